// LrSchedule: the warm-up and decay formulas written out in schedule.h.
#include "trainer/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "comm/base/error.h"

namespace kolo::trainer {

LrSchedule::LrSchedule(const ScheduleOptions& options) : options_(options) {
  const ScheduleOptions& o = options_;
  KOLO_CHECK_ARG(o.start_lr >= 0, "scheduler warmup_min_lr: ", o.start_lr,
                 " is out of range (>= 0)");
  KOLO_CHECK_ARG(o.peak_lr >= 0, "scheduler warmup_max_lr: ", o.peak_lr, " is out of range (>= 0)");
  KOLO_CHECK_ARG(o.end_lr >= 0, "scheduler end lr: ", o.end_lr, " is out of range (>= 0)");
  KOLO_CHECK_ARG(o.warmup_steps >= 0, "scheduler warmup_num_steps: ", o.warmup_steps,
                 " is out of range (>= 0)");
  if (o.warmup == WarmupType::kLog) options_.warmup_steps = std::max<int64_t>(o.warmup_steps, 2);
  KOLO_CHECK_ARG(o.decay == DecayType::kConstant || o.total_steps > options_.warmup_steps,
                 "scheduler total_num_steps: ", o.total_steps,
                 " is out of range (> warmup_num_steps = ", options_.warmup_steps, ")");
}

double LrSchedule::lr(int64_t step) const {
  const ScheduleOptions& o = options_;
  const double s = static_cast<double>(std::max<int64_t>(step, 0));
  const double w = static_cast<double>(o.warmup_steps);
  if (s < w) {
    const double frac = o.warmup == WarmupType::kLinear ? s / w : std::log(s + 1) / std::log(w);
    return o.start_lr + (o.peak_lr - o.start_lr) * frac;
  }
  const double span = static_cast<double>(o.total_steps) - w;
  if (o.decay == DecayType::kConstant) return o.peak_lr;
  if (o.decay == DecayType::kLinear) {
    const double gamma = std::max(0.0, (static_cast<double>(o.total_steps) - s) / span);
    return o.end_lr + (o.peak_lr - o.end_lr) * gamma;
  }
  const double progress = std::min(1.0, (s - w + 1) / span);
  return o.end_lr + (o.peak_lr - o.end_lr) * (1 + std::cos(std::numbers::pi * progress)) / 2;
}

}  // namespace kolo::trainer
