// LayerNorm over the last dimension, one warp per row: the mean, then the centred variance
// (which cannot go negative), then the output, each a pass over the row. The backward writes
// dx per row (one warp each, after the sums, so dx may alias dout) and sums dgamma and dbeta in
// fp32 per block of kRows rows, the blocks then added in order to the gradients: the same result on
// every run.
#include "trainer/kernels/checks.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

constexpr int kRows = 64;          // rows per partial of dgamma / dbeta
constexpr int kWarpsPerBlock = 8;  // rows per block of the per-row kernels

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x,
                                         const T* gamma, const T* beta, int rows, int C,
                                         float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* xr = x + size_t(row) * C;
  float sum = 0.0f;
  for (int j = lane; j < C; j += 32) sum += to_float(xr[j]);
  const float mu = warp_sum(sum) / C;
  float var = 0.0f;
  for (int j = lane; j < C; j += 32) {
    const float d = to_float(xr[j]) - mu;
    var = fmaf(d, d, var);
  }
  const float rs = 1.0f / sqrtf(warp_sum(var) / C + eps);
  if (lane == 0) {
    if (mean != nullptr) mean[row] = mu;
    if (rstd != nullptr) rstd[row] = rs;
  }
  T* o = out + size_t(row) * C;
  for (int j = lane; j < C; j += 32)
    o[j] = from_float<T>(fmaf((to_float(xr[j]) - mu) * rs, to_float(gamma[j]), to_float(beta[j])));
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dout gamma, xhat = (x - mean) rstd.
template <typename T>
__global__ void layernorm_dx_kernel(T* dx, const T* dout, const T* x, const float* mean,
                                    const float* rstd, const T* gamma, int rows, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = lane; j < C; j += 32) {
    const float g = to_float(dout[base + j]) * to_float(gamma[j]);
    sum_g += g;
    sum_gx = fmaf(g, (to_float(x[base + j]) - m) * r, sum_gx);
  }
  const float mean_g = warp_sum(sum_g) / C, mean_gx = warp_sum(sum_gx) / C;
  for (int j = lane; j < C; j += 32) {
    const float xhat = (to_float(x[base + j]) - m) * r;
    const float g = to_float(dout[base + j]) * to_float(gamma[j]);
    dx[base + j] = from_float<T>((g - mean_g - xhat * mean_gx) * r);
  }
}

// partial[b][0, C): sum over the rows of block b of dout xhat; partial[b][C, 2C): of dout.
template <typename T>
__global__ void layernorm_partial_kernel(float* partial, const T* dout, const T* x,
                                         const float* mean, const float* rstd, int rows, int C) {
  const int first = blockIdx.y * kRows, last = min(rows, first + kRows);
  float* pg = partial + size_t(blockIdx.y) * 2 * C;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < C; j += gridDim.x * blockDim.x) {
    float dgamma = 0.0f, dbeta = 0.0f;
    for (int t = first; t < last; ++t) {
      const float d = to_float(dout[size_t(t) * C + j]);
      dgamma = fmaf(d, (to_float(x[size_t(t) * C + j]) - mean[t]) * rstd[t], dgamma);
      dbeta += d;
    }
    pg[j] = dgamma;
    pg[C + j] = dbeta;
  }
}

template <typename T>
__global__ void layernorm_sum_kernel(T* dgamma, T* dbeta, const float* partial, int blocks, int C) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < C; j += gridDim.x * blockDim.x) {
    float sg = 0.0f, sb = 0.0f;
    for (int b = 0; b < blocks; ++b) {
      sg += partial[size_t(b) * 2 * C + j];
      sb += partial[size_t(b) * 2 * C + C + j];
    }
    if (dgamma != nullptr) dgamma[j] = from_float<T>(to_float(dgamma[j]) + sg);
    if (dbeta != nullptr) dbeta[j] = from_float<T>(to_float(dbeta[j]) + sb);
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::layernorm_forward(void* out, float* mean, float* rstd, const void* x,
                                    const void* gamma, const void* beta, int T, int C, float eps,
                                    DType dt) {
  check_layernorm("layernorm_forward", T, C);
  KOLO_CHECK_ARG(eps >= 0.0f, "layernorm_forward: eps must be >= 0, got ", eps);
  if (T == 0) return;
  dispatch(dt, "layernorm_forward", [&](auto tag) {
    using E = decltype(tag);
    layernorm_forward_kernel<E>
        <<<unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream()>>>(
            static_cast<E*>(out), mean, rstd, static_cast<const E*>(x),
            static_cast<const E*>(gamma), static_cast<const E*>(beta), T, C, eps);
  });
  check(cudaGetLastError(), "layernorm_forward launch");
}

void CudaBackend::layernorm_backward(void* dx, void* dgamma, void* dbeta, const void* dout,
                                     const void* x, const float* mean, const float* rstd,
                                     const void* gamma, int T, int C, DType dt) {
  check_layernorm("layernorm_backward", T, C);
  if (T == 0) return;
  const int blocks = (T + kRows - 1) / kRows;
  auto* partial = static_cast<float*>(scratch(Slot::kA, size_t(blocks) * 2 * C * sizeof(float)));
  dispatch(dt, "layernorm_backward", [&](auto tag) {
    using E = decltype(tag);
    const auto* d = static_cast<const E*>(dout);
    const auto* xs = static_cast<const E*>(x);
    const unsigned col_blocks = unsigned((C + kThreads - 1) / kThreads);
    layernorm_partial_kernel<E><<<dim3(col_blocks, unsigned(blocks)), kThreads, 0, stream()>>>(
        partial, d, xs, mean, rstd, T, C);
    layernorm_sum_kernel<E><<<col_blocks, kThreads, 0, stream()>>>(
        static_cast<E*>(dgamma), static_cast<E*>(dbeta), partial, blocks, C);
    // Last: dx may be dout's buffer, which the sums above read.
    layernorm_dx_kernel<E>
        <<<unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream()>>>(
            static_cast<E*>(dx), d, xs, mean, rstd, static_cast<const E*>(gamma), T, C);
  });
  check(cudaGetLastError(), "layernorm_backward launch");
}

}  // namespace kolo::trainer
