// StepLoop: micro-batches -> TrainStep::finish -> progress lines.
#include "trainer/train/step_loop.h"

namespace kolo::trainer {

StepLoop::StepLoop(TrainStep& step, int64_t total_steps, int64_t steps_per_print,
                   ProgressPrinter& progress)
    : step_(step), total_(total_steps), every_(steps_per_print), progress_(progress) {}

void StepLoop::run_epoch(int64_t epoch, int64_t steps, int accumulation, const Micro& micro,
                         int64_t first) {
  for (int64_t s = first; s < steps; ++s) {
    for (int a = 0; a < accumulation; ++a) {
      step_.begin_micro(a == accumulation - 1);
      const MicroResult r =
          micro(static_cast<size_t>(s * accumulation + a), step_.backward_scale(accumulation));
      loss_.add(r.loss);
      meter_.add(r.units);
    }
    const StepResult result = step_.finish();
    if (++done_ % every_ == 0 || done_ == total_) report(result, epoch);
    if (after_) after_(epoch, s + 1);
  }
}

void StepLoop::report(const StepResult& result, int64_t epoch) {
  // Every rank reaches this on the same steps: the loss is averaged and the rate summed over
  // the data-parallel ranks, so rank 0 prints the job's figures.
  double loss = loss_.mean(), rate = meter_.rate();
  if (DataParallel* dp = step_.data_parallel()) {
    const std::vector<double> total = dp->sum({loss, rate});
    loss = total[0] / dp->size();
    rate = total[1];
  }
  progress_.report(
      {done_,
       total_,
       loss,
       result.loss_scale,
       result.lr,
       rate,
       {{"epoch", std::to_string(epoch + 1)}, {"skipped", std::to_string(step_.skipped_steps())}}});
  loss_.reset();
}

}  // namespace kolo::trainer
