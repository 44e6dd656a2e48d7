// TrainStep stops a run that has diverged instead of skipping every later step (found by a
// sweep: weight_decay 1e308 or a warm-up to lr 1e30 trained on with loss NaN, exit 0, and wrote
// checkpoints of 99% NaN). An MLP whose inputs hold an inf gives non-finite gradients: in float32
// and bfloat16 the first such step stops with kInvalidArgument; in float16 the dynamic scale
// backs off first, and the step that would lower it past fp16.min_loss_scale stops.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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
      step.finish(1);
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

}  // namespace
