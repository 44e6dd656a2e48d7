// Internal to the CUDA kernels: the backend class, error checks, the storage-dtype dispatch,
// launch sizes and the warp and block reductions the kernels share.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <type_traits>

#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "fusion/cuda/codec.cuh"
#include "trainer/kernels/backend.h"

namespace kolo::trainer::cuda {

using fusion::cuda::from_float;
using fusion::cuda::to_float;

// Throw kolo::Error naming the operation and CUDA's or cuBLAS's message.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);

// fn(T{}) with T the element type of a storage dtype (float, __half, __nv_bfloat16).
template <typename Fn>
decltype(auto) dispatch(DType dt, const char* kernel, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat16: return fn(__half{});
    case DType::kBFloat16: return fn(__nv_bfloat16{});
    default: break;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, kernel, ": unsupported storage dtype ", dtype_name(dt),
             " (accepted: ", kStorageDTypeNames, ")");
}

template <typename T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  return CUDA_R_16BF;
}

inline constexpr unsigned kThreads = 256;
// Blocks for n items at `per_block` items a block, capped (grid-stride loops cover the rest).
inline unsigned blocks_for(size_t n, size_t per_block = kThreads) {
  return static_cast<unsigned>(std::clamp<size_t>((n + per_block - 1) / per_block, 1, 65535));
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The larger of the lanes' values; NaN lanes lose (fmaxf returns the other operand).
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `shared` holds 32 floats; calls may follow each other with the same array.
template <typename Op>
__device__ inline float block_reduce(float v, float* shared, float identity, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // the previous call's readers are done with shared
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? shared[lane] : identity;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ inline float block_sum(float v, float* shared) {
  return block_reduce(v, shared, 0.0f, SumOp{});
}
__device__ inline float block_max(float v, float* shared) {
  return block_reduce(v, shared, -INFINITY, MaxOp{});
}

// 16 bytes of T, the widest load a thread issues.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
// V consecutive elements from p into f, as fp32: one 16-byte load when V is a whole pack (p
// then 16-byte aligned), else V loads.
template <int V, typename T>
__device__ inline void load_floats(float* f, const T* p) {
  if constexpr (V == Pack16<T>::kSize) {
    const Pack16<T> x = *reinterpret_cast<const Pack16<T>*>(p);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = to_float(x.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = to_float(p[k]);
  }
}
template <int V, typename T>
__device__ inline void store_floats(T* p, const float* f) {
  if constexpr (V == Pack16<T>::kSize) {
    Pack16<T> y;
#pragma unroll
    for (int k = 0; k < V; ++k) y.v[k] = from_float<T>(f[k]);
    *reinterpret_cast<Pack16<T>*>(p) = y;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = from_float<T>(f[k]);
  }
}

// Runs launch(std::integral_constant<int, V>): V = Pack16<T>::kSize where C is a multiple of it
// and every pointer is 16-byte aligned (rows of C elements then are too), else 1.
template <typename T, typename Launch>
void with_width(int C, std::initializer_list<const void*> pointers, Launch launch) {
  bool packed = C % Pack16<T>::kSize == 0;
  for (const void* p : pointers) packed = packed && aligned16(p);
  if (packed) {
    launch(std::integral_constant<int, Pack16<T>::kSize>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// Device scratch buffers, one per slot, grown on demand and never shrunk (stream-ordered, so a
// kernel may reuse a slot as soon as the previous user is queued before it).
enum class Slot : int { kA, kB, kC, kD, kE, kF, kG, kH, kInts0, kInts1, kInts2, kCount };

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  Device device() const override { return Device::kCuda; }
  const char* name() const override { return "cuda"; }
  int device_id() const override { return device_; }
  void* device_stream() const override { return stream_; }

  void* alloc(size_t bytes) override;
  void free(void* ptr) override;
  void zero(void* ptr, size_t bytes) override;
  void discard(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void convert(void* dst, DType dst_dt, const void* src, DType src_dt, size_t n,
               float scale) override;

  void linear_forward(void* y, const void* x, const void* w, const void* b, int T, int K, int N,
                      DType dt) override;
  void linear_backward(void* dx, void* dw, void* db, const void* dy, const void* x, const void* w,
                       int T, int K, int N, DType dt) override;

  void embed_forward(void* out, const int32_t* ids, const int32_t* type_ids, const void* word,
                     const void* pos, const void* type, int B, int S, int C, DType dt) override;
  void embed_backward(void* dword, void* dpos, void* dtype_emb, const void* dout,
                      const int32_t* ids, const int32_t* type_ids, int B, int S, int C,
                      DType dt) override;

  void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const void* gamma,
                         const void* beta, int T, int C, float eps, DType dt) override;
  void layernorm_backward(void* dx, void* dgamma, void* dbeta, const void* dout, const void* x,
                          const float* mean, const float* rstd, const void* gamma, int T, int C,
                          DType dt) override;

  void gelu_forward(void* out, const void* x, size_t n, DType dt) override;
  void gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) override;
  void relu_forward(void* out, const void* x, size_t n, DType dt) override;
  void relu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) override;
  void tanh_forward(void* out, const void* x, size_t n, DType dt) override;
  void tanh_backward(void* dx, const void* dout, const void* y, size_t n, DType dt) override;
  void add(void* out, const void* a, const void* b, size_t n, DType dt) override;
  void dropout_forward(void* out, const void* in, size_t n, float p, uint64_t seed, uint64_t offset,
                       DType dt) override;
  void dropout_backward(void* dx, const void* dout, size_t n, float p, uint64_t seed,
                        uint64_t offset, DType dt) override;

  void attention_forward(void* out, void* probs, const void* qkv, const int32_t* mask, int B, int S,
                         int C, int NH, float dropout_p, uint64_t seed, uint64_t offset,
                         DType dt) override;
  void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* probs,
                          const int32_t* mask, int B, int S, int C, int NH, float dropout_p,
                          uint64_t seed, uint64_t offset, DType dt) override;

  float cross_entropy_forward(float* losses, int32_t* argmax, const void* logits,
                              const int32_t* targets, int N, int V, int ignore_index,
                              DType dt) override;
  void cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets, int N,
                              int V, int ignore_index, float dloss, DType dt) override;
  void argmax_rows(int32_t* out, const void* logits, int N, int V, DType dt) override;

  double sum_squares(const void* x, size_t n, DType dt, bool* nonfinite) override;

  void adamw_update(float* params, float* exp_avg, float* exp_avg_sq, const void* grads,
                    DType grad_dt, size_t n, float multiplier, float grad_scale,
                    const AdamWScalars& s) override;
  void sgd_update(float* params, float* momentum_buffer, const void* grads, DType grad_dt, size_t n,
                  float multiplier, float grad_scale, const SgdScalars& s) override;

  // --- for the kernel files ---------------------------------------------------------------
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  // A device buffer of at least `bytes` for `slot`, valid until the slot is asked for again.
  void* scratch(Slot slot, size_t bytes);
  // n host ints copied into the device scratch of `slot` (queued on the stream).
  const int32_t* upload(Slot slot, const int32_t* host, size_t n);
  // Blocks until the stream's work is done; a failure names `what`.
  void sync(const char* what);
  // Column-major y = alpha op(A) op(B) + beta y with cuBLASLt (A: m x k after op, B: k x n;
  // every matrix in the storage dtype, fp32 accumulation); bias (length m, storage dtype, may
  // be null) is added to every column of the result.
  void matmul(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda,
              const void* B, int ldb, float beta, void* C, int ldc, const void* bias, DType dt);

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* scratch_[static_cast<int>(Slot::kCount)] = {};
  size_t scratch_bytes_[static_cast<int>(Slot::kCount)] = {};
  // cuBLASLt's pick for each matmul shape (transposes, sizes, leading dimensions, dtype,
  // bias, beta), asked for once.
  std::map<std::array<int, 11>, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace kolo::trainer::cuda
