// RunningMean, ExponentialMean and ThroughputMeter.
#include "trainer/metrics/meters.h"

#include <chrono>

#include "comm/base/error.h"

namespace kolo::trainer {

void RunningMean::add(double value, double weight) {
  sum_ += value * weight;
  weight_ += weight;
}

ExponentialMean::ExponentialMean(double decay) : decay_(decay) {
  KOLO_CHECK_ARG(decay >= 0 && decay < 1, "exponential mean decay: ", decay,
                 " is out of range [0, 1)");
}

void ExponentialMean::add(double value) {
  biased_ = decay_ * biased_ + (1 - decay_) * value;
  decay_power_ *= decay_;
  ++count_;
}

double ExponentialMean::value() const {
  return count_ == 0 ? 0.0 : biased_ / (1 - decay_power_);
}

ThroughputMeter::ThroughputMeter(Clock clock) : clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  start_ = clock_();
}

double ThroughputMeter::rate() {
  const double now = clock_();
  const double seconds = now - start_;
  const double r = seconds > 0 ? units_ / seconds : 0.0;
  total_units_ += units_;
  units_ = 0;
  start_ = now;
  return r;
}

}  // namespace kolo::trainer
