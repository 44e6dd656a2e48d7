// Test inputs with closed-form results. Rank r's element i is a small number chosen so that any
// sum, min, max or product over up to 8 ranks is exact in every dtype (bf16 included), so most
// checks are bit-exact; average is within one unit in the last place (see tolerance()).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::testing {

// input_value and expected_value depend on i only through i % kValuePeriod.
inline constexpr size_t kValuePeriod = 60;

// Input of rank r at element i for `op` (products use only 1s and 2s to stay small).
double input_value(DType dtype, ReduceOp op, int rank, size_t i);
// The closed-form reduction over `size` ranks, as the dtype stores it (integers truncate).
double expected_value(DType dtype, ReduceOp op, int size, size_t i);
// Typed patterns of kValuePeriod elements: element i of a buffer is pattern[i % kValuePeriod].
std::vector<char> input_pattern(DType dtype, ReduceOp op, int rank);
std::vector<char> expected_pattern(DType dtype, ReduceOp op, int size);
// Fills `count` elements with pattern[(phase + i) % kValuePeriod].
void tile(DType dtype, void* data, size_t count, const std::vector<char>& pattern, size_t phase);
// Index of the first element differing from the tiled pattern, or count if none does.
size_t first_mismatch(DType dtype, const void* data, size_t count, const std::vector<char>& pattern,
                      size_t phase);

// Allowed |got - expected|: 0 except for average of floating types (one ulp of the result).
double tolerance(DType dtype, ReduceOp op, double expected);

// Pseudo-random input in [-1, 1], already representable in dtype (for rounding-error tests).
double random_value(DType dtype, uint64_t seed, int rank, size_t i);
// Unit roundoff of a floating dtype: 2^-24 fp32, 2^-53 fp64, 2^-11 fp16, 2^-8 bf16.
double unit_roundoff(DType dtype);

// Reads / writes element i of a typed buffer as a double.
double load(DType dtype, const void* data, size_t i);
void store(DType dtype, void* data, size_t i, double value);

// Typed buffer of `count` elements.
std::vector<char> make_buffer(DType dtype, size_t count);

uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 1469598103934665603ull);

}  // namespace kolo::testing
