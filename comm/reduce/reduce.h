// Element-wise reduction kernels used by every collective. Vectorised versions (AVX2 with F16C,
// AVX-512) are chosen at run time from the CPU's features; the scalar path is the reference
// that tests compare them against. fp16 and bf16 are computed in fp32 and rounded to nearest
// even, so every ISA gives bit-identical results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::reduce {

enum class Isa { kScalar, kAvx2, kAvx512 };
const char* isa_name(Isa isa);

Isa best_isa();            // the widest the CPU supports (KOLO_REDUCE_ISA may lower it)
Isa active_isa();          // what combine() uses now
void set_active_isa(Isa);  // for tests and benchmarks; throws if the CPU lacks it

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not partially).
// kAverage combines as a sum; finish_average() divides once at the end.
void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
void combine_with(Isa isa, void* dst, const void* a, const void* b, size_t count, DType dtype,
                  ReduceOp op);

// data[i] = the identity of `op` in `dtype` (x op e == x): 0 for sum, average, bor and bxor (-0
// for floats, since -0 + +0 is +0), 1 for product, all ones for band, the largest value (+inf
// for floats) for min, the lowest (-inf) for max. What a rank that has joined contributes.
void fill_identity(void* data, size_t count, DType dtype, ReduceOp op);

// data[i] /= divisor (integer types: truncating division, as C++ does).
void finish_average(void* data, size_t count, DType dtype, int divisor);
// combine(dst, a, b, count, dtype, kSum) then finish_average(dst, count, dtype, divisor), with
// the same bits, in one pass over the data where the dtype allows (fp32, fp64): the last
// combine of an average.
void combine_average(void* dst, const void* a, const void* b, size_t count, DType dtype,
                     int divisor);

}  // namespace kolo::reduce
