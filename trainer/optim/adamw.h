// Adam with decoupled weight decay, exactly torch.optim.AdamW's update (amsgrad off); with
// decoupled_weight_decay off it is torch.optim.Adam's L2 form (DeepSpeed "Adam" with
// adam_w_mode false).
#pragma once

#include <vector>

#include "trainer/optim/optimizer.h"

namespace kolo::trainer {

struct AdamWOptions {
  float beta1 = 0.9f;          // [0, 1)
  float beta2 = 0.999f;        // [0, 1)
  float eps = 1e-8f;           // > 0
  float weight_decay = 0.01f;  // >= 0, only on tensors with ParamInfo.decay
  bool decoupled_weight_decay = true;
};

// Per element, with t = step_count() after the increment, g = grad * grad_scale:
//   decoupled: p -= lr * wd * p          L2 (not decoupled): g += wd * p
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class AdamW : public Optimizer {
 public:
  AdamW(const ParamLayout& layout, const AdamWOptions& options);
  const char* name() const override;
  void update(const ParamInfo& info, size_t first, size_t count, float* params, const float* grads,
              float grad_scale) override;
  void update_on(Backend& backend, const ParamInfo& info, float* params, const void* grads,
                 DType grad_dt, float multiplier, float grad_scale,
                 float* const* state) const override;
  std::vector<OptimizerStateBuffer> state() override;
  const AdamWOptions& options() const { return options_; }

 private:
  void prepare(float lr) override;
  AdamWScalars scalars(const ParamInfo& info) const;  // this step's, for one tensor

  AdamWOptions options_;
  float lr_ = 0, step_size_ = 0, bc2_sqrt_ = 1;  // this step's scalars
  std::vector<float> exp_avg_;                   // m
  std::vector<float> exp_avg_sq_;                // v
};

}  // namespace kolo::trainer
