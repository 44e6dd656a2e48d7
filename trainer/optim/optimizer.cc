// Optimizer: the shared step counter.
#include "trainer/optim/optimizer.h"

#include "comm/base/error.h"

namespace kolo::trainer {

void Optimizer::set_step_count(int64_t steps) {
  KOLO_CHECK_ARG(steps >= 0, "optimizer step count: ", steps, " is out of range (>= 0)");
  step_count_ = steps;
}

void Optimizer::begin_step(float lr) {
  ++step_count_;
  prepare(lr);
}

void Optimizer::step(float* params, const float* grads, float lr, float grad_scale) {
  begin_step(lr);
  for (const ParamInfo& info : layout_.params())
    update(info, 0, info.numel, params + info.offset, grads + info.offset, grad_scale);
}

}  // namespace kolo::trainer
