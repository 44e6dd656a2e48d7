// comm/base/convert.h against independent references: the fp16 / bf16 helpers against values
// computed from the bit fields with ldexp and nearbyint (every 16-bit pattern, every tie), and
// convert()'s vector loops against the scalar helpers bit for bit on random arrays.
#include "comm/base/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "comm/base/error.h"

namespace kolo {
namespace {

// A binary16-like grid: `mantissa` stored bits, `min_exponent` the smallest normal exponent.
struct Grid {
  int mantissa;
  int min_exponent;
  uint16_t infinity;
};
constexpr Grid kHalf{10, -14, 0x7C00};
constexpr Grid kBFloat16{7, -126, 0x7F80};

// The value of a finite grid pattern: (2^m + mantissa) * 2^(e - m), or mantissa * 2^(emin - m)
// for subnormals. Exact in double.
double grid_value(const Grid& g, uint16_t bits) {
  const int exponent_field = (bits & 0x7FFF) >> g.mantissa;
  const int mantissa = bits & ((1 << g.mantissa) - 1);
  const double magnitude = exponent_field == 0
                               ? std::ldexp(mantissa, g.min_exponent - g.mantissa)
                               : std::ldexp((1 << g.mantissa) + mantissa,
                                            exponent_field - 1 + g.min_exponent - g.mantissa);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// The nearest grid pattern to a finite f, ties to even, overflow to infinity. With e the
// exponent of f (at least the smallest normal one), f / 2^(e - m) is exact in double and
// nearbyint rounds it; the pattern is then ((e - emin) << m) + r, where a carry of r into
// 2^(m+1) lands on the next exponent by itself.
uint16_t grid_round(const Grid& g, float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(f));
  if (magnitude == 0) return sign;
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  const int e = std::max(exponent - 1, g.min_exponent);
  const double r = std::nearbyint(std::ldexp(magnitude, g.mantissa - e));
  const double bits = std::ldexp(e - g.min_exponent, g.mantissa) + r;
  return static_cast<uint16_t>(sign | (bits >= g.infinity ? g.infinity : static_cast<int>(bits)));
}

bool is_nan_bits(float f) {
  return (std::bit_cast<uint32_t>(f) & 0x7FFFFFFFu) > 0x7F800000u;
}

// Expected float_to_half: the grid rounding, and for NaN the documented quiet NaN.
uint16_t reference_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (is_nan_bits(f))
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits >> 13) & 0x3FFu));
  if (std::isinf(f)) return f > 0 ? 0x7C00 : 0xFC00;
  return grid_round(kHalf, f);
}

uint16_t reference_bfloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (is_nan_bits(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  if (std::isinf(f)) return f > 0 ? 0x7F80 : 0xFF80;
  return grid_round(kBFloat16, f);
}

// Floats that stress a grid: every finite pattern's value, the midpoint to the next one (exact
// in float) and the floats either side of it; edge values; random bit patterns and values.
std::vector<float> grid_test_values(const Grid& g) {
  std::vector<float> values;
  for (uint32_t h = 0; h < g.infinity; ++h) {
    // grid_value of the infinity pattern is the power of two the largest finite rounds to.
    const double v = grid_value(g, static_cast<uint16_t>(h));
    const double next = grid_value(g, static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((v + next) / 2);
    for (float x : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, std::numeric_limits<float>::infinity())}) {
      values.push_back(x);
      values.push_back(-x);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                  65504.0f, 65519.996f, 65520.0f, 65536.0f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f,
                  0x1p-14f, 0x1p-126f, 0x1p-133f, 0x1p-134f, 0x1.8p-134f})
    values.push_back(x);
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  std::normal_distribution<float> normal(0.0f, 1000.0f);
  for (int i = 0; i < 200000; ++i) values.push_back(normal(rng));
  for (uint32_t payload : {0x1u, 0x2000u, 0x3FFFFFu, 0x400000u, 0x7FFFFFu, 0x1FFFu}) {
    values.push_back(std::bit_cast<float>(0x7F800000u | payload));
    values.push_back(std::bit_cast<float>(0xFF800000u | payload));
  }
  return values;
}

