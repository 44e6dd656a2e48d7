// AdamW: torch.optim.AdamW's single-tensor update over the flat master buffer, tensor by
// tensor so weight decay follows ParamInfo.decay.
#include "trainer/optim/adamw.h"

#include <cmath>

#include "comm/base/error.h"

namespace kolo::trainer {

AdamW::AdamW(const ParamLayout& layout, const AdamWOptions& options)
    : Optimizer(layout),
      options_(options),
      exp_avg_(layout.total(), 0.0f),
      exp_avg_sq_(layout.total(), 0.0f) {
  KOLO_CHECK_ARG(options.beta1 >= 0 && options.beta1 < 1,
                 "optimizer.params.betas[0]: ", options.beta1, " is out of range [0, 1)");
  KOLO_CHECK_ARG(options.beta2 >= 0 && options.beta2 < 1,
                 "optimizer.params.betas[1]: ", options.beta2, " is out of range [0, 1)");
  KOLO_CHECK_ARG(options.eps > 0, "optimizer.params.eps: ", options.eps, " is out of range (> 0)");
  KOLO_CHECK_ARG(options.weight_decay >= 0, "optimizer.params.weight_decay: ", options.weight_decay,
                 " is out of range (>= 0)");
}

const char* AdamW::name() const {
  return options_.decoupled_weight_decay ? "AdamW" : "Adam";
}

void AdamW::prepare(float lr) {
  // Scalars in double as PyTorch computes them from Python floats, then applied in fp32.
  const double t = static_cast<double>(step_count_);
  lr_ = lr;
  step_size_ = static_cast<float>(lr / (1.0 - std::pow(double(options_.beta1), t)));
  bc2_sqrt_ = static_cast<float>(std::sqrt(1.0 - std::pow(double(options_.beta2), t)));
}

void AdamW::update(const ParamInfo& info, size_t first, size_t count, float* p, const float* g,
                   float grad_scale) {
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const float wd = info.decay ? options_.weight_decay : 0.0f;
  // Decoupled decay shrinks p before the Adam update; L2 adds wd * p to the gradient.
  const float shrink = options_.decoupled_weight_decay ? 1.0f - lr_ * wd : 1.0f;
  const float l2 = options_.decoupled_weight_decay ? 0.0f : wd;
  float* m = exp_avg_.data() + info.offset + first;
  float* v = exp_avg_sq_.data() + info.offset + first;
  for (size_t i = 0; i < count; ++i) {
    const float gi = g[i] * grad_scale + l2 * p[i];
    p[i] *= shrink;
    m[i] += (gi - m[i]) * (1.0f - b1);  // torch's lerp_(grad, 1 - beta1)
    v[i] = v[i] * b2 + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) / bc2_sqrt_ + eps;
    p[i] -= step_size_ * (m[i] / denom);
  }
}

std::vector<OptimizerStateBuffer> AdamW::state() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace kolo::trainer
