// Tests of the reduction kernels: every vector ISA the CPU has must match the scalar reference
// bit for bit (all dtypes x ops, awkward counts, unaligned buffers, aliasing, NaN), and
// set_active_isa switching kernels (KOLO_REDUCE_ISA's checks: reduce_isa_test.cc). The scalar
// helpers (fp16 / bf16 conversions, finish_average) are checked in closed form in
// reduce_scalar_test.cc.
#include "comm/reduce/reduce.h"
#include "comm/base/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "tests/unit/reduce_bytes.h"
#include "tests/unit/reduce_cpu.h"

namespace kolo::reduce {
namespace {

constexpr DType kDTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                             DType::kBFloat16, DType::kInt32,   DType::kInt64,
                             DType::kUInt8,    DType::kInt8,    DType::kInt16};
// The bitwise ops only with the integer dtypes (op_takes): loops over both skip the others.
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                             ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kBand,
                             ReduceOp::kBor, ReduceOp::kBxor};
// Around the vector widths (8, 16, 32, 64 elements) and their 4x unrolled blocks.
constexpr size_t kCounts[] = {0, 1, 7, 15, 16, 17, 31, 33, 1000, 4099};
constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (static_cast<int>(isa) <= static_cast<int>(cpu_isa())) isas.push_back(isa);
  }
  return isas;
}

bool is_nan_at(DType dtype, const Bytes& bytes, size_t i) {
  switch (dtype) {
    case DType::kFloat32: return std::isnan(read<float>(bytes, i));
    case DType::kFloat64: return std::isnan(read<double>(bytes, i));
    case DType::kFloat16: return (read<uint16_t>(bytes, i) & 0x7FFF) > 0x7C00;
    case DType::kBFloat16: return (read<uint16_t>(bytes, i) & 0x7FFF) > 0x7F80;
    default: return false;
  }
}

// Element i of a buffer in hex, for failure messages.
std::string hex_at(DType dtype, const Bytes& bytes, size_t i) {
  const size_t size = dtype_size(dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + i * size, size);
  char text[24];
  std::snprintf(text, sizeof(text), "0x%0*llx", static_cast<int>(size * 2),
                static_cast<unsigned long long>(bits));
  return text;
}

