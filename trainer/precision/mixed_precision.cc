// MixedPrecision: fp32 master weights and the post-backward phases over plain CPU loops; the
// storage <-> fp32 conversions are kolo::convert's (round to nearest even).
#include "trainer/precision/mixed_precision.h"

#include <cmath>
#include <cstdint>

#include "comm/base/convert.h"
#include "comm/base/error.h"

namespace kolo::trainer {

namespace {

void check_storage(DType dtype) {
  KOLO_CHECK_ARG(dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16,
                 "mixed precision storage dtype: ", dtype_name(dtype),
                 " is not supported (float32, float16, bfloat16)");
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

MixedPrecision::MixedPrecision(const ParamLayout& layout, DType storage, void* params)
    : layout_(layout), storage_(storage), size_(layout.total()), params_(params) {
  check_storage(storage);
  KOLO_CHECK_ARG(params != nullptr || size_ == 0, "mixed precision: params buffer is null");
  if (storage == DType::kFloat32) {
    master_ = static_cast<float*>(params);
    master_grads_ = nullptr;
    return;
  }
  owned_master_.assign(size_, 0.0f);
  owned_grads_.assign(size_, 0.0f);
  master_ = owned_master_.data();
  master_grads_ = owned_grads_.data();
  reload_master();
}

bool MixedPrecision::check_overflow(const void* grads) const {
  return has_inf_or_nan(grads, storage_, size_);
}

double MixedPrecision::unscale_grads(void* grads, float multiplier) {
  if (storage_ == DType::kFloat32) {
    master_grads_ = static_cast<float*>(grads);
    if (multiplier != 1.0f) {
      kolo::convert(master_grads_, DType::kFloat32, grads, storage_, size_,
                    multiplier);  // in place
    }
  } else {
    kolo::convert(master_grads_, DType::kFloat32, grads, storage_, size_, multiplier);
  }
  return squared_norm(master_grads_, layout_);
}

double squared_norm(const float* data, const ParamLayout& layout) {
  double sum = 0.0;
  for (const ParamInfo& info : layout.params()) {
    const float* g = data + info.offset;
    for (size_t i = 0; i < info.numel; ++i) sum += static_cast<double>(g[i]) * g[i];
  }
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
