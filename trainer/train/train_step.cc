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

TrainStep::TrainStep(Model& model, const TrainConfig& config, int64_t total_steps,
                     DataParallel* parallel)
    : model_(model),
      max_norm_(config.gradient_clipping),
      precision_(model.layout(), model.dtype(), model.params()),
      scaler_(config.loss_scaler_options()),
      schedule_(schedule_for(config, total_steps)),
      optimizer_(make_optimizer(config, model.layout())),
      parallel_(parallel) {
  // DataParallel broadcast rank 0's parameters: the master copy starts from them.
  if (parallel_ != nullptr) precision_.reload_master();
  model_.zero_grad();
}

void TrainStep::begin_micro(bool last_of_step) {
  if (parallel_ != nullptr) parallel_->begin_micro(last_of_step);
}

size_t TrainStep::model_state_bytes() {
  size_t bytes = 2 * model_.param_bytes() + precision_.owned_bytes();
  for (const OptimizerStateBuffer& buffer : optimizer_->state())
    bytes += buffer.data->size() * sizeof(float);
  return bytes;
}

StepResult TrainStep::finish(int accumulation) {
  StepResult result;
  result.loss_scale = scaler_.scale();
  result.lr = lr();
  if (parallel_ != nullptr) parallel_->finish_reduction();
  bool overflow = precision_.check_overflow(model_.grads());
  // Every rank holds the same averaged gradients, so the flag agrees already; asking makes the
  // skip decision one that no rank can take alone.
  if (parallel_ != nullptr) overflow = parallel_->any(overflow);
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
