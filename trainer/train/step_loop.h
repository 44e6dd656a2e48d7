// The optimizer-step loop shared by the training programs: each step runs the micro-batches'
// forward and backward passes (through a callback), then TrainStep::finish, and reports
// progress (mean loss, loss scale, lr, throughput, skipped steps) every steps_per_print steps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainer/metrics/meters.h"
#include "trainer/metrics/progress.h"
#include "trainer/train/train_step.h"

namespace kolo::trainer {

struct MicroResult {
  double loss = 0;   // the micro-batch's mean loss
  double units = 0;  // tokens or samples it processed (for the rate)
};

class StepLoop {
 public:
  // micro(index, scale): forward and backward of micro-batch `index` of the epoch, the backward
  // seeded with `scale` (TrainStep::backward_scale: the loss scale over the accumulation steps).
  using Micro = std::function<MicroResult(size_t index, float scale)>;

  StepLoop(TrainStep& step, int64_t total_steps, int64_t steps_per_print,
           ProgressPrinter& progress);

  // One epoch of `steps` optimizer steps over micro-batches 0 .. steps * accumulation - 1,
  // starting at step `first` (a resumed epoch skips the steps it had done).
  void run_epoch(int64_t epoch, int64_t steps, int accumulation, const Micro& micro,
                 int64_t first = 0);

  int64_t done() const { return done_; }
  // A resume: the steps done before this run.
  void set_done(int64_t done) { done_ = done; }
  // Called after each optimizer step with the epoch and the steps done in it (checkpoints).
  using AfterStep = std::function<void(int64_t epoch, int64_t steps_in_epoch)>;
  void set_after_step(AfterStep after) { after_ = std::move(after); }

 private:
  void report(const StepResult& result, int64_t epoch);

  TrainStep& step_;
  int64_t total_;
  int64_t every_;
  ProgressPrinter& progress_;
  ThroughputMeter meter_;
  RunningMean loss_;
  int64_t done_ = 0;
  AfterStep after_;
};

}  // namespace kolo::trainer