// Random test data: ordinary values, values with clashing exponents, every bit pattern class
// (subnormals, infinities, values near overflow, NaNs with payloads) and integer extremes.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  Bytes make(DType dtype, size_t count, bool allow_nan) {
    Bytes bytes(count * dtype_size(dtype));
    for (size_t i = 0; i < count; ++i) {
      switch (dtype) {
        case DType::kFloat32: write(bytes, i, random_float(allow_nan)); break;
        case DType::kFloat64: write(bytes, i, random_double(allow_nan)); break;
        case DType::kFloat16: write(bytes, i, random_half(allow_nan)); break;
        case DType::kBFloat16: write(bytes, i, random_bfloat16(allow_nan)); break;
        case DType::kInt32: write(bytes, i, random_integer<int32_t>()); break;
        case DType::kInt64: write(bytes, i, random_integer<int64_t>()); break;
        case DType::kUInt8: write(bytes, i, static_cast<uint8_t>(rng_())); break;
        case DType::kInt8: write(bytes, i, random_integer<int8_t>()); break;
        case DType::kInt16: write(bytes, i, random_integer<int16_t>()); break;
      }
    }
    return bytes;
  }

 private:
  template <typename T>
  T pick(std::initializer_list<T> values) {
    return values.begin()[rng_() % values.size()];
  }

  float uniform(float low, float high) {
    return std::uniform_real_distribution<float>(low, high)(rng_);
  }

  float random_float(bool allow_nan) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    constexpr float kMax = std::numeric_limits<float>::max();
    switch (rng_() % 16) {
      case 0: return pick({0.0f, -0.0f, kInf, -kInf, kMax, -kMax, 1e-40f, -1e-40f, 1e38f, 1.0f});
      case 1:
        if (allow_nan) return std::bit_cast<float>(nan_bits32());
        return uniform(-1.0f, 1.0f);
      case 2: {
        const float value = std::bit_cast<float>(static_cast<uint32_t>(rng_()));
        return std::isnan(value) && !allow_nan ? 2.0f : value;
      }
      default: return uniform(-1000.0f, 1000.0f);
    }
  }

  double random_double(bool allow_nan) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    constexpr double kMax = std::numeric_limits<double>::max();
    switch (rng_() % 16) {
      case 0: return pick({0.0, -0.0, kInf, -kInf, kMax, -kMax, 1e-310, -1e-310, 1e308, 1.0});
      case 1:
        if (allow_nan) return std::bit_cast<double>(0x7FF0000000000000ull | (rng_() >> 12) | 1u);
        return uniform(-1.0f, 1.0f);
      case 2: {
        const double value = std::bit_cast<double>(static_cast<uint64_t>(rng_()));
        return std::isnan(value) && !allow_nan ? 2.0 : value;
      }
      default: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
    }
  }

  uint16_t random_half(bool allow_nan) {
    switch (rng_() % 8) {
      case 0:  // near overflow, subnormals, zeros, infinities
        return pick<uint16_t>({0x7BFF, 0xFBFF, 0x7BFE, 0x7800, 0x7A00, 0x0001, 0x8001, 0x03FF,
                               0x0400, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x3C00});
      case 1:
        if (allow_nan) return static_cast<uint16_t>(0x7C01 | (rng_() & 0x83FF));
        return 0x3C00;
      case 2:
      case 3:  // similar magnitudes: sums hit rounding ties often
        return float_to_half(uniform(-8.0f, 8.0f));
      default: {
        const auto bits = static_cast<uint16_t>(rng_());
        return (bits & 0x7FFF) > 0x7C00 && !allow_nan ? uint16_t{0x4000} : bits;
      }
    }
  }

  uint16_t random_bfloat16(bool allow_nan) {
    switch (rng_() % 8) {
      case 0:  // near overflow, subnormals, zeros, infinities, tie makers (1 and 2^-8)
        return pick<uint16_t>({0x7F7F, 0xFF7F, 0x7F7E, 0x0001, 0x8001, 0x0080, 0x7F80, 0xFF80,
                               0x0000, 0x8000, 0x3F80, 0x3F81, 0x3B80});
      case 1:
        if (allow_nan) return static_cast<uint16_t>(0x7F81 | (rng_() & 0x807F));
        return 0x3F80;
      case 2:
      case 3: return float_to_bfloat16(uniform(-8.0f, 8.0f));
      default: {
        const auto bits = static_cast<uint16_t>(rng_());
        return (bits & 0x7FFF) > 0x7F80 && !allow_nan ? uint16_t{0x4000} : bits;
      }
    }
  }

  template <typename T>
  T random_integer() {
    if (rng_() % 8 == 0) {
      return pick<T>(
          {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T{-1}, T{0}, T{1}, T{2}});
    }
    if (rng_() % 2 == 0) return static_cast<T>(static_cast<int64_t>(rng_() % 2001) - 1000);
    return static_cast<T>(rng_());
  }

  uint32_t nan_bits32() { return 0x7F800000u | (static_cast<uint32_t>(rng_()) & 0x807FFFFFu) | 1u; }

  std::mt19937_64 rng_;
};

// Inputs for one op. Sums and products get NaN in at most one operand per element: with two
// NaNs, which payload wins depends on operand order, which no C++ compiler promises to keep.
// min/max select an operand without arithmetic, so NaN in both is well defined there.
struct Inputs {
  Bytes a;
  Bytes b;
};

