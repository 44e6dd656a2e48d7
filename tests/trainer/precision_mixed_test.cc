// MixedPrecision: fp16/bf16 round trips through the master weights, overflow detection per
// dtype, unscaling with the norm over real elements only, and a full step sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/clip.h"
#include "trainer/optim/sgd.h"
#include "trainer/precision/mixed_precision.h"

namespace kolo::trainer {
namespace {

ParamLayout two_tensors() {
  ParamLayout layout;
  layout.add("w", {3, 2}, true);  // 6 elements, then padding up to kAlign
  layout.add("b", {3}, false);
  return layout;
}

std::vector<uint16_t> to_half(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  convert(out.data(), dt, v.data(), DType::kFloat32, v.size());
  return out;
}

class MixedPrecisionHalf : public ::testing::TestWithParam<DType> {};

TEST_P(MixedPrecisionHalf, MasterRoundTrip) {
  const DType dt = GetParam();
  ParamLayout layout = two_tensors();
  std::vector<float> values(layout.total(), 0.0f);
  const size_t b = layout.find("b").offset;
  for (size_t i = 0; i < 6; ++i) values[i] = 0.25f * float(i) - 0.5f;  // exact in both dtypes
  values[b] = 3.0f;
  std::vector<uint16_t> params = to_half(values, dt);
  MixedPrecision mp(layout, dt, params.data());
  ASSERT_TRUE(mp.owns_master());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(mp.master()[i], values[i]) << i;
  // 1 + 2^-12 is below half an ulp of 1 in both dtypes: rounds back to 1 in params, but the
  // master keeps it (the point of fp32 master weights).
  mp.master()[0] = 1.0f + 1.0f / 4096;
  mp.master()[1] = 1.0f + 1.0f / 4;
  mp.copy_master_to_params();
  EXPECT_EQ(params[0], to_half({1.0f}, dt)[0]);
  EXPECT_EQ(params[1], to_half({1.25f}, dt)[0]);
  EXPECT_EQ(mp.master()[0], 1.0f + 1.0f / 4096);
  mp.reload_master();
  EXPECT_EQ(mp.master()[0], 1.0f);
}

TEST_P(MixedPrecisionHalf, OverflowDetection) {
  const DType dt = GetParam();
  ParamLayout layout = two_tensors();
  std::vector<float> g(layout.total(), 1.0f);
  std::vector<uint16_t> params = to_half(g, dt);
  MixedPrecision mp(layout, dt, params.data());
  EXPECT_FALSE(mp.check_overflow(to_half(g, dt).data(), dt));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> h = g;
    h.back() = bad;  // last element: the loop must reach the end
    EXPECT_TRUE(mp.check_overflow(to_half(h, dt).data(), dt)) << bad;
  }
  // fp16's largest finite value is 65504; 1e5 rounds to infinity there, not in bf16.
  std::vector<float> big = g;
  big[2] = 1e5f;
  EXPECT_EQ(mp.check_overflow(to_half(big, dt).data(), dt), dt == DType::kFloat16);
}

TEST_P(MixedPrecisionHalf, UnscaleAndNormSkipPadding) {
  const DType dt = GetParam();
  ParamLayout layout = two_tensors();
  std::vector<float> params(layout.total(), 0.0f);
  std::vector<uint16_t> p16 = to_half(params, dt);
  MixedPrecision mp(layout, dt, p16.data());
  std::vector<float> g(layout.total(), 0.0f);
  for (size_t i = 0; i < 6; ++i) g[i] = 1024.0f * float(i + 1);  // scaled by 1024
  const size_t b = layout.find("b").offset;
  g[b] = 2048.0f;
  g[6] = 4096.0f;  // a padding element: must be left out of the norm
  std::vector<uint16_t> g16 = to_half(g, dt);
  EXPECT_DOUBLE_EQ(squared_norm(g16.data(), dt, 1.0f / 1024, layout), 1 + 4 + 9 + 16 + 25 + 36 + 4);
  // Plain SGD at rate 1 subtracts the unscaled gradient: the values the step saw.
  Sgd sgd(layout, SgdOptions{});
  mp.step(sgd, g16.data(), dt, 1.0f / 1024, 1.0f, 1.0f);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(mp.master()[i], -float(i + 1));
  EXPECT_EQ(mp.master()[b], -2.0f);
  EXPECT_EQ(mp.master()[6], 0.0f);                              // padding untouched
  EXPECT_EQ(mp.owned_bytes(), layout.total() * sizeof(float));  // no fp32 gradient copy
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MixedPrecisionHalf,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16));

