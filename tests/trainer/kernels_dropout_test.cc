// Dropout and its counter-based generator: Philox4x32-10 against the Random123 known answers,
// the vector kernels against the scalar rng::uniform at every alignment, keep rate 1 - p,
// scale 1 / (1 - p), the same mask in the backward, and splitting a call changes nothing.
#include <gtest/gtest.h>

#include <limits>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/rng.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

TEST(KernelsRng, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(rng::philox4x32({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      rng::philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      rng::philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(KernelsRng, UniformIsInUnitIntervalAndMeanHalf) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = rng::uniform(42, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
}

class KernelsDropout : public ::testing::TestWithParam<DType> {};

// The kernel keeps element i iff rng::uniform(seed, offset + i) >= p, for offsets at every
// alignment to Philox's 4-element blocks and across a 2^32-block counter boundary.
TEST_P(KernelsDropout, MaskIsTheScalarGeneratorsAtAnyOffset) {
  const DType dt = GetParam();
  const float p = 0.3f;
  const uint64_t seed = 0x123456789abcdefULL;
  for (const uint64_t offset : {0ULL, 1ULL, 2ULL, 3ULL, 77ULL, (1ULL << 34) - 45}) {
    for (const size_t n : {1UL, 7UL, 31UL, 33UL, 1500UL}) {
      const auto x = testing::random_values(n, 3, 0.5f, 1.5f, dt);
      Tensor tx(dt, x), ty(dt, n);
      cpu_backend().dropout_forward(ty.data(), tx.data(), n, p, seed, offset, dt);
      for (size_t i = 0; i < n; ++i) {
        const bool keep = rng::uniform(seed, offset + i) >= p;
        const float want = keep ? testing::round_to(x[i] * (1.0f / (1.0f - p)), dt) : 0.0f;
        ASSERT_NEAR(ty.get(i), want, std::abs(want) * 1e-6)
            << "offset " << offset << " n " << n << " i " << i;
      }
    }
  }
}

TEST_P(KernelsDropout, KeepRateScaleAndBackwardMask) {
  const DType dt = GetParam();
  const size_t n = 200003;
  for (const float p : {0.1f, 0.5f}) {
    Tensor ones(dt, std::vector<float>(n, 1.0f)), y(dt, n), dx(dt, n);
    cpu_backend().dropout_forward(y.data(), ones.data(), n, p, 7, 1000, dt);
    cpu_backend().dropout_backward(dx.data(), ones.data(), n, p, 7, 1000, dt);
    size_t kept = 0;
    const float scale = testing::round_to(1.0f / (1.0f - p), dt);
    for (size_t i = 0; i < n; ++i) {
      const float v = y.get(i);
      ASSERT_TRUE(v == 0.0f || v == scale) << i << ": " << v;
      ASSERT_EQ(dx.get(i), v) << "backward mask differs at " << i;
      kept += v != 0.0f;
    }
    const double rate = static_cast<double>(kept) / n;
    EXPECT_NEAR(rate, 1 - p, 5 * std::sqrt(p * (1 - p) / n)) << "p " << p;
  }
}

TEST_P(KernelsDropout, SplitCallsAndZeroProbability) {
  const DType dt = GetParam();
  const size_t n = 1001, k = 333;
  const auto x = testing::random_values(n, 4, -1, 1, dt);
  Tensor tx(dt, x), whole(dt, n), split(dt, n);
  cpu_backend().dropout_forward(whole.data(), tx.data(), n, 0.2f, 9, 5, dt);
  const size_t es = dtype_size(dt);
  cpu_backend().dropout_forward(split.data(), tx.data(), k, 0.2f, 9, 5, dt);
  cpu_backend().dropout_forward(static_cast<char*>(split.data()) + k * es,
                                static_cast<const char*>(tx.data()) + k * es, n - k, 0.2f, 9, 5 + k,
                                dt);
  EXPECT_EQ(whole.values(), split.values());
  cpu_backend().dropout_forward(split.data(), tx.data(), n, 0.0f, 9, 5, dt);
  EXPECT_EQ(split.values(), tx.values());
  cpu_backend().dropout_forward(tx.data(), tx.data(), n, 0.0f, 9, 5, dt);  // in place
  EXPECT_EQ(split.values(), tx.values());
  EXPECT_THROW(cpu_backend().dropout_forward(split.data(), tx.data(), n, 1.0f, 9, 5, dt), Error);
  EXPECT_THROW(cpu_backend().dropout_backward(split.data(), tx.data(), n, -0.1f, 9, 5, dt), Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsDropout, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