Inputs make_inputs(DType dtype, ReduceOp op, size_t count, uint64_t seed) {
  Generator generator(seed);
  Inputs in{generator.make(dtype, count, true), generator.make(dtype, count, true)};
  if (op != ReduceOp::kMin && op != ReduceOp::kMax) {
    const Bytes ones = Generator(seed + 1).make(dtype, count, false);
    const size_t size = dtype_size(dtype);
    for (size_t i = 0; i < count; ++i) {
      if (is_nan_at(dtype, in.a, i) && is_nan_at(dtype, in.b, i)) {
        std::memcpy(in.b.data() + i * size, ones.data() + i * size, size);
      }
    }
  }
  return in;
}

// Asserts equal bytes; on a mismatch names the first differing element and its inputs.
void expect_same(DType dtype, const Bytes& a, const Bytes& b, const Bytes& expected,
                 const Bytes& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  if (expected == actual) return;
  const size_t size = dtype_size(dtype);
  for (size_t i = 0; i * size < expected.size(); ++i) {
    if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) != 0) {
      FAIL() << "first mismatch at element " << i << ": a=" << hex_at(dtype, a, i)
             << " b=" << hex_at(dtype, b, i) << " expected " << hex_at(dtype, expected, i)
             << " got " << hex_at(dtype, actual, i);
    }
  }
}

std::string describe(Isa isa, DType dtype, ReduceOp op, size_t count) {
  return std::string(isa_name(isa)) + " " + dtype_name(dtype) + " " + op_name(op) +
         " count=" + std::to_string(count);
}

// Runs combine_with on copies placed `shift` elements into their buffers (to test unaligned
// access) and returns the result.
Bytes combine_shifted(Isa isa, const Inputs& in, size_t count, DType dtype, ReduceOp op,
                      size_t shift) {
  const size_t size = dtype_size(dtype);
  const size_t offset = shift * size;
  Bytes a(offset + in.a.size()), b(offset + in.b.size()), out(offset + in.a.size(), 0xCD);
  // std::copy, not memcpy: at count 0 the vectors' data() is null, which memcpy may not take.
  std::copy(in.a.begin(), in.a.end(), a.begin() + static_cast<ptrdiff_t>(offset));
  std::copy(in.b.begin(), in.b.end(), b.begin() + static_cast<ptrdiff_t>(offset));
  combine_with(isa, out.data() + offset, a.data() + offset, b.data() + offset, count, dtype, op);
  return Bytes(out.begin() + static_cast<ptrdiff_t>(offset), out.end());
}

TEST(ReduceKernels, EveryIsaMatchesScalarBitForBit) {
  uint64_t seed = 1;
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        if (!op_takes(op, dtype)) continue;
        for (size_t count : kCounts) {
          for (size_t shift : {size_t{0}, size_t{1}}) {
            SCOPED_TRACE(describe(isa, dtype, op, count) + " shift=" + std::to_string(shift));
            const Inputs in = make_inputs(dtype, op, count, ++seed);
            const Bytes expected = combine_shifted(Isa::kScalar, in, count, dtype, op, shift);
            const Bytes actual = combine_shifted(isa, in, count, dtype, op, shift);
            expect_same(dtype, in.a, in.b, expected, actual);
          }
        }
      }
    }
  }
}

// x op identity is x, bit for bit (any NaN stays a NaN), for every dtype and op, with NaNs,
// infinities and signed zeros among the x: what a rank that has joined contributes.
TEST(ReduceKernels, TheIdentityLeavesEveryValueUnchanged) {
  constexpr size_t kCount = 1000;
  for (DType dtype : kDTypes) {
    for (ReduceOp op : kOps) {
      if (!op_takes(op, dtype)) continue;
      SCOPED_TRACE(describe(active_isa(), dtype, op, kCount));
      const Bytes x = make_inputs(dtype, op, kCount, 99).a;
      Bytes identity(x.size()), out(x.size());
      fill_identity(identity.data(), kCount, dtype, op);
      combine(out.data(), x.data(), identity.data(), kCount, dtype, op);
      const size_t size = dtype_size(dtype);
      for (size_t i = 0; i < kCount; ++i) {
        const bool same = is_nan_at(dtype, x, i)
                              ? is_nan_at(dtype, out, i)
                              : std::memcmp(x.data() + i * size, out.data() + i * size, size) == 0;
        ASSERT_TRUE(same) << "element " << i << ": x=" << hex_at(dtype, x, i)
                          << " identity=" << hex_at(dtype, identity, i) << " got "
                          << hex_at(dtype, out, i);
      }
    }
  }
}

