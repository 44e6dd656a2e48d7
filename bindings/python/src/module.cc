// kolo._core's module: the enums, the build facts and the translation of kolo::Error into the
// exception classes of kolo/errors.py (imported lazily: kolo/__init__.py imports _core first).
#include "bindings/python/src/core.h"

#include <limits>

#include "comm/alloc_shared.h"
#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "fusion/engine.h"
#include "kolo_config.h"

namespace kolo::python {
namespace {

// Sets the Python error for a kolo::Error; RuntimeError if kolo.errors cannot be imported. A
// KeyboardInterrupt (or SystemExit) raised meanwhile, by a signal handler that ran during the
// import, stands instead: dropping it lost the user's Ctrl-C.
void set_python_error(ErrorCode code, const char* text) {
  try {
    py::object cls = py::module_::import("kolo.errors").attr("error_class")(error_code_name(code));
    PyErr_SetString(cls.ptr(), text);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) {
      e.restore();
      return;
    }
    PyErr_SetString(PyExc_RuntimeError, text);
  }
}

// kolo.DType(15) is a valid Python object (py::enum_ takes any value of the underlying type),
// so the value is checked before a C++ function indexes a table with it.
DType checked_dtype(DType d) {
  if (static_cast<int>(d) >= kNumDTypes)
    invalid(detail::concat("dtype ", static_cast<int>(d), " is not a kolo dtype (0-",
                           kNumDTypes - 1, ")"));
  return d;
}

void bind_enums(py::module_& m) {
  py::enum_<DType>(m, "DType", "Element types of the tensors kolo moves.")
      .value("FLOAT32", DType::kFloat32)
      .value("FLOAT64", DType::kFloat64)
      .value("FLOAT16", DType::kFloat16)
      .value("BFLOAT16", DType::kBFloat16)
      .value("INT32", DType::kInt32)
      .value("INT64", DType::kInt64)
      .value("UINT8", DType::kUInt8)
      .value("INT8", DType::kInt8)
      .value("INT16", DType::kInt16);
  py::enum_<ReduceOp>(m, "ReduceOp", "Reductions of allreduce and reduce_scatter.")
      .value("SUM", ReduceOp::kSum)
      .value("AVERAGE", ReduceOp::kAverage)
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("PRODUCT", ReduceOp::kProduct)
      .value("BAND", ReduceOp::kBand)
      .value("BOR", ReduceOp::kBor)
      .value("BXOR", ReduceOp::kBxor);
  py::enum_<engine::Compression>(m, "Compression", "What an engine allreduce puts on the wire.")
      .value("NONE", engine::Compression::kNone)
      .value("FP16", engine::Compression::kFp16)
      .value("BF16", engine::Compression::kBf16);
  m.def(
      "dtype_size", [](DType d) { return dtype_size(checked_dtype(d)); }, "Bytes per element.");
  m.def(
      "dtype_name", [](DType d) { return std::string(dtype_name(checked_dtype(d))); },
      "e.g. 'float32'.");
}

// Memory from kolo::alloc_shared with Python's buffer protocol (torch.frombuffer, numpy): the
// shared-memory collectives read a peer's such buffer with plain loads instead of staging it.
// Never made (SharedBuffer.__new__ without __init__): data_ is null (ZeroedAllocation).
class SharedBuffer : public ZeroedAllocation {
 public:
  explicit SharedBuffer(const py::object& nbytes)
      : bytes_(int_arg(nbytes, 1, std::numeric_limits<int64_t>::max(), "SharedBuffer: nbytes",
                       "is not in [1, 2**63)")) {
    data_ = alloc_shared(static_cast<size_t>(bytes_));
  }
  ~SharedBuffer() { free_shared(data_); }
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  py::buffer_info info() {
    // pybind11 calls this from Python's getbuffer slot, where an exception would abort the
    // process: a SharedBuffer never made shows as no memory, read-only.
    if (data_ == nullptr)
      return py::buffer_info(nullptr, 1, py::format_descriptor<uint8_t>::format(), 0, true);
    return py::buffer_info(data_, 1, py::format_descriptor<uint8_t>::format(), bytes_, false);
  }
  int64_t nbytes() const {
    check();
    return bytes_;
  }

 private:
  void check() const {
    if (data_ == nullptr) not_initialised("SharedBuffer", "kolo.SharedBuffer(nbytes)");
  }
  int64_t bytes_;
  void* data_;
};

void bind_shared_buffer(py::module_& m) {
  py::class_<SharedBuffer>(m, "SharedBuffer", py::buffer_protocol(),
                           "nbytes of zeroed memory that ranks on one host read from each other "
                           "directly in kolo's shared-memory collectives (kolo::alloc_shared).")
      .def(py::init<const py::object&>(), py::arg("nbytes"))
      .def_property_readonly("nbytes", &SharedBuffer::nbytes)
      .def_buffer(&SharedBuffer::info);
}

}  // namespace

void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

void refuse_new(py::handle cls, const std::string& how_to_make) {
  const std::string message = py::str(cls.attr("__name__")).cast<std::string>() +
                              " objects cannot be made directly: " + how_to_make;
  // Set on the class, __new__ takes over its tp_new (Python's slot update); pybind11's own
  // factories allocate with tp_alloc and are not affected.
  cls.attr("__new__") = py::cpp_function(
      [message](py::args, py::kwargs) -> py::object { throw py::type_error(message); });
}

void not_initialised(const char* cls, const char* how_to_make) {
  throw py::type_error(std::string("this kolo.") + cls +
                       " was made with __new__ and never initialised: make one with " +
                       how_to_make);
}

int64_t int_arg(py::handle value, int64_t min, int64_t max, const std::string& what,
                const std::string& range) {
  // A float has no __index__: refused, never truncated.
  if (!PyIndex_Check(value.ptr()))
    throw py::type_error(what + " must be an int, got " +
                         py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>() +
                         " " + py::repr(value).cast<std::string>());
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow == 0 && v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || v < min || v > max)
    invalid(what + " " + py::str(index).cast<std::string>() + " " + range);
  return v;
}

void register_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e.code(), e.what());
    }
  });
}

}  // namespace kolo::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  m.doc() = "kolo's C++ core: Communicator, Engine and Handle (see docs/python.md).";
  kolo::python::register_errors(m);
  kolo::python::bind_enums(m);
  kolo::python::bind_communicator(m);
  kolo::python::bind_engine(m);
  kolo::python::bind_shared_buffer(m);
  m.attr("__version__") = KOLO_VERSION;
  py::dict build;
  build["mpi"] = static_cast<bool>(KOLO_HAVE_MPI);
  build["gloo"] = false;  // kolo's collectives are its own; Gloo is only a benchmark baseline
  build["nccl"] = false;
  build["cuda"] = false;
  m.attr("build_info") = build;
}
