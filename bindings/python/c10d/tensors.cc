// The checks and buffers of tensors.h.
#include "bindings/python/c10d/tensors.h"

#include <torch/csrc/utils/tensor_dtypes.h>

#include <optional>

#include "comm/base/error.h"

namespace kolo::c10d_backend {
namespace {

std::optional<DType> kolo_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kInt: return DType::kInt32;
    case at::kLong: return DType::kInt64;
    case at::kByte: return DType::kUInt8;
    case at::kChar: return DType::kInt8;
    case at::kShort: return DType::kInt16;
    default: return std::nullopt;
  }
}

// "torch.int8": the name Python users know.
std::string dtype_name(at::ScalarType type) {
  return "torch." + torch::utils::getDtypeNames(type).first;
}

void check_dense_cpu(const at::Tensor& t, const std::string& what) {
  KOLO_CHECK_ARG(t.defined(), what, " is an undefined tensor");
  KOLO_CHECK_ARG(t.device().is_cpu() && t.layout() == at::kStrided,
                 "kolo's process group takes dense CPU tensors, but ", what, " is a ", t.layout(),
                 " tensor on ", t.device());
}

Buffer buffer(const at::Tensor& t, DType dtype, size_t scale) {
  Buffer b;
  b.tensor = t.is_contiguous() ? t : t.contiguous();
  b.dtype = dtype;
  b.scale = scale;
  b.count = static_cast<size_t>(t.numel()) * scale;
  return b;
}

}  // namespace

Buffer reduced(const at::Tensor& t, ReduceOp op, const std::string& what) {
  check_dense_cpu(t, what);
  std::optional<DType> dtype = kolo_dtype(t.scalar_type());
  if (t.scalar_type() == at::kBool && is_bitwise(op)) dtype = DType::kUInt8;  // 0 and 1 stay so
  KOLO_CHECK_ARG(dtype, what, " is ", dtype_name(t.scalar_type()),
                 ", which kolo does not reduce (float32, float64, float16, bfloat16, int32, "
                 "int64, uint8, int8 and int16 it does; bool with BAND, BOR and BXOR)");
  KOLO_CHECK_ARG(op_takes(op, *dtype), what, " is ", dtype_name(t.scalar_type()), ", but ",
                 op_name(op), " works on the bits of integer (or bool) tensors");
  return buffer(t, *dtype, 1);
}

Buffer moved(const at::Tensor& t, const std::string& what) {
  check_dense_cpu(t, what);
  if (std::optional<DType> dtype = kolo_dtype(t.scalar_type())) return buffer(t, *dtype, 1);
  return buffer(t, DType::kUInt8, t.element_size());
}

void copy_back(const Buffer& b, const at::Tensor& target) {
  if (!b.tensor.is_same(target)) target.copy_(b.tensor);
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& what) {
  KOLO_CHECK_ARG(tensors.size() == 1, what,
                 ": kolo's process group takes one tensor per call "
                 "(the tensors of one CPU device), not ",
                 tensors.size());
  return tensors[0];
}

void one_per_rank(const std::vector<at::Tensor>& tensors, int size, const std::string& what) {
  KOLO_CHECK_ARG(tensors.size() == static_cast<size_t>(size), what, " holds ", tensors.size(),
                 " tensors; expected one per rank of the group (", size, ")");
}

const std::vector<at::Tensor>& per_rank_like(const std::vector<std::vector<at::Tensor>>& lists,
                                             const at::Tensor& like, int size,
                                             const std::string& op, const std::string& kind,
                                             const std::string& like_kind) {
  KOLO_CHECK_ARG(lists.size() == 1, op, ": the ", kind, "s hold ", lists.size(),
                 " lists; kolo takes one list (of one tensor per rank)");
  one_per_rank(lists[0], size, op + ": the " + kind + " list");
  for (const at::Tensor& t : lists[0]) {
    moved(t, op + ": an " + kind);
    same_dtype(like, t, op + ": " + like_kind + " and " + kind + "s");
    KOLO_CHECK_ARG(t.numel() == like.numel(), op, ": an ", kind, " holds ", t.numel(),
                   " elements, the ", like_kind, " ", like.numel(), "; they must be equal");
  }
  return lists[0];
}

int root_rank(int64_t root, int size, const std::string& what, int64_t root_tensor) {
  KOLO_CHECK_ARG(root >= 0 && root < size, what, ": root ", root,
                 " is not a rank of the group [0, ", size, ")");
  KOLO_CHECK_ARG(root_tensor == 0, what, ": root tensor ", root_tensor,
                 " (kolo takes one tensor per call)");
  return static_cast<int>(root);
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  KOLO_CHECK_ARG(a.scalar_type() == b.scalar_type(), what, ": dtypes differ, ",
                 dtype_name(a.scalar_type()), " and ", dtype_name(b.scalar_type()));
}

ReduceOp reduce_op(const ::c10d::ReduceOp& op) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case ::c10d::ReduceOp::AVG: return ReduceOp::kAverage;
    case ::c10d::ReduceOp::PRODUCT: return ReduceOp::kProduct;
    case ::c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case ::c10d::ReduceOp::MAX: return ReduceOp::kMax;
    case ::c10d::ReduceOp::BAND: return ReduceOp::kBand;
    case ::c10d::ReduceOp::BOR: return ReduceOp::kBor;
    case ::c10d::ReduceOp::BXOR: return ReduceOp::kBxor;
    default: break;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "kolo's process group does not reduce with op ",
             static_cast<int>(op.op_),
             " (PREMUL_SUM); it takes SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR and BXOR");
}

std::vector<size_t> counts(const std::vector<at::Tensor>& tensors, size_t scale) {
  std::vector<size_t> result;
  for (const at::Tensor& t : tensors) result.push_back(static_cast<size_t>(t.numel()) * scale);
  return result;
}

at::Tensor concatenated(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape(-1));
  return at::cat(flat);
}

void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& targets) {
  int64_t offset = 0;
  for (const at::Tensor& t : targets) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace kolo::c10d_backend
