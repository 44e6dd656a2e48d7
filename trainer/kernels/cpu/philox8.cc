// Philox4x32-10 over eight counters per AVX2 register; see philox8.h. Checked against the
// scalar rng::bits in tests/trainer/kernels_random_test.cc.
#include "trainer/kernels/cpu/philox8.h"

#include "trainer/kernels/cpu/rng.h"

namespace kolo::trainer::cpu {
namespace {

// Low and high 32 bits of the 64-bit products m * a for the eight lanes of a.
inline void mulhilo(__m256i a, __m256i m, __m256i* lo, __m256i* hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// 32 uniforms for the blocks first_block .. first_block + 7, in stream order.
void philox_32(uint64_t seed, uint64_t first_block, float* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // Block counters never wrap in the low word inside one call here: the caller splits there.
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first_block)), lane);
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(first_block >> 32));
  __m256i c2 = _mm256_setzero_si256();
  __m256i c3 = _mm256_setzero_si256();
  __m256i k0 = _mm256_set1_epi32(static_cast<int>(seed));
  __m256i k1 = _mm256_set1_epi32(static_cast<int>(seed >> 32));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(rng::kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(rng::kPhiloxM1));
  const __m256i w0 = _mm256_set1_epi32(static_cast<int>(rng::kPhiloxW0));
  const __m256i w1 = _mm256_set1_epi32(static_cast<int>(rng::kPhiloxW1));
  for (int round = 0; round < rng::kPhiloxRounds; ++round) {
    __m256i lo0, hi0, lo1, hi1;
    mulhilo(c0, m0, &lo0, &hi0);
    mulhilo(c2, m1, &lo1, &hi1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0);
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), k1);
    c3 = lo0;
    k0 = _mm256_add_epi32(k0, w0);
    k1 = _mm256_add_epi32(k1, w1);
  }
  // Transpose the 4 x 8 (output word x block) result into block-major stream order.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1);
  const __m256i t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3);
  const __m256i t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i b04 = _mm256_unpacklo_epi64(t0, t2);
  const __m256i b15 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i b26 = _mm256_unpacklo_epi64(t1, t3);
  const __m256i b37 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i rows[4] = {
      _mm256_permute2x128_si256(b04, b15, 0x20), _mm256_permute2x128_si256(b26, b37, 0x20),
      _mm256_permute2x128_si256(b04, b15, 0x31), _mm256_permute2x128_si256(b26, b37, 0x31)};
  const __m256 kScale = _mm256_set1_ps(1.0f / 16777216.0f);
  for (int r = 0; r < 4; ++r) {
    const __m256 u = _mm256_cvtepi32_ps(_mm256_srli_epi32(rows[r], 8));
    _mm256_storeu_ps(out + 8 * r, _mm256_mul_ps(u, kScale));
  }
}

}  // namespace

void fill_uniforms(uint64_t seed, uint64_t start, float* out, size_t n) {
  size_t j = 0;
  // Scalar up to a block boundary and wherever eight blocks would cross a 2^32 block
  // boundary (the vector path adds to the low counter word only); a short tail is cut from
  // one more vector call.
  while (j < n) {
    const uint64_t pos = start + j;
    const uint64_t block = pos >> 2;
    if ((pos & 3) != 0 || static_cast<uint32_t>(block) > UINT32_MAX - 7) {
      out[j++] = rng::uniform(seed, pos);
    } else if (n - j >= 32) {
      philox_32(seed, block, out + j);
      j += 32;
    } else {
      float tail[32];
      philox_32(seed, block, tail);
      for (size_t t = 0; j < n; ++t) out[j++] = tail[t];
    }
  }
}

}  // namespace kolo::trainer::cpu
