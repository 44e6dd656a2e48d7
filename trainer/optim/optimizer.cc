// Optimizer: the shared step counter.
#include "trainer/optim/optimizer.h"

#include "comm/base/error.h"

namespace kolo::trainer {

void Optimizer::set_step_count(int64_t steps) {
  KOLO_CHECK_ARG(steps >= 0, "optimizer step count: ", steps, " is out of range (>= 0)");
  step_count_ = steps;
}

}  // namespace kolo::trainer
