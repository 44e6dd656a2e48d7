// kolo.Engine and kolo.Handle: the engine's named asynchronous ops over raw tensor addresses.
// The caller keeps each tensor alive (and unmoved) until its handle is done; results sized by
// the engine (allgather, alltoall, reduce_scatter) are copied out with Handle.copy_output.
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "bindings/python/src/core.h"
#include "fusion/engine.h"
#include "timeline/timeline.h"

namespace kolo::python {
namespace {

using engine::Handle;
using engine::OpOptions;
using engine::TensorView;

// How long a wait holds the GIL released before checking for Ctrl-C.
constexpr auto kSignalCheck = std::chrono::milliseconds(100);

// Never made (Engine.__new__ without __init__): world.comm is null (ZeroedAllocation); a made
// one keeps it after close().
struct PyEngine : ZeroedAllocation {
  PyEngine(PyCommunicator world, std::shared_ptr<engine::Engine> engine)
      : world(std::move(world)), engine(std::move(engine)) {}
  PyCommunicator world;
  std::shared_ptr<engine::Engine> engine;

  void check_made() const {
    if (!world.comm) not_initialised("Engine", "kolo.Engine(comm)");
  }
  // A reference that outlives a concurrent close().
  std::shared_ptr<engine::Engine> get() const {
    check_made();
    if (!engine) invalid("the kolo engine has been shut down");
    return engine;
  }
};

// A tensor as Python describes it: address, dtype and shape.
TensorView view(uintptr_t address, DType dtype, std::vector<int64_t> shape) {
  for (int64_t d : shape)
    if (d < 0) invalid("shape dimension " + std::to_string(d) + " is negative");
  return {reinterpret_cast<void*>(address), dtype, std::move(shape), -1};
}

OpOptions options(ReduceOp op, double prescale, double postscale, engine::Compression compression,
                  int process_set) {
  OpOptions o;
  o.op = op;
  o.prescale = prescale;
  o.postscale = postscale;
  o.compression = compression;
  o.process_set = process_set;
  return o;
}

OpOptions in_set(int process_set) {
  return options(ReduceOp::kSum, 1.0, 1.0, engine::Compression::kNone, process_set);
}

PyEngine make_engine(PyCommunicator world) {
  py::gil_scoped_release release;  // collective: compares settings and splits the communicator
  auto e = std::make_shared<engine::Engine>(world.comm);
  return PyEngine{std::move(world), std::move(e)};
}

void close(PyEngine& e) {
  e.check_made();
  std::shared_ptr<engine::Engine> last = std::move(e.engine);
  py::gil_scoped_release release;  // stops the loop thread, which may take a cycle with peers
  last.reset();
}

// Waits with the GIL released, a slice at a time so that Ctrl-C still interrupts.
bool wait(const Handle& h, std::optional<double> timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  if (timeout_seconds && !(*timeout_seconds >= 0))
    invalid(detail::concat("wait: timeout=", *timeout_seconds,
                           " is not a number of seconds >= 0 (None waits without a limit)"));
  if (timeout_seconds && *timeout_seconds > 1e9) timeout_seconds.reset();  // 30 years: no limit
  const auto deadline = timeout_seconds
                            ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(*timeout_seconds))
                            : Clock::time_point::max();
  while (true) {
    const auto slice = std::min<Clock::duration>(kSignalCheck, deadline - Clock::now());
    bool done;
    {
      py::gil_scoped_release release;
      done = h.wait(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max<Clock::duration>(slice, Clock::duration::zero())));
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (Clock::now() >= deadline) return false;
  }
}

// Raises the op's error; the handle must be done.
void check(const Handle& h) {
  if (!h.done()) invalid("the op is still running: wait() for it first");
  engine::Status s = h.status();
  if (!s.ok) throw Error(s.code, s.message);
}

void copy_output(const Handle& h, uintptr_t address, size_t bytes) {
  check(h);
  const std::vector<char>& out = h.output();
  if (bytes != out.size())
    invalid("copy_output: the destination holds " + std::to_string(bytes) + " bytes, the result " +
            std::to_string(out.size()));
  if (bytes) std::memcpy(reinterpret_cast<void*>(address), out.data(), bytes);
}

std::vector<Handle> grouped_allreduce(PyEngine& e, const std::vector<std::string>& names,
                                      const std::vector<uintptr_t>& addresses, DType dtype,
                                      const std::vector<std::vector<int64_t>>& shapes, ReduceOp op,
                                      double prescale, double postscale,
                                      engine::Compression compression, int process_set) {
  if (addresses.size() != names.size() || shapes.size() != names.size())
    invalid("grouped_allreduce: " + std::to_string(names.size()) + " names, " +
            std::to_string(addresses.size()) + " tensors, " + std::to_string(shapes.size()) +
            " shapes");
  std::vector<TensorView> views;
  for (size_t i = 0; i < names.size(); ++i) views.push_back(view(addresses[i], dtype, shapes[i]));
  return e.get()->grouped_allreduce(names, views,
                                    options(op, prescale, postscale, compression, process_set));
}

py::dict stats(const PyEngine& e) {
  engine::EngineStats s = e.get()->stats();
  py::dict d;
  d["cycles"] = s.cycles;
  d["negotiations"] = s.negotiations;
  d["cache_hits"] = s.cache_hits;
  d["responses"] = s.responses;
  d["fused_collectives"] = s.fused_collectives;
  d["fused_tensors"] = s.fused_tensors;
  d["bytes_submitted"] = s.bytes_submitted;
  d["bytes_sent"] = s.bytes_sent;
  return d;
}

void bind_handle(py::module_& m) {
  py::class_<Handle> cls(m, "Handle", "Completion of one engine op.");
  refuse_new(cls, "the kolo.Engine's ops return them");
  cls.def("wait", &wait, py::arg("timeout") = py::none(),
          "Waits (seconds; None = until done); True when done, successfully or not.")
      .def("done", &Handle::done)
      .def("check", &check, "Raises the op's error (a KoloError subclass); the op must be done.")
      .def("output_shape", &Handle::output_shape)
      .def("output_nbytes", [](const Handle& h) { return h.output().size(); })
      .def("copy_output", &copy_output, py::arg("address"), py::arg("nbytes"),
           "Copies the result of allgather, alltoall or reduce_scatter to `address`.")
      .def("output_value", &Handle::output_value, "join: the last rank to join.");
}

}  // namespace

