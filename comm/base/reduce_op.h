// Reduction operations of allreduce and reduce-scatter, their names and parser.
#pragma once

#include <cstdint>
#include <string_view>

#include "comm/base/dtype.h"

namespace kolo {

// New ops go at the end: the values travel in wire messages. The bitwise ops (and, or, xor of
// the elements' bits) take integer dtypes only.
enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct, kBand, kBor, kBxor };
inline constexpr int kNumReduceOps = 8;

inline bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}
// False for a bitwise op on a floating dtype; op and dtype must be kolo's.
bool op_takes(ReduceOp op, DType dtype);
// Throws kInvalidArgument, starting with `what`, unless `op` is a kolo op that `dtype` takes.
void check_op_and_dtype(ReduceOp op, DType dtype, std::string_view what);

const char* op_name(ReduceOp op);  // "sum", "avg", ...
// Accepts the names above and aliases (average, mean, product).
ReduceOp parse_op(std::string_view text, std::string_view setting);

}  // namespace kolo
