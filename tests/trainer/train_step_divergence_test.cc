// TrainStep stops a run that has diverged instead of skipping every later step (found by a
// sweep: weight_decay 1e308 or a warm-up to lr 1e30 trained on with loss NaN, exit 0, and wrote
// checkpoints of 99% NaN). An MLP whose inputs hold an inf gives non-finite gradients: in float32
// and bfloat16 the first such step stops with kInvalidArgument; in float16 the dynamic scale
// backs off first, and the step that would lower it past fp16.min_loss_scale stops. And the
// float16 gradients of an accumulated step hold the scaled mean, not a sum that overflows sooner.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/config/train_config.h"
#include "trainer/kernels/backend.h"
#include "trainer/model/mlp.h"
#include "trainer/train/train_step.h"

namespace {

using namespace kolo::trainer;

// Steps with inf inputs until TrainStep throws; returns the steps taken and the message.
std::pair<int, std::string> steps_until_stopped(const nlohmann::json& precision) {
  nlohmann::json json = {{"train_batch_size", 4},
                         {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-3}}}}}};
  json.update(precision);
  const TrainConfig config = parse_train_config(json, 1, false);
  Mlp model(cpu_backend(), MlpConfig{{6, 8, 3}}, config.storage_dtype(), 4);
  TrainStep step(model, config, 100);
  FeatureBatch batch{4, 6, std::vector<float>(24, INFINITY), {0, 1, 2, 0}};
  for (int s = 1; s <= 100; ++s) {
    try {
      model.forward(batch);
      model.backward(step.loss_scale());
      step.finish();
    } catch (const kolo::Error& e) {
      EXPECT_EQ(e.code(), kolo::ErrorCode::kInvalidArgument);
      return {s, e.what()};
    }
  }
  return {0, "never stopped"};
}

TEST(TrainStepDivergence, AFloat32OrBfloat16RunStopsAtItsFirstNonFiniteGradient) {
  for (const nlohmann::json& precision :
       {nlohmann::json::object(), nlohmann::json{{"bf16", {{"enabled", true}}}}}) {
    const auto [steps, message] = steps_until_stopped(precision);
    EXPECT_EQ(steps, 1) << message;
    EXPECT_NE(message.find("optimizer step 1: the gradients hold inf or NaN"), std::string::npos)
        << message;
  }
}

TEST(TrainStepDivergence, AFloat16RunStopsOnceTheScaleCannotGoLower) {
  // Scale 2^4, hysteresis 2, minimum 1: a tolerated overflow, four back-offs to 1, and the
  // overflow that would lower it again.
  const auto [steps, message] = steps_until_stopped(
      {{"fp16", {{"enabled", true}, {"initial_scale_power", 4}, {"hysteresis", 2}}}});
  EXPECT_EQ(steps, 6) << message;
  EXPECT_NE(message.find("overflow float16 even at fp16.min_loss_scale 1"), std::string::npos)
      << message;
}

// One fp16 step of `accumulation` copies of one batch at loss scale 2^power: whether it was
// applied, and the parameters after it.
std::pair<bool, std::vector<float>> accumulated_step(int accumulation, int power) {
  const nlohmann::json json = {
      {"train_batch_size", 4 * accumulation},
      {"train_micro_batch_size_per_gpu", 4},
      {"gradient_accumulation_steps", accumulation},
      {"optimizer", {{"type", "SGD"}, {"params", {{"lr", 1e-3}}}}},
      {"fp16", {{"enabled", true}, {"initial_scale_power", power}, {"hysteresis", 1}}}};
  const TrainConfig config = parse_train_config(json, 1, false);
  Mlp model(cpu_backend(), MlpConfig{{6, 8, 3}}, config.storage_dtype(), 4);
  TrainStep step(model, config, 10);
  std::vector<float> inputs(24);
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = 40.0f * std::sin(float(i) + 1.0f);
  const FeatureBatch batch{4, 6, inputs, {0, 1, 2, 0}};
  for (int a = 0; a < accumulation; ++a) {
    step.begin_micro(a + 1 == accumulation);
    model.forward(batch);
    model.backward(step.backward_scale(accumulation));
  }
  const bool applied = step.finish().applied;
  std::vector<uint16_t> bits(model.param_bytes() / 2);
  std::memcpy(bits.data(), model.params(), model.param_bytes());
  std::vector<float> params;
  for (uint16_t b : bits) params.push_back(kolo::half_to_float(b));
  return {applied, params};
}

TEST(TrainStepAccumulation, Float16AccumulationOverflowsNoSoonerThanOneMicroBatch) {
  // Found by a sweep: each micro-batch's backward used the whole loss scale and the sum was
  // divided by the accumulation steps only at the end, so 8 micro-batches overflowed float16 at
  // an eighth of the scale one micro-batch of the same data takes (the same global batch
  // skipped steps, and the loss curve drifted). The largest scale that one batch takes:
  int power = 0;
  while (power < 40 && accumulated_step(1, power + 1).first) ++power;
  ASSERT_GT(power, 3);
  ASSERT_LT(power, 40);
  const auto [one_applied, one] = accumulated_step(1, power);
  const auto [eight_applied, eight] = accumulated_step(8, power);
  EXPECT_TRUE(one_applied);
  EXPECT_TRUE(eight_applied) << "8 micro-batches overflowed at scale 2^" << power;
  ASSERT_EQ(one.size(), eight.size());
  for (size_t i = 0; i < one.size(); ++i)  // the mean of 8 equal gradients is that gradient
    EXPECT_NEAR(one[i], eight[i], 1e-3 * (1 + std::fabs(one[i]))) << "parameter " << i;
  EXPECT_FALSE(accumulated_step(8, power + 1).first);  // and the next scale overflows both
}

}  // namespace
