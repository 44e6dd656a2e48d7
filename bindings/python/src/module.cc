// kolo._core's module: the enums, the build facts and the translation of kolo::Error into the
// exception classes of kolo/errors.py (imported lazily: kolo/__init__.py imports _core first).
#include "bindings/python/src/core.h"

#include "comm/alloc_shared.h"
#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "fusion/engine.h"
#include "kolo_config.h"

namespace kolo::python {
namespace {

// Sets the Python error for a kolo::Error; RuntimeError if kolo.errors cannot be imported.
void set_python_error(ErrorCode code, const char* text) {
  try {
    py::object cls = py::module_::import("kolo.errors").attr("error_class")(error_code_name(code));
    PyErr_SetString(cls.ptr(), text);
  } catch (py::error_already_set&) {
    PyErr_SetString(PyExc_RuntimeError, text);
  }
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
      "dtype_size", [](DType d) { return dtype_size(d); }, "Bytes per element.");
  m.def(
      "dtype_name", [](DType d) { return std::string(dtype_name(d)); }, "e.g. 'float32'.");
}

// Memory from kolo::alloc_shared with Python's buffer protocol (torch.frombuffer, numpy): the
// shared-memory collectives read a peer's such buffer with plain loads instead of staging it.
class SharedBuffer {
 public:
  explicit SharedBuffer(int64_t bytes) : bytes_(bytes) {
    if (bytes <= 0) invalid("SharedBuffer: nbytes must be positive, got " + std::to_string(bytes));
    data_ = alloc_shared(static_cast<size_t>(bytes));
  }
  ~SharedBuffer() { free_shared(data_); }
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  py::buffer_info info() {
    return py::buffer_info(data_, 1, py::format_descriptor<uint8_t>::format(), bytes_, false);
  }
  int64_t nbytes() const { return bytes_; }

 private:
  int64_t bytes_;
  void* data_;
};

void bind_shared_buffer(py::module_& m) {
  py::class_<SharedBuffer>(m, "SharedBuffer", py::buffer_protocol(),
                           "nbytes of zeroed memory that ranks on one host read from each other "
                           "directly in kolo's shared-memory collectives (kolo::alloc_shared).")
      .def(py::init<int64_t>(), py::arg("nbytes"))
      .def_property_readonly("nbytes", &SharedBuffer::nbytes)
      .def_buffer(&SharedBuffer::info);
}

}  // namespace

void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
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
