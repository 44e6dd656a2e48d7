// TrainStep: the post-backward phases of trainer/precision/mixed_precision.h in their order.
#include "trainer/train/train_step.h"

#include <algorithm>
#include <cmath>

#include "trainer/optim/clip.h"

namespace kolo::trainer {
namespace {

ScheduleOptions schedule_for(const TrainConfig& config, int64_t total_steps) {
  ScheduleOptions o = config.schedule_options();
  if (o.total_steps == 0) o.total_steps = std::max<int64_t>(total_steps, o.warmup_steps + 1);
  return o;
}

}  // namespace

TrainStep::TrainStep(Model& model, const TrainConfig& config, int64_t total_steps)
    : model_(model),
      max_norm_(config.gradient_clipping),
      precision_(model.layout(), model.dtype(), model.params()),
      scaler_(config.loss_scaler_options()),
      schedule_(schedule_for(config, total_steps)),
      optimizer_(make_optimizer(config, model.layout())) {
  model_.zero_grad();
}

StepResult TrainStep::finish(int accumulation) {
  StepResult result;
  result.loss_scale = scaler_.scale();
  result.lr = lr();
  const bool overflow = precision_.check_overflow(model_.grads());
  result.applied = scaler_.update(overflow);
  if (result.applied) {
    const float multiplier = 1.0f / (result.loss_scale * static_cast<float>(accumulation));
    result.grad_norm = std::sqrt(precision_.unscale_grads(model_.grads(), multiplier));
    const float factor = clip_factor(result.grad_norm, max_norm_);
    optimizer_->step(precision_.master(), precision_.master_grads(), static_cast<float>(result.lr),
                     factor);
    precision_.copy_master_to_params();
  }
  model_.zero_grad();
  return result;
}

}  // namespace kolo::trainer
