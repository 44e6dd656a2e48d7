// LayerNorm over the last dimension, one warp per row: the mean, then the centred variance
// (which cannot go negative), then the output, each a pass over the row (16 bytes a load where
// the row allows). The backward writes dx per row (one warp each, after the sums, so dx may
// alias dout) and sums dgamma and dbeta in fp32 per block of kRows rows, the blocks then added
// in a fixed order to the gradients: the same result on every run.
#include "trainer/kernels/checks.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

constexpr int kRows = 16;          // rows per partial of dgamma / dbeta
constexpr int kWarpsPerBlock = 8;  // rows per block of the per-row kernels

// The per-row kernels read and write V consecutive elements at a time (V = Pack16<T>::kSize,
// 16 bytes, where C is a multiple of it and the pointers aligned; else 1).
template <int V, typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x,
                                         const T* gamma, const T* beta, int rows, int C,
                                         float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* xr = x + size_t(row) * C;
  float v[V];
  float sum = 0.0f;
  for (int j = lane * V; j < C; j += 32 * V) {
    load_floats<V>(v, xr + j);
    for (int k = 0; k < V; ++k) sum += v[k];
  }
  const float mu = warp_sum(sum) / C;
  float var = 0.0f;
  for (int j = lane * V; j < C; j += 32 * V) {
    load_floats<V>(v, xr + j);
    for (int k = 0; k < V; ++k) var = fmaf(v[k] - mu, v[k] - mu, var);
  }
  const float rs = 1.0f / sqrtf(warp_sum(var) / C + eps);
  if (lane == 0) {
    if (mean != nullptr) mean[row] = mu;
    if (rstd != nullptr) rstd[row] = rs;
  }
  T* o = out + size_t(row) * C;
  float g[V], b[V];
  for (int j = lane * V; j < C; j += 32 * V) {
    load_floats<V>(v, xr + j);
    load_floats<V>(g, gamma + j);
    load_floats<V>(b, beta + j);
    for (int k = 0; k < V; ++k) v[k] = fmaf((v[k] - mu) * rs, g[k], b[k]);
    store_floats<V>(o + j, v);
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dout gamma, xhat = (x - mean) rstd.
template <int V, typename T>
__global__ void layernorm_dx_kernel(T* dx, const T* dout, const T* x, const float* mean,
                                    const float* rstd, const T* gamma, int rows, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t base = size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float d[V], xv[V], g[V];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = lane * V; j < C; j += 32 * V) {
    load_floats<V>(d, dout + base + j);
    load_floats<V>(xv, x + base + j);
    load_floats<V>(g, gamma + j);
    for (int k = 0; k < V; ++k) {
      sum_g = fmaf(d[k], g[k], sum_g);
      sum_gx = fmaf(d[k] * g[k], (xv[k] - m) * r, sum_gx);
    }
  }
  const float mean_g = warp_sum(sum_g) / C, mean_gx = warp_sum(sum_gx) / C;
  for (int j = lane * V; j < C; j += 32 * V) {
    load_floats<V>(d, dout + base + j);
    load_floats<V>(xv, x + base + j);
    load_floats<V>(g, gamma + j);
    for (int k = 0; k < V; ++k) d[k] = (d[k] * g[k] - mean_g - (xv[k] - m) * r * mean_gx) * r;
    store_floats<V>(dx + base + j, d);
  }
}

// partial[b][0, C): sum over the rows of block b of dout xhat; partial[b][C, 2C): of dout.
// (Blocks along y stride over the row blocks where there are more than a grid's 65535.)
template <typename T>
__global__ void layernorm_partial_kernel(float* partial, const T* dout, const T* x,
                                         const float* mean, const float* rstd, int rows, int C,
                                         int blocks) {
  for (int block = blockIdx.y; block < blocks; block += gridDim.y) {
    const int first = block * kRows, last = min(rows, first + kRows);
    float* pg = partial + size_t(block) * 2 * C;
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
}

// Block x: columns [32 x, 32 x + 32); warp w adds the partials w, w + 8, ...; the warps' sums
// are added in warp order.
template <typename T>
__global__ void layernorm_sum_kernel(T* dgamma, T* dbeta, const float* partial, int blocks, int C) {
  __shared__ float sums[2][8][33];
  const int j = blockIdx.x * 32 + threadIdx.x;
  float sg = 0.0f, sb = 0.0f;
  if (j < C) {
    for (int b = threadIdx.y; b < blocks; b += 8) {
      sg += partial[size_t(b) * 2 * C + j];
      sb += partial[size_t(b) * 2 * C + C + j];
    }
  }
  sums[0][threadIdx.y][threadIdx.x] = sg;
  sums[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y != 0 || j >= C) return;
  sg = sb = 0.0f;
  for (int w = 0; w < 8; ++w) sg += sums[0][w][threadIdx.x], sb += sums[1][w][threadIdx.x];
  if (dgamma != nullptr) dgamma[j] = from_float<T>(to_float(dgamma[j]) + sg);
  if (dbeta != nullptr) dbeta[j] = from_float<T>(to_float(dbeta[j]) + sb);
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
    with_width<E>(C, {out, x, gamma, beta}, [&](auto width) {
      layernorm_forward_kernel<decltype(width)::value, E>
          <<<unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
             stream()>>>(static_cast<E*>(out), mean, rstd, static_cast<const E*>(x),
                         static_cast<const E*>(gamma), static_cast<const E*>(beta), T, C, eps);
    });
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
    layernorm_partial_kernel<E>
        <<<dim3(col_blocks, std::min(unsigned(blocks), 65535u)), kThreads, 0, stream()>>>(
            partial, d, xs, mean, rstd, T, C, blocks);
    layernorm_sum_kernel<E><<<unsigned((C + 31) / 32), dim3(32, 8), 0, stream()>>>(
        static_cast<E*>(dgamma), static_cast<E*>(dbeta), partial, blocks, C);
    // Last: dx may be dout's buffer, which the sums above read.
    with_width<E>(C, {dx, dout, x, gamma}, [&](auto width) {
      layernorm_dx_kernel<decltype(width)::value, E>
          <<<unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
             stream()>>>(static_cast<E*>(dx), d, xs, mean, rstd, static_cast<const E*>(gamma), T,
                         C);
    });
  });
  check(cudaGetLastError(), "layernorm_backward launch");
}

}  // namespace kolo::trainer
