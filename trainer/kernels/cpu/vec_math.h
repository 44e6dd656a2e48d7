// Internal to the CPU kernels: 8-lane fp32 exp and the exact (erf) GELU and its derivative.
// exp is Cephes' expf (about 1 ulp); erfc is the Chebyshev fit of Numerical Recipes (relative
// error below 1.2e-7 everywhere), so GELU stays within 1e-6 relative of the double result
// (checked over [-12, 12] in tests/trainer/kernels_elementwise_test.cc).
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
  // Cephes' polynomial 1 + r + r^2 (c5 + c4 r + ... + c0 r^5), evaluated by Estrin's scheme
  // (pairs, then powers of r^2) for a shorter dependency chain than Horner's.
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 r4 = _mm256_mul_ps(r2, r2);
  const __m256 p01 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  const __m256 p23 =
      _mm256_fmadd_ps(_mm256_set1_ps(8.3334519073e-3f), r, _mm256_set1_ps(4.1665795894e-2f));
  const __m256 p45 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.6666665459e-1f), r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 p = _mm256_fmadd_ps(p01, r4, _mm256_fmadd_ps(p23, r2, p45));
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n >= -126 here, so 2^n is a normal float built straight from its exponent bits.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

// Phi(x) = erfc(-x / sqrt 2) / 2 with erfc(z) = t exp(c(t) - z^2), t = 1 / (1 + z / 2),
// z = |x| / sqrt 2, c the Numerical Recipes polynomial. exp amplifies an absolute error of its
// argument into a relative one, so -z^2 is carried exactly: z^2 = x^2 / 2 is taken from x (z
// itself carries the rounding of 1/sqrt2) as the rounded square plus its FMA residual.
struct ErfcParts {
  __m256 t;         // 1 / (1 + z/2)
  __m256 c;         // the polynomial in t
  __m256 zz;        // z^2 rounded
  __m256 residual;  // z^2 - zz, exact
};
inline ErfcParts erfc_parts(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  // Beyond |x| = 14 (erfc ~ 1e-44) nothing changes: clamping keeps inf away from inf - inf.
  const __m256 ax =
      _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(14.0f));
  const __m256 d = _mm256_fmadd_ps(_mm256_set1_ps(0.35355339059327376f), ax, one);  // 1 + z/2
  // Reciprocal estimate plus one Newton step: ~1e-7 relative, far cheaper than a divide.
  __m256 t = _mm256_rcp_ps(d);
  t = _mm256_fmadd_ps(t, _mm256_fnmadd_ps(d, t, one), t);
  // The degree-9 polynomial by Estrin's scheme: a third of Horner's dependency chain, which
  // is what bounds this loop.
  const auto pair = [&](float lo, float hi) {
    return _mm256_fmadd_ps(_mm256_set1_ps(hi), t, _mm256_set1_ps(lo));
  };
  const __m256 t2 = _mm256_mul_ps(t, t);
  const __m256 t4 = _mm256_mul_ps(t2, t2);
  const __m256 t8 = _mm256_mul_ps(t4, t4);
  const __m256 q0 =
      _mm256_fmadd_ps(pair(0.37409196f, 0.09678418f), t2, pair(-1.26551223f, 1.00002368f));
  const __m256 q1 =
      _mm256_fmadd_ps(pair(-1.13520398f, 1.48851587f), t2, pair(-0.18628806f, 0.27886807f));
  const __m256 c =
      _mm256_fmadd_ps(pair(-0.82215223f, 0.17087277f), t8, _mm256_fmadd_ps(q1, t4, q0));
  const __m256 xx = _mm256_mul_ps(ax, ax);
  return {t, c, _mm256_mul_ps(xx, half), _mm256_mul_ps(_mm256_fmsub_ps(ax, ax, xx), half)};
}

// Phi from erfc(z) / 2: itself for x < 0, 1 - it for x >= 0.
inline __m256 cdf_from_half_erfc(__m256 x, __m256 half_erfc) {
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), half_erfc), half_erfc, negative);
}

// GELU(x) = x Phi(x) with one exp: e^{c - zz} where the rounding of c - zz (TwoSum) and the
// square's residual are folded back in as a first-order factor.
inline __m256 gelu8(__m256 x) {
  const ErfcParts p = erfc_parts(x);
  const __m256 neg_zz = _mm256_xor_ps(p.zz, _mm256_set1_ps(-0.0f));
  const __m256 s = _mm256_add_ps(p.c, neg_zz);
  const __m256 bb = _mm256_sub_ps(s, p.c);
  const __m256 sum_err =
      _mm256_add_ps(_mm256_sub_ps(p.c, _mm256_sub_ps(s, bb)), _mm256_sub_ps(neg_zz, bb));
  const __m256 correction = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_sub_ps(sum_err, p.residual));
  const __m256 half_erfc =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), p.t), _mm256_mul_ps(exp8(s), correction));
  return _mm256_mul_ps(x, cdf_from_half_erfc(x, half_erfc));
}

// GELU'(x) = Phi(x) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi): e^{-zz} serves both.
inline __m256 gelu_grad8(__m256 x) {
  const ErfcParts p = erfc_parts(x);
  const __m256 gauss = _mm256_mul_ps(exp8(_mm256_xor_ps(p.zz, _mm256_set1_ps(-0.0f))),
                                     _mm256_sub_ps(_mm256_set1_ps(1.0f), p.residual));
  const __m256 half_erfc =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), p.t), _mm256_mul_ps(gauss, exp8(p.c)));
  const __m256 cdf = cdf_from_half_erfc(x, half_erfc);
  return _mm256_fmadd_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.39894228040143268f)), gauss, cdf);
}

}  // namespace kolo::trainer::cpu
