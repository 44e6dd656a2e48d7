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

SgdScalars Sgd::scalars(const ParamInfo& info) const {
  SgdScalars s;
  s.lr = lr_;
  s.weight_decay = info.decay ? options_.weight_decay : 0.0f;
  s.momentum = options_.momentum;
  s.nesterov = options_.nesterov;
  return s;
}

void Sgd::update(const ParamInfo& info, size_t first, size_t count, float* p, const float* g,
                 float grad_scale) {
  const SgdScalars s = scalars(info);
  float* buf = s.momentum > 0 ? momentum_buffer_.data() + info.offset + first : nullptr;
  for (size_t i = 0; i < count; ++i)
    sgd_element(p[i], buf != nullptr ? buf + i : nullptr, g[i] * grad_scale, s);
}

void Sgd::update_on(Backend& backend, const ParamInfo& info, float* params, const void* grads,
                    DType grad_dt, float multiplier, float grad_scale, float* const* state) const {
  backend.sgd_update(params, options_.momentum > 0 ? state[0] : nullptr, grads, grad_dt, info.numel,
                     multiplier, grad_scale, scalars(info));
}

std::vector<OptimizerStateBuffer> Sgd::state() {
  if (momentum_buffer_.empty()) return {};
  return {{"momentum_buffer", &momentum_buffer_}};
}

}  // namespace kolo::trainer
