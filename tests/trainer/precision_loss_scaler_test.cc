// DynamicLossScaler against DeepSpeed's rules: overflow skip, backoff, growth, hysteresis (both
// modes), the minimum and the static scale, checked step by step.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "comm/base/error.h"
#include "trainer/precision/loss_scaler.h"

namespace kolo::trainer {
namespace {

LossScalerOptions options(int64_t hysteresis, int64_t interval) {
  LossScalerOptions o;
  o.hysteresis = hysteresis;
  o.growth_interval = interval;
  return o;
}

TEST(LossScaler, DefaultsAreDeepSpeeds) {
  DynamicLossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.options().growth_interval, 2000);
  EXPECT_EQ(s.options().hysteresis, 2);
  EXPECT_EQ(s.options().min_scale, 1.0f);
}

TEST(LossScaler, OverflowIsAlwaysSkippedAndCounted) {
  DynamicLossScaler s(options(1, 1000));
  EXPECT_TRUE(s.update(false));
  EXPECT_FALSE(s.update(true));
  EXPECT_FALSE(s.update(true));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_EQ(s.overflows(), 2);
}

TEST(LossScaler, BackoffHalvesWithoutHysteresis) {
  DynamicLossScaler s(options(1, 1000));
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0f);
  s.update(true);
  EXPECT_EQ(s.scale(), 16384.0f);
}

TEST(LossScaler, GrowthAfterIntervalCleanStepsInARow) {
  DynamicLossScaler s(options(1, 3));
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(false);  // third clean step in a row
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.clean_steps_since_overflow_or_growth(), 0);
  s.update(false);
  s.update(false);
  s.update(true);  // breaks the run: counter restarts, scale halves
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0f);
}

TEST(LossScaler, HysteresisToleratesFirstOverflows) {
  DynamicLossScaler s(options(3, 1000));
  s.update(true);  // budget 3 -> 2, scale kept
  s.update(true);  // budget 2 -> 1, scale kept
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.hysteresis_left(), 1);
  s.update(true);  // third: backs off
  EXPECT_EQ(s.scale(), 32768.0f);
  s.update(true);  // budget stays exhausted: every further overflow backs off
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.skipped_steps(), 4);
}

TEST(LossScaler, CleanStepKeepsHysteresisBudgetByDefault) {
  // DeepSpeed's default: a clean step does not refill the budget, only growth does.
  DynamicLossScaler s(options(2, 4));
  s.update(true);  // tolerated, budget 1
  s.update(false);
  EXPECT_EQ(s.hysteresis_left(), 1);
  s.update(true);  // not consecutive, still backs off
  EXPECT_EQ(s.scale(), 32768.0f);
  for (int i = 0; i < 4; ++i) s.update(false);  // growth refills the budget
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.hysteresis_left(), 2);
  s.update(true);  // tolerated again
  EXPECT_EQ(s.scale(), 65536.0f);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnCleanStep) {
  LossScalerOptions o = options(2, 1000);
  o.consecutive_hysteresis = true;
  DynamicLossScaler s(o);
  s.update(true);  // tolerated
  s.update(false);
  EXPECT_EQ(s.hysteresis_left(), 2);
  s.update(true);  // tolerated again: the run was broken
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(true);  // second in a row: backs off
  EXPECT_EQ(s.scale(), 32768.0f);
}

TEST(LossScaler, NeverBelowMinimum) {
  LossScalerOptions o = options(1, 1000);
  o.initial_scale = 8.0f;
  o.min_scale = 2.0f;
  DynamicLossScaler s(o);
  s.update(true);
  EXPECT_EQ(s.scale(), 4.0f);
  s.update(true);
  EXPECT_EQ(s.scale(), 2.0f);
  EXPECT_FALSE(s.update(true));  // still skipped at the minimum
  EXPECT_EQ(s.scale(), 2.0f);
  o.min_scale = 3.0f;  // not a power of two: clamps exactly
  DynamicLossScaler t(o);
  t.update(true);
  t.update(true);
  EXPECT_EQ(t.scale(), 3.0f);
}

TEST(LossScaler, StaticScaleSkipsButNeverChanges) {
  LossScalerOptions o;
  o.dynamic = false;
  o.initial_scale = 128.0f;
  o.growth_interval = 1;
  DynamicLossScaler s(o);
  EXPECT_FALSE(s.update(true));
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  DynamicLossScaler none(no_loss_scaling());
  EXPECT_EQ(none.scale(), 1.0f);
  EXPECT_EQ(none.inverse_scale(), 1.0f);
}

// DeepSpeed's DynamicLossScaler.update_scale transcribed in its own formulation (iteration
// numbers and the last overflow's iteration instead of a clean-step counter), as the reference.
struct DeepSpeedReference {
  double cur_scale, scale_factor, min_scale;
  int64_t scale_window, delayed_shift, cur_hysteresis;
  bool consecutive_hysteresis;
  int64_t cur_iter = 0, last_overflow_iter = -1;

  void update_scale(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1) {
        cur_scale = std::max(cur_scale / scale_factor, min_scale);
      } else {
        cur_hysteresis -= 1;
      }
      last_overflow_iter = cur_iter;
    } else {
      if (consecutive_hysteresis) cur_hysteresis = delayed_shift;
      if ((cur_iter - last_overflow_iter) % scale_window == 0) {
        if (!consecutive_hysteresis) cur_hysteresis = delayed_shift;
        cur_scale *= scale_factor;
      }
    }
    cur_iter += 1;
  }
};

