// Internal entry points of the per-ISA reduction kernels; reduce.cc validates the arguments
// and dispatches here. Not installed: callers use comm/reduce/reduce.h.
//
// avx2.cc and avx512.cc are compiled with -mavx2 / -mavx512* and must therefore stay free of
// code that other files could share: everything in them lives in an anonymous namespace and
// they call no inline library functions (std::string, kolo::Error, ...). Otherwise the linker
// could keep their copy of a shared inline function, and a CPU without the ISA would crash in
// code that never meant to use it.
#pragma once

#include <cstddef>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"

namespace kolo::reduce {

namespace scalar {
// The reference: every dtype and op. Throws kolo::Error for an unknown dtype or op.
// Also handles the tails the vector kernels leave (fewer elements than one vector).
void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
// divisor > 0, checked by the caller.
void finish_average(void* data, size_t count, DType dtype, int divisor);
}  // namespace scalar

namespace avx2 {
// Requires AVX2, FMA and F16C. Bit-identical to scalar::combine and scalar::finish_average.
void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
void finish_average(void* data, size_t count, DType dtype, int divisor);
void combine_average(void* dst, const void* a, const void* b, size_t count, DType dtype,
                     int divisor);
}  // namespace avx2

namespace avx512 {
// Requires AVX-512 F/BW/VL/DQ (and AVX2, FMA, F16C). Bit-identical to the scalar reference.
void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
void finish_average(void* data, size_t count, DType dtype, int divisor);
void combine_average(void* dst, const void* a, const void* b, size_t count, DType dtype,
                     int divisor);
}  // namespace avx512

}  // namespace kolo::reduce
