// kolo._c10d: the Python module of torch.distributed's "kolo" backend. kolo/torch/distributed.py
// registers ProcessGroupKolo as the backend's creator: torch calls it as (store, rank, size,
// timeout) for init_process_group("kolo") and for every new_group(backend="kolo").
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <string>

#include "bindings/python/c10d/process_group.h"
#include "comm/base/transport_kind.h"

namespace {

namespace py = pybind11;

// The extension is built against one libtorch's C++ classes: another torch in the interpreter
// would lay them out differently. Refused at import, naming both versions.
void require_matching_torch() {
  const std::string built =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ".";
  const std::string running = py::module_::import("torch").attr("__version__").cast<std::string>();
  if (running.rfind(built, 0) != 0)
    throw py::import_error("kolo._c10d was built against torch " + built +
                           "x (libtorch's C++ "
                           "headers) but this interpreter runs torch " +
                           running + "; rebuild kolo against this torch (docs/python.md)");
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  using kolo::c10d_backend::ProcessGroupKolo;
  m.doc() = "torch.distributed's 'kolo' backend: a c10d ProcessGroup on kolo's Communicator.";
  require_matching_torch();
  // torch.distributed registers c10d's classes (ProcessGroup, Store) that the bindings below use.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupKolo, c10::intrusive_ptr<ProcessGroupKolo>, ::c10d::ProcessGroup>(
      m, "ProcessGroupKolo",
      "A c10d ProcessGroup whose collectives run on a kolo Communicator (docs/python.md).")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupKolo>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Collective: builds the group's communicator on torch's store (the creator "
           "torch.distributed calls for the 'kolo' backend).")
      .def_property_readonly(
          "transport",
          [](const ProcessGroupKolo& pg) {
            return std::string(kolo::transport_name(pg.communicator().transport()));
          },
          "The kolo transport the group runs on: shm, tcp or mpi.");
}
