// Mlp: layout, PyTorch-style init, and the forward/backward over the arena.
#include "trainer/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "comm/base/error.h"
#include "trainer/metrics/classification.h"

namespace kolo::trainer {

void MlpConfig::validate() const {
  KOLO_CHECK_ARG(sizes.size() >= 2, "MLP config: needs at least 2 widths (input and classes), got ",
                 sizes.size());
  for (int s : sizes)
    KOLO_CHECK_ARG(s >= 1 && s <= (1 << 20), "MLP config: width ", s, " outside [1, 1048576]");
  KOLO_CHECK_ARG(sizes.back() >= 2, "MLP config: ", sizes.back(), " classes, need at least 2");
}

MlpConfig parse_mlp_config(std::string_view text) {
  MlpConfig c;
  c.sizes.clear();
  std::string part;
  auto flush = [&]() {
    KOLO_CHECK_ARG(!part.empty(), "MLP config '", text,
                   "': expected widths joined by '-', e.g. 784-512-256-10");
    KOLO_CHECK_ARG(part.size() < 9, "MLP config: width ", part, " outside [1, 1048576]");
    c.sizes.push_back(std::stoi(part));
    part.clear();
  };
  for (char ch : text) {
    if (ch == '-' || ch == ',') {
      flush();
    } else {
      KOLO_CHECK_ARG(ch >= '0' && ch <= '9', "MLP config '", text, "': unexpected character '", ch,
                     "' (expected widths joined by '-', e.g. 784-512-256-10)");
      part += ch;
    }
  }
  flush();
  c.validate();
  return c;
}

ParamLayout Mlp::make_layout(const MlpConfig& c) {
  c.validate();
  ParamLayout p;
  for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
    std::string pre = "layers." + std::to_string(i);
    p.add(pre + ".weight", {c.sizes[i + 1], c.sizes[i]}, true);
    p.add(pre + ".bias", {c.sizes[i + 1]}, false);
  }
  return p;
}

Mlp::Mlp(Backend& backend, const MlpConfig& config, DType dtype, int batch, uint64_t seed)
    : Model(backend, dtype, make_layout(config)), config_(config) {
  std::vector<float> values(layout().total(), 0.0f);
  for (size_t i = 0; i + 1 < config_.sizes.size(); ++i) {
    std::string pre = "layers." + std::to_string(i);
    const ParamInfo& w = layout().find(pre + ".weight");
    const ParamInfo& b = layout().find(pre + ".bias");
    w_.push_back(w.offset);
    b_.push_back(b.offset);
    float bound = 1.0f / std::sqrt(static_cast<float>(config_.sizes[i]));
    for (const ParamInfo* p : {&w, &b}) {
      InitRng rng(seed, p->name);
      for (size_t j = 0; j < p->numel; ++j)
        values[p->offset + j] = bound * (2.0f * rng.uniform() - 1.0f);
    }
  }
  upload_params(values);
  KOLO_CHECK_ARG(batch > 0, "Mlp: batch ", batch, " must be positive");
  plan(batch);
}

void Mlp::plan(int batch) {
  const size_t es = dtype_size(dtype()), B = batch, n = config_.sizes.size() - 1;
  const size_t widest = *std::max_element(config_.sizes.begin(), config_.sizes.end());
  z_.assign(n, nullptr);
  h_.assign(n, nullptr);
  auto carve = [&](ArenaCarver& c) {
    input_ = c.take(B * config_.sizes[0] * es);
    for (size_t i = 0; i < n; ++i) {
      z_[i] = c.take(B * config_.sizes[i + 1] * es);
      if (i + 1 < n) h_[i] = c.take(B * config_.sizes[i + 1] * es);
    }
    d1_ = c.take(B * widest * es);
    d2_ = c.take(B * widest * es);
    dlogits_ = c.take(B * config_.sizes.back() * es);
    losses_ = c.take<float>(B * 4);
  };
  ArenaCarver measure(nullptr);
  carve(measure);
  ArenaCarver real(ensure_arena(measure.used()));
  carve(real);
}

