// Sgd: torch.optim.SGD's single-tensor update (dampening 0) over the flat master buffer.
#include "trainer/optim/sgd.h"

#include "comm/base/error.h"

namespace kolo::trainer {

Sgd::Sgd(const ParamLayout& layout, const SgdOptions& options)
    : Optimizer(layout), options_(options) {
  KOLO_CHECK_ARG(options.momentum >= 0 && options.momentum < 1,
                 "optimizer.params.momentum: ", options.momentum, " is out of range [0, 1)");
  KOLO_CHECK_ARG(options.weight_decay >= 0, "optimizer.params.weight_decay: ", options.weight_decay,
                 " is out of range (>= 0)");
  KOLO_CHECK_ARG(!options.nesterov || options.momentum > 0,
                 "optimizer.params.nesterov: true needs optimizer.params.momentum > 0");
  if (options.momentum > 0) momentum_buffer_.assign(layout.total(), 0.0f);
}

void Sgd::update(const ParamInfo& info, size_t first, size_t count, float* p, const float* g,
                 float grad_scale) {
  const float mu = options_.momentum;
  const float wd = info.decay ? options_.weight_decay : 0.0f;
  float* buf = mu > 0 ? momentum_buffer_.data() + info.offset + first : nullptr;
  for (size_t i = 0; i < count; ++i) {
    float d = g[i] * grad_scale + wd * p[i];
    if (buf != nullptr) {
      // The buffer starts at zero, so the first step gives buf = g as torch's clone does.
      buf[i] = mu * buf[i] + d;
      d = options_.nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr_ * d;
  }
}

std::vector<OptimizerStateBuffer> Sgd::state() {
  if (momentum_buffer_.empty()) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace kolo::trainer
