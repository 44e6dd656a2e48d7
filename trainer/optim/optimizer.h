// The optimizer interface of the trainer: an update of fp32 master weights from fp32 gradients
// over a model's flat buffers, with weight decay only on the tensors whose ParamInfo.decay is
// set, and state kept as plain fp32 buffers so checkpoints can save them by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/kernels/backend.h"
#include "trainer/layout/param_layout.h"

namespace kolo::trainer {

// One named state tensor of an optimizer, as long as the flat parameter buffer (padding
// included, where it stays zero). Checkpoints write and restore `*data` as is.
struct OptimizerStateBuffer {
  std::string name;  // "exp_avg", "exp_avg_sq", "momentum_buffer" (PyTorch's names)
  std::vector<float>* data;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;

  // One update over the whole layout. params and grads are fp32 buffers of layout.total()
  // elements; the gradient used is grads[i] * grad_scale (grad_scale carries the clipping
  // factor, so clipping costs no extra pass). Only elements of registered tensors are touched:
  // padding stays as it is. lr is this step's learning rate (from the schedule). Increments
  // step_count(). The same as begin_step(lr) and then update() over every tensor.
  void step(float* params, const float* grads, float lr, float grad_scale = 1.0f);

  // The same update in pieces, for callers that convert the gradients chunk by chunk (mixed
  // precision keeps no fp32 copy of the whole gradient): begin_step once per step, then
  // update() over consecutive pieces [first, first + count) of each tensor of layout(); params
  // and grads point at the piece's first element. The result is the same to the bit.
  void begin_step(float lr);
  virtual void update(const ParamInfo& info, size_t first, size_t count, float* params,
                      const float* grads, float grad_scale) = 0;

  // The same update of one whole tensor in a backend's memory (a model on a device,
  // train/train_step.h), after begin_step(): params (fp32 master weights) and grads (grad_dt)
  // point at the tensor's first element, state[k] at that element of a copy of state()[k] in the
  // backend's memory. The gradient used is (grads * multiplier) * grad_scale, the host path's
  // conversion and scale. Through Backend::adamw_update / sgd_update: the same arithmetic.
  // Element by element with scalars that depend on info.decay alone, so `info` may also span
  // several tensors that follow each other with no padding and share `decay` (TrainStep passes
  // such runs, one launch each).
  virtual void update_on(Backend& backend, const ParamInfo& info, float* params, const void* grads,
                         DType grad_dt, float multiplier, float grad_scale,
                         float* const* state) const = 0;

  // Named state buffers, for checkpoints.
  virtual std::vector<OptimizerStateBuffer> state() = 0;

  // Updates applied so far (skipped overflow steps do not count); restored from checkpoints.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

  const ParamLayout& layout() const { return layout_; }

 protected:
  explicit Optimizer(const ParamLayout& layout) : layout_(layout) {}

  // Per-step scalars from lr and step_count() (already incremented).
  virtual void prepare(float lr) = 0;

  ParamLayout layout_;
  int64_t step_count_ = 0;
};

}  // namespace kolo::trainer
