// Softmax cross-entropy fused with its log-softmax, and the argmax of logits rows, one block
// per row: a max pass and an exp-sum pass, loss = log(sum e^{x - max}) + max - x[target]. The
// backward recomputes the two statistics and writes (softmax - onehot) dloss / counted, reading
// each element before writing it, so dlogits may alias logits. Targets are host memory: they
// are checked there and the counted rows known without reading the device. The mean loss sums
// the rows' losses in order in double on the host, as the CPU backend does.
#include <climits>
#include <vector>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

struct RowStats {
  float max, sum;
};

// Every thread of the block gets the row's statistics; NaN entries never win the max.
template <typename T>
__device__ RowStats row_stats(const T* x, int V, float* shared) {
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, to_float(x[j]));
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += __expf(to_float(x[j]) - mx);
  return {mx, block_sum(sum, shared)};
}

template <typename T>
__global__ void cross_entropy_forward_kernel(float* losses, const T* logits, const int32_t* targets,
                                             int N, int V, int ignore_index) {
  __shared__ float shared[32];
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + size_t(n) * V;
    const int32_t t = targets[n];
    if (t == ignore_index) {
      if (threadIdx.x == 0) losses[n] = 0.0f;
      continue;
    }
    const RowStats st = row_stats(x, V, shared);
    if (threadIdx.x == 0) losses[n] = logf(st.sum) + st.max - to_float(x[t]);
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const int32_t* targets,
                                              int N, int V, int ignore_index, float row_scale) {
  __shared__ float shared[32];
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + size_t(n) * V;
    T* d = dlogits + size_t(n) * V;
    const int32_t t = targets[n];
    if (t == ignore_index) {
      for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = from_float<T>(0.0f);
      continue;
    }
    const RowStats st = row_stats(x, V, shared);
    const float k = row_scale / st.sum;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      const float g = __expf(to_float(x[j]) - st.max) * k;
      d[j] = from_float<T>(j == t ? g - row_scale : g);
    }
    __syncthreads();  // the next row's statistics reuse shared
  }
}

// out[n] = the first index of row n's largest value; NaN never wins; a row without a number
// gives 0.
template <typename T>
__global__ void argmax_kernel(int32_t* out, const T* logits, int N, int V) {
  __shared__ float shared[32];
  __shared__ int first[32];
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    const T* x = logits + size_t(n) * V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, to_float(x[j]));
    mx = block_max(mx, shared);
    int best = INT_MAX;
    for (int j = threadIdx.x; j < V && best == INT_MAX; j += blockDim.x)
      if (to_float(x[j]) == mx) best = j;
    for (int o = 16; o > 0; o >>= 1) best = min(best, __shfl_xor_sync(0xffffffffu, best, o));
    if ((threadIdx.x & 31) == 0) first[threadIdx.x >> 5] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < int(blockDim.x >> 5); ++w) best = min(best, first[w]);
      out[n] = best == INT_MAX ? 0 : best;
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

float CudaBackend::cross_entropy_forward(float* losses, int32_t* argmax, const void* logits,
                                         const int32_t* targets, int N, int V, int ignore_index,
                                         DType dt) {
  check_cross_entropy("cross_entropy_forward", N, V);
  const int counted = counted_rows("cross_entropy_forward", targets, N, V, ignore_index);
  if (N == 0) return 0.0f;
  if (argmax != nullptr) argmax_rows(argmax, logits, N, V, dt);
  float* rows =
      losses != nullptr ? losses : static_cast<float*>(scratch(Slot::kH, N * sizeof(float)));
  const int32_t* targets_dev = upload(Slot::kInts0, targets, N);
  dispatch(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_forward_kernel<T><<<blocks_for(size_t(N), 1), kThreads, 0, stream()>>>(
        rows, static_cast<const T*>(logits), targets_dev, N, V, ignore_index);
  });
  check(cudaGetLastError(), "cross_entropy_forward launch");
  std::vector<float> host(N);
  check(cudaMemcpyAsync(host.data(), rows, N * sizeof(float), cudaMemcpyDeviceToHost, stream()),
        "cudaMemcpyAsync (cross_entropy_forward)");
  sync("cross_entropy_forward");
  if (counted == 0) return 0.0f;
  double total = 0;
  for (int n = 0; n < N; ++n)
    if (targets[n] != ignore_index) total += host[n];
  return static_cast<float>(total / counted);
}

void CudaBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                         int N, int V, int ignore_index, float dloss, DType dt) {
  check_cross_entropy("cross_entropy_backward", N, V);
  const int counted = counted_rows("cross_entropy_backward", targets, N, V, ignore_index);
  if (N == 0) return;
  const float row_scale = counted == 0 ? 0.0f : dloss / counted;
  const int32_t* targets_dev = upload(Slot::kInts0, targets, N);
  dispatch(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward_kernel<T><<<blocks_for(size_t(N), 1), kThreads, 0, stream()>>>(
        static_cast<T*>(dlogits), static_cast<const T*>(logits), targets_dev, N, V, ignore_index,
        row_scale);
  });
  check(cudaGetLastError(), "cross_entropy_backward launch");
}

void CudaBackend::argmax_rows(int32_t* out, const void* logits, int N, int V, DType dt) {
  check_cross_entropy("argmax_rows", N, V);
  KOLO_CHECK_ARG(out != nullptr || N == 0, "argmax_rows: out is null");
  if (N == 0) return;
  auto* dev = static_cast<int32_t*>(scratch(Slot::kInts1, N * sizeof(int32_t)));
  dispatch(dt, "argmax_rows", [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T><<<blocks_for(size_t(N), 1), kThreads, 0, stream()>>>(
        dev, static_cast<const T*>(logits), N, V);
  });
  check(cudaGetLastError(), "argmax_rows launch");
  copy_to_host(out, dev, N * sizeof(int32_t));
}

}  // namespace kolo::trainer
