// AdamW: torch.optim.AdamW's single-tensor update over the flat master buffer, tensor by
// tensor so weight decay follows ParamInfo.decay; the element arithmetic is
// kernels/optimizer_math.h's.
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

AdamWScalars AdamW::scalars(const ParamInfo& info) const {
  const float wd = info.decay ? options_.weight_decay : 0.0f;
  AdamWScalars s;
  s.beta1 = options_.beta1;
  s.beta2 = options_.beta2;
  s.eps = options_.eps;
  // Decoupled decay shrinks p before the Adam update; L2 adds wd * p to the gradient.
  s.shrink = options_.decoupled_weight_decay ? 1.0f - lr_ * wd : 1.0f;
  s.l2 = options_.decoupled_weight_decay ? 0.0f : wd;
  s.step_size = step_size_;
  s.bc2_sqrt = bc2_sqrt_;
  return s;
}

void AdamW::update(const ParamInfo& info, size_t first, size_t count, float* p, const float* g,
                   float grad_scale) {
  const AdamWScalars s = scalars(info);
  float* m = exp_avg_.data() + info.offset + first;
  float* v = exp_avg_sq_.data() + info.offset + first;
  for (size_t i = 0; i < count; ++i) adamw_element(p[i], m[i], v[i], g[i] * grad_scale, s);
}

void AdamW::update_on(Backend& backend, const ParamInfo& info, float* params, const void* grads,
                      DType grad_dt, float multiplier, float grad_scale,
                      float* const* state) const {
  backend.adamw_update(params, state[0], state[1], grads, grad_dt, info.numel, multiplier,
                       grad_scale, scalars(info));
}

std::vector<OptimizerStateBuffer> AdamW::state() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

}  // namespace kolo::trainer
