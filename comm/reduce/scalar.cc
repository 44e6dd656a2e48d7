// The reference reduction kernels (every dtype x op) and the fp16 / bf16 conversions. The
// vector kernels in avx2.cc and avx512.cc must match these bit for bit, and call in here for
// the tail elements that do not fill a vector.
#include <bit>
#include <cstdint>
#include <type_traits>

#include "comm/base/error.h"
#include "comm/reduce/kernels.h"
#include "comm/reduce/reduce.h"
#include "comm/base/reduce_op.h"

namespace kolo::reduce {
namespace {

constexpr uint32_t kFloatAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kFloatInfinity = 0x7F800000u;
constexpr uint32_t kFloatQuietBit = 0x00400000u;
constexpr uint16_t kHalfInfinity = 0x7C00u;
constexpr uint16_t kHalfQuietNan = 0x7E00u;
constexpr uint16_t kBFloat16QuietBit = 0x0040u;
// |x| at or above this (65536) is infinity in fp16 whatever the rounding.
constexpr uint32_t kHalfOverflow = 0x47800000u;
// 2^-14, the smallest normal fp16.
constexpr uint32_t kHalfMinNormal = 0x38800000u;
// 2^-25, half the smallest subnormal fp16: at or below it everything rounds to zero.
constexpr uint32_t kHalfRoundsToZero = 0x33000000u;
// fp32 exponent bias 127 minus fp16 bias 15, in the exponent field.
constexpr uint32_t kRebias = 112u << 23;

// The conversions are defined here, inline, so the scalar loops below inline them (the
// public functions are thin wrappers).
inline uint16_t encode_half(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & kFloatAbsMask;
  uint32_t half;
  if (magnitude > kFloatInfinity) {
    // NaN: keep the top payload bits and make it quiet, as F16C's vcvtps2ph does.
    half = kHalfQuietNan | ((magnitude >> 13) & 0x3FFu);
  } else if (magnitude >= kHalfOverflow) {
    half = kHalfInfinity;
  } else if (magnitude >= kHalfMinNormal) {
    // Rebias the exponent and round away the 13 low mantissa bits to nearest even. A carry out
    // of the mantissa bumps the exponent, which is also what turns [65520, 65536) into infinity.
    const uint32_t rebased = magnitude - kRebias;
    half = (rebased + 0xFFFu + ((rebased >> 13) & 1u)) >> 13;
  } else if (magnitude > kHalfRoundsToZero) {
    // Subnormal result, counted in units of 2^-24: shift the whole significand (implicit bit
    // included) right by the exponent deficit, rounding to nearest even. Rounding up to 1024
    // units gives 0x400, the smallest normal, which is exactly right.
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

inline float decode_half(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) {
    // Infinity, or NaN made quiet with its payload kept (what F16C's vcvtph2ps does), so the
    // scalar and vector paths see the same fp32 value.
    const uint32_t quiet = mantissa != 0 ? kFloatQuietBit : 0u;
    return std::bit_cast<float>(sign | kFloatInfinity | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in fp32 (and normal there, so immune to DAZ).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent << 23) + kRebias) | (mantissa << 13));
}

inline uint16_t encode_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & kFloatAbsMask) > kFloatInfinity) {
    // NaN: truncate and set the quiet bit; rounding could carry a NaN into infinity.
    return static_cast<uint16_t>((bits >> 16) | kBFloat16QuietBit);
  }
  // Round to nearest even on the 16 dropped bits; the largest finite floats carry into
  // infinity, as they should. Cannot overflow 32 bits: the largest input is -inf, 0xFF800000.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float decode_bfloat16(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace

uint16_t float_to_half(float value) {
  return encode_half(value);
}
float half_to_float(uint16_t bits) {
  return decode_half(bits);
}
uint16_t float_to_bfloat16(float value) {
  return encode_bfloat16(value);
}
float bfloat16_to_float(uint16_t bits) {
  return decode_bfloat16(bits);
}

