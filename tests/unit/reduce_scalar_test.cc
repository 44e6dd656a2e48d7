// comm/reduce/reduce.h's finish_average and combine_average: closed-form checks, and every
// vector ISA against the scalar reference bit for bit (the conversions' closed forms are in
// convert_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>

#include "comm/base/error.h"
#include "comm/reduce/reduce.h"
#include "tests/unit/reduce_bytes.h"

namespace kolo::reduce {
namespace {

// Element i of a float test input: one of the special values at the start of every 97
// (infinity, -0, NaN, subnormals, an exact quotient), else a random value in +-1e6.
double test_value(size_t i, std::mt19937_64& rng) {
  static const double kSpecials[] = {std::numeric_limits<double>::infinity(),
                                     -0.0,
                                     std::numeric_limits<double>::quiet_NaN(),
                                     1e-310,
                                     3.0,
                                     1e-40 /* a subnormal float */,
                                     5e-324 /* the least double */};
  constexpr size_t kNumSpecials = std::size(kSpecials);
  if (i % 97 < kNumSpecials) return kSpecials[i % 97];
  return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
}

TEST(ReduceFinishAverage, IntegersTruncate) {
  Bytes i32 = pack<int32_t>(
      {7, -7, 10, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 1});
  finish_average(i32.data(), 6, DType::kInt32, 2);
  EXPECT_EQ(i32, pack<int32_t>({3, -3, 5, -1073741824, 1073741823, 0}));
  Bytes i64 = pack<int64_t>({-9, 9, std::numeric_limits<int64_t>::min()});
  finish_average(i64.data(), 3, DType::kInt64, 4);
  EXPECT_EQ(i64, pack<int64_t>({-2, 2, -(int64_t{1} << 61)}));
  Bytes u8 = pack<uint8_t>({255, 7, 0, 1});
  finish_average(u8.data(), 4, DType::kUInt8, 2);
  EXPECT_EQ(u8, pack<uint8_t>({127, 3, 0, 0}));
  Bytes u8_big = pack<uint8_t>({255});
  finish_average(u8_big.data(), 1, DType::kUInt8, 1000);
  EXPECT_EQ(u8_big, pack<uint8_t>({0}));
  Bytes i8 = pack<int8_t>({-128, 127, -7, 7, -1, 0});
  finish_average(i8.data(), 6, DType::kInt8, 2);
  EXPECT_EQ(i8, pack<int8_t>({-64, 63, -3, 3, 0, 0}));
  Bytes i16 = pack<int16_t>({-32768, 32767, -9, 9, -3});
  finish_average(i16.data(), 5, DType::kInt16, 4);
  EXPECT_EQ(i16, pack<int16_t>({-8192, 8191, -2, 2, 0}));
  Bytes i16_big = pack<int16_t>({-32768, 32767});
  finish_average(i16_big.data(), 2, DType::kInt16, 1000);
  EXPECT_EQ(i16_big, pack<int16_t>({-32, 32}));
}

TEST(ReduceFinishAverage, FloatsDivideAndRound) {
  Bytes f32 = pack<float>({1.0f, 3.0f, -7.0f, 1.0f});
  finish_average(f32.data(), 3, DType::kFloat32, 2);  // the last element is left alone
  EXPECT_EQ(f32, pack<float>({0.5f, 1.5f, -3.5f, 1.0f}));
  Bytes f32_third = pack<float>({1.0f});
  finish_average(f32_third.data(), 1, DType::kFloat32, 3);
  EXPECT_EQ(read<float>(f32_third, 0), 1.0f / 3.0f);
  Bytes f64 = pack<double>({1.0, -5.0});
  finish_average(f64.data(), 2, DType::kFloat64, 3);
  EXPECT_EQ(f64, pack<double>({1.0 / 3.0, -5.0 / 3.0}));
  Bytes f16 = pack<uint16_t>({0x3C00, 0x7BFF, 0x0001, 0xC000});
  finish_average(f16.data(), 4, DType::kFloat16, 3);
  // 1/3 -> 0x3555; 65504/3 = 21834.67 -> 21840 (ulp 16 there); 2^-24/3 -> 0; -2/3 -> 0xB955.
  EXPECT_EQ(f16, pack<uint16_t>({0x3555, 0x7555, 0x0000, 0xB955}));
  Bytes bf16 = pack<uint16_t>({0x3F80, 0x4040});
  finish_average(bf16.data(), 2, DType::kBFloat16, 3);
  EXPECT_EQ(bf16, pack<uint16_t>({0x3EAB, 0x3F80}));  // 1/3 rounds up; 3/3 exact
}

TEST(ReduceFinishAverage, EveryIsaMatchesScalar) {
  // Every fp16 / bf16 / int8 / int16 pattern, and random fp32 / fp64 values with infinities,
  // NaN and subnormals, at divisors that are and are not powers of two, at counts that leave a
  // scalar tail. The ISAs up to the CPU's best.
  const Isa before = active_isa();
  std::mt19937_64 rng(77);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                      DType::kInt8, DType::kInt16}) {
    const bool half = dtype_size(dtype) == 2;
    const size_t count = half ? 65536 + 13 : 4099;
    Bytes input(count * dtype_size(dtype));
    for (size_t i = 0; i < count; ++i) {
      const double x = test_value(i, rng);
      if (dtype == DType::kInt8)
        write(input, i, static_cast<uint8_t>(i));
      else if (half)
        write(input, i, static_cast<uint16_t>(i));
      else if (dtype == DType::kFloat32)
        write(input, i, static_cast<float>(x));
      else
        write(input, i, x);
    }
    for (int divisor : {1, 2, 3, 7, 8}) {
      Bytes expected = input;
      set_active_isa(Isa::kScalar);
      finish_average(expected.data(), count, dtype, divisor);
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (static_cast<int>(isa) > static_cast<int>(best_isa())) continue;
        Bytes actual = input;
        set_active_isa(isa);
        finish_average(actual.data(), count, dtype, divisor);
        EXPECT_TRUE(actual == expected)
            << isa_name(isa) << " " << dtype_name(dtype) << " / " << divisor;
      }
    }
  }
  set_active_isa(before);
}

