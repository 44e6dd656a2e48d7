// AVX2 reduction kernels for every dtype and op; compiled with -mavx2 -mfma -mf16c and only
// called when the CPU has them. Results are bit-identical to scalar.cc, which also handles the
// tail that does not fill a vector. See kernels.h for why everything here is file-local.
#include <immintrin.h>

#include <cstdint>

#include "comm/reduce/kernels.h"

namespace kolo::reduce::avx2 {
namespace {

enum class Kind { kSum, kMin, kMax, kProduct, kBand, kBor, kBxor };

// Each dtype is a "lane" type: Elem is what memory holds, Vec what the op computes on, kWidth
// how many elements one Vec covers, load/store convert between them, and sum/min/max/product
// are the ops. min/max keep scalar.cc's rule: minps/maxps(a, b), with a NaN in a kept.
struct Float32 {
  using Elem = float;
  using Vec = __m256;
  static constexpr size_t kWidth = 8;
  static Vec load(const Elem* p) { return _mm256_loadu_ps(p); }
  static void store(Elem* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec sum(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  // minps/maxps give b when either is NaN: a NaN in a is put back (scalar.cc's Min and Max).
  static Vec keep_nan(Vec a, Vec r) {
    return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  static Vec min(Vec a, Vec b) { return keep_nan(a, _mm256_min_ps(a, b)); }
  static Vec max(Vec a, Vec b) { return keep_nan(a, _mm256_max_ps(a, b)); }
  static Vec product(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec splat(float x) { return _mm256_set1_ps(x); }
  static Vec divide(Vec a, Vec b) { return _mm256_div_ps(a, b); }
};

struct Float64 {
  using Elem = double;
  using Vec = __m256d;
  static constexpr size_t kWidth = 4;
  static Vec load(const Elem* p) { return _mm256_loadu_pd(p); }
  static void store(Elem* p, Vec v) { _mm256_storeu_pd(p, v); }
  static Vec sum(Vec a, Vec b) { return _mm256_add_pd(a, b); }
  static Vec keep_nan(Vec a, Vec r) {
    return _mm256_blendv_pd(r, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  static Vec min(Vec a, Vec b) { return keep_nan(a, _mm256_min_pd(a, b)); }
  static Vec max(Vec a, Vec b) { return keep_nan(a, _mm256_max_pd(a, b)); }
  static Vec product(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
  static Vec splat(double x) { return _mm256_set1_pd(x); }
  static Vec divide(Vec a, Vec b) { return _mm256_div_pd(a, b); }
};

// fp16 and bf16 compute in fp32 (reusing Float32's ops) and round to nearest even on store.
struct Float16 : Float32 {
  using Elem = uint16_t;
  static Vec load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(Elem* p, Vec v) {
    // F16C rounds to nearest even, handles subnormals and overflow to infinity, and quiets
    // NaNs keeping the top payload bits: the same as float_to_half.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bf16 is the upper half of an fp32, so a plain 256-bit load of 16 bf16 splits into fp32
// without any (slow, cross-lane) shuffle: the odd elements only need the low half of each
// 32-bit lane cleared, the even ones a shift up. Ops run on both halves; the store rounds each
// and interleaves the 16-bit results back with a blend.
struct BFloat16 {
  using Elem = uint16_t;
  struct Vec {
    __m256 even;
    __m256 odd;
  };
  static constexpr size_t kWidth = 16;
  static constexpr int kUpperHalf = -65536;  // 0xFFFF0000 as the int the intrinsics take

  static Vec load(const Elem* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(bits, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(kUpperHalf)))};
  }
  static void store(Elem* p, Vec v) {
    const __m256i even = _mm256_srli_epi32(round_to_upper_half(v.even), 16);
    const __m256i odd = round_to_upper_half(v.odd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_blend_epi16(even, odd, 0xAA));
  }
  static Vec sum(Vec a, Vec b) {
    return {Float32::sum(a.even, b.even), Float32::sum(a.odd, b.odd)};
  }
  static Vec min(Vec a, Vec b) {
    return {Float32::min(a.even, b.even), Float32::min(a.odd, b.odd)};
  }
  static Vec max(Vec a, Vec b) {
    return {Float32::max(a.even, b.even), Float32::max(a.odd, b.odd)};
  }
  static Vec product(Vec a, Vec b) {
    return {Float32::product(a.even, b.even), Float32::product(a.odd, b.odd)};
  }
  static Vec splat(float x) { return {Float32::splat(x), Float32::splat(x)}; }
  static Vec divide(Vec a, Vec b) {
    return {Float32::divide(a.even, b.even), Float32::divide(a.odd, b.odd)};
  }

  // float_to_bfloat16 in vector form, leaving the result in the upper 16 bits of each lane:
  // NaNs are truncated and made quiet, everything else is rounded to nearest even by adding
  // 0x7FFF plus the lowest kept bit.
  static __m256i round_to_upper_half(__m256 v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_add_epi32(bits, _mm256_add_epi32(kept_lsb, _mm256_set1_epi32(0x7FFF)));
    const __m256i quiet_nan = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet_nan), is_nan));
  }
};

// Shared by the integer lanes: plain unaligned 256-bit moves.
struct IntegerMoves {
  using Vec = __m256i;
  static Vec load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(void* p, Vec v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
};

struct Int32 : IntegerMoves {
  using Elem = int32_t;
  static constexpr size_t kWidth = 8;
  static Vec sum(Vec a, Vec b) { return _mm256_add_epi32(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_epi32(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_epi32(a, b); }
  static Vec product(Vec a, Vec b) { return _mm256_mullo_epi32(a, b); }
};

struct Int64 : IntegerMoves {
  using Elem = int64_t;
  static constexpr size_t kWidth = 4;
  static Vec sum(Vec a, Vec b) { return _mm256_add_epi64(a, b); }
  // AVX2 has no 64-bit min/max: compare, then pick per lane.
  static Vec min(Vec a, Vec b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(b, a)); }
  static Vec max(Vec a, Vec b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b)); }
  static Vec product(Vec a, Vec b) {
    // No 64-bit multiply either. From 32-bit halves: a*b mod 2^64 =
    // lo(a)*lo(b) + ((lo(a)*hi(b) + hi(a)*lo(b)) << 32); hi*hi only reaches bits above 64.
    const __m256i a_high = _mm256_srli_epi64(a, 32);
    const __m256i b_high = _mm256_srli_epi64(b, 32);
    const __m256i cross =
        _mm256_add_epi64(_mm256_mul_epu32(a, b_high), _mm256_mul_epu32(a_high, b));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
  }
};

// The bitwise ops see bytes whatever the integer dtype: and, or and xor of bits.
struct Bits : IntegerMoves {
  using Elem = uint8_t;
  static constexpr size_t kWidth = 32;
  static Vec band(Vec a, Vec b) { return _mm256_and_si256(a, b); }
  static Vec bor(Vec a, Vec b) { return _mm256_or_si256(a, b); }
  static Vec bxor(Vec a, Vec b) { return _mm256_xor_si256(a, b); }
};

struct UInt8 : IntegerMoves {
  using Elem = uint8_t;
  static constexpr size_t kWidth = 32;
  static Vec sum(Vec a, Vec b) { return _mm256_add_epi8(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_epu8(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_epu8(a, b); }
  static Vec product(Vec a, Vec b) {
    // No byte multiply: the low byte of a 16-bit product depends only on the low bytes, so
    // multiply the even bytes in place and the odd bytes shifted down, then interleave.
    const __m256i even = _mm256_mullo_epi16(a, b);
    const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)),
                           _mm256_slli_epi16(odd, 8));
  }
};

// int8 and int16 wrap like the other integers. A byte product's low byte is the same whether
// the bytes are read signed or unsigned, so int8 multiplies as uint8 does.
struct Int8 : UInt8 {
  using Elem = int8_t;
  static Vec min(Vec a, Vec b) { return _mm256_min_epi8(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_epi8(a, b); }
};

struct Int16 : IntegerMoves {
  using Elem = int16_t;
  static constexpr size_t kWidth = 16;
  static Vec sum(Vec a, Vec b) { return _mm256_add_epi16(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_epi16(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_epi16(a, b); }
  static Vec product(Vec a, Vec b) { return _mm256_mullo_epi16(a, b); }
};

#include "comm/reduce/vector_driver.inc"

}  // namespace kolo::reduce::avx2
