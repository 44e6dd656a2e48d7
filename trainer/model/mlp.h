// A multilayer perceptron for MNIST over flat buffers: linear layers with ReLU between them
// and a softmax cross-entropy loss. Names "layers.N.weight" / "layers.N.bias" match a PyTorch
// nn.ModuleList of nn.Linear called `layers`.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/model/model.h"

namespace kolo::trainer {

struct MlpConfig {
  // Layer widths, input first, classes last. Default 784-512-256-10 (MNIST).
  std::vector<int> sizes = {784, 512, 256, 10};
  void validate() const;
};

// "784-512-256-10" (widths joined by '-' or ',').
MlpConfig parse_mlp_config(std::string_view text);

class Mlp : public Model {
 public:
  // Initialised as PyTorch's nn.Linear does by default: weights and biases uniform in
  // +-1/sqrt(fan_in), from `seed`. The arena is sized for `batch` and grows when needed.
  Mlp(Backend& backend, const MlpConfig& config, DType dtype, int batch, uint64_t seed = 0);

  const MlpConfig& config() const { return config_; }
  int num_classes() const { return config_.sizes.back(); }

  // Mean cross-entropy over the batch's labels (kIgnoreIndex rows excluded).
  float forward(const FeatureBatch& batch);
  void backward(float dloss = 1.0f);  // accumulates into grads()

  std::vector<float> logits() const;         // [batch, classes] of the last forward, fp32
  std::vector<int32_t> predictions() const;  // [batch]
  int correct() const;                       // predictions equal to the labels

  static ParamLayout make_layout(const MlpConfig& config);

 private:
  void plan(int batch);

  MlpConfig config_;
  std::vector<size_t> w_, b_;  // offsets per layer
  // Arena: the input in storage dtype, per layer its pre-activation z and (hidden layers) its
  // ReLU output; two scratch gradients of the widest layer; per-row losses.
  void* input_ = nullptr;
  std::vector<void*> z_, h_;
  void *d1_ = nullptr, *d2_ = nullptr, *dlogits_ = nullptr;
  float* losses_ = nullptr;
  int B_ = 0;
  std::vector<int32_t> labels_;
  bool forwarded_ = false;
};

}  // namespace kolo::trainer
