// Internal to the CPU kernels: Philox4x32-10 on eight blocks at once with AVX2, producing the
// same stream as rng::bits (position i = output i % 4 of block i / 4), and the dropout mask
// helper the dropout and attention kernels share.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace kolo::trainer::cpu {

// out[j] = rng::uniform(seed, start + j) for j < n.
void fill_uniforms(uint64_t seed, uint64_t start, float* out, size_t n);

// Keep-and-scale factors of a dropout call: x[j] *= (u[j] >= p) ? 1/(1-p) : 0 over 8 lanes.
inline __m256 dropout_factor8(const float* u, __m256 p, __m256 scale) {
  return _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(u), p, _CMP_GE_OQ), scale);
}

}  // namespace kolo::trainer::cpu
