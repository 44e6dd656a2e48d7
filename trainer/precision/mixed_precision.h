// Mixed precision around the optimizer: fp32 master weights for fp16/bf16 parameters, and the
// post-backward phases (overflow check, unscale + norm, clip, step, copy back) as separate
// calls so a distributed trainer can reduce the flag, the gradients and the norm between them.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/base/dtype.h"
#include "trainer/layout/param_layout.h"
#include "trainer/optim/optimizer.h"

namespace kolo::trainer {

// One training step after backward, in order (a distributed trainer inserts the reductions):
//   1. overflow = check_overflow(grads, dtype)  [agreed across ranks: any rank's overflow]
//   2. if (!scaler.update(overflow)) { zero grads; skip the step }
//      (the scaler is updated here, so a skipped step lowers the scale before the next one)
//   3. sumsq = squared_norm(grads, dtype, m, layout) with m = 1 / (scale * accumulation_steps)
//                                              [summed across ranks when gradients are sharded]
//   4. factor = clip_factor(sqrt(sumsq), max_norm)              (optim/clip.h)
//   5. step(optimizer, grads, dtype, m, lr, factor)
//   6. copy_master_to_params()                 [ZeRO: allgather the updated parameters]
// The gradients stay in their own dtype (the storage dtype, or an fp32 accumulator): phases 3
// and 5 convert them chunk by chunk, so no fp32 copy of the whole gradient is ever held.
// Storage fp32: the params buffer IS the master and step 6 does nothing. Storage fp16/bf16:
// the fp32 master weights are owned here.
class MixedPrecision {
 public:
  // params: the model's flat parameter buffer (or a rank's range of it), layout.total()
  // elements of `storage` (float32, float16 or bfloat16), alive as long as this object. For
  // half storage the master copy is taken from params now (see reload_master).
  MixedPrecision(const ParamLayout& layout, DType storage, void* params);

  DType storage() const { return storage_; }
  size_t size() const { return size_; }  // layout.total(): padding included
  bool owns_master() const { return storage_ != DType::kFloat32; }

  float* master() { return master_; }
  const float* master() const { return master_; }

  // Bytes this object allocated (the fp32 master weights; 0 for fp32 storage).
  size_t owned_bytes() const { return owned_master_.size() * sizeof(float); }

  // Phase 1: true when any of size() elements of grads (float32/float16/bfloat16) is inf/NaN.
  bool check_overflow(const void* grads, DType dtype) const;

  // Phase 5: the optimizer's update of the master weights from grads * multiplier (the
  // unscaled, averaged gradient), times grad_scale (the clipping factor).
  void step(Optimizer& optimizer, const void* grads, DType dtype, float multiplier, float lr,
            float grad_scale);

  // Phase 6: params = master rounded to nearest even in the storage dtype.
  void copy_master_to_params();
  // After params were overwritten (checkpoint load, broadcast from rank 0): master = params.
  void reload_master();

 private:
  ParamLayout layout_;
  DType storage_;
  size_t size_;
  void* params_;
  std::vector<float> owned_master_;  // empty for fp32 storage
  float* master_;
};

// Phase 3: the sum of squares (in double, tensor by tensor in layout order) of the registered
// elements of grads * multiplier, with grads a float32/float16/bfloat16 buffer laid out by
// `layout`; padding is left out. The products are the fp32 values phase 5 uses.
double squared_norm(const void* grads, DType dtype, float multiplier, const ParamLayout& layout);

// true when any of n elements of a storage-dtype buffer (float32 / float16 / bfloat16) is inf
// or NaN.
bool has_inf_or_nan(const void* data, DType dtype, size_t n);

}  // namespace kolo::trainer
