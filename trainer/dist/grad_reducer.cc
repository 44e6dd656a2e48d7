// GradReducer: per-tensor engine allreduces, retired in submission order.
#include "trainer/dist/grad_reducer.h"

#include <algorithm>

namespace kolo::trainer {

GradReducer::GradReducer(engine::Engine& engine, Model& model, Partition own, size_t max_in_flight,
                         const engine::OpOptions& average)
    : engine_(engine),
      model_(model),
      own_(own),
      average_(average),
      releases_(own.begin > 0 || own.end < model.layout().total()),
      max_in_flight_(max_in_flight),
      submitted_(model.layout().params().size(), false) {}

void GradReducer::submit(const std::string& prefix) {
  const auto& params = model_.layout().params();
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    if (submitted_[i] || p.name.compare(0, prefix.size(), prefix) != 0) continue;
    if (releases_) {
      retire(false);
      while (!pending_.empty() && in_flight_ + p.numel > max_in_flight_) retire(true);
    }
    engine::TensorView grad{model_.grad(p.name),
                            model_.dtype(),
                            {static_cast<int64_t>(p.numel)},
                            model_.backend().device_id(),
                            model_.backend().device_stream()};
    pending_.push_back({i, engine_.allreduce(p.name, grad, grad, average_)});
    in_flight_ += p.numel;
    submitted_[i] = true;
  }
}

void GradReducer::retire(bool wait) {
  while (!pending_.empty()) {
    Pending& front = pending_.front();
    if (!wait && !front.handle.done()) return;
    front.handle.check();
    const ParamInfo& p = model_.layout().params()[front.index];
    if (releases_) release(p);
    in_flight_ -= p.numel;
    pending_.pop_front();
    if (wait) return;
  }
}

void GradReducer::release(const ParamInfo& p) {
  // The parts of [offset, offset + numel) before and after this rank's range.
  const size_t begin = p.offset, end = p.offset + p.numel, esize = dtype_size(model_.dtype());
  char* base = static_cast<char*>(model_.grads());
  const size_t cut1 = std::min(end, std::max(begin, own_.begin));
  const size_t cut2 = std::max(begin, std::min(end, own_.end));
  model_.backend().discard(base + begin * esize, (cut1 - begin) * esize);
  model_.backend().discard(base + cut2 * esize, (end - cut2) * esize);
}

void GradReducer::finish() {
  submit("");
  while (!pending_.empty()) retire(true);
  submitted_.assign(submitted_.size(), false);
}

}  // namespace kolo::trainer
