// Pack / unpack with scale and cast, through kolo's one conversion module (comm/base/convert.h),
// and the fusion buffer's storage (alloc_shared memory where it can be had).
#include "fusion/pack.h"

#include <algorithm>
#include <cstdlib>

#include "comm/alloc_shared.h"
#include "comm/base/convert.h"
#include "comm/base/error.h"

namespace kolo::fusion {

void pack(void* dst, DType wire, const void* src, DType dtype, size_t count, double scale) {
  kolo::convert(dst, wire, src, dtype, count, scale);
}

void unpack(void* dst, DType dtype, const void* src, DType wire, size_t count, double scale) {
  kolo::convert(dst, dtype, src, wire, count, scale);
}

void FusionBuffer::Free::operator()(char* p) const {
  if (shared)
    free_shared(p);
  else
    std::free(p);
}

char* FusionBuffer::reserve(size_t bytes) {
  if (bytes > capacity_) {
    size_t grown = align_up(std::max(bytes, capacity_ * 2));
    data_.reset();  // the old buffer goes first: its contents are not kept
    // alloc_shared memory (page-aligned) lets the shm allreduce reduce straight from the
    // peers' fusion buffers and write the result into them: one pass instead of the staging
    // slots' copies. Where it cannot be had (no memfd), ordinary memory works everywhere.
    char* p = nullptr;
    bool shared = true;
    try {
      p = static_cast<char*>(alloc_shared(grown));
    } catch (const Error&) {
      shared = false;
      p = static_cast<char*>(std::aligned_alloc(kFusionAlignment, grown));
    }
    KOLO_CHECK_ARG(p != nullptr, "cannot allocate a fusion buffer of ", grown, " bytes");
    data_ = std::unique_ptr<char, Free>(p, Free{shared});
    capacity_ = grown;
  }
  return data_.get();
}

}  // namespace kolo::fusion