namespace scalar {
namespace {

// A codec maps a stored element to the value the op computes on and back. fp16 and bf16 are
// computed in fp32 and rounded to nearest even when stored, like the vector kernels do.
template <typename T>
struct Plain {
  using Stored = T;
  using Value = T;
  static T load(T x) { return x; }
  static T store(T x) { return x; }
};

struct Half {
  using Stored = uint16_t;
  using Value = float;
  static float load(uint16_t x) { return decode_half(x); }
  static uint16_t store(float x) { return encode_half(x); }
};

struct BFloat16 {
  using Stored = uint16_t;
  using Value = float;
  static float load(uint16_t x) { return decode_bfloat16(x); }
  static uint16_t store(float x) { return encode_bfloat16(x); }
};

// Integer sums and products wrap (two's complement), computed unsigned because signed
// overflow is undefined behaviour. uint8 widens to uint32 so its promotion stays unsigned.
template <typename T>
using Wrapping = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wrapping<T>>(a) + static_cast<Wrapping<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct Product {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Wrapping<T>>(a) * static_cast<Wrapping<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Min and max are exactly x86's minps / maxps: `a < b ? a : b` and `a > b ? a : b`. Every ISA
// uses this form so results are bit-identical. Consequences for floats: if either operand is
// NaN the result is b (a NaN in b propagates, a NaN in a is dropped), and for -0 vs +0 the
// result is b too.
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

template <typename Codec, typename Op>
void apply(void* dst, const void* a, const void* b, size_t count) {
  using Stored = typename Codec::Stored;
  // dst may equal a or b: each element is read before it is written, so that is safe.
  auto* out = static_cast<Stored*>(dst);
  const auto* x = static_cast<const Stored*>(a);
  const auto* y = static_cast<const Stored*>(b);
  const Op op;
  for (size_t i = 0; i < count; ++i) {
    out[i] = Codec::store(op(Codec::load(x[i]), Codec::load(y[i])));
  }
}

template <typename Codec>
void apply_op(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return apply<Codec, Sum>(dst, a, b, count);
    case ReduceOp::kMin: return apply<Codec, Min>(dst, a, b, count);
    case ReduceOp::kMax: return apply<Codec, Max>(dst, a, b, count);
    case ReduceOp::kProduct: return apply<Codec, Product>(dst, a, b, count);
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown reduce op ", static_cast<int>(op));
}

template <typename Codec, typename Divide>
void divide_each(void* data, size_t count, Divide divide) {
  auto* values = static_cast<typename Codec::Stored*>(data);
  for (size_t i = 0; i < count; ++i) values[i] = Codec::store(divide(Codec::load(values[i])));
}

}  // namespace

void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32: return apply_op<Plain<float>>(dst, a, b, count, op);
    case DType::kFloat64: return apply_op<Plain<double>>(dst, a, b, count, op);
    case DType::kFloat16: return apply_op<Half>(dst, a, b, count, op);
    case DType::kBFloat16: return apply_op<BFloat16>(dst, a, b, count, op);
    case DType::kInt32: return apply_op<Plain<int32_t>>(dst, a, b, count, op);
    case DType::kInt64: return apply_op<Plain<int64_t>>(dst, a, b, count, op);
    case DType::kUInt8: return apply_op<Plain<uint8_t>>(dst, a, b, count, op);
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

void finish_average(void* data, size_t count, DType dtype, int divisor) {
  // Floats divide (not multiply by a reciprocal) so the result is the correctly rounded
  // quotient; fp32 represents every divisor up to 2^24 exactly. Integers truncate toward zero;
  // divisor > 0 rules out INT_MIN / -1.
  const float float_divisor = static_cast<float>(divisor);
  switch (dtype) {
    case DType::kFloat32:
      return divide_each<Plain<float>>(data, count, [=](float x) { return x / float_divisor; });
    case DType::kFloat64:
      return divide_each<Plain<double>>(data, count, [=](double x) { return x / divisor; });
    case DType::kFloat16:
      return divide_each<Half>(data, count, [=](float x) { return x / float_divisor; });
    case DType::kBFloat16:
      return divide_each<BFloat16>(data, count, [=](float x) { return x / float_divisor; });
    case DType::kInt32:
      return divide_each<Plain<int32_t>>(data, count, [=](int32_t x) { return x / divisor; });
    case DType::kInt64:
      return divide_each<Plain<int64_t>>(data, count,
                                         [=](int64_t x) { return x / int64_t{divisor}; });
    case DType::kUInt8:
      return divide_each<Plain<uint8_t>>(
          data, count, [=](uint8_t x) { return static_cast<uint8_t>(x / divisor); });
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

}  // namespace scalar
}  // namespace kolo::reduce
