// Internal to the CPU kernels: the exponentials pass of the softmaxes (cross-entropy's rows and
// attention's), 16 lanes wide where use_avx512() says so, else 8.
#pragma once

#include "trainer/kernels/cpu/avx512.h"
#include "trainer/kernels/cpu/vec.h"
#include "trainer/kernels/cpu/vec_math.h"

namespace kolo::trainer::cpu {

// Sum of e^{x - shift} over n elements of the storage dtype; with `out` (fp32 for every storage
// dtype) each term is stored there too, out may alias x when the storage is fp32. With
// prefetch_next, the n elements that follow x's are brought into cache while the exponentials
// are computed: a caller walking a long row chunk by chunk finds the next chunk there.
template <typename S>
float exp_sum(const typename S::T* x, size_t n, float shift, float* out,
              bool prefetch_next = false) {
  if (use_avx512()) return avx512::exp_sum(x, n, shift, out, S::kDType, prefetch_next);
  const __m256 m = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  for (size_t j = 0; j < n; j += kLanes) {
    const size_t left = n - j;
    // Past the buffer at its end: harmless, a prefetch never faults.
    if (prefetch_next) {
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x) +
                                                 (n + j) * sizeof(typename S::T)),
                   _MM_HINT_T0);
    }
    __m256 e = exp8(_mm256_sub_ps(load_n<S>(x + j, left), m));
    if (left < kLanes) e = _mm256_and_ps(e, lane_mask(left));
    if (out != nullptr) store_n<F32>(out + j, e, left);
    sum = _mm256_add_ps(sum, e);
  }
  return hsum(sum);
}

}  // namespace kolo::trainer::cpu
