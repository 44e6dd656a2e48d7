// Pack / unpack with scale and cast, through kolo's one conversion module (comm/base/convert.h),
// and the fusion buffer's storage.
#include "fusion/pack.h"

#include <algorithm>
#include <cstdlib>

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
  std::free(p);
}

char* FusionBuffer::reserve(size_t bytes) {
  if (bytes > capacity_) {
    size_t grown = align_up(std::max(bytes, capacity_ * 2));
    char* p = static_cast<char*>(std::aligned_alloc(kFusionAlignment, grown));
    KOLO_CHECK_ARG(p != nullptr, "cannot allocate a fusion buffer of ", grown, " bytes");
    data_.reset(p);
    capacity_ = grown;
  }
  return data_.get();
}

}  // namespace kolo::fusion