// Every fp16 and bf16 bit pattern as an input, so the vector conversions (F16C, the bf16
// integer rounding) are checked against float_to_half / float_to_bfloat16 on all of them.
TEST(ReduceKernels, EveryHalfAndBFloat16PatternMatchesScalar) {
  constexpr size_t kPatterns = 65536;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const uint16_t one = dtype == DType::kFloat16 ? 0x3C00 : 0x3F80;
    for (ReduceOp op : kOps) {
      if (!op_takes(op, dtype)) continue;
      Inputs in{Bytes(kPatterns * 2), Bytes(kPatterns * 2)};
      for (size_t i = 0; i < kPatterns; ++i) {
        write(in.a, i, static_cast<uint16_t>(i));
        // An odd multiplier permutes the patterns, pairing each with an unrelated one.
        write(in.b, i, static_cast<uint16_t>(i * 40503u + 12345u));
        const bool sum_like = op != ReduceOp::kMin && op != ReduceOp::kMax;
        if (sum_like && is_nan_at(dtype, in.a, i) && is_nan_at(dtype, in.b, i)) {
          write(in.b, i, one);
        }
      }
      const Bytes expected = combine_shifted(Isa::kScalar, in, kPatterns, dtype, op, 0);
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(describe(isa, dtype, op, kPatterns));
        expect_same(dtype, in.a, in.b, expected, combine_shifted(isa, in, kPatterns, dtype, op, 0));
      }
    }
    // x + (-0) == x for every x: a pure round trip through fp32 and back.
    Inputs identity{Bytes(kPatterns * 2), Bytes(kPatterns * 2)};
    for (size_t i = 0; i < kPatterns; ++i) {
      write(identity.a, i, static_cast<uint16_t>(i));
      write(identity.b, i, uint16_t{0x8000});
    }
    for (Isa isa : supported_isas()) {
      const Bytes out = combine_shifted(isa, identity, kPatterns, dtype, ReduceOp::kSum, 0);
      for (size_t i = 0; i < kPatterns; ++i) {
        const uint16_t bits = static_cast<uint16_t>(i);
        const uint16_t quiet = dtype == DType::kFloat16 ? 0x0200 : 0x0040;
        const uint16_t want = is_nan_at(dtype, identity.a, i) ? bits | quiet : bits;
        ASSERT_EQ(read<uint16_t>(out, i), want) << isa_name(isa) << " " << dtype_name(dtype);
      }
    }
  }
}

TEST(ReduceKernels, AliasingDstWithAOrB) {
  for (Isa isa : supported_isas()) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        if (!op_takes(op, dtype)) continue;
        for (size_t count : {size_t{33}, size_t{1000}, size_t{4099}}) {
          SCOPED_TRACE(describe(isa, dtype, op, count));
          const Inputs in = make_inputs(dtype, op, count, count * 31 + static_cast<int>(op));
          const Bytes expected = combine_shifted(Isa::kScalar, in, count, dtype, op, 0);
          Bytes into_a = in.a;
          combine_with(isa, into_a.data(), into_a.data(), in.b.data(), count, dtype, op);
          expect_same(dtype, in.a, in.b, expected, into_a);
          Bytes into_b = in.b;
          combine_with(isa, into_b.data(), in.a.data(), into_b.data(), count, dtype, op);
          expect_same(dtype, in.a, in.b, expected, into_b);
        }
      }
    }
  }
}

