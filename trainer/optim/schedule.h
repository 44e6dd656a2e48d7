// Learning-rate schedules: warm-up from a start rate to a peak, then constant, linear decay or
// cosine decay, as a pure function lr(step). The curves are DeepSpeed's WarmupLR,
// WarmupDecayLR and WarmupCosineLR (deepspeed/runtime/lr_schedules.py).
#pragma once

#include <cstdint>

namespace kolo::trainer {

enum class WarmupType { kLinear, kLog };
enum class DecayType { kConstant, kLinear, kCosine };

struct ScheduleOptions {
  double start_lr = 0.0;     // at step 0 (DeepSpeed warmup_min_lr)
  double peak_lr = 1e-3;     // at the end of warm-up (warmup_max_lr)
  double end_lr = 0.0;       // linear / cosine: at total_steps
  int64_t warmup_steps = 0;  // >= 0 (warmup_num_steps)
  int64_t total_steps = 0;   // linear / cosine: > warmup_steps (total_num_steps)
  WarmupType warmup = WarmupType::kLinear;
  DecayType decay = DecayType::kConstant;
};

// lr(s) is the rate of the update that takes the optimizer from s to s + 1 applied steps
// (skipped overflow steps do not advance s, as in DeepSpeed). With W = warmup_steps,
// T = total_steps:
//   s < W, linear:  start + (peak - start) * s / W
//   s < W, log:     start + (peak - start) * ln(s + 1) / ln(W)   (W is raised to 2 if smaller)
//   s >= W, constant: peak
//   s >= W, linear:   end + (peak - end) * max(0, (T - s) / (T - W))
//   s >= W, cosine:   end + (peak - end) * (1 + cos(pi * min(1, (s - W + 1) / (T - W)))) / 2
// The cosine's "+ 1" is DeepSpeed's; past T it stays at end (DeepSpeed's would rise again).
class LrSchedule {
 public:
  explicit LrSchedule(const ScheduleOptions& options);
  double lr(int64_t step) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace kolo::trainer