TEST(MixedPrecision, Fp32ParamsAreTheMaster) {
  ParamLayout layout = two_tensors();
  std::vector<float> params(layout.total(), 1.0f), grads(layout.total(), 0.0f);
  MixedPrecision mp(layout, DType::kFloat32, params.data());
  EXPECT_FALSE(mp.owns_master());
  EXPECT_EQ(mp.master(), params.data());
  grads[0] = 6.0f;
  EXPECT_DOUBLE_EQ(squared_norm(grads.data(), DType::kFloat32, 0.5f, layout), 9.0);
  Sgd sgd(layout, SgdOptions{});
  mp.step(sgd, grads.data(), DType::kFloat32, 0.5f, 1.0f, 1.0f);
  EXPECT_EQ(params[0], 1.0f - 3.0f);
  EXPECT_EQ(grads[0], 6.0f);  // read, not scaled in place
  grads[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(mp.check_overflow(grads.data(), DType::kFloat32));
}

TEST(MixedPrecision, FullFp16StepWithClipping) {
  // One SGD step through every phase: scaled fp16 grads -> unscale -> clip -> step -> copy.
  ParamLayout layout;
  layout.add("w", {2}, true);
  std::vector<uint16_t> params = to_half(std::vector<float>(layout.total(), 1.0f), DType::kFloat16);
  MixedPrecision mp(layout, DType::kFloat16, params.data());
  std::vector<float> g(layout.total(), 0.0f);
  g[0] = 3.0f * 256;
  g[1] = 4.0f * 256;  // norm 5 after unscaling by 1/256
  std::vector<uint16_t> g16 = to_half(g, DType::kFloat16);
  ASSERT_FALSE(mp.check_overflow(g16.data(), DType::kFloat16));
  const double norm = std::sqrt(squared_norm(g16.data(), DType::kFloat16, 1.0f / 256, layout));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  const float factor = clip_factor(norm, 1.0);  // clip to norm 1: g = (0.6, 0.8)
  Sgd sgd(layout, SgdOptions{});
  mp.step(sgd, g16.data(), DType::kFloat16, 1.0f / 256, 0.5f, factor);
  mp.copy_master_to_params();
  EXPECT_NEAR(mp.master()[0], 1.0 - 0.5 * 0.6, 1e-6);
  EXPECT_NEAR(mp.master()[1], 1.0 - 0.5 * 0.8, 1e-6);
  EXPECT_NEAR(half_to_float(params[0]), 0.7, 1e-3);
  EXPECT_NEAR(half_to_float(params[1]), 0.6, 1e-3);
}

TEST(MixedPrecision, ChunkedStepMatchesTheWholeBufferStep) {
  // Tensors longer than one conversion chunk: AdamW through MixedPrecision::step (pieces of
  // 16K) against Optimizer::step over the whole fp32 gradient, to the bit.
  ParamLayout layout;
  layout.add("a", {40000}, true);
  layout.add("b", {17}, false);
  std::vector<float> p1(layout.total(), 0.0f), g(layout.total(), 0.0f);
  for (size_t i = 0; i < layout.total(); ++i) {
    p1[i] = std::sin(0.001f * float(i));
    g[i] = std::cos(0.003f * float(i)) * 8.0f;
  }
  std::vector<float> p2 = p1, unscaled(g.size());
  for (size_t i = 0; i < g.size(); ++i) unscaled[i] = g[i] * 0.125f;
  AdamW whole(layout, AdamWOptions{}), chunked(layout, AdamWOptions{});
  MixedPrecision mp(layout, DType::kFloat32, p2.data());
  for (int step = 0; step < 3; ++step) {
    whole.step(p1.data(), unscaled.data(), 1e-3f, 0.5f);
    mp.step(chunked, g.data(), DType::kFloat32, 0.125f, 1e-3f, 0.5f);
  }
  for (size_t i = 0; i < p1.size(); ++i) ASSERT_EQ(p1[i], p2[i]) << i;
  EXPECT_EQ(chunked.step_count(), 3);
}

TEST(MixedPrecision, RejectsOtherDtypes) {
  ParamLayout layout = two_tensors();
  std::vector<double> params(layout.total());
  EXPECT_THROW(MixedPrecision(layout, DType::kFloat64, params.data()), Error);
}

}  // namespace
}  // namespace kolo::trainer