TEST(ConvertScalar, EveryHalfPatternToFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t expected;
    if ((h & 0x7C00u) == 0x7C00u) {
      const uint32_t mantissa = h & 0x3FFu;
      expected = sign | 0x7F800000u | (mantissa ? 0x400000u : 0u) | (mantissa << 13);
    } else {
      expected = std::bit_cast<uint32_t>(static_cast<float>(grid_value(kHalf, bits)));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(half_to_float(bits)), expected) << "half 0x" << std::hex << h;
  }
}

TEST(ConvertScalar, EveryBFloat16PatternToFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = bfloat16_to_float(bits);
    if ((h & 0x7F80u) == 0x7F80u) {
      ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16) << "bf16 0x" << std::hex << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(f),
                std::bit_cast<uint32_t>(static_cast<float>(grid_value(kBFloat16, bits))))
          << "bf16 0x" << std::hex << h;
    }
  }
}

TEST(ConvertScalar, FloatToHalfRoundsToNearestEven) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float f : grid_test_values(kHalf)) {
    ASSERT_EQ(float_to_half(f), reference_half(f))
        << "float " << f << " (0x" << std::hex << std::bit_cast<uint32_t>(f) << ")";
  }
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);  // a tie between 0 and the smallest subnormal
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // a tie between 65504 and 2^16: infinity
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);
}

TEST(ConvertScalar, FloatToBFloat16RoundsToNearestEven) {
  for (float f : grid_test_values(kBFloat16)) {
    ASSERT_EQ(float_to_bfloat16(f), reference_bfloat16(f))
        << "float " << f << " (0x" << std::hex << std::bit_cast<uint32_t>(f) << ")";
  }
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // sNaN made quiet
}

// --- arrays ------------------------------------------------------------------------------------

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

