// Internal to the CPU kernels: the loops that run 16 lanes wide where the CPU has AVX-512
// (avx512.cc, the only file built with -mavx512f), over any storage dtype (float32, float16,
// bfloat16: `dt`, which the callers have checked), in fp32 lanes. Each works on one range, on
// one thread; the callers split the work across the pool and fall back to their 8-lane loops
// elsewhere.
//
// avx512.cc must stay free of code other files could share (everything in it is file-local but
// these entry points, and it calls no inline library function): the linker could otherwise keep
// its copy of a shared inline function, and a CPU without AVX-512 would crash in it.
#pragma once

#include <cstddef>

#include "comm/base/dtype.h"

namespace kolo::trainer::cpu {

// True where the CPU and OS support AVX-512F and KOLO_TRAINER_ISA does not cap the kernels at
// avx2 (read once; a value other than avx2 or avx512 is an invalid argument naming it).
bool use_avx512();

namespace avx512 {
// n elements of dt from each pointer.
void gelu_forward(void* out, const void* x, size_t n, DType dt);
void gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt);
// Sum of e^{x[i] - shift} over n elements; with `out` (fp32 whatever dt is), out[i] = each term
// too (out may alias x when dt is float32). With prefetch_next, the n elements after x's are
// brought into cache meanwhile (softmax.h).
float exp_sum(const void* x, size_t n, float shift, float* out, DType dt, bool prefetch_next);
}  // namespace avx512

}  // namespace kolo::trainer::cpu
