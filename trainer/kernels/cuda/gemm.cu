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

// db[N] += column sums of dy[T,N]: 32 columns per block, 32 row strides summed in fp32 per
// column, then the 32 partial sums added in order (the same result every run).
template <typename T>
__global__ void bias_backward_kernel(T* db, const T* dy, int rows, int cols) {
  __shared__ float partial[32][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (col < cols) {
    for (int r = threadIdx.y; r < rows; r += 32) acc += to_float(dy[size_t(r) * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float sum = 0.0f;
    for (int r = 0; r < 32; ++r) sum += partial[r][threadIdx.x];
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
    dispatch(dt, "linear_backward", [&](auto tag) {
      using E = decltype(tag);
      bias_backward_kernel<E><<<unsigned((N + 31) / 32), dim3(32, 32), 0, stream()>>>(
          static_cast<E*>(db), static_cast<const E*>(dy), T, N);
    });
    check(cudaGetLastError(), "linear_backward (bias) launch");
  }
}

}  // namespace kolo::trainer