TEST(ReduceKernels, PartialOverlapIsRejected) {
  std::vector<float> buffer(64, 1.0f);
  try {
    combine(buffer.data() + 1, buffer.data(), buffer.data() + 32, 16, DType::kFloat32,
            ReduceOp::kSum);
    FAIL() << "expected kolo::Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(ReduceKernels, CountZeroAcceptsNullPointers) {
  for (Isa isa : supported_isas()) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        if (!op_takes(op, dtype)) continue;
        EXPECT_NO_THROW(combine_with(isa, nullptr, nullptr, nullptr, 0, dtype, op));
      }
    }
  }
  for (DType dtype : kDTypes) {
    EXPECT_NO_THROW(combine(nullptr, nullptr, nullptr, 0, dtype, ReduceOp::kSum));
    EXPECT_NO_THROW(finish_average(nullptr, 0, dtype, 4));
  }
}

TEST(ReduceKernels, BadArgumentsThrowInvalidArgument) {
  float x = 1.0f;
  auto expect_invalid = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "expected kolo::Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
    }
  };
  expect_invalid([&] { combine(&x, &x, &x, 1, static_cast<DType>(42), ReduceOp::kSum); });
  expect_invalid([&] { combine(&x, &x, &x, 1, DType::kFloat32, static_cast<ReduceOp>(42)); });
  expect_invalid([&] { combine(&x, &x, &x, 1, DType::kFloat32, ReduceOp::kBand); });
  expect_invalid([&] { combine(nullptr, &x, &x, 1, DType::kFloat32, ReduceOp::kSum); });
  expect_invalid([&] { finish_average(&x, 1, DType::kFloat32, 0); });
  expect_invalid([&] { finish_average(&x, 1, DType::kFloat32, -2); });
  expect_invalid([&] { set_active_isa(static_cast<Isa>(7)); });
  if (cpu_isa() != Isa::kAvx512) {
    expect_invalid([&] { set_active_isa(Isa::kAvx512); });
    expect_invalid(
        [&] { combine_with(Isa::kAvx512, &x, &x, &x, 1, DType::kFloat32, ReduceOp::kSum); });
  }
}

// combine(a, b) with `a` and `b` in every element, on counts that reach the vector bodies too:
// every element must be `want`.
template <class T>
void expect_every_element(Isa isa, DType dtype, ReduceOp op, T a, T b, T want) {
  constexpr size_t kCount = 130;
  std::vector<T> va(kCount, a), vb(kCount, b), out(kCount);
  combine_with(isa, out.data(), va.data(), vb.data(), kCount, dtype, op);
  for (T v : out) ASSERT_EQ(v, want) << op_name(op) << " of " << +a << " and " << +b;
}

// Integer sums and products wrap, and min/max compare signed where the type is signed.
TEST(ReduceKernels, IntegerArithmeticWraps) {
  using I32 = std::numeric_limits<int32_t>;
  using I64 = std::numeric_limits<int64_t>;
  const int64_t big = (int64_t{1} << 32) + 3;
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    expect_every_element<int32_t>(isa, DType::kInt32, ReduceOp::kSum, I32::max(), 1, I32::min());
    // -(2^32 + 2^16) mod 2^32
    expect_every_element<int32_t>(isa, DType::kInt32, ReduceOp::kProduct, 65536, -65537, -65536);
    // -(2^64 + 6 * 2^32 + 9) mod 2^64 = -(6 * 2^32 + 9)
    expect_every_element<int64_t>(isa, DType::kInt64, ReduceOp::kProduct, big, -big,
                                  -((int64_t{6} << 32) + 9));
    expect_every_element<int64_t>(isa, DType::kInt64, ReduceOp::kSum, I64::min(), -1, I64::max());
    expect_every_element<int64_t>(isa, DType::kInt64, ReduceOp::kMin, I64::min(), -1, I64::min());
    expect_every_element<int64_t>(isa, DType::kInt64, ReduceOp::kMax, I64::min(), -1, -1);

    expect_every_element<uint8_t>(isa, DType::kUInt8, ReduceOp::kSum, 200, 100, 44);
    expect_every_element<uint8_t>(isa, DType::kUInt8, ReduceOp::kProduct, 16, 17, 16);  // 272

    // int8 and int16: wrap like the others, and min/max compare signed (-128 < 127; read
    // unsigned, 0x80 > 0x7F would pick the other operand).
    expect_every_element<int8_t>(isa, DType::kInt8, ReduceOp::kSum, 127, 1, -128);
    expect_every_element<int8_t>(isa, DType::kInt8, ReduceOp::kProduct, -16, 17, -16);  // -272
    expect_every_element<int8_t>(isa, DType::kInt8, ReduceOp::kMin, -128, 127, -128);
    expect_every_element<int8_t>(isa, DType::kInt8, ReduceOp::kMax, -128, 127, 127);
    expect_every_element<int16_t>(isa, DType::kInt16, ReduceOp::kSum, -32768, -1, 32767);
    expect_every_element<int16_t>(isa, DType::kInt16, ReduceOp::kMin, -32768, -1, -32768);
    expect_every_element<int16_t>(isa, DType::kInt16, ReduceOp::kMax, -32768, -1, -1);
    // -90000 mod 65536
    expect_every_element<int16_t>(isa, DType::kInt16, ReduceOp::kProduct, 300, -300, -24464);
  }
}

