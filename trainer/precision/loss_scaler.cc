// DynamicLossScaler: DeepSpeed's dynamic loss-scale update with hysteresis; the contract is
// written out in loss_scaler.h.
#include "trainer/precision/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "comm/base/error.h"

namespace kolo::trainer {

namespace {

void validate(const LossScalerOptions& o) {
  KOLO_CHECK_ARG(std::isfinite(o.initial_scale) && o.initial_scale > 0,
                 "loss scaler initial_scale: ", o.initial_scale, " is out of range (> 0, finite)");
  KOLO_CHECK_ARG(o.min_scale > 0 && (!o.dynamic || o.min_scale <= o.initial_scale),
                 "loss scaler min_scale: ", o.min_scale,
                 " is out of range (> 0 and <= initial_scale ", o.initial_scale, ")");
  KOLO_CHECK_ARG(o.growth_factor > 1, "loss scaler growth_factor: ", o.growth_factor,
                 " is out of range (> 1)");
  KOLO_CHECK_ARG(o.backoff_factor > 0 && o.backoff_factor < 1,
                 "loss scaler backoff_factor: ", o.backoff_factor, " is out of range (0 < f < 1)");
  KOLO_CHECK_ARG(o.growth_interval >= 1, "loss scaler growth_interval: ", o.growth_interval,
                 " is out of range (>= 1)");
  KOLO_CHECK_ARG(o.hysteresis >= 1, "loss scaler hysteresis: ", o.hysteresis,
                 " is out of range (>= 1)");
}

}  // namespace

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& options)
    : options_(options), scale_(options.initial_scale), hysteresis_left_(options.hysteresis) {
  validate(options_);
}

bool DynamicLossScaler::update(bool overflow) {
  below_minimum_ = false;
  if (overflow) {
    ++skipped_steps_;
    clean_steps_ = 0;
    if (!options_.dynamic) return false;
    if (hysteresis_left_ > 1) {
      --hysteresis_left_;
    } else {
      below_minimum_ = scale_ <= options_.min_scale;
      scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
    }
    return false;
  }
  if (!options_.dynamic) return true;
  if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
  if (++clean_steps_ >= options_.growth_interval) {
    clean_steps_ = 0;
    hysteresis_left_ = options_.hysteresis;
    const float grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
  }
  return true;
}

void DynamicLossScaler::restore(float scale, int64_t clean_steps, int64_t hysteresis_left,
                                int64_t skipped_steps) {
  KOLO_CHECK_ARG(std::isfinite(scale) && scale > 0, "loss scaler checkpoint: scale ", scale,
                 " is out of range (> 0, finite)");
  KOLO_CHECK_ARG(clean_steps >= 0 && clean_steps < options_.growth_interval,
                 "loss scaler checkpoint: clean steps ", clean_steps, " out of range [0, ",
                 options_.growth_interval, ")");
  KOLO_CHECK_ARG(hysteresis_left >= 1 && hysteresis_left <= options_.hysteresis,
                 "loss scaler checkpoint: hysteresis left ", hysteresis_left, " out of range [1, ",
                 options_.hysteresis, "]");
  KOLO_CHECK_ARG(skipped_steps >= 0, "loss scaler checkpoint: skipped steps ", skipped_steps,
                 " is negative");
  scale_ = scale;
  clean_steps_ = clean_steps;
  hysteresis_left_ = hysteresis_left;
  skipped_steps_ = skipped_steps;
}

void DynamicLossScaler::resume(float scale, int64_t clean_steps, int64_t hysteresis_left,
                               int64_t skipped_steps, bool same_precision) {
  if (!options_.dynamic || !same_precision) {
    restore(options_.initial_scale, 0, options_.hysteresis, skipped_steps);
    return;
  }
  restore(std::max(scale, options_.min_scale),
          std::clamp<int64_t>(clean_steps, 0, options_.growth_interval - 1),
          std::clamp<int64_t>(hysteresis_left, 1, options_.hysteresis), skipped_steps);
}

LossScalerOptions no_loss_scaling() {
  LossScalerOptions o;
  o.dynamic = false;
  o.initial_scale = 1.0f;
  o.min_scale = 1.0f;
  return o;
}

}  // namespace kolo::trainer