float widen(DType dtype, const uint8_t* p) {
  if (dtype == DType::kFloat32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::kFloat16 ? half_to_float(bits) : bfloat16_to_float(bits);
}

void narrow(DType dtype, uint8_t* p, float v) {
  if (dtype == DType::kFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t bits = dtype == DType::kFloat16 ? float_to_half(v) : float_to_bfloat16(v);
  std::memcpy(p, &bits, 2);
}

// Random source elements: every 16-bit pattern is fair game; fp32 mixes raw bit patterns (NaN,
// infinity, subnormals) with values in the fp16 range, where the rounding matters.
std::vector<uint8_t> random_source(DType dtype, size_t n, size_t offset, std::mt19937& rng) {
  std::vector<uint8_t> bytes(offset + n * dtype_size(dtype) + 1);
  std::normal_distribution<float> normal(0.0f, 300.0f);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = bytes.data() + offset + i * dtype_size(dtype);
    if (dtype != DType::kFloat32) {
      const uint16_t bits = static_cast<uint16_t>(rng());
      std::memcpy(p, &bits, 2);
    } else {
      const float v = i % 2 ? std::bit_cast<float>(static_cast<uint32_t>(rng())) : normal(rng);
      std::memcpy(p, &v, 4);
    }
  }
  return bytes;
}

TEST(ConvertArrays, VectorMatchesScalarHelpersBitwise) {
  std::cout << "convert() vector loops: " << (convert_is_vectorized() ? "AVX2 + F16C" : "none")
            << "\n";
  std::mt19937 rng(11);
  for (size_t n : {0, 1, 7, 8, 9, 1000003}) {
    for (DType from : kFloatTypes) {
      for (DType to : kFloatTypes) {
        for (double scale : {1.0, 0.5, 3.0, 1.0 / 3.0, 65536.0, 1e-8}) {
          // Misaligned buffers as well: file data comes at any byte offset.
          for (size_t offset : {0, 1}) {
            SCOPED_TRACE(testing::Message() << dtype_name(from) << " -> " << dtype_name(to) << " n="
                                            << n << " scale=" << scale << " offset=" << offset);
            const std::vector<uint8_t> src = random_source(from, n, offset, rng);
            const size_t to_bytes = n * dtype_size(to);
            std::vector<uint8_t> expected(to_bytes + 1), vec(to_bytes + 3), ref(to_bytes + 1);
            const float s = static_cast<float>(scale);
            for (size_t i = 0; i < n; ++i) {
              const uint8_t* in = src.data() + offset + i * dtype_size(from);
              uint8_t* out = expected.data() + i * dtype_size(to);
              if (from == to && scale == 1.0) {
                std::memcpy(out, in, dtype_size(to));
              } else {
                narrow(to, out, s == 1.0f ? widen(from, in) : widen(from, in) * s);
              }
            }
            convert(vec.data() + 3 * offset, to, src.data() + offset, from, n, scale);
            convert_scalar(ref.data(), to, src.data() + offset, from, n, scale);
            ASSERT_EQ(0, std::memcmp(vec.data() + 3 * offset, expected.data(), to_bytes));
            ASSERT_EQ(0, std::memcmp(ref.data(), expected.data(), to_bytes));
          }
        }
      }
    }
  }
}

TEST(ConvertArrays, InPlaceWhenSizesMatch) {
  std::mt19937 rng(5);
  const size_t n = 1000003;
  for (auto [from, to, scale] : {std::tuple{DType::kFloat16, DType::kBFloat16, 1.0},
                                 std::tuple{DType::kBFloat16, DType::kFloat16, 0.25},
                                 std::tuple{DType::kFloat16, DType::kFloat16, 3.0},
                                 std::tuple{DType::kFloat32, DType::kFloat32, 0.125}}) {
    std::vector<uint8_t> data = random_source(from, n, 0, rng);
    std::vector<uint8_t> expected(n * dtype_size(to));
    convert(expected.data(), to, data.data(), from, n, scale);
    convert(data.data(), to, data.data(), from, n, scale);
    EXPECT_EQ(0, std::memcmp(data.data(), expected.data(), expected.size()))
        << dtype_name(from) << " -> " << dtype_name(to);
  }
}

TEST(ConvertArrays, EqualDTypesCopyBytes) {
  const std::vector<uint16_t> src = {0x7C01, 0xFC00, 0x0001, 0x3C00};  // a signalling NaN first
  std::vector<uint16_t> dst(src.size());
  convert(dst.data(), DType::kFloat16, src.data(), DType::kFloat16, src.size());
  EXPECT_EQ(dst, src);
  const std::vector<int64_t> big = {(int64_t{1} << 62) + 1, -3};
  std::vector<int64_t> out(2);
  convert(out.data(), DType::kInt64, big.data(), DType::kInt64, 2);
  EXPECT_EQ(out, big);
}

TEST(ConvertArrays, DoublePathForFloat64AndIntegers) {
  const std::vector<double> d = {1.0, -2.5, 65520.0, 1e-30, 1.0 + 0x1p-8};
  std::vector<uint16_t> h(d.size()), bf(d.size());
  convert(h.data(), DType::kFloat16, d.data(), DType::kFloat64, d.size(), 2.0);
  EXPECT_EQ(h, (std::vector<uint16_t>{0x4000, 0xC500, 0x7C00, 0x0000, 0x4004}));
  convert(bf.data(), DType::kBFloat16, d.data(), DType::kFloat64, d.size());
  EXPECT_EQ(bf[0], 0x3F80);
  EXPECT_EQ(bf[1], 0xC020);
  EXPECT_EQ(bf[4], 0x3F80);  // 1 + 2^-8 is a tie at bf16's 7 bits: even is down

  std::vector<double> back(h.size());
  convert(back.data(), DType::kFloat64, h.data(), DType::kFloat16, h.size(), 0.5);
  EXPECT_EQ(back[1], -2.5);
  EXPECT_TRUE(std::isinf(back[2]));

  const std::vector<int32_t> ints = {3, -7, 1 << 20};
  std::vector<uint16_t> ih(ints.size());
  convert(ih.data(), DType::kFloat16, ints.data(), DType::kInt32, ints.size());
  EXPECT_EQ(half_to_float(ih[0]), 3.0f);
  EXPECT_EQ(half_to_float(ih[1]), -7.0f);
  EXPECT_EQ(ih[2], 0x7C00);

  // Integer destinations truncate toward zero and saturate; NaN gives 0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> f = {-3.7f, 3.7f, 1e10f, -1e10f, nan, 300.0f};
  std::vector<int32_t> i32(f.size());
  convert(i32.data(), DType::kInt32, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, std::numeric_limits<int32_t>::max(),
                                       std::numeric_limits<int32_t>::min(), 0, 300}));
  std::vector<uint8_t> u8(f.size());
  convert(u8.data(), DType::kUInt8, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 3, 255, 0, 0, 255}));
  std::vector<int8_t> i8(f.size());
  convert(i8.data(), DType::kInt8, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(i8, (std::vector<int8_t>{-3, 3, 127, -128, 0, 127}));
  std::vector<int16_t> i16(f.size());
  convert(i16.data(), DType::kInt16, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(i16, (std::vector<int16_t>{-3, 3, 32767, -32768, 0, 300}));
  std::vector<int64_t> i64(f.size());
  convert(i64.data(), DType::kInt64, f.data(), DType::kFloat32, f.size(), 1e20);
  EXPECT_EQ(i64[2], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[3], std::numeric_limits<int64_t>::min());
}

// Every int8 and int16 value is exact in fp32 and comes back unchanged; between integer types
// out-of-range values saturate.
TEST(ConvertArrays, SmallIntegersRoundTripAndSaturate) {
  std::vector<int16_t> every16(65536);
  for (size_t i = 0; i < every16.size(); ++i) every16[i] = static_cast<int16_t>(i);
  std::vector<float> f(every16.size());
  convert(f.data(), DType::kFloat32, every16.data(), DType::kInt16, every16.size());
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], static_cast<float>(every16[i])) << i;
  std::vector<int16_t> back16(f.size());
  convert(back16.data(), DType::kInt16, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(back16, every16);

  std::vector<int8_t> every8(256);
  for (size_t i = 0; i < every8.size(); ++i) every8[i] = static_cast<int8_t>(i);
  std::vector<uint16_t> h(every8.size());  // fp16 holds every integer up to 2048 exactly
  convert(h.data(), DType::kFloat16, every8.data(), DType::kInt8, every8.size());
  std::vector<int8_t> back8(h.size());
  convert(back8.data(), DType::kInt8, h.data(), DType::kFloat16, h.size());
  EXPECT_EQ(back8, every8);

  const std::vector<int16_t> wide = {300, -300, 5, -5};
  std::vector<int8_t> narrow(wide.size());
  convert(narrow.data(), DType::kInt8, wide.data(), DType::kInt16, wide.size());
  EXPECT_EQ(narrow, (std::vector<int8_t>{127, -128, 5, -5}));
  std::vector<uint8_t> unsigned8(wide.size());
  convert(unsigned8.data(), DType::kUInt8, wide.data(), DType::kInt16, wide.size());
  EXPECT_EQ(unsigned8, (std::vector<uint8_t>{255, 0, 5, 0}));
}

// Every dtype's name parses back to it, and its size is its C type's.
TEST(DTypes, NamesParseBackAndSizes) {
  const size_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1, 2};
  static_assert(static_cast<int>(std::size(sizes)) == kNumDTypes);
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(dtype), "test"), dtype) << dtype_name(dtype);
    EXPECT_EQ(dtype_size(dtype), sizes[i]) << dtype_name(dtype);
  }
  EXPECT_STREQ(dtype_name(DType::kInt8), "int8");
  EXPECT_STREQ(dtype_name(DType::kInt16), "int16");
}

TEST(ConvertArrays, NullBuffersAreRefused) {
  float x = 1.0f;
  convert(nullptr, DType::kFloat16, nullptr, DType::kFloat32, 0);  // nothing to do
  EXPECT_THROW(convert(nullptr, DType::kFloat16, &x, DType::kFloat32, 1), Error);
}

// Closed forms: ties, overflow, subnormals, NaN payloads, and a round trip of every pattern.
TEST(ConvertClosedForms, HalfClosedForms) {
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

TEST(ConvertClosedForms, BFloat16ClosedForms) {
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

TEST(ConvertClosedForms, EveryNonNanPatternRoundTrips) {
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

}  // namespace
}  // namespace kolo
