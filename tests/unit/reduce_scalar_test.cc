// Closed-form checks of comm/reduce/reduce.h's finish_average (the conversions' closed forms
// are in convert_test.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "comm/reduce/reduce.h"
#include "tests/unit/reduce_bytes.h"

namespace kolo::reduce {
namespace {

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
