// Loss scaling for fp16 training: the scale the loss is multiplied by before backward, and its
// update after each step from the overflow flag, following DeepSpeed's DynamicLossScaler
// (deepspeed/runtime/fp16/loss_scaler.py) with torch.cuda.amp.GradScaler's separate factors.
#pragma once

#include <cstdint>

namespace kolo::trainer {

struct LossScalerOptions {
  bool dynamic = true;                  // false: the scale stays initial_scale forever
  float initial_scale = 65536.0f;       // 2^16 (DeepSpeed fp16.initial_scale_power = 16)
  float growth_factor = 2.0f;           // > 1
  float backoff_factor = 0.5f;          // in (0, 1)
  int64_t growth_interval = 2000;       // >= 1 (DeepSpeed fp16.loss_scale_window)
  int64_t hysteresis = 2;               // >= 1 (DeepSpeed fp16.hysteresis)
  bool consecutive_hysteresis = false;  // DeepSpeed fp16.consecutive_hysteresis
  float min_scale = 1.0f;               // > 0 (DeepSpeed fp16.min_loss_scale)
};

// Exact behaviour of update(overflow), one call per optimizer step (after the overflow flag
// has been agreed by every rank, so all ranks keep the same scale):
//
// - Overflow (an inf or NaN anywhere in the gradients): the step is ALWAYS skipped (update
//   returns false) and counted in skipped_steps() and overflows(); the clean-step counter
//   restarts from 0. Then, when dynamic:
//     * if the hysteresis budget is above 1, it is decremented and the scale is kept;
//     * otherwise (budget 1) the scale becomes max(scale * backoff_factor, min_scale).
//   So with hysteresis h, the first h-1 overflows tolerate without lowering the scale, and
//   every later one backs off, until the budget is refilled.
// - Clean step: the step is applied (update returns true). The clean-step counter is
//   incremented; when it reaches growth_interval the scale is multiplied by growth_factor,
//   the counter restarts from 0 and the hysteresis budget is refilled to h.
//   A clean step does NOT refill the hysteresis budget by itself (DeepSpeed's default): the
//   h-1 tolerated overflows are counted since the last growth (or the start), consecutive or
//   not. With consecutive_hysteresis = true every clean step refills it, so only overflows in
//   an unbroken run are tolerated.
// - Not dynamic (static scale, DeepSpeed fp16.loss_scale > 0): overflow steps are still
//   skipped and counted, the scale never changes.
// The scale never grows past the largest finite float (growth is skipped there).
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& options = {});

  // Records one step's overflow flag; returns true when the optimizer step may be applied.
  bool update(bool overflow);

  float scale() const { return scale_; }
  float inverse_scale() const { return 1.0f / scale_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t overflows() const { return skipped_steps_; }  // every overflow skips its step
  int64_t clean_steps_since_overflow_or_growth() const { return clean_steps_; }
  int64_t hysteresis_left() const { return hysteresis_left_; }
  const LossScalerOptions& options() const { return options_; }
  // The last update() was an overflow that had to lower a dynamic scale already at min_scale
  // (DeepSpeed stops the run there: every later step would overflow too).
  bool below_minimum() const { return below_minimum_; }

  // Checkpoint state: restore what the accessors above returned.
  void restore(float scale, int64_t clean_steps, int64_t hysteresis_left, int64_t skipped_steps);
  // A resume: a checkpoint's state (as restore() takes it) under this run's options, which win
  // where the config fixes them. skipped_steps always carries over. Not dynamic (bf16, fp32 or
  // a static fp16.loss_scale): the options' scale. Dynamic after a checkpoint of another
  // precision (`same_precision` false, e.g. bf16 to fp16): the initial state, as a new run.
  // Dynamic after an fp16 one: its scale raised to min_scale, its clean steps and hysteresis
  // budget clamped to this run's growth_interval - 1 and hysteresis.
  void resume(float scale, int64_t clean_steps, int64_t hysteresis_left, int64_t skipped_steps,
              bool same_precision);

 private:
  LossScalerOptions options_;
  float scale_;
  int64_t clean_steps_ = 0;
  int64_t hysteresis_left_;
  int64_t skipped_steps_ = 0;
  bool below_minimum_ = false;
};

// bf16 and fp32 training: scale 1, never changes (overflow steps are still reported).
LossScalerOptions no_loss_scaling();

}  // namespace kolo::trainer
