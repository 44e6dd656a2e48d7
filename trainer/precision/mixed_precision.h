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
//   1. overflow = check_overflow(grads)        [allreduce overflow with max/or across ranks]
//   2. if (!scaler.update(overflow)) { zero grads; skip the step }
//      (the scaler is updated here, so a skipped step lowers the scale before the next one)
//   3. sumsq = unscale_grads(grads, 1 / (scale * accumulation_steps))
//                                              [allreduce sumsq when gradients are sharded]
//   4. factor = clip_factor(sqrt(sumsq), max_norm)              (optim/clip.h)
//   5. optimizer.step(master(), master_grads(), lr, factor)
//   6. copy_master_to_params()                 [ZeRO: allgather the updated parameters]
// Storage fp32: the params buffer IS the master, unscale works in place on grads, and step 6
// does nothing. Storage fp16/bf16: the master and the fp32 gradients are owned here.
class MixedPrecision {
 public:
  // params: the model's flat parameter buffer, layout.total() elements of `storage`
  // (float32, float16 or bfloat16), alive as long as this object. For half storage the
  // master copy is taken from params now (see reload_master).
  MixedPrecision(const ParamLayout& layout, DType storage, void* params);

  DType storage() const { return storage_; }
  size_t size() const { return size_; }  // layout.total(): padding included
  bool owns_master() const { return storage_ != DType::kFloat32; }

  float* master() { return master_; }
  const float* master() const { return master_; }
  // fp32 gradients of the last unscale_grads (fp32 storage: the grads buffer itself).
  float* master_grads() { return master_grads_; }

  // Bytes this object allocated (fp32 master weights and gradients; 0 for fp32 storage).
  size_t owned_bytes() const {
    return (owned_master_.size() + owned_grads_.size()) * sizeof(float);
  }

  // Phase 1: true when any element of grads (storage dtype) is inf or NaN.
  bool check_overflow(const void* grads) const;

  // Phase 2: fp32 gradients = grads * multiplier (1 / loss scale, also divided by the number
  // of accumulation steps to average). Half storage: written to the owned fp32 buffer, grads
  // unchanged. fp32 storage: grads is scaled in place (not touched when multiplier is 1).
  // Returns the squared L2 norm of the result over the registered tensors only (padding is
  // left out), summed in double.
  double unscale_grads(void* grads, float multiplier);

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
  std::vector<float> owned_grads_;   // empty for fp32 storage
  float* master_;
  float* master_grads_;
};

// Sum of squares (in double, tensor by tensor in layout order) of the registered elements of an
// fp32 buffer laid out by `layout`; padding is left out. unscale_grads returns this.
double squared_norm(const float* data, const ParamLayout& layout);

// true when any of n elements of a storage-dtype buffer (float32 / float16 / bfloat16) is inf
// or NaN.
bool has_inf_or_nan(const void* data, DType dtype, size_t n);

}  // namespace kolo::trainer
