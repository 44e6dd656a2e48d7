// Closed-form checks of comm/reduce/reduce.h's scalar helpers: the fp16 and bf16 conversions
// (rounding to nearest even at ties, overflow to infinity, subnormals, NaN quieting with
// payloads, a round trip of every bit pattern) and finish_average.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>

#include "comm/reduce/reduce.h"
#include "tests/unit/reduce_bytes.h"

namespace kolo::reduce {
namespace {

TEST(ReduceConversions, HalfClosedForms) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);  // largest half
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);  // below the midpoint to 65536
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // the midpoint: ties to even = infinity
  EXPECT_EQ(float_to_half(-65520.0f), 0xFC00);
  EXPECT_EQ(float_to_half(1e10f), 0x7C00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);      // tie, even is down
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie, even is up
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_half(1023 * 0x1p-24f), 0x03FF);     // largest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);            // tie between 0 and 1 unit
  EXPECT_EQ(float_to_half(0x1.000002p-25f), 0x0001);     // just above the tie
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);        // tie between 1 and 2 units
  EXPECT_EQ(float_to_half(1023.5f * 0x1p-24f), 0x0400);  // tie rounds up into normals
  EXPECT_EQ(float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0x7F800001u)), 0x7E00);  // sNaN made quiet
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0xFFC02000u)), 0xFE01);  // payload kept

  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(half_to_float(0x0400), 0x1p-14f);
  EXPECT_EQ(std::bit_cast<uint32_t>(half_to_float(0x8000)), 0x80000000u);
  EXPECT_EQ(half_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(std::bit_cast<uint32_t>(half_to_float(0x7C01)), 0x7FC02000u);  // quiet, payload kept
}

TEST(ReduceConversions, BFloat16ClosedForms) {
  auto from_bits = [](uint32_t bits) { return float_to_bfloat16(std::bit_cast<float>(bits)); };
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(-2.0f), 0xC000);
  EXPECT_EQ(from_bits(0x3F808000u), 0x3F80);  // tie, even is down
  EXPECT_EQ(from_bits(0x3F818000u), 0x3F82);  // tie, even is up
  EXPECT_EQ(from_bits(0x3F808001u), 0x3F81);  // above the tie
  EXPECT_EQ(from_bits(0x3F807FFFu), 0x3F80);  // below the tie
  EXPECT_EQ(from_bits(0x7F7FFFFFu), 0x7F80);  // largest float rounds to infinity
  EXPECT_EQ(from_bits(0xFF7FFFFFu), 0xFF80);
  EXPECT_EQ(from_bits(0x7F7F7FFFu), 0x7F7F);  // still finite
  EXPECT_EQ(from_bits(0x7F800000u), 0x7F80);
  EXPECT_EQ(from_bits(0x7F800001u), 0x7FC0);  // sNaN whose payload is all dropped: quiet NaN
  EXPECT_EQ(from_bits(0xFFFFFFFFu), 0xFFFF);  // must not carry out of the NaN
  EXPECT_EQ(from_bits(0x00008000u), 0x0000);  // subnormal tie
  EXPECT_EQ(from_bits(0x00018000u), 0x0002);
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(bfloat16_to_float(0xFF81)), 0xFF810000u);
}

TEST(ReduceConversions, EveryNonNanPatternRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    if ((bits & 0x7FFF) <= 0x7C00) {
      ASSERT_EQ(float_to_half(half_to_float(bits)), bits) << std::hex << i;
    } else {
      ASSERT_EQ(float_to_half(half_to_float(bits)), bits | 0x0200) << std::hex << i;
    }
    if ((bits & 0x7FFF) <= 0x7F80) {
      ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(bits)), bits) << std::hex << i;
    } else {
      ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(bits)), bits | 0x0040) << std::hex << i;
    }
  }
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

}  // namespace
}  // namespace kolo::reduce
