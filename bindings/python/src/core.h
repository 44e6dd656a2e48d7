// kolo._core, the Python extension over kolo::Communicator and kolo::engine::Engine: what its
// source files share. Python passes tensors as raw addresses (tensor.data_ptr()) with a dtype
// and a shape and keeps them alive until the op completes; every blocking call drops the GIL.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>

#include "comm/base/error.h"
#include "comm/communicator.h"

namespace kolo::python {

namespace py = pybind11;

// A Communicator as Python holds it. The Communicator serves one thread at a time, and Python
// threads run concurrently while a call has dropped the GIL: calls take `mutex` first.
struct PyCommunicator {
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
};

// kolo::Error becomes the class of kolo.errors named by its code (KoloError and its subclasses).
void register_errors(py::module_& m);
void bind_communicator(py::module_& m);
void bind_engine(py::module_& m);

// Raises kolo::Error(kInvalidArgument); the door's checks use it.
[[noreturn]] void invalid(const std::string& message);

}  // namespace kolo::python
