// The CUDA backend object: device, stream and library handles, memory, host copies,
// conversion (the fusion packer's kernel), the sum of squares, and the cuBLASLt matmul the
// linear layers use. The kernels live in the sibling files.
#include <cmath>
#include <cstring>
#include <vector>

#include "comm/base/cuda_check.h"
#include "fusion/cuda/convert.h"
#include "trainer/kernels/cuda/common.cuh"
#include "trainer/kernels/cuda/cuda_backend.h"

namespace kolo::trainer {
namespace cuda {

void check(cudaError_t status, const char* what) {
  check_cuda(status, "cuda backend", what);
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    KOLO_THROW(ErrorCode::kIo, "cuda backend: ", what, " failed: ", cublasGetStatusName(status),
               " (", cublasGetStatusString(status), ")");
  }
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's, as its docs suggest for Hopper
constexpr size_t kSquaresBlock = 4096;                // elements summed in fp32 per partial

// partial[b] = sum of squares of elements [b kSquaresBlock, (b + 1) kSquaresBlock) in fp32;
// *bad = 1 when one of them is inf or NaN.
template <typename T>
__global__ void sum_squares_kernel(const T* x, size_t n, float* partial, int* bad) {
  __shared__ float shared[32];
  const size_t start = size_t(blockIdx.x) * kSquaresBlock;
  const size_t stop = min(n, start + kSquaresBlock);
  float acc = 0.0f;
  bool nonfinite = false;
  for (size_t i = start + threadIdx.x; i < stop; i += blockDim.x) {
    const float v = to_float(x[i]);
    acc = fmaf(v, v, acc);
    nonfinite |= !isfinite(v);
  }
  if (nonfinite) atomicExch(bad, 1);
  const float total = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

}  // namespace

CudaBackend::CudaBackend() {
  check(cudaGetDevice(&device_), "cudaGetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasCreate(&blas_), "cublasCreate");
  check(cublasSetStream(blas_, stream_), "cublasSetStream");
  check(cublasLtCreate(&lt_), "cublasLtCreate");
  check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  workspace_bytes_ = kWorkspaceBytes;
}

CudaBackend::~CudaBackend() {
  // Destroyed at exit: errors are ignored, there is nobody left to tell.
  cudaStreamSynchronize(stream_);
  for (void* p : scratch_) cudaFree(p);
  cudaFree(workspace_);
  cublasLtDestroy(lt_);
  cublasDestroy(blas_);
  cudaStreamDestroy(stream_);
}

void* CudaBackend::alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    KOLO_THROW(ErrorCode::kInvalidArgument, "cuda alloc: cannot allocate ", bytes,
               " bytes of device memory: ", cudaGetErrorString(status));
  }
  check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync (alloc)");
  sync("alloc");
  return p;
}

void CudaBackend::free(void* ptr) {
  if (ptr == nullptr) return;
  sync("free");  // queued kernels may still read it
  check(cudaFree(ptr), "cudaFree");
}

void CudaBackend::zero(void* ptr, size_t bytes) {
  if (bytes > 0) check(cudaMemsetAsync(ptr, 0, bytes, stream_), "cudaMemsetAsync (zero)");
}

void CudaBackend::discard(void* ptr, size_t bytes) {
  // Device memory stays allocated (cudaMalloc has no per-page release): the range only reads as
  // zero afterwards, as the contract asks.
  zero(ptr, bytes);
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (host to device)");
  sync("copy_from_host");
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (device to host)");
  sync("copy_to_host");
}

void CudaBackend::convert(void* dst, DType dst_dt, const void* src, DType src_dt, size_t n,
                          float scale) {
  dispatch(dst_dt, "convert (destination)", [](auto) {});
  dispatch(src_dt, "convert (source)", [](auto) {});
  if (n == 0) return;
  const fusion::cuda::Span span{src, dst, n};
  fusion::cuda::convert_spans(&span, 1, src_dt, dst_dt, scale, stream_);
}

double CudaBackend::sum_squares(const void* x, size_t n, DType dt, bool* nonfinite) {
  KOLO_CHECK_ARG(nonfinite != nullptr, "sum_squares: nonfinite flag pointer is null");
  if (n == 0) return 0.0;
  const size_t blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
  auto* partial = static_cast<float*>(scratch(Slot::kH, blocks * sizeof(float) + sizeof(int)));
  int* bad = reinterpret_cast<int*>(partial + blocks);
  check(cudaMemsetAsync(bad, 0, sizeof(int), stream_), "cudaMemsetAsync (sum_squares)");
  dispatch(dt, "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    // One block per partial; the grid's x dimension holds 2^31 - 1 of them.
    sum_squares_kernel<T>
        <<<unsigned(blocks), kThreads, 0, stream_>>>(static_cast<const T*>(x), n, partial, bad);
  });
  check(cudaGetLastError(), "sum_squares launch");
  std::vector<float> host(blocks + 1);
  check(cudaMemcpyAsync(host.data(), partial, blocks * sizeof(float) + sizeof(int),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (sum_squares)");
  sync("sum_squares");
  int bad_host = 0;
  std::memcpy(&bad_host, host.data() + blocks, sizeof(int));
  if (bad_host != 0) *nonfinite = true;
  double total = 0;  // the partials in order, in double, as the CPU backend sums its blocks
  for (size_t b = 0; b < blocks; ++b) total += host[b];
  return total;
}

void* CudaBackend::scratch(Slot slot, size_t bytes) {
  const int i = static_cast<int>(slot);
  if (bytes > scratch_bytes_[i]) {
    // Stream-ordered: the old buffer is released after the work queued on it.
    const size_t grown = std::max(bytes, scratch_bytes_[i] * 2);
    if (scratch_[i] != nullptr) check(cudaFreeAsync(scratch_[i], stream_), "cudaFreeAsync");
    scratch_[i] = nullptr;
    scratch_bytes_[i] = 0;
    check(cudaMallocAsync(&scratch_[i], grown, stream_), "cudaMallocAsync (scratch)");
    scratch_bytes_[i] = grown;
  }
  return scratch_[i];
}

const int32_t* CudaBackend::upload(Slot slot, const int32_t* host, size_t n) {
  if (host == nullptr || n == 0) return nullptr;
  void* dst = scratch(slot, n * sizeof(int32_t));
  // From pageable memory the copy is staged before the call returns, so `host` may change.
  check(cudaMemcpyAsync(dst, host, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (index upload)");
  return static_cast<const int32_t*>(dst);
}

void CudaBackend::sync(const char* what) {
  check(cudaStreamSynchronize(stream_), what);
}

void CudaBackend::matmul(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda,
                         const void* B, int ldb, float beta, void* C, int ldc, const void* bias,
                         DType dt) {
  const cudaDataType_t type =
      dispatch(dt, "matmul", [](auto tag) { return cuda_type<decltype(tag)>(); });
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  // Descriptors are cheap host objects; the algorithm choice is what is cached.
  struct Release {
    cublasLtMatmulDesc_t& op;
    cublasLtMatrixLayout_t &a, &b, &c;
    ~Release() {
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  } release{op, a, b, c};
  check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
        "cublasLtMatmulDescSetAttribute (transa)");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
        "cublasLtMatmulDescSetAttribute (transb)");
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue)),
          "cublasLtMatmulDescSetAttribute (epilogue)");
    check(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute (bias)");
  }
  check(cublasLtMatrixLayoutCreate(&a, type, trans_a ? k : m, trans_a ? m : k, lda),
        "cublasLtMatrixLayoutCreate (A)");
  check(cublasLtMatrixLayoutCreate(&b, type, trans_b ? n : k, trans_b ? k : n, ldb),
        "cublasLtMatrixLayoutCreate (B)");
  check(cublasLtMatrixLayoutCreate(&c, type, m, n, ldc), "cublasLtMatrixLayoutCreate (C)");