TEST(ReduceCombineAverage, EveryIsaGivesTheBitsOfCombineThenFinishAverage) {
  // The one-pass average (fp32, fp64) and the two-pass one (other dtypes) against the scalar
  // sum followed by the scalar division: random values with infinities, NaN and subnormals,
  // divisors that are and are not powers of two, counts with and without a scalar tail (and
  // one shorter than a vector), out of place and in place.
  const Isa before = active_isa();
  std::mt19937_64 rng(78);
  for (DType dtype :
       {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32}) {
    for (size_t count : {size_t{5}, size_t{4096}, size_t{4099}}) {
      Bytes a(count * dtype_size(dtype)), b(a.size());
      for (size_t i = 0; i < count; ++i) {
        const double x = test_value(i, rng), y = test_value(i + 50, rng);
        if (dtype == DType::kFloat32) {
          write(a, i, static_cast<float>(x));
          write(b, i, static_cast<float>(y));
        } else if (dtype == DType::kFloat64) {
          write(a, i, x);
          write(b, i, y);
        } else if (dtype == DType::kInt32) {
          write(a, i, static_cast<int32_t>(i * 7919 % 100003) - 50000);  // y may be inf or NaN
          write(b, i, static_cast<int32_t>(i));
        } else {
          write(a, i, static_cast<uint16_t>(rng()));
          write(b, i, static_cast<uint16_t>(rng()));
        }
      }
      for (int divisor : {1, 2, 3, 7, 8}) {
        set_active_isa(Isa::kScalar);
        Bytes expected(a.size());
        combine(expected.data(), a.data(), b.data(), count, dtype, ReduceOp::kSum);
        finish_average(expected.data(), count, dtype, divisor);
        for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
          if (static_cast<int>(isa) > static_cast<int>(best_isa())) continue;
          set_active_isa(isa);
          Bytes out(a.size()), in_place = a;
          combine_average(out.data(), a.data(), b.data(), count, dtype, divisor);
          combine_average(in_place.data(), in_place.data(), b.data(), count, dtype, divisor);
          EXPECT_TRUE(out == expected)
              << isa_name(isa) << " " << dtype_name(dtype) << " x" << count << " / " << divisor;
          EXPECT_TRUE(in_place == expected)
              << isa_name(isa) << " in place " << dtype_name(dtype) << " / " << divisor;
        }
      }
    }
  }
  set_active_isa(before);
  EXPECT_THROW(combine_average(nullptr, nullptr, nullptr, 0, DType::kFloat32, 0), kolo::Error);
}

}  // namespace
}  // namespace kolo::reduce
