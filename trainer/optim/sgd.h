// Stochastic gradient descent with momentum, torch.optim.SGD's semantics with dampening 0:
// optional Nesterov momentum and L2 weight decay on the tensors with ParamInfo.decay.
#pragma once

#include <vector>

#include "trainer/optim/optimizer.h"

namespace kolo::trainer {

struct SgdOptions {
  float momentum = 0.0f;      // [0, 1)
  float weight_decay = 0.0f;  // >= 0
  bool nesterov = false;      // needs momentum > 0
};

// Per element, g = grad * grad_scale:
//   g += wd * p
//   momentum > 0: buf = momentum * buf + g (buf = g at the first step, the same with zero
//                 dampening); g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
class Sgd : public Optimizer {
 public:
  Sgd(const ParamLayout& layout, const SgdOptions& options);
  const char* name() const override { return "SGD"; }
  void update(const ParamInfo& info, size_t first, size_t count, float* params, const float* grads,
              float grad_scale) override;
  void update_on(Backend& backend, const ParamInfo& info, float* params, const void* grads,
                 DType grad_dt, float multiplier, float grad_scale,
                 float* const* state) const override;
  // "momentum_buffer" when momentum > 0, nothing otherwise (as torch keeps none).
  std::vector<OptimizerStateBuffer> state() override;
  const SgdOptions& options() const { return options_; }

 private:
  void prepare(float lr) override { lr_ = lr; }
  SgdScalars scalars(const ParamInfo& info) const;  // this step's, for one tensor

  SgdOptions options_;
  float lr_ = 0;
  std::vector<float> momentum_buffer_;
};

}  // namespace kolo::trainer
