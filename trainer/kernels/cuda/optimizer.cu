// The optimizers' updates on the device: one grid-stride pass over a tensor reads its gradient
// in the storage dtype (or fp32), scales it as the host path does and applies
// kernels/optimizer_math.h's element update to the fp32 master weights and states in place.
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

template <typename T>
__global__ void adamw_kernel(float* p, float* m, float* v, const T* g, size_t n, float multiplier,
                             float grad_scale, AdamWScalars s) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    adamw_element(p[i], m[i], v[i], (to_float(g[i]) * multiplier) * grad_scale, s);
}

template <typename T>
__global__ void sgd_kernel(float* p, float* buf, const T* g, size_t n, float multiplier,
                           float grad_scale, SgdScalars s) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    sgd_element(p[i], buf != nullptr ? buf + i : nullptr,
                (to_float(g[i]) * multiplier) * grad_scale, s);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::adamw_update(float* params, float* exp_avg, float* exp_avg_sq, const void* grads,
                               DType grad_dt, size_t n, float multiplier, float grad_scale,
                               const AdamWScalars& s) {
  dispatch(grad_dt, "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    adamw_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        params, exp_avg, exp_avg_sq, static_cast<const T*>(grads), n, multiplier, grad_scale, s);
  });
  check(cudaGetLastError(), "adamw_update launch");
}

void CudaBackend::sgd_update(float* params, float* momentum_buffer, const void* grads,
                             DType grad_dt, size_t n, float multiplier, float grad_scale,
                             const SgdScalars& s) {
  KOLO_CHECK_ARG((momentum_buffer != nullptr) == (s.momentum > 0),
                 "sgd_update: a momentum buffer goes with momentum > 0 (momentum ", s.momentum,
                 ")");
  dispatch(grad_dt, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    sgd_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        params, momentum_buffer, static_cast<const T*>(grads), n, multiplier, grad_scale, s);
  });
  check(cudaGetLastError(), "sgd_update launch");
}

}  // namespace kolo::trainer
