// Internal to the CPU kernels: 8-lane fp32 exp and the exact (erf) GELU and its derivative.
// exp is Cephes' expf (about 1 ulp); erfc is the Chebyshev fit of Numerical Recipes (relative
// error below 1.2e-7 everywhere), so GELU stays within 1e-6 relative of the double result.
#pragma once

#include <immintrin.h>

namespace kolo::trainer::cpu {

// e^x for every lane: 0 below -87.3 (so -inf gives an exact 0) and +inf above 88.7.
inline __m256 exp8(__m256 x) {
  const __m256 kLog2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 kLn2Hi = _mm256_set1_ps(0.693359375f);
  const __m256 kLn2Lo = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 hi = _mm256_set1_ps(88.72283f);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  // x = n ln2 + r with |r| <= ln2 / 2; the two-part ln2 keeps r exact to fp32.
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, kLog2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, kLn2Hi, xc);
  r = _mm256_fnmadd_ps(n, kLn2Lo, r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n >= -126 here, so 2^n is a normal float built straight from its exponent bits.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

// Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, and e^{-x^2/2} as a by-product (the
// GELU derivative needs it). erfc(z) = t exp(-z^2) exp(c(t)) with t = 1 / (1 + z / 2), z =
// |x|/sqrt2.
struct NormalCdf {
  __m256 cdf;
  __m256 gauss;  // e^{-x^2 / 2}
};
inline NormalCdf normal_cdf8(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  // Beyond |x| = 14 (erfc(z) ~ 1e-44) nothing changes: clamping keeps infinite inputs away
  // from inf - inf.
  const __m256 ax = _mm256_min_ps(_mm256_andnot_ps(sign_mask, x), _mm256_set1_ps(14.0f));
  const __m256 z = _mm256_mul_ps(ax, _mm256_set1_ps(0.70710678118654752f));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, one));
  __m256 c = _mm256_set1_ps(0.17087277f);
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(-0.82215223f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(1.48851587f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(-1.13520398f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(0.27886807f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(-0.18628806f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(0.09678418f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(0.37409196f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(1.00002368f));
  c = _mm256_fmadd_ps(c, t, _mm256_set1_ps(-1.26551223f));
  // z^2 = x^2 / 2 taken from x itself (z carries the rounding of 1/sqrt2, which exp would
  // amplify by z^2), as the rounded square plus its exact FMA residual, halved exactly.
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 xx = _mm256_mul_ps(ax, ax);
  const __m256 zz = _mm256_mul_ps(xx, half);
  const __m256 zz_residual = _mm256_mul_ps(_mm256_fmsub_ps(ax, ax, xx), half);
  // e^{-z^2} = e^{-zz} (1 - residual): the residual is below half an ulp of zz.
  const __m256 gauss =
      _mm256_mul_ps(exp8(_mm256_xor_ps(zz, sign_mask)), _mm256_sub_ps(one, zz_residual));
  const __m256 half_erfc =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), t), _mm256_mul_ps(gauss, exp8(c)));
  // x < 0: Phi = erfc(z)/2; x >= 0: Phi = 1 - erfc(z)/2.
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 cdf = _mm256_blendv_ps(_mm256_sub_ps(one, half_erfc), half_erfc, negative);
  return {cdf, gauss};
}

// GELU(x) = x Phi(x).
inline __m256 gelu8(__m256 x) {
  return _mm256_mul_ps(x, normal_cdf8(x).cdf);
}

// GELU'(x) = Phi(x) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi).
inline __m256 gelu_grad8(__m256 x) {
  const NormalCdf n = normal_cdf8(x);
  return _mm256_fmadd_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.39894228040143268f)), n.gauss, n.cdf);
}

}  // namespace kolo::trainer::cpu