// Every pair of int8 values, every op, every ISA, against plain int arithmetic narrowed back
// to 8 bits (modulo 256): an independent reference for the scalar kernel too.
TEST(ReduceKernels, EveryInt8PairMatchesIntArithmetic) {
  constexpr size_t kPairs = 65536;
  Inputs in{Bytes(kPairs), Bytes(kPairs)};
  for (size_t i = 0; i < kPairs; ++i) {
    write(in.a, i, static_cast<int8_t>(i & 0xFF));
    write(in.b, i, static_cast<int8_t>(i >> 8));
  }
  for (ReduceOp op : kOps) {
    Bytes want(kPairs);
    for (size_t i = 0; i < kPairs; ++i) {
      const int a = read<int8_t>(in.a, i), b = read<int8_t>(in.b, i);
      const int r = op == ReduceOp::kMin       ? std::min(a, b)
                    : op == ReduceOp::kMax     ? std::max(a, b)
                    : op == ReduceOp::kProduct ? a * b
                    : op == ReduceOp::kBand    ? a & b
                    : op == ReduceOp::kBor     ? a | b
                    : op == ReduceOp::kBxor    ? a ^ b
                                               : a + b;  // sum, and average before its division
      write(want, i, static_cast<int8_t>(r));
    }
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(describe(isa, DType::kInt8, op, kPairs));
      expect_same(DType::kInt8, in.a, in.b, want,
                  combine_shifted(isa, in, kPairs, DType::kInt8, op, 0));
    }
  }
}