float Mlp::forward(const FeatureBatch& batch) {
  const int classes = num_classes(), n = static_cast<int>(config_.sizes.size()) - 1;
  KOLO_CHECK_ARG(batch.batch > 0 && batch.features == config_.sizes[0], "FeatureBatch: batch ",
                 batch.batch, " must be positive and features ", batch.features,
                 " equal the MLP input width ", config_.sizes[0]);
  KOLO_CHECK_EQ(batch.inputs.size(), size_t(batch.batch) * batch.features,
                ErrorCode::kInvalidArgument, "FeatureBatch: inputs size vs batch * features");
  KOLO_CHECK_EQ(batch.labels.size(), size_t(batch.batch), ErrorCode::kInvalidArgument,
                "FeatureBatch: labels size vs batch");
  for (int32_t y : batch.labels)
    KOLO_CHECK_ARG((y >= 0 && y < classes) || y == kIgnoreIndex, "FeatureBatch: label ", y,
                   " outside [0, ", classes, ") and not kIgnoreIndex (-100)");
  B_ = batch.batch;
  labels_ = batch.labels;
  plan(B_);
  Backend& k = backend();
  const DType dt = dtype();
  write_floats(input_, batch.inputs.data(), batch.inputs.size());
  const void* x = input_;
  for (int i = 0; i < n; ++i) {
    const ParamsInUse in_use = use_params("layers." + std::to_string(i) + ".");
    k.linear_forward(z_[i], x, at(params(), w_[i]), at(params(), b_[i]), B_, config_.sizes[i],
                     config_.sizes[i + 1], dt);
    if (i + 1 < n) {
      k.relu_forward(h_[i], z_[i], size_t(B_) * config_.sizes[i + 1], dt);
      x = h_[i];
    }
  }
  forwarded_ = true;
  return k.cross_entropy_forward(losses_, nullptr, z_[n - 1], labels_.data(), B_, classes,
                                 kIgnoreIndex, dt);
}

void Mlp::backward(float dloss) {
  KOLO_CHECK_ARG(forwarded_, "Mlp::backward called before forward");
  Backend& k = backend();
  const DType dt = dtype();
  const int n = static_cast<int>(config_.sizes.size()) - 1;
  k.cross_entropy_backward(dlogits_, z_[n - 1], labels_.data(), B_, num_classes(), kIgnoreIndex,
                           dloss, dt);
  const void* dz = dlogits_;
  for (int i = n - 1; i >= 0; --i) {
    const void* x = i > 0 ? h_[i - 1] : input_;
    void* dx = i > 0 ? d1_ : nullptr;  // the input needs no gradient
    const ParamsInUse in_use = use_params("layers." + std::to_string(i) + ".");
    k.linear_backward(dx, at(grads(), w_[i]), at(grads(), b_[i]), dz, x, at(params(), w_[i]), B_,
                      config_.sizes[i], config_.sizes[i + 1], dt);
    grads_ready("layers." + std::to_string(i) + ".");
    if (i > 0) {
      // d1_ = d h(i-1) -> d2_ = d z(i-1); the next linear_backward reads d2_, writes d1_.
      k.relu_backward(d2_, d1_, z_[i - 1], size_t(B_) * config_.sizes[i], dt);
      dz = d2_;
    }
  }
}

std::vector<float> Mlp::logits() const {
  KOLO_CHECK_ARG(forwarded_, "Mlp::logits called before forward");
  return read_floats(z_.back(), size_t(B_) * num_classes());
}

std::vector<int32_t> Mlp::predictions() const {
  KOLO_CHECK_ARG(forwarded_, "Mlp::predictions called before forward");
  std::vector<int32_t> pred(B_);
  backend().argmax_rows(pred.data(), z_.back(), B_, num_classes(), dtype());
  return pred;
}

int Mlp::correct() const {
  std::vector<int32_t> pred = predictions();
  int n = 0;
  for (int i = 0; i < B_; ++i) n += pred[i] == labels_[i];
  return n;
}

}  // namespace kolo::trainer
