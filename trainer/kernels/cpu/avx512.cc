// The 16-lane loops of avx512.h: vec_math.h's exp and GELU over AVX-512 operations, on every
// storage dtype (converted in registers). See avx512.h for why nothing here may be shared with
// other files.

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

// Storage codecs, 16 elements at a time, rounding exactly as vec.h's 8-lane F32 / F16 / BF16
// (so either width stores the same bits for the same fp32 values). load_n / store_n take the
// `left` elements from there to the end, fewer than 16 only in the last vector.
struct W32 {
  using T = float;
  static __mmask16 lanes(size_t left) {
    return left >= kWide ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  }
  static __m512 load_n(const T* p, size_t left) { return _mm512_maskz_loadu_ps(lanes(left), p); }
  static void store_n(T* p, __m512 v, size_t left) { _mm512_mask_storeu_ps(p, lanes(left), v); }
};

// The 16-bit storages: whole vectors move directly, the last partial one through a buffer.
template <typename Codec>
struct Storage16 {
  using T = uint16_t;
  static __m512 load_n(const T* p, size_t left) {
    if (left >= kWide) return Codec::load(p);
    alignas(32) T part[kWide] = {};
    for (size_t i = 0; i < left; ++i) part[i] = p[i];
    return Codec::load(part);
  }
  static void store_n(T* p, __m512 v, size_t left) {
    if (left >= kWide) return Codec::store(p, v);
    alignas(32) T part[kWide];
    Codec::store(part, v);
    for (size_t i = 0; i < left; ++i) p[i] = part[i];
  }
};

// fp16: converted exactly on load, rounded to nearest even on store (as F16C's 8-lane forms).
struct F16Codec {
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(uint16_t* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bf16: the upper half of an fp32; stores add 0x7FFF plus the lowest kept bit, NaNs are
// truncated and made quiet.
struct BF16Codec {
  static __m512 load(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static void store(uint16_t* p, __m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    const __m512i quiet = _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000));
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i chosen = _mm512_mask_blend_epi32(is_nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(chosen, 16)));
  }
};

using W16 = Storage16<F16Codec>;
using WB16 = Storage16<BF16Codec>;

// fn(W{}) for the storage dtype dt (a storage dtype: the callers have checked it).
template <typename Fn>
decltype(auto) with_codec(DType dt, Fn&& fn) {
  if (dt == DType::kFloat16) return fn(W16{});
  if (dt == DType::kBFloat16) return fn(WB16{});
  return fn(W32{});
}

// A hint to bring the cache line of p[i] in; i may lie past the buffer (a prefetch never faults).
template <typename T>
void prefetch(const T* p, size_t i) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + i * sizeof(T)),
               _MM_HINT_T0);
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

void gelu_forward(void* out, const void* x, size_t n, DType dt) {
  with_codec(dt, [&](auto w) {
    using W = decltype(w);
    auto* o = static_cast<typename W::T*>(out);
    const auto* v = static_cast<const typename W::T*>(x);
    for (size_t i = 0; i < n; i += kWide)
      W::store_n(o + i, gelu_v<Avx512>(W::load_n(v + i, n - i)), n - i);
  });
}

void gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) {
  with_codec(dt, [&](auto w) {
    using W = decltype(w);
    auto* o = static_cast<typename W::T*>(dx);
    const auto* d = static_cast<const typename W::T*>(dout);
    const auto* v = static_cast<const typename W::T*>(x);
    for (size_t i = 0; i < n; i += kWide) {
      const __m512 g = gelu_grad_v<Avx512>(W::load_n(v + i, n - i));
      W::store_n(o + i, _mm512_mul_ps(W::load_n(d + i, n - i), g), n - i);
    }
  });
}

float exp_sum(const void* x, size_t n, float shift, float* out, DType dt, bool prefetch_next) {
  return with_codec(dt, [&](auto w) {
    using W = decltype(w);
    const auto* v = static_cast<const typename W::T*>(x);
    const __m512 s = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += kWide) {
      if (prefetch_next) prefetch(v, n + i);
      const __mmask16 m = W32::lanes(n - i);
      const __m512 e =
          _mm512_maskz_mov_ps(m, exp_v<Avx512>(_mm512_sub_ps(W::load_n(v + i, n - i), s)));
      if (out != nullptr) W32::store_n(out + i, e, n - i);
      sum = _mm512_add_ps(sum, e);
    }
    return hsum16(sum);
  });
}

}  // namespace avx512
}  // namespace kolo::trainer::cpu
