// Reduction operations of allreduce and reduce-scatter, their names and parser.
#pragma once

#include <cstdint>
#include <string_view>

namespace kolo {

enum class ReduceOp : uint8_t { kSum, kAverage, kMin, kMax, kProduct };
inline constexpr int kNumReduceOps = 5;

const char* op_name(ReduceOp op);  // "sum", "avg", ...
// Accepts the names above and aliases (average, mean, product).
ReduceOp parse_op(std::string_view text, std::string_view setting);

}  // namespace kolo