TEST(LossScaler, MatchesDeepSpeedOnRandomOverflowSequences) {
  std::mt19937 rng(1234);
  for (bool consecutive : {false, true}) {
    for (int64_t hysteresis : {1, 2, 3}) {
      for (int64_t window : {1, 3, 7}) {
        LossScalerOptions o = options(hysteresis, window);
        o.consecutive_hysteresis = consecutive;
        o.initial_scale = 1024.0f;
        o.min_scale = 4.0f;
        DynamicLossScaler s(o);
        DeepSpeedReference ref{1024.0, 2.0, 4.0, window, hysteresis, hysteresis, consecutive};
        std::bernoulli_distribution overflow_p(0.3);
        for (int step = 0; step < 100; ++step) {  // < 2^117: no float overflow
          const bool overflow = overflow_p(rng);
          EXPECT_EQ(s.update(overflow), !overflow);
          ref.update_scale(overflow);
          ASSERT_EQ(double(s.scale()), ref.cur_scale)
              << "step " << step << " h " << hysteresis << " w " << window << " consecutive "
              << consecutive;
          ASSERT_EQ(s.hysteresis_left(), ref.cur_hysteresis) << "step " << step;
        }
      }
    }
  }
}

TEST(LossScaler, RestoreRoundTrip) {
  DynamicLossScaler a(options(2, 5));
  for (bool o : {true, false, false, true, true, false}) a.update(o);
  DynamicLossScaler b(options(2, 5));
  b.restore(a.scale(), a.clean_steps_since_overflow_or_growth(), a.hysteresis_left(),
            a.skipped_steps());
  for (bool o : {false, false, false, false, true, false}) EXPECT_EQ(a.update(o), b.update(o));
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_EQ(a.hysteresis_left(), b.hysteresis_left());
}

// A resume: the config's settings win where they are fixed by it (docs/checkpoints.md).
TEST(LossScaler, ResumeKeepsWhatTheConfigFixes) {
  // Same precision, dynamic: the state carries over exactly.
  DynamicLossScaler same(options(2, 5));
  same.resume(1024.0f, 3, 1, 4, true);
  EXPECT_EQ(same.scale(), 1024.0f);
  EXPECT_EQ(same.clean_steps_since_overflow_or_growth(), 3);
  EXPECT_EQ(same.hysteresis_left(), 1);
  EXPECT_EQ(same.skipped_steps(), 4);
  // A smaller window and hysteresis are applied: the state is clamped to them (before: refused
  // with "clean steps 6 out of range [0, 2)").
  DynamicLossScaler smaller(options(1, 2));
  smaller.resume(1024.0f, 6, 2, 0, true);
  EXPECT_EQ(smaller.clean_steps_since_overflow_or_growth(), 1);
  EXPECT_EQ(smaller.hysteresis_left(), 1);
  EXPECT_TRUE(smaller.update(false));
  EXPECT_EQ(smaller.scale(), 2048.0f);  // the window of 2 is reached at once
  // fp16.min_loss_scale above the checkpoint's scale: raised to it.
  LossScalerOptions high = options(2, 5);
  high.initial_scale = 262144.0f;
  high.min_scale = 131072.0f;
  DynamicLossScaler raised(high);
  raised.resume(65536.0f, 0, 2, 0, true);
  EXPECT_EQ(raised.scale(), 131072.0f);
  // A static fp16.loss_scale: the config's scale, whatever the checkpoint's.
  LossScalerOptions fixed = options(2, 5);
  fixed.dynamic = false;
  fixed.initial_scale = 128.0f;
  DynamicLossScaler fixed_scaler(fixed);
  fixed_scaler.resume(65536.0f, 3, 1, 2, true);
  EXPECT_EQ(fixed_scaler.scale(), 128.0f);
  EXPECT_EQ(fixed_scaler.skipped_steps(), 2);
  // bf16 or fp32 after fp16: scale 1.
  DynamicLossScaler none(no_loss_scaling());
  none.resume(65536.0f, 3, 1, 0, false);
  EXPECT_EQ(none.scale(), 1.0f);
  // fp16 after bf16 (whose scale was 1): the config's initial state, not scale 1.
  DynamicLossScaler fresh(options(2, 5));
  fresh.resume(1.0f, 4, 1, 1, false);
  EXPECT_EQ(fresh.scale(), 65536.0f);
  EXPECT_EQ(fresh.clean_steps_since_overflow_or_growth(), 0);
  EXPECT_EQ(fresh.hysteresis_left(), 2);
  EXPECT_EQ(fresh.skipped_steps(), 1);
}

TEST(LossScaler, InvalidOptionsNameTheSettingAndRange) {
  LossScalerOptions o;
  o.hysteresis = 0;
  try {
    DynamicLossScaler s(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("hysteresis: 0 is out of range (>= 1)"), std::string::npos)
        << e.what();
  }
  o = LossScalerOptions{};
  o.backoff_factor = 1.5f;
  EXPECT_THROW(DynamicLossScaler{o}, Error);
}

}  // namespace
}  // namespace kolo::trainer
