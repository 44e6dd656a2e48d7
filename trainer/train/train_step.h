// One optimizer step: after the micro-batches' backward passes it finishes the gradients'
// reduction across data-parallel ranks (when there are several), then runs the mixed-precision
// phases (overflow check agreed by every rank, loss-scale update, unscale + global norm, clip,
// update of the fp32 master weights, copy back) and keeps the learning-rate schedule. With a
// model on a device those phases run there: the overflow check and the norm in one
// Backend::sum_squares pass, the update through Backend::adamw_update / sgd_update on fp32 master
// weights and optimizer states kept in device memory, the copy back with Backend::convert; no
// gradient or parameter crosses to the host. The host keeps a copy of the master weights and
// states for checkpoints, brought up to date by state_to_host() and sent back by
// state_from_host().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/config/train_config.h"
#include "trainer/dist/data_parallel.h"
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
  // `parallel` (optional, outliving this object) spans the data-parallel ranks.
  TrainStep(Model& model, const TrainConfig& config, int64_t total_steps,
            DataParallel* parallel = nullptr);

  // The fp16 loss scale (else 1).
  float loss_scale() const { return scaler_.scale(); }
  // What each micro-batch's backward multiplies its loss by in a step of `accumulation`
  // micro-batches: the loss scale over the accumulation steps, as DeepSpeed divides the loss by
  // them before backward, so the accumulated gradients hold the scaled mean (a scaled sum grew
  // with the accumulation steps and overflowed float16 where the same global batch did not).
  float backward_scale(int accumulation) const {
    return scaler_.scale() / static_cast<float>(accumulation);
  }
  // Before each micro-batch's backward: whether it is the last of this step (the one whose
  // gradients are reduced across ranks).
  void begin_micro(bool last_of_step);
  // Call after the step's backward passes (each seeded with backward_scale): updates the
  // weights (or skips on overflow) and zeroes the gradients for the next step.
  StepResult finish();
  DataParallel* data_parallel() const { return parallel_; }

  int64_t applied_steps() const { return optimizer_->step_count(); }
  int64_t skipped_steps() const { return scaler_.skipped_steps(); }
  double lr() const { return schedule_.lr(optimizer_->step_count()); }
  const DynamicLossScaler& scaler() const { return scaler_; }
  // Bytes of model state this rank holds: parameters and gradients in the storage dtype, the
  // fp32 master copy (half storage), the optimizer's states.
  size_t model_state_bytes();
  // What the ZeRO paper's formula gives for this run (train/summary.h).
  size_t formula_bytes() const { return formula_bytes_; }

  // For checkpoints: the range of the flat buffers this rank updates, its fp32 master weights
  // (range().end - range().begin elements), its optimizer and the loss scaler. With a model on a
  // device these are the host copies: state_to_host() before reading them, state_from_host()
  // after writing them (both do nothing on the host).
  void state_to_host();
  void state_from_host();
  const Partition& range() const { return range_; }
  float* master() { return precision_.master(); }
  Optimizer& optimizer() { return *optimizer_; }
  DynamicLossScaler& mutable_scaler() { return scaler_; }

 private:
  // After an overflow: kInvalidArgument when no later step can be finite (a float32 or bfloat16
  // run has no scale to lower; a float16 one had to lower it past fp16.min_loss_scale). Every
  // rank agrees on the overflow, so every rank stops at the same step.
  void stop_if_diverged() const;
  void zero_grads();
  // The phases' device forms (a model on a device).
  float* device_master();
  void update_on_device(const GradSource& grads, float multiplier, float lr, float grad_scale);

  Model& model_;
  double max_norm_;
  // What this rank updates: the whole buffer, or its ZeRO partition (stage >= 1).
  Partition range_;
  ParamLayout layout_;  // model.layout() sliced to range_
  bool on_device_;      // the model's buffers are device memory
  // A model on a device: a host copy of range_ of its parameters, which precision_ wraps (its
  // master weights are the checkpoints' host copy). Empty on the host, where precision_ works
  // on the model's own buffers.
  std::vector<char> host_params_;
  MixedPrecision precision_;
  DynamicLossScaler scaler_;
  LrSchedule schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  // A model on a device: the fp32 master weights of range_ (half storage; fp32 storage updates
  // the parameters in place) and a copy of each of optimizer_->state()'s buffers, in its memory.
  BackendBuffer device_master_;
  std::vector<BackendBuffer> device_state_;
  DataParallel* parallel_;
  bool sharded_;  // stage >= 1 over several ranks
  size_t formula_bytes_;
};

}  // namespace kolo::trainer
