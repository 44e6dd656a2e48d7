// One optimizer step of a single-process trainer: after the micro-batches' backward passes it
// runs the mixed-precision phases (overflow check, loss-scale update, unscale + global norm,
// clip, update of the fp32 master weights, copy back) and keeps the learning-rate schedule.
#pragma once

#include <cstdint>
#include <memory>

#include "trainer/config/train_config.h"
#include "trainer/model/model.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/schedule.h"
#include "trainer/precision/loss_scaler.h"
#include "trainer/precision/mixed_precision.h"

namespace kolo::trainer {

struct StepResult {
  bool applied = false;  // false: an inf/NaN gradient skipped the step (fp16 overflow)
  double grad_norm = 0;  // global L2 norm of the unscaled, averaged gradient (before clipping)
  double lr = 0;         // the rate this step used
  float loss_scale = 1;  // the scale the backward passes of this step used
};

class TrainStep {
 public:
  // total_steps fills scheduler.params.total_num_steps when the config leaves it 0, so a
  // decaying schedule spans the whole run by default.
  TrainStep(Model& model, const TrainConfig& config, int64_t total_steps);

  // What each micro-batch's backward multiplies the loss by (the fp16 loss scale, else 1).
  float loss_scale() const { return scaler_.scale(); }
  // Call after `accumulation` backward passes: updates the weights (or skips on overflow) and
  // zeroes the gradients for the next step.
  StepResult finish(int accumulation);

  int64_t applied_steps() const { return optimizer_->step_count(); }
  int64_t skipped_steps() const { return scaler_.skipped_steps(); }
  double lr() const { return schedule_.lr(optimizer_->step_count()); }
  const DynamicLossScaler& scaler() const { return scaler_; }

 private:
  Model& model_;
  double max_norm_;
  MixedPrecision precision_;
  DynamicLossScaler scaler_;
  LrSchedule schedule_;
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace kolo::trainer