  const std::array<int, 11> key{trans_a, trans_b,         m,           n, k, lda, ldb, ldc,
                                int(dt), bias != nullptr, beta != 0.0f};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &workspace_bytes_, sizeof(workspace_bytes_));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(lt_, op, a, b, c, c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
      KOLO_THROW(ErrorCode::kInvalidArgument, "cuda matmul: cuBLASLt has no algorithm for ", m,
                 " x ", n, " x ", k, " in ", dtype_name(dt));
    }
    it = algos_.emplace(key, result.algo).first;
  }
  const float alpha = 1.0f;
  check(cublasLtMatmul(lt_, op, &alpha, A, a, B, b, &beta, C, c, C, c, &it->second, workspace_,
                       workspace_bytes_, stream_),
        "cublasLtMatmul");
}

}  // namespace cuda

Backend& cuda_backend() {
  static cuda::CudaBackend backend;
  return backend;
}

Backend& cuda_backend_for(int local_rank) {
  KOLO_CHECK_ARG(local_rank >= 0, "cuda backend: local rank ", local_rank, " is negative");
  int count = 0;
  cuda::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  KOLO_CHECK_ARG(count > 0, "cuda backend: no CUDA device is visible");
  cuda::check(cudaSetDevice(local_rank % count), "cudaSetDevice");
  return cuda_backend();
}

}  // namespace kolo::trainer
