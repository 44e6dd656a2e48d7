// Moving tensors in and out of the fusion buffer. Packing applies the prescale factor and the
// cast to the wire dtype (fp16/bf16 compression) in the same pass; unpacking applies the
// postscale factor (and 1/n for an average) and casts back, so each tensor is read once and
// written once on each side of the collective.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/base/dtype.h"

namespace kolo::fusion {

// dst (wire dtype) = src (dtype) * scale, element by element.
void pack(void* dst, DType wire, const void* src, DType dtype, size_t count, double scale);
// dst (dtype) = src (wire dtype) * scale.
void unpack(void* dst, DType dtype, const void* src, DType wire, size_t count, double scale);

// A persistent, 64-byte aligned buffer that only grows (its contents are not kept when it
// does). It is kolo::alloc_shared memory where that can be had, so that the shm allreduce on
// it reads and writes the peers' buffers directly.
class FusionBuffer {
 public:
  char* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    bool shared;  // from alloc_shared, else std::aligned_alloc (value-initialised: false)
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  size_t capacity_ = 0;
};

// Byte offsets of fused tensors start on this boundary, so vector code stays aligned.
inline constexpr size_t kFusionAlignment = 64;
inline size_t align_up(size_t bytes) {
  return (bytes + kFusionAlignment - 1) / kFusionAlignment * kFusionAlignment;
}

}  // namespace kolo::fusion