// The documented NaN and signed-zero rules of min/max (`a < b ? a : b`, `a > b ? a : b`, but a
// NaN in a is kept): a NaN in either operand reaches the result (a's when both are NaN), and
// the result is b for -0 vs +0. Checked on 40 elements so the vector bodies and the scalar tail
// both run.
TEST(ReduceKernels, MinMaxNanAndSignedZeroRules) {
  constexpr size_t kCount = 40;
  auto check = [&](DType dtype, const Bytes& a1, const Bytes& b1, ReduceOp op, const Bytes& want1) {
    const size_t size = dtype_size(dtype);
    Inputs in{Bytes(kCount * size), Bytes(kCount * size)};
    Bytes want(kCount * size);
    for (size_t i = 0; i < kCount; ++i) {
      std::memcpy(in.a.data() + i * size, a1.data(), size);
      std::memcpy(in.b.data() + i * size, b1.data(), size);
      std::memcpy(want.data() + i * size, want1.data(), size);
    }
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(describe(isa, dtype, op, kCount));
      expect_same(dtype, in.a, in.b, want, combine_shifted(isa, in, kCount, dtype, op, 0));
    }
  };
  const float nan = std::bit_cast<float>(0x7FC00123u);
  const Bytes f_nan = pack({nan}), f_one = pack({1.0f});
  // A NaN from either side: with minps/maxps alone, only b's survived.
  check(DType::kFloat32, f_nan, f_one, ReduceOp::kMin, f_nan);
  check(DType::kFloat32, f_one, f_nan, ReduceOp::kMin, f_nan);
  check(DType::kFloat32, f_nan, f_one, ReduceOp::kMax, f_nan);
  check(DType::kFloat32, f_one, f_nan, ReduceOp::kMax, f_nan);
  check(DType::kFloat32, f_nan, pack({-1.0f}), ReduceOp::kMax, f_nan);
  check(DType::kFloat32, pack({-0.0f}), pack({0.0f}), ReduceOp::kMin, pack({0.0f}));
  check(DType::kFloat32, pack({0.0f}), pack({-0.0f}), ReduceOp::kMax, pack({-0.0f}));
  const Bytes d_nan = pack({std::bit_cast<double>(0x7FF8000000000456ull)}), d_one = pack({1.0});
  check(DType::kFloat64, d_nan, d_one, ReduceOp::kMin, d_nan);
  check(DType::kFloat64, d_nan, d_one, ReduceOp::kMax, d_nan);
  check(DType::kFloat64, d_one, d_nan, ReduceOp::kMax, d_nan);
  // fp16 / bf16 go through fp32, so a NaN result comes back quiet (0x7D00 -> 0x7F00).
  check(DType::kFloat16, pack<uint16_t>({0x7E00}), pack<uint16_t>({0x3C00}), ReduceOp::kMin,
        pack<uint16_t>({0x7E00}));
  check(DType::kFloat16, pack<uint16_t>({0x3C00}), pack<uint16_t>({0x7D00}), ReduceOp::kMax,
        pack<uint16_t>({0x7F00}));
  check(DType::kBFloat16, pack<uint16_t>({0x7F81}), pack<uint16_t>({0x3F80}), ReduceOp::kMax,
        pack<uint16_t>({0x7FC1}));
  check(DType::kBFloat16, pack<uint16_t>({0x3F80}), pack<uint16_t>({0xFF81}), ReduceOp::kMin,
        pack<uint16_t>({0xFFC1}));
}

// bf16 sums that land exactly halfway between two bf16 values round to the even one.
TEST(ReduceKernels, BFloat16SumTiesRoundToEven) {
  constexpr size_t kCount = 40;
  struct Case {
    uint16_t a, b, want;
  };
  // 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7; 1+2^-7 + 2^-8 is halfway between
  // 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  for (const Case& c :
       {Case{0x3F80, 0x3B80, 0x3F80}, Case{0x3F81, 0x3B80, 0x3F82}, Case{0xBF81, 0xBB80, 0xBF82}}) {
    Inputs in{Bytes(kCount * 2), Bytes(kCount * 2)};
    for (size_t i = 0; i < kCount; ++i) {
      write(in.a, i, c.a);
      write(in.b, i, c.b);
    }
    for (Isa isa : supported_isas()) {
      const Bytes out = combine_shifted(isa, in, kCount, DType::kBFloat16, ReduceOp::kSum, 0);
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(read<uint16_t>(out, i), c.want) << isa_name(isa);
      }
    }
  }
}

TEST(ReduceIsa, SetActiveIsaSelectsTheKernel) {
  const Isa original = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    EXPECT_EQ(active_isa(), isa);
    const Inputs in = make_inputs(DType::kFloat16, ReduceOp::kSum, 100, 99);
    Bytes out(in.a.size());
    combine(out.data(), in.a.data(), in.b.data(), 100, DType::kFloat16, ReduceOp::kSum);
    expect_same(DType::kFloat16, in.a, in.b,
                combine_shifted(Isa::kScalar, in, 100, DType::kFloat16, ReduceOp::kSum, 0), out);
  }
  set_active_isa(original);
}

}  // namespace
}  // namespace kolo::reduce
