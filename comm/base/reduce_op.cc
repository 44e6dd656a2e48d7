// Names and the parser of ReduceOp.
#include "comm/base/reduce_op.h"

#include "comm/base/names.h"

namespace kolo {

const char* op_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "avg", "min", "max", "prod"};
  return kNames[static_cast<int>(op)];
}

ReduceOp parse_op(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, ReduceOp>, 8> kTable{
      {{"sum", ReduceOp::kSum},
       {"avg", ReduceOp::kAverage},
       {"average", ReduceOp::kAverage},
       {"mean", ReduceOp::kAverage},
       {"min", ReduceOp::kMin},
       {"max", ReduceOp::kMax},
       {"prod", ReduceOp::kProduct},
       {"product", ReduceOp::kProduct}}};
  return detail::parse_name(text, setting, "reduce op", kTable);
}

}  // namespace kolo
