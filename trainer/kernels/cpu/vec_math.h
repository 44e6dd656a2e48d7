// Internal to the CPU kernels: fp32 exp and the exact (erf) GELU and its derivative, written
// once over a vector width: `O` is the operations of one instruction set, Avx2 below (8 lanes)
// or Avx512 (16 lanes, avx512.cc, built for AVX-512 only). exp is Cephes' expf (about 1 ulp);
// erfc is the Chebyshev fit of Numerical Recipes (relative error below 1.2e-7 everywhere), so
// GELU stays within 1e-6 relative of the double result (checked over [-12, 12] in
// tests/trainer/kernels_elementwise_test.cc, on every width the CPU runs). Each is forced inline:
// a loop that calls them for several storage dtypes would otherwise call them per vector.
#pragma once

#include <immintrin.h>

namespace kolo::trainer::cpu {

// The 8-lane operations the math below is written in.
struct Avx2 {
  using V = __m256;
  using Mask = __m256;
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }
  // min/max return b when either is NaN (minps / maxps).
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  // About 12 bits of 1/a: callers add a Newton step.
  static V rcp(V a) { return _mm256_rcp_ps(a); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral n in [-126, 127], from the exponent bits.
  static V pow2(V n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static Mask lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static Mask gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static V select(Mask m, V if_true, V if_false) { return _mm256_blendv_ps(if_false, if_true, m); }
};

// e^x for every lane: 0 below -87.3 (so -inf gives an exact 0) and +inf from 88.38 (where 2^n
// leaves the exponent range; e^x itself overflows at 88.72). The softmaxes only take x <= 0.
template <typename O>
[[gnu::always_inline]] inline typename O::V exp_v(typename O::V x) {
  const auto c = [](float v) { return O::set1(v); };
  const auto lo = c(-87.33654f);
  const auto hi = c(88.72283f);
  const auto xc = O::min(O::max(x, lo), hi);
  // x = n ln2 + r with |r| <= ln2 / 2; the two-part ln2 keeps r exact to fp32.
  const auto n = O::round(O::mul(xc, c(1.44269504088896341f)));
  auto r = O::fnmadd(n, c(0.693359375f), xc);
  r = O::fnmadd(n, c(-2.12194440e-4f), r);
  // Cephes' polynomial 1 + r + r^2 (c5 + c4 r + ... + c0 r^5), evaluated by Estrin's scheme
  // (pairs, then powers of r^2) for a shorter dependency chain than Horner's.
  const auto r2 = O::mul(r, r);
  const auto r4 = O::mul(r2, r2);
  const auto p01 = O::fmadd(c(1.9875691500e-4f), r, c(1.3981999507e-3f));
  const auto p23 = O::fmadd(c(8.3334519073e-3f), r, c(4.1665795894e-2f));
  const auto p45 = O::fmadd(c(1.6666665459e-1f), r, c(5.0000001201e-1f));
  auto p = O::fmadd(p01, r4, O::fmadd(p23, r2, p45));
  p = O::fmadd(p, r2, O::add(r, c(1.0f)));
  // n >= -126 here, so 2^n is a normal float.
  const auto out = O::mul(p, O::pow2(n));
  return O::select(O::gt(x, hi), c(__builtin_inff()), O::select(O::lt(x, lo), O::set1(0.0f), out));
}

// Phi(x) = erfc(-x / sqrt 2) / 2 with erfc(z) = t exp(c(t) - z^2), t = 1 / (1 + z / 2),
// z = |x| / sqrt 2, c the Numerical Recipes polynomial. exp amplifies an absolute error of its
// argument into a relative one, so -z^2 is carried exactly: z^2 = x^2 / 2 is taken from x (z
// itself carries the rounding of 1/sqrt2) as the rounded square plus its FMA residual.
template <typename O>
struct ErfcParts {
  typename O::V t;         // 1 / (1 + z/2)
  typename O::V c;         // the polynomial in t
  typename O::V zz;        // z^2 rounded
  typename O::V residual;  // z^2 - zz, exact
};
template <typename O>
[[gnu::always_inline]] inline ErfcParts<O> erfc_parts(typename O::V x) {
  const auto k = [](float v) { return O::set1(v); };
  const auto one = k(1.0f);
  // Beyond |x| = 14 (erfc ~ 1e-44) nothing changes: clamping keeps inf away from inf - inf.
  const auto ax = O::min(O::abs(x), k(14.0f));
  const auto d = O::fmadd(k(0.35355339059327376f), ax, one);  // 1 + z/2
  // Reciprocal estimate plus one Newton step: ~1e-7 relative, far cheaper than a divide.
  auto t = O::rcp(d);
  t = O::fmadd(t, O::fnmadd(d, t, one), t);
  // The degree-9 polynomial by Estrin's scheme: a third of Horner's dependency chain, which
  // is what bounds this loop.
  const auto pair = [&](float lo, float hi) { return O::fmadd(k(hi), t, k(lo)); };
  const auto t2 = O::mul(t, t);
  const auto t4 = O::mul(t2, t2);
  const auto t8 = O::mul(t4, t4);
  const auto q0 = O::fmadd(pair(0.37409196f, 0.09678418f), t2, pair(-1.26551223f, 1.00002368f));
  const auto q1 = O::fmadd(pair(-1.13520398f, 1.48851587f), t2, pair(-0.18628806f, 0.27886807f));
  const auto c = O::fmadd(pair(-0.82215223f, 0.17087277f), t8, O::fmadd(q1, t4, q0));
  const auto xx = O::mul(ax, ax);
  return {t, c, O::mul(xx, k(0.5f)), O::mul(O::fmsub(ax, ax, xx), k(0.5f))};
}

// Phi from erfc(z) / 2: itself for x < 0, 1 - it for x >= 0.
template <typename O>
[[gnu::always_inline]] inline typename O::V cdf_from_half_erfc(typename O::V x,
                                                               typename O::V half_erfc) {
  return O::select(O::lt(x, O::set1(0.0f)), half_erfc, O::sub(O::set1(1.0f), half_erfc));
}

// GELU(x) = x Phi(x) with one exp: e^{c - zz} where the rounding of c - zz (TwoSum) and the
// square's residual are folded back in as a first-order factor.
template <typename O>
[[gnu::always_inline]] inline typename O::V gelu_v(typename O::V x) {
  const ErfcParts<O> p = erfc_parts<O>(x);
  const auto neg_zz = O::neg(p.zz);
  const auto s = O::add(p.c, neg_zz);
  const auto bb = O::sub(s, p.c);
  const auto sum_err = O::add(O::sub(p.c, O::sub(s, bb)), O::sub(neg_zz, bb));
  const auto correction = O::add(O::set1(1.0f), O::sub(sum_err, p.residual));
  const auto half_erfc = O::mul(O::mul(O::set1(0.5f), p.t), O::mul(exp_v<O>(s), correction));
  return O::mul(x, cdf_from_half_erfc<O>(x, half_erfc));
}

// GELU'(x) = Phi(x) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi): e^{-zz} serves both.
template <typename O>
[[gnu::always_inline]] inline typename O::V gelu_grad_v(typename O::V x) {
  const ErfcParts<O> p = erfc_parts<O>(x);
  const auto gauss = O::mul(exp_v<O>(O::neg(p.zz)), O::sub(O::set1(1.0f), p.residual));
  const auto half_erfc = O::mul(O::mul(O::set1(0.5f), p.t), O::mul(gauss, exp_v<O>(p.c)));
  const auto cdf = cdf_from_half_erfc<O>(x, half_erfc);
  return O::fmadd(O::mul(x, O::set1(0.39894228040143268f)), gauss, cdf);
}

inline __m256 exp8(__m256 x) {
  return exp_v<Avx2>(x);
}
inline __m256 gelu8(__m256 x) {
  return gelu_v<Avx2>(x);
}
inline __m256 gelu_grad8(__m256 x) {
  return gelu_grad_v<Avx2>(x);
}

}  // namespace kolo::trainer::cpu
