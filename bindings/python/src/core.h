// kolo._core, the Python extension over kolo::Communicator and kolo::engine::Engine: what its
// source files share. Python passes tensors as raw addresses (tensor.data_ptr()) with a dtype
// and a shape and keeps them alive until the op completes; every blocking call drops the GIL.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
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

// Python can make an object with `Class.__new__(Class)` and never run __init__, and pybind11
// then hands the methods memory in which no C++ object was ever constructed. Classes that only
// C++ makes (Communicator, Handle) refuse __new__ with refuse_new(). Classes that Python
// constructs (Engine, SharedBuffer) cannot, since construction goes through __new__: they
// derive from ZeroedAllocation, so that such an object reads as null pointers, which their
// methods check.
void refuse_new(py::handle cls, const std::string& how_to_make);
struct ZeroedAllocation {
  static void* operator new(size_t bytes) {
    void* p = ::operator new(bytes);
    std::memset(p, 0, bytes);
    return p;
  }
  static void operator delete(void* p) { ::operator delete(p); }
};
[[noreturn]] void not_initialised(const char* cls, const char* how_to_make);

// A Python int argument (or any object with __index__) in [min, max]. Out of range, at any size
// (2**63 too): InvalidArgumentError "<what> <value as Python prints it> <range>"; not an int:
// TypeError naming `what`. pybind11's own int64_t conversion answered 2**63 with its list of
// signatures.
int64_t int_arg(py::handle value, int64_t min, int64_t max, const std::string& what,
                const std::string& range);

// kolo::Error becomes the class of kolo.errors named by its code (KoloError and its subclasses).
void register_errors(py::module_& m);
void bind_communicator(py::module_& m);
void bind_engine(py::module_& m);

// Raises kolo::Error(kInvalidArgument); the door's checks use it.
[[noreturn]] void invalid(const std::string& message);

}  // namespace kolo::python
