// Learning-rate schedules at their key steps (start, mid warm-up, peak, mid decay, end, past
// the end) against the closed forms of DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR,
// and clipping factors against torch's clip_grad_norm_ rule.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "comm/base/error.h"
#include "trainer/optim/clip.h"
#include "trainer/optim/schedule.h"

namespace kolo::trainer {
namespace {

ScheduleOptions opts(DecayType decay, WarmupType warmup = WarmupType::kLinear) {
  ScheduleOptions o;
  o.start_lr = 0.0;
  o.peak_lr = 1e-3;
  o.end_lr = 0.0;
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.decay = decay;
  o.warmup = warmup;
  return o;
}

TEST(Schedule, LinearWarmupThenConstant) {
  LrSchedule s(opts(DecayType::kConstant));
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(100000), 1e-3);
}

TEST(Schedule, WarmupFromMinLr) {
  ScheduleOptions o = opts(DecayType::kConstant);
  o.start_lr = 1e-4;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(5), 1e-4 + 0.5 * 9e-4);
}

TEST(Schedule, LogWarmup) {
  LrSchedule s(opts(DecayType::kConstant, WarmupType::kLog));
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);  // ln(1) = 0
  EXPECT_NEAR(s.lr(4), 1e-3 * std::log(5.0) / std::log(10.0), 1e-15);
  EXPECT_NEAR(s.lr(9), 1e-3, 1e-15);  // ln(10) / ln(10)
}

TEST(Schedule, LinearDecay) {
  LrSchedule s(opts(DecayType::kLinear));
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(60), 5e-4);  // half way through the 100 decay steps
  EXPECT_DOUBLE_EQ(s.lr(110), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(200), 0.0);
}

TEST(Schedule, CosineDecay) {
  ScheduleOptions o = opts(DecayType::kCosine);
  o.end_lr = 1e-4;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr(5), 5e-4);
  // DeepSpeed's cosine counts the first decay step as 1 of 100.
  EXPECT_NEAR(s.lr(10), 1e-4 + 9e-4 * (1 + std::cos(std::numbers::pi * 0.01)) / 2, 1e-15);
  EXPECT_NEAR(s.lr(59), 1e-4 + 9e-4 * 0.5, 1e-15);
  EXPECT_NEAR(s.lr(109), 1e-4, 1e-15);
  EXPECT_NEAR(s.lr(500), 1e-4, 1e-15);  // stays at the end value
}

TEST(Schedule, NoWarmup) {
  ScheduleOptions o = opts(DecayType::kLinear);
  o.warmup_steps = 0;
  o.total_steps = 4;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(2), 5e-4);
}

TEST(Schedule, RejectsTotalNotAfterWarmup) {
  ScheduleOptions o = opts(DecayType::kCosine);
  o.total_steps = 10;
  EXPECT_THROW(LrSchedule{o}, Error);
  o.decay = DecayType::kConstant;  // total is not used then
  EXPECT_NO_THROW(LrSchedule{o});
}

TEST(Clip, FactorAsTorch) {
  EXPECT_FLOAT_EQ(clip_factor(10.0, 1.0), float(1.0 / (10.0 + 1e-6)));
  EXPECT_EQ(clip_factor(0.5, 1.0), 1.0f);
  EXPECT_EQ(clip_factor(0.0, 1.0), 1.0f);
  EXPECT_EQ(clip_factor(1e30, 0.0), 1.0f);  // clipping off
  EXPECT_TRUE(std::isnan(clip_factor(std::nan(""), 1.0)));
}

}  // namespace
}  // namespace kolo::trainer
