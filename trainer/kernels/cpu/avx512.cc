// The 16-lane fp32 loops of avx512.h: vec_math.h's exp and GELU over AVX-512 operations. See
// avx512.h for why nothing here may be shared with other files.

#include "trainer/kernels/cpu/avx512.h"
#include "comm/base/avx512_intrin.h"
#include "trainer/kernels/cpu/vec_math.h"

namespace kolo::trainer::cpu {
namespace {

// vec_math.h's operations, 16 lanes, AVX-512F only.
struct Avx512 {
  using V = __m512;
  using Mask = __mmask16;
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V neg(V a) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int(0x80000000u))));
  }
  static V rcp(V a) { return _mm512_rcp14_ps(a); }
  static V round(V a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V pow2(V n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static Mask lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Mask gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static V select(Mask m, V if_true, V if_false) {
    return _mm512_mask_blend_ps(m, if_false, if_true);
  }
};

constexpr size_t kWide = 16;

// The lanes of the vector at i that lie before n (all 16 but at the very end).
__mmask16 lanes_from(size_t i, size_t n) {
  const size_t left = n - i;
  return left >= kWide ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

// Sum of the 16 lanes, pairwise.
float hsum16(__m512 v) {
  alignas(64) float lanes[kWide];
  _mm512_store_ps(lanes, v);
  for (size_t width = kWide / 2; width >= 1; width /= 2)
    for (size_t i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

}  // namespace

namespace avx512 {

void gelu_forward(float* out, const float* x, size_t n) {
  for (size_t i = 0; i < n; i += kWide) {
    const __mmask16 m = lanes_from(i, n);
    _mm512_mask_storeu_ps(out + i, m, gelu_v<Avx512>(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void gelu_backward(float* dx, const float* dout, const float* x, size_t n) {
  for (size_t i = 0; i < n; i += kWide) {
    const __mmask16 m = lanes_from(i, n);
    const __m512 g = gelu_grad_v<Avx512>(_mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(dx + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dout + i), g));
  }
}

float exp_sum(const float* x, size_t n, float shift, float* out) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += kWide) {
    const __mmask16 m = lanes_from(i, n);
    const __m512 e = exp_v<Avx512>(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    if (out != nullptr) _mm512_mask_storeu_ps(out + i, m, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
  }
  return hsum16(sum);
}

}  // namespace avx512
}  // namespace kolo::trainer::cpu
