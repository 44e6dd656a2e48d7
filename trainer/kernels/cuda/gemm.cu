// Linear layers on cuBLASLt, row-major tensors expressed as column-major transposes (a
// row-major [R, C] matrix is a column-major [C, R] one), so no transposes are ever copied:
//   y[T,N]  = x . w^T + b   ->  y^T = w^T-layout op: (T, N) col-major (N x T) = op_T(w) . x
//   dx[T,K] = dy . w        ->  (K x T) = w (K x N) . dy (N x T)
//   dw[N,K] += dy^T . x     ->  (K x N) += x (K x T) . op_T(dy)
// The bias rides the forward GEMM's epilogue; fp16/bf16 accumulate in fp32 and round once,
// weight gradients with beta = 1 (read, accumulated, rounded back), as on the CPU.
#include "trainer/kernels/checks.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

// db[N] += column sums of dy[T,N], in fp32, in two passes (below).
constexpr int kBiasRows = 128;  // rows per partial sum of the bias gradient

// Block (x, y): columns [32 x, 32 x + 32) over rows [kBiasRows y, kBiasRows (y + 1)); warp w
// sums rows w, w + 8, ... of them; the warps' sums are added in warp order into partial[y].
// Many blocks, so a bias of a few hundred columns still spreads over the whole GPU.
// (Blocks along y stride over the partials where there are more than a grid's 65535.)
template <typename T>
__global__ void bias_partial_kernel(float* partial, const T* dy, int rows, int cols, int parts) {
  __shared__ float sums[8][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  for (int part = blockIdx.y; part < parts; part += gridDim.y) {
    const int first = part * kBiasRows, last = min(rows, first + kBiasRows);
    float acc = 0.0f;
    if (col < cols) {
      for (int r = first + threadIdx.y; r < last; r += 8)
        acc += to_float(dy[size_t(r) * cols + col]);
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      float sum = 0.0f;
      for (int w = 0; w < 8; ++w) sum += sums[w][threadIdx.x];
      partial[size_t(part) * cols + col] = sum;
    }
    __syncthreads();  // sums is read before the next part writes it
  }
}
// db[col] += the partials of col, added in order: the same bits on every run.
template <typename T>
__global__ void bias_sum_kernel(T* db, const float* partial, int parts, int cols) {
  for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < cols; col += gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int p = 0; p < parts; ++p) sum += partial[size_t(p) * cols + col];
    db[col] = from_float<T>(to_float(db[col]) + sum);
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::linear_forward(void* y, const void* x, const void* w, const void* b, int T, int K,
                                 int N, DType dt) {
  check_linear("linear_forward", T, K, N);
  if (T == 0) return;
  matmul(true, false, N, T, K, w, K, x, K, 0.0f, y, N, b, dt);
}

void CudaBackend::linear_backward(void* dx, void* dw, void* db, const void* dy, const void* x,
                                  const void* w, int T, int K, int N, DType dt) {
  check_linear("linear_backward", T, K, N);
  if (T == 0) return;
  if (dx != nullptr) matmul(false, false, K, T, N, w, K, dy, N, 0.0f, dx, K, nullptr, dt);
  if (dw != nullptr) matmul(false, true, K, N, T, x, K, dy, N, 1.0f, dw, K, nullptr, dt);
  if (db != nullptr) {
    const int parts = (T + kBiasRows - 1) / kBiasRows;
    auto* partial = static_cast<float*>(scratch(Slot::kA, size_t(parts) * N * sizeof(float)));
    dispatch(dt, "linear_backward", [&](auto tag) {
      using E = decltype(tag);
      bias_partial_kernel<E>
          <<<dim3(unsigned((N + 31) / 32), std::min(unsigned(parts), 65535u)), dim3(32, 8), 0,
             stream()>>>(partial, static_cast<const E*>(dy), T, N, parts);
      bias_sum_kernel<E><<<blocks_for(size_t(N)), kThreads, 0, stream()>>>(static_cast<E*>(db),
                                                                           partial, parts, N);
    });
    check(cudaGetLastError(), "linear_backward (bias) launch");
  }
}

}  // namespace kolo::trainer
