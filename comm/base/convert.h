// kolo's one home for element-type conversion: fp32 <-> fp16 / bf16 scalar helpers, and whole
// arrays between any two DTypes with an optional scale factor (AVX2 + F16C when the CPU has
// them). Every other layer (reduce, fusion, the trainer) converts through here.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "comm/base/dtype.h"

namespace kolo {

// dst[i] = src[i] * scale for i < count, read as `from` and written as `to`.
//
// Between float32, float16 and bfloat16 (either side), each element is widened exactly to fp32,
// multiplied by float(scale) in fp32 (skipped when scale is 1) and rounded once to the
// destination as the helpers below round. The vector loops and the scalar ones give the same
// bits: e.g. fp32 -> fp16 is float_to_half(x * float(scale)) element by element.
// Any pair with float64 or an integer type computes in double; fp16/bf16 destinations round
// through fp32, integer destinations truncate toward zero and saturate (NaN becomes 0).
// Equal dtypes with scale 1 copy the bytes. No alignment is required. dst may be src itself when
// both dtypes have the same size; other overlaps are not allowed.
void convert(void* dst, DType to, const void* src, DType from, size_t count, double scale = 1.0);

// The same conversion with scalar loops only: what convert() runs on a CPU without AVX2 and
// F16C, and the reference the tests hold the vector loops to.
void convert_scalar(void* dst, DType to, const void* src, DType from, size_t count,
                    double scale = 1.0);

// true when convert() uses its AVX2 + F16C loops on this CPU.
bool convert_is_vectorized();

// Scalar conversions, round to nearest even: overflow goes to infinity, subnormals are kept,
// NaN stays a quiet NaN with its top payload bits (what F16C's vcvtps2ph / vcvtph2ps do, so
// scalar and vector code agree bit for bit). Inline so that scalar loops everywhere inline them.

inline uint16_t float_to_half(float value) {
  constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
  constexpr uint32_t kInfinity = 0x7F800000u;
  constexpr uint32_t kHalfOverflow = 0x47800000u;      // 65536: infinity whatever the rounding
  constexpr uint32_t kHalfMinNormal = 0x38800000u;     // 2^-14, the smallest normal fp16
  constexpr uint32_t kHalfRoundsToZero = 0x33000000u;  // 2^-25, half the smallest subnormal
  constexpr uint32_t kRebias = 112u << 23;             // fp32 bias 127 - fp16 bias 15
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & kAbsMask;
  uint32_t half;
  if (magnitude > kInfinity) {
    half = 0x7E00u | ((magnitude >> 13) & 0x3FFu);  // NaN: quiet, top payload bits kept
  } else if (magnitude >= kHalfOverflow) {
    half = 0x7C00u;
  } else if (magnitude >= kHalfMinNormal) {
    // Rebias the exponent and round the 13 dropped mantissa bits to nearest even. A carry out of
    // the mantissa bumps the exponent, which also turns [65520, 65536) into infinity.
    const uint32_t rebased = magnitude - kRebias;
    half = (rebased + 0xFFFu + ((rebased >> 13) & 1u)) >> 13;
  } else if (magnitude > kHalfRoundsToZero) {
    // Subnormal result in units of 2^-24: shift the significand (implicit bit included) right by
    // the exponent deficit, rounding to nearest even. Rounding up to 1024 units gives 0x400, the
    // smallest normal, which is exactly right.
    const uint32_t exponent = magnitude >> 23;  // 102..112
    const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24
    const uint32_t round = (1u << (shift - 1)) - 1u + ((significand >> shift) & 1u);
    half = (significand + round) >> shift;
  } else {
    half = 0;  // includes 2^-25 itself: a tie, and zero is the even neighbour
  }
  return static_cast<uint16_t>(sign | half);
}

inline float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) {
    // Infinity, or NaN made quiet with its payload kept.
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in fp32 (and normal there, so immune to DAZ).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t float_to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncate and set the quiet bit; rounding could carry a NaN into infinity.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits; the largest finite floats carry into
  // infinity, as they should. Cannot overflow 32 bits: the largest input is -inf, 0xFF800000.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float bfloat16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace kolo
