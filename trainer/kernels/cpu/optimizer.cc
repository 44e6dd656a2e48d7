// The CPU backend's optimizer updates: the gradient converted piece by piece as the host path
// converts it (kolo::convert with the multiplier), then kernels/optimizer_math.h's element
// update. This file is compiled without floating-point contraction (trainer/CMakeLists.txt), so
// the results are the host optimizers' bits.
#include <algorithm>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"

namespace kolo::trainer {
namespace {

// Gradient elements converted to fp32 at a time (64 KiB: stays in cache).
constexpr size_t kPiece = 16384;

void check_grads(DType dt, const char* what) {
  KOLO_CHECK_ARG(dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16, what,
                 ": gradient dtype ", dtype_name(dt),
                 " is not supported (float32, float16, "
                 "bfloat16)");
}

// fn(i, g) for every element i of [0, n), g its fp32 gradient times multiplier and grad_scale.
template <typename Fn>
void for_each_gradient(const void* grads, DType dt, size_t n, float multiplier, float grad_scale,
                       Fn&& fn) {
  const size_t esize = dtype_size(dt);
  cpu::parallel_for(n, kPiece, [&](size_t begin, size_t end) {
    float g[kPiece];
    for (size_t first = begin; first < end; first += kPiece) {
      const size_t count = std::min(kPiece, end - first);
      kolo::convert(g, DType::kFloat32, static_cast<const char*>(grads) + first * esize, dt, count,
                    multiplier);
      for (size_t i = 0; i < count; ++i) fn(first + i, g[i] * grad_scale);
    }
  });
}

}  // namespace

void CpuBackend::adamw_update(float* params, float* exp_avg, float* exp_avg_sq, const void* grads,
                              DType grad_dt, size_t n, float multiplier, float grad_scale,
                              const AdamWScalars& s) {
  check_grads(grad_dt, "adamw_update");
  for_each_gradient(grads, grad_dt, n, multiplier, grad_scale, [&](size_t i, float g) {
    adamw_element(params[i], exp_avg[i], exp_avg_sq[i], g, s);
  });
}

void CpuBackend::sgd_update(float* params, float* momentum_buffer, const void* grads, DType grad_dt,
                            size_t n, float multiplier, float grad_scale, const SgdScalars& s) {
  check_grads(grad_dt, "sgd_update");
  KOLO_CHECK_ARG((momentum_buffer != nullptr) == (s.momentum > 0),
                 "sgd_update: a momentum buffer goes with momentum > 0 (momentum ", s.momentum,
                 ")");
  for_each_gradient(grads, grad_dt, n, multiplier, grad_scale, [&](size_t i, float g) {
    sgd_element(params[i], momentum_buffer != nullptr ? momentum_buffer + i : nullptr, g, s);
  });
}

}  // namespace kolo::trainer
