// MixedPrecision: fp32 master weights and the post-backward phases over plain CPU loops; the
// storage <-> fp32 conversions are kolo::convert's (round to nearest even).
#include "trainer/precision/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {

namespace {

void check_storage(DType dtype) {
  KOLO_CHECK_ARG(is_storage_dtype(dtype), "mixed precision storage dtype: ", dtype_name(dtype),
                 " is not supported (", kStorageDTypeNames, ")");
}

}  // namespace

bool has_inf_or_nan(const void* data, DType dtype, size_t n) {
  check_storage(dtype);
  if (dtype == DType::kFloat32) {
    const float* d = static_cast<const float*>(data);
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(d[i])) return true;
    return false;
  }
  // An all-ones exponent field is inf or NaN; test the bits without converting.
  const uint16_t exponent = dtype == DType::kFloat16 ? 0x7c00 : 0x7f80;
  const uint16_t* d = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < n; ++i)
    if ((d[i] & exponent) == exponent) return true;
  return false;
}

namespace {

// Gradients are converted to fp32 in pieces of this many elements (64 KiB: stays in cache).
constexpr size_t kChunk = 16384;

// Calls fn(info, first, count, fp32 values of grads * multiplier) over every registered
// element of `layout`, in layout order, piece by piece.
template <typename Fn>
void for_each_chunk(const void* grads, DType dtype, float multiplier, const ParamLayout& layout,
                    Fn&& fn) {
  check_storage(dtype);
  float scratch[kChunk];
  const size_t esize = dtype_size(dtype);
  for (const ParamInfo& info : layout.params()) {
    for (size_t first = 0; first < info.numel; first += kChunk) {
      const size_t count = std::min(kChunk, info.numel - first);
      const char* src = static_cast<const char*>(grads) + (info.offset + first) * esize;
      kolo::convert(scratch, DType::kFloat32, src, dtype, count, multiplier);
      fn(info, first, count, static_cast<const float*>(scratch));
    }
  }
}

}  // namespace

MixedPrecision::MixedPrecision(const ParamLayout& layout, DType storage, void* params)
    : layout_(layout), storage_(storage), size_(layout.total()), params_(params) {
  check_storage(storage);
  KOLO_CHECK_ARG(params != nullptr || size_ == 0, "mixed precision: params buffer is null");
  if (storage == DType::kFloat32) {
    master_ = static_cast<float*>(params);
    return;
  }
  owned_master_.assign(size_, 0.0f);
  master_ = owned_master_.data();
  reload_master();
}

bool MixedPrecision::check_overflow(const void* grads, DType dtype) const {
  return has_inf_or_nan(grads, dtype, size_);
}

void MixedPrecision::step(Optimizer& optimizer, const void* grads, DType dtype, float multiplier,
                          float lr, float grad_scale) {
  optimizer.begin_step(lr);
  for_each_chunk(grads, dtype, multiplier, layout_,
                 [&](const ParamInfo& info, size_t first, size_t count, const float* g) {
                   optimizer.update(info, first, count, master_ + info.offset + first, g,
                                    grad_scale);
                 });
}

double squared_norm(const void* grads, DType dtype, float multiplier, const ParamLayout& layout) {
  double sum = 0.0;
  for_each_chunk(grads, dtype, multiplier, layout,
                 [&sum](const ParamInfo&, size_t, size_t count, const float* g) {
                   for (size_t i = 0; i < count; ++i) sum += static_cast<double>(g[i]) * g[i];
                 });
  return sum;
}

void MixedPrecision::copy_master_to_params() {
  if (storage_ == DType::kFloat32) return;
  kolo::convert(params_, storage_, master_, DType::kFloat32, size_);
}

void MixedPrecision::reload_master() {
  if (storage_ == DType::kFloat32) return;
  kolo::convert(master_, DType::kFloat32, params_, storage_, size_);
}

}  // namespace kolo::trainer
