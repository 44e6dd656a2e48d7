// The in-register storage codecs of trainer/kernels/cpu/vec.h against kolo's one conversion
// module (comm/base/convert.h), bit for bit: every fp16 / bf16 pattern widened, and floats at
// every rounding tie, subnormals, overflow and NaN narrowed. Built with the kernels' ISA flags.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "comm/base/convert.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer::cpu {
namespace {

// Floats around every boundary that matters to either 16-bit type: each 16-bit pattern put in
// the high half with the low half 0, at the tie (0x8000) and either side of it, with the fp16
// ties besides, plus random bit patterns.
std::vector<float> narrowing_inputs() {
  std::vector<float> values;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    for (uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0x0FFFu, 0x1000u, 0x1001u})
      values.push_back(std::bit_cast<float>((h << 16) | low));
    values.push_back(half_to_float(static_cast<uint16_t>(h)));
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) values.push_back(std::bit_cast<float>(uint32_t(rng())));
  while (values.size() % kLanes != 0) values.push_back(0.0f);
  return values;
}

template <typename S>
void expect_codec_matches(uint16_t (*narrow)(float), float (*widen)(uint16_t)) {
  for (uint32_t h = 0; h <= 0xFFFF; h += kLanes) {
    uint16_t in[kLanes];
    float out[kLanes];
    for (int j = 0; j < kLanes; ++j) in[j] = static_cast<uint16_t>(h + j);
    _mm256_storeu_ps(out, S::load(in));
    for (int j = 0; j < kLanes; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[j]), std::bit_cast<uint32_t>(widen(in[j])))
          << "load of 0x" << std::hex << in[j];
      ASSERT_EQ(std::bit_cast<uint32_t>(S::load1(&in[j])), std::bit_cast<uint32_t>(widen(in[j])));
    }
  }
  const std::vector<float> values = narrowing_inputs();
  for (size_t i = 0; i < values.size(); i += kLanes) {
    uint16_t out[kLanes];
    S::store(out, _mm256_loadu_ps(values.data() + i));
    for (int j = 0; j < kLanes; ++j) {
      uint16_t one;
      S::store1(&one, values[i + j]);
      ASSERT_EQ(out[j], narrow(values[i + j]))
          << "store of 0x" << std::hex << std::bit_cast<uint32_t>(values[i + j]);
      ASSERT_EQ(one, out[j]);
    }
  }
}

TEST(KernelsCodecs, HalfMatchesConvertModule) {
  expect_codec_matches<F16>(float_to_half, half_to_float);
}

TEST(KernelsCodecs, BFloat16MatchesConvertModule) {
  expect_codec_matches<BF16>(float_to_bfloat16, bfloat16_to_float);
}

}  // namespace
}  // namespace kolo::trainer::cpu