void bind_engine(py::module_& m) {
  bind_handle(m);
  m.def(
      "check_engine_settings", [] { (void)engine::EngineOptions::from_env(); },
      "Reads the engine's KOLO_* settings, raising for a bad one: before the rendezvous, so that "
      "every rank names it.");
  const auto none = engine::Compression::kNone;
  py::class_<PyEngine>(m, "Engine", "The Horovod-style engine (one per process; docs/engine.md).")
      .def(py::init(&make_engine), py::arg("comm"),
           "Collective: starts the engine's thread on a split of `comm`; options from KOLO_*.")
      .def_property_readonly("communicator",
                             [](const PyEngine& e) {
                               e.check_made();
                               return e.world;
                             })
      .def("close", &close, "Stops the engine; pending ops fail. Later calls raise.")
      .def(
          "allreduce",
          [](PyEngine& e, const std::string& name, uintptr_t input, uintptr_t output, DType dtype,
             std::vector<int64_t> shape, ReduceOp op, double prescale, double postscale,
             engine::Compression compression, int process_set) {
            return e.get()->allreduce(name, view(input, dtype, shape), view(output, dtype, shape),
                                      options(op, prescale, postscale, compression, process_set));
          },
          py::arg("name"), py::arg("input"), py::arg("output"), py::arg("dtype"), py::arg("shape"),
          py::arg("op") = ReduceOp::kSum, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
          py::arg("compression") = none, py::arg("process_set") = 0)
      .def("grouped_allreduce", &grouped_allreduce, py::arg("names"), py::arg("addresses"),
           py::arg("dtype"), py::arg("shapes"), py::arg("op") = ReduceOp::kSum,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("compression") = none,
           py::arg("process_set") = 0, "In place; one handle per tensor, all completing together.")
      .def(
          "allgather",
          [](PyEngine& e, const std::string& name, uintptr_t input, DType dtype,
             std::vector<int64_t> shape, int process_set) {
            return e.get()->allgather(name, view(input, dtype, shape), in_set(process_set));
          },
          py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
          py::arg("process_set") = 0)
      .def(
          "broadcast",
          [](PyEngine& e, const std::string& name, uintptr_t data, DType dtype,
             std::vector<int64_t> shape, int root, int process_set) {
            return e.get()->broadcast(name, view(data, dtype, shape), root, in_set(process_set));
          },
          py::arg("name"), py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("root"),
          py::arg("process_set") = 0, "In place; root is a rank of the process set.")
      .def(
          "alltoall",
          [](PyEngine& e, const std::string& name, uintptr_t input, DType dtype,
             std::vector<int64_t> shape, std::vector<int64_t> splits, int process_set) {
            OpOptions o = in_set(process_set);
            o.splits = std::move(splits);
            return e.get()->alltoall(name, view(input, dtype, shape), o);
          },
          py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
          py::arg("splits") = std::vector<int64_t>{}, py::arg("process_set") = 0)
      .def(
          "reduce_scatter",
          [](PyEngine& e, const std::string& name, uintptr_t input, DType dtype,
             std::vector<int64_t> shape, ReduceOp op, double prescale, double postscale,
             int process_set) {
            return e.get()->reduce_scatter(name, view(input, dtype, shape),
                                           options(op, prescale, postscale, none, process_set));
          },
          py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
          py::arg("op") = ReduceOp::kSum, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
          py::arg("process_set") = 0)
      .def(
          "barrier",
          [](PyEngine& e, int process_set) { return e.get()->barrier(in_set(process_set)); },
          py::arg("process_set") = 0)
      .def(
          "join", [](PyEngine& e, int process_set) { return e.get()->join(in_set(process_set)); },
          py::arg("process_set") = 0)
      .def(
          "add_process_set",
          [](PyEngine& e, const std::vector<int>& ranks) {
            auto engine = e.get();
            py::gil_scoped_release release;  // collective
            return engine->add_process_set(ranks);
          },
          py::arg("ranks"), "Collective, in the same order on every rank; returns the set's id.")
      .def(
          "remove_process_set",
          [](PyEngine& e, int id) {
            auto engine = e.get();
            py::gil_scoped_release release;  // collective
            engine->remove_process_set(id);
          },
          py::arg("id"), "Collective, in the same order on every rank; frees the set.")
      .def(
          "start_timeline",
          [](PyEngine& e, const std::string& path) { e.get()->start_timeline(path); },
          py::arg("path"), "Rank 0 writes `path`, rank r `path.rank<r>` (or `%r` in the path).")
      .def("stop_timeline", [](PyEngine& e) { e.get()->stop_timeline(); })
      .def("stats", &stats);
}

}  // namespace kolo::python
