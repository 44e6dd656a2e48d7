// The part every trainer model shares: a ParamLayout with Hugging Face names, one flat
// parameter buffer and one flat gradient buffer in the storage dtype, an activation arena, the
// dropout mode and seed, and save/load of the weights as safetensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "trainer/io/tensor_io.h"
#include "trainer/kernels/backend.h"
#include "trainer/layout/param_layout.h"

namespace kolo::trainer {

class Model {
 public:
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  Backend& backend() const { return backend_; }
  DType dtype() const { return dtype_; }  // storage dtype of params, grads and activations
  const ParamLayout& layout() const { return layout_; }
  // layout().total() elements each (alignment padding included, always zero).
  void* params() { return params_; }
  const void* params() const { return params_; }
  void* grads() { return grads_; }
  const void* grads() const { return grads_; }
  void* param(const std::string& name);  // start of one named tensor inside params()
  void* grad(const std::string& name);   // ... and inside grads()

  size_t num_params() const { return layout_.num_params(); }
  size_t param_bytes() const { return layout_.total() * dtype_size(dtype_); }
  // Bytes of each flat buffer: layout().capacity() elements (total() plus zeroed slack).
  size_t buffer_bytes() const { return layout_.capacity() * dtype_size(dtype_); }
  size_t activation_bytes() const { return arena_bytes_; }  // arena capacity now

  void zero_grad();
  // Dropout is active only while training (the default); eval mode runs with p = 0.
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }
  // The seed of the counter-based dropout masks; set it once per step (a recompute or a
  // second forward with the same seed reproduces the masks).
  void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }
  uint64_t dropout_seed() const { return dropout_seed_; }

  // Called during backward each time the gradients of a group of tensors are final for this
  // backward (a head's, an encoder layer's, the embeddings'), with the prefix their Hugging Face
  // names share ("bert.encoder.layer.3."), so a data-parallel trainer can reduce them while the
  // backward goes on. The groups, in order, cover every tensor the backward writes.
  using GradsReadyHook = std::function<void(const std::string& prefix)>;
  void set_grads_ready_hook(GradsReadyHook hook) { grads_ready_hook_ = std::move(hook); }

  // ZeRO stage 3: called with (prefix, true) before the tensors named prefix... are read (a
  // forward, a backward, a recompute) and with (prefix, false) once they are not, so a
  // data-parallel trainer can gather them from their owners just in time and release them
  // again. Uses nest (a head reads the word embeddings inside its own use). The release call
  // must not throw.
  using ParamsHook = std::function<void(const std::string& prefix, bool acquire)>;
  void set_params_hook(ParamsHook hook) { params_hook_ = std::move(hook); }

  // Weights under their Hugging Face names, in the storage dtype (`sha256`: the file's, computed
  // while writing).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {},
            std::string* sha256 = nullptr) const;
  // Converts from the file's dtype; shapes must match (see load_layout for `strict`).
  LoadReport load(const std::string& path, bool strict = true);

 protected:
  Model(Backend& backend, DType dtype, ParamLayout layout);

  // Copies host fp32 values (layout().total() of them) into params(), converting.
  void upload_params(const std::vector<float>& values);
  // n host fp32 values into a buffer of the backend in the storage dtype, and back.
  void write_floats(void* dst, const float* values, size_t n);
  std::vector<float> read_floats(const void* src, size_t n) const;
  // A pointer `elements` storage-dtype elements into a flat buffer.
  void* at(void* base, size_t elements) const {
    return static_cast<char*>(base) + elements * dtype_size(dtype_);
  }
  // Tells the hook (if any) that the tensors named `prefix`... are final for this backward.
  void grads_ready(const std::string& prefix) const {
    if (grads_ready_hook_) grads_ready_hook_(prefix);
  }
  // The tensors named `prefix`... are read while the returned guard lives (see ParamsHook).
  class ParamsInUse {
   public:
    ParamsInUse(const ParamsHook& hook, std::string prefix);
    ~ParamsInUse();
    ParamsInUse(const ParamsInUse&) = delete;
    ParamsInUse& operator=(const ParamsInUse&) = delete;

   private:
    const ParamsHook& hook_;
    std::string prefix_;
  };
  ParamsInUse use_params(std::string prefix) const { return {params_hook_, std::move(prefix)}; }
  // Dropout probability now: 0 in eval mode.
  float dropout_p(float p) const { return training_ ? p : 0.0f; }
  // Returns an arena of at least `bytes` (grown, contents lost, when smaller).
  char* ensure_arena(size_t bytes);
  void release_arena();

 private:
  Backend& backend_;
  DType dtype_;
  ParamLayout layout_;
  void* params_ = nullptr;
  void* grads_ = nullptr;
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  bool training_ = true;
  uint64_t dropout_seed_ = 0;
  GradsReadyHook grads_ready_hook_;
  ParamsHook params_hook_;
};

// Carves an arena into 64-byte aligned pieces. A first pass with a null base only measures
// (every take() returns null), so the same code sizes the arena and then assigns pointers.
class ArenaCarver {
 public:
  explicit ArenaCarver(char* base) : base_(base) {}
  template <typename T = void>
  T* take(size_t bytes) {
    size_t offset = (used_ + 63) / 64 * 64;
    used_ = offset + bytes;
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// Deterministic initialisation: each tensor draws from its own stream, derived from the model
// seed and the tensor's name, so values do not depend on the layout order.
class InitRng {
 public:
  InitRng(uint64_t seed, const std::string& name);
  float uniform();  // [0, 1)
  float normal();   // standard normal (Box-Muller)

 private:
  uint64_t state_;
};

}  // namespace kolo::trainer
