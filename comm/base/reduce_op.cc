// Names and the parser of ReduceOp.
#include "comm/base/reduce_op.h"

#include "comm/base/error.h"
#include "comm/base/names.h"

namespace kolo {

bool op_takes(ReduceOp op, DType dtype) {
  return !(is_bitwise(op) && is_floating(dtype));
}

void check_op_and_dtype(ReduceOp op, DType dtype, std::string_view what) {
  KOLO_CHECK_ARG(static_cast<int>(dtype) < kNumDTypes, what, ": dtype ", static_cast<int>(dtype),
                 " is not a kolo dtype (0-", kNumDTypes - 1, ")");
  KOLO_CHECK_ARG(static_cast<int>(op) < kNumReduceOps, what, ": reduce op ", static_cast<int>(op),
                 " is not a kolo reduce op (0-", kNumReduceOps - 1, ")");
  KOLO_CHECK_ARG(op_takes(op, dtype), what, ": reduce op ", op_name(op),
                 " works on the bits of integers; ", dtype_name(dtype),
                 " elements have none to combine (use an integer dtype)");
}

const char* op_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "avg", "min", "max", "prod", "band", "bor", "bxor"};
  return detail::enum_name(kNames, op, "reduce op");
}

ReduceOp parse_op(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, ReduceOp>, 11> kTable{
      {{"sum", ReduceOp::kSum},
       {"avg", ReduceOp::kAverage},
       {"average", ReduceOp::kAverage},
       {"mean", ReduceOp::kAverage},
       {"min", ReduceOp::kMin},
       {"max", ReduceOp::kMax},
       {"prod", ReduceOp::kProduct},
       {"product", ReduceOp::kProduct},
       {"band", ReduceOp::kBand},
       {"bor", ReduceOp::kBor},
       {"bxor", ReduceOp::kBxor}}};
  return detail::parse_name(text, setting, "reduce op", kTable);
}

}  // namespace kolo
