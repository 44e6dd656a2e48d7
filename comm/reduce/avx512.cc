// AVX-512 reduction kernels for every dtype and op; compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mf16c -mfma and only called when the CPU has them. Results are
// bit-identical to scalar.cc, which also handles the tail that does not fill a vector.
// See kernels.h for why everything here is file-local.
#include <cstdint>

#include "comm/base/avx512_intrin.h"
#include "comm/reduce/kernels.h"

namespace kolo::reduce::avx512 {
namespace {

enum class Kind { kSum, kMin, kMax, kProduct, kBand, kBor, kBxor };

// Lane types as in avx2.cc: Elem in memory, Vec computed on, kWidth elements per Vec. min/max
// are minps/maxps(a, b) with a NaN in a kept: scalar.cc's Min and Max.
struct Float32 {
  using Elem = float;
  using Vec = __m512;
  static constexpr size_t kWidth = 16;
  static Vec load(const Elem* p) { return _mm512_loadu_ps(p); }
  static void store(Elem* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec sum(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  // minps/maxps give b when either is NaN: a NaN in a is put back (scalar.cc's Min and Max).
  static Vec keep_nan(Vec a, Vec r) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
  }
  static Vec min(Vec a, Vec b) { return keep_nan(a, _mm512_min_ps(a, b)); }
  static Vec max(Vec a, Vec b) { return keep_nan(a, _mm512_max_ps(a, b)); }
  static Vec product(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec splat(float x) { return _mm512_set1_ps(x); }
  static Vec divide(Vec a, Vec b) { return _mm512_div_ps(a, b); }
};

struct Float64 {
  using Elem = double;
  using Vec = __m512d;
  static constexpr size_t kWidth = 8;
  static Vec load(const Elem* p) { return _mm512_loadu_pd(p); }
  static void store(Elem* p, Vec v) { _mm512_storeu_pd(p, v); }
  static Vec sum(Vec a, Vec b) { return _mm512_add_pd(a, b); }
  static Vec keep_nan(Vec a, Vec r) {
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), r, a);
  }
  static Vec min(Vec a, Vec b) { return keep_nan(a, _mm512_min_pd(a, b)); }
  static Vec max(Vec a, Vec b) { return keep_nan(a, _mm512_max_pd(a, b)); }
  static Vec product(Vec a, Vec b) { return _mm512_mul_pd(a, b); }
  static Vec splat(double x) { return _mm512_set1_pd(x); }
  static Vec divide(Vec a, Vec b) { return _mm512_div_pd(a, b); }
};

// fp16 and bf16 compute in fp32 (reusing Float32's ops) and round to nearest even on store.
struct Float16 : Float32 {
  using Elem = uint16_t;
  static Vec load(const Elem* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(Elem* p, Vec v) {
    // Rounds to nearest even with subnormals, overflow to infinity and quiet NaNs, exactly as
    // float_to_half does.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bf16 is the upper half of an fp32, so a plain 512-bit load of 32 bf16 splits into fp32
// without any (slow, cross-lane) shuffle: the odd elements only need the low half of each
// 32-bit lane cleared, the even ones a shift up. Ops run on both halves; the store rounds each
// and interleaves the 16-bit results back with a masked blend. No AVX512_BF16 needed.
struct BFloat16 {
  using Elem = uint16_t;
  struct Vec {
    __m512 even;
    __m512 odd;
  };
  static constexpr size_t kWidth = 32;
  static constexpr int kUpperHalf = -65536;  // 0xFFFF0000 as the int the intrinsics take

  static Vec load(const Elem* p) {
    const __m512i bits = _mm512_loadu_si512(p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(kUpperHalf)))};
  }
  static void store(Elem* p, Vec v) {
    constexpr __mmask32 kOddWords = 0xAAAAAAAAu;
    const __m512i even = _mm512_srli_epi32(round_to_upper_half(v.even), 16);
    const __m512i odd = round_to_upper_half(v.odd);
    _mm512_storeu_si512(p, _mm512_mask_blend_epi16(kOddWords, even, odd));
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
  static __m512i round_to_upper_half(__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i kept_lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(kept_lsb, _mm512_set1_epi32(0x7FFF)));
    const __m512i quiet_nan = _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000));
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
  }
};

// Shared by the integer lanes: plain unaligned 512-bit moves.
struct IntegerMoves {
  using Vec = __m512i;
  static Vec load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(void* p, Vec v) { _mm512_storeu_si512(p, v); }
};

struct Int32 : IntegerMoves {
  using Elem = int32_t;
  static constexpr size_t kWidth = 16;
  static Vec sum(Vec a, Vec b) { return _mm512_add_epi32(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_epi32(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_epi32(a, b); }
  static Vec product(Vec a, Vec b) { return _mm512_mullo_epi32(a, b); }
};

struct Int64 : IntegerMoves {
  using Elem = int64_t;
  static constexpr size_t kWidth = 8;
  static Vec sum(Vec a, Vec b) { return _mm512_add_epi64(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_epi64(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_epi64(a, b); }
  static Vec product(Vec a, Vec b) { return _mm512_mullo_epi64(a, b); }  // AVX512DQ
};

// The bitwise ops see bytes whatever the integer dtype: and, or and xor of bits.
struct Bits : IntegerMoves {
  using Elem = uint8_t;
  static constexpr size_t kWidth = 64;
  static Vec band(Vec a, Vec b) { return _mm512_and_si512(a, b); }
  static Vec bor(Vec a, Vec b) { return _mm512_or_si512(a, b); }
  static Vec bxor(Vec a, Vec b) { return _mm512_xor_si512(a, b); }
};

struct UInt8 : IntegerMoves {
  using Elem = uint8_t;
  static constexpr size_t kWidth = 64;
  static Vec sum(Vec a, Vec b) { return _mm512_add_epi8(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_epu8(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_epu8(a, b); }
  static Vec product(Vec a, Vec b) {
    // No byte multiply: the low byte of a 16-bit product depends only on the low bytes, so
    // multiply the even bytes in place and the odd bytes shifted down, then merge the odd
    // products (shifted back up) into the odd byte positions.
    constexpr __mmask64 kOddBytes = 0xAAAAAAAAAAAAAAAAull;
    const __m512i even = _mm512_mullo_epi16(a, b);
    const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
    return _mm512_mask_blend_epi8(kOddBytes, even, _mm512_slli_epi16(odd, 8));
  }
};

// int8 and int16 wrap like the other integers. A byte product's low byte is the same whether
// the bytes are read signed or unsigned, so int8 multiplies as uint8 does.
struct Int8 : UInt8 {
  using Elem = int8_t;
  static Vec min(Vec a, Vec b) { return _mm512_min_epi8(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_epi8(a, b); }
};

struct Int16 : IntegerMoves {
  using Elem = int16_t;
  static constexpr size_t kWidth = 32;
  static Vec sum(Vec a, Vec b) { return _mm512_add_epi16(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_epi16(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_epi16(a, b); }
  static Vec product(Vec a, Vec b) { return _mm512_mullo_epi16(a, b); }
};

#include "comm/reduce/vector_driver.inc"

}  // namespace kolo::reduce::avx512
