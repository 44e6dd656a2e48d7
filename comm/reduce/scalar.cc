// The reference reduction kernels (every dtype x op). The vector kernels in avx2.cc and
// avx512.cc must match these bit for bit, and call in here for the tail elements that do not
// fill a vector. fp16 and bf16 round as kolo's one conversion module does (comm/base/convert.h).
#include <cstdint>
#include <type_traits>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/reduce/kernels.h"
#include "comm/reduce/reduce.h"

namespace kolo::reduce {
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
  static float load(uint16_t x) { return half_to_float(x); }
  static uint16_t store(float x) { return float_to_half(x); }
};

struct BFloat16 {
  using Stored = uint16_t;
  using Value = float;
  static float load(uint16_t x) { return bfloat16_to_float(x); }
  static uint16_t store(float x) { return float_to_bfloat16(x); }
};

// Integer sums and products wrap (two's complement), computed unsigned because signed
// overflow is undefined behaviour. 8- and 16-bit types widen to uint32 so their promotion
// stays unsigned (int16 * int16 promoted to int could overflow); the cast back keeps the low
// bits.
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

// Min and max are x86's minps / maxps (`a < b ? a : b`, `a > b ? a : b`) except that a NaN in
// a is kept: a NaN on any rank reaches the result whichever rank holds it (as torch's maximum
// and minimum do; with minps alone only a NaN from the rank reduced last survived, so a NaN
// check by MAX missed the others). Every ISA uses this form so results are bit-identical; for
// -0 vs +0 the result is b.
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (!std::is_integral_v<T>)
      if (a != a) return a;
    return a < b ? a : b;
  }
};

struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (!std::is_integral_v<T>)
      if (a != a) return a;
    return a > b ? a : b;
  }
};

// The bitwise ops, on integers only: check_op_and_dtype refuses the others before any kernel
// runs, and apply_op does not instantiate these for floating codecs.
struct BitAnd {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};

struct BitOr {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};

struct BitXor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
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
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      if constexpr (std::is_integral_v<typename Codec::Value>) {
        if (op == ReduceOp::kBand) return apply<Codec, BitAnd>(dst, a, b, count);
        if (op == ReduceOp::kBor) return apply<Codec, BitOr>(dst, a, b, count);
        return apply<Codec, BitXor>(dst, a, b, count);
      }
      KOLO_THROW(ErrorCode::kInvalidArgument, "reduce op ", op_name(op),
                 " takes integer dtypes only");
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
    case DType::kInt8: return apply_op<Plain<int8_t>>(dst, a, b, count, op);
    case DType::kInt16: return apply_op<Plain<int16_t>>(dst, a, b, count, op);
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
    case DType::kInt8:
      return divide_each<Plain<int8_t>>(data, count,
                                        [=](int8_t x) { return static_cast<int8_t>(x / divisor); });
    case DType::kInt16:
      return divide_each<Plain<int16_t>>(
          data, count, [=](int16_t x) { return static_cast<int16_t>(x / divisor); });
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

}  // namespace scalar
}  // namespace kolo::reduce
