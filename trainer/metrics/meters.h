// Running averages and a throughput meter for the progress lines: the mean loss since the last
// report, a smoothed loss, and tokens (or samples) per second over a report interval.
#pragma once

#include <cstdint>
#include <functional>

namespace kolo::trainer {

// Mean of the values added since the last reset (weighted by `weight`, e.g. tokens).
class RunningMean {
 public:
  void add(double value, double weight = 1.0);
  double mean() const { return weight_ == 0 ? 0.0 : sum_ / weight_; }
  double weight() const { return weight_; }
  void reset() { sum_ = weight_ = 0; }

 private:
  double sum_ = 0;
  double weight_ = 0;
};

// Exponential moving average with bias correction (as Adam's moments): after the first value
// it equals that value, then value_t = decay * value_{t-1} + (1 - decay) * x, corrected.
class ExponentialMean {
 public:
  explicit ExponentialMean(double decay = 0.9);  // decay in [0, 1)
  void add(double value);
  double value() const;  // 0 before the first value
  int64_t count() const { return count_; }

 private:
  double decay_;
  double biased_ = 0;
  double decay_power_ = 1;  // decay^count
  int64_t count_ = 0;
};

// Units (tokens or samples) per second between calls to rate(). The clock is injectable so
// tests can drive it; by default std::chrono::steady_clock in seconds.
class ThroughputMeter {
 public:
  using Clock = std::function<double()>;
  explicit ThroughputMeter(Clock clock = {});

  void add(double units) { units_ += units; }
  // Units added since the last rate() (or construction) divided by the seconds since then;
  // then starts a new interval. 0 when no time has passed.
  double rate();
  double total_units() const { return total_units_ + units_; }

 private:
  Clock clock_;
  double start_;
  double units_ = 0;
  double total_units_ = 0;
};

}  // namespace kolo::trainer
