// Multi-head self-attention on the fused qkv layout [B*S, 3C]. Every (batch, head) pair is
// one entry of a cuBLAS batched GEMM whose pointers address q, k and v in place (leading
// dimension 3C) and the head's slice of out (C): no permute copies. Scores are fp32; one warp
// per row applies the padding mask, the softmax and dropout (the CPU backend's Philox stream,
// element (b, h, i, j) at offset + ((b NH + h) S + i) S + j) and writes probs (before dropout,
// for the backward) and the dropped copy the value product reads.
#include <cmath>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/rng.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

struct AttnShape {
  int B, S, C, NH, hd;
  int Z() const { return B * NH; }  // (batch, head) pairs
  size_t square() const { return size_t(S) * S; }
};

AttnShape attention_shape(const char* kernel, int B, int S, int C, int NH, float p) {
  check_attention(kernel, B, S, C, NH, p);
  return {B, S, C, NH, C / NH};
}

// Pointer arrays of a batched GEMM: array k entry z = base[k] + b by_batch[k] + h by_head[k]
// bytes, with (b, h) = (z / NH, z % NH).
constexpr int kMaxArrays = 10;
struct HeadPointers {
  const char* base[kMaxArrays];
  size_t by_batch[kMaxArrays];
  size_t by_head[kMaxArrays];
};

__global__ void head_pointers_kernel(HeadPointers spec, int arrays, const void** out, int Z,
                                     int NH) {
  const int z = blockIdx.x * blockDim.x + threadIdx.x;
  if (z >= Z) return;
  const int b = z / NH, h = z % NH;
  for (int k = 0; k < arrays; ++k)
    out[size_t(k) * Z + z] = spec.base[k] + b * spec.by_batch[k] + h * spec.by_head[k];
}

// Builds `arrays` pointer arrays of Z entries each in device scratch; array k is at
// result + k Z.
const void** head_pointers(CudaBackend& be, const HeadPointers& spec, int arrays,
                           const AttnShape& sh) {
  auto* out =
      static_cast<const void**>(be.scratch(Slot::kC, size_t(arrays) * sh.Z() * sizeof(void*)));
  head_pointers_kernel<<<blocks_for(size_t(sh.Z())), kThreads, 0, be.stream()>>>(spec, arrays, out,
                                                                                 sh.Z(), sh.NH);
  check(cudaGetLastError(), "attention pointer arrays launch");
  return out;
}

// Row-major C[z] (M x N) = alpha op(A[z]) op(B[z]) for every z, as the column-major product
// C^T = op(B)^T op(A)^T; fp32 accumulation.
void gemm_batched(CudaBackend& be, bool ta, bool tb, int M, int N, int K, float alpha,
                  const void* const* A, int lda, const void* const* B, int ldb,
                  const void* const* C, int ldc, int batch, cudaDataType_t ab, cudaDataType_t c) {
  const float beta = 0.0f;
  check(cublasGemmBatchedEx(be.blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ab, ldb, A, ab, lda,
                            &beta, const_cast<void* const*>(C), c, ldc, batch, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
        "cublasGemmBatchedEx (attention)");
}

struct Dropout {
  float p;
  uint64_t seed, offset;
};

// One warp per score row r = z S + i: probs = softmax(scores + mask bias), a row whose keys
// are all padding becomes zeros; dropped = dropout(probs) when p > 0. Each lane reads V scores
// at a time (4: 16 bytes, where the rows allow).
template <int V, typename T>
__global__ void softmax_kernel(T* probs, T* dropped, const float* scores, const int32_t* mask,
                               int rows, int S, int NH, Dropout drop) {
  const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  const int b = r / S / NH;
  const float* x = scores + size_t(r) * S;
  const int32_t* m = mask == nullptr ? nullptr : mask + size_t(b) * S;
  float v[V];
  float mx = -INFINITY;
  for (int j = lane * V; j < S; j += 32 * V) {
    load_floats<V>(v, x + j);
    for (int k = 0; k < V; ++k)
      if (m == nullptr || m[j + k] != 0) mx = fmaxf(mx, v[k]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int j = lane * V; j < S; j += 32 * V) {
      load_floats<V>(v, x + j);
      for (int k = 0; k < V; ++k)
        if (m == nullptr || m[j + k] != 0) sum += __expf(v[k] - mx);
    }
  }
  sum = warp_sum(sum);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  const float scale = 1.0f / (1.0f - drop.p);
  const uint64_t first = drop.offset + uint64_t(r) * S;
  for (int j = lane * V; j < S; j += 32 * V) {
    load_floats<V>(v, x + j);
    for (int k = 0; k < V; ++k) {
      const bool off = mx == -INFINITY || (m != nullptr && m[j + k] == 0);
      v[k] = off ? 0.0f : __expf(v[k] - mx) * inv;
    }
    store_floats<V>(probs + size_t(r) * S + j, v);
    if (drop.p > 0.0f) {
      for (int k = 0; k < V; ++k)
        v[k] = rng::uniform(drop.seed, first + j + k) >= drop.p ? v[k] * scale : 0.0f;
      store_floats<V>(dropped + size_t(r) * S + j, v);
    }
  }
}

// One warp per row: dP = dropout(dPd); dS = P (dP - rowsum(P dP)); dropped = dropout(P) again
// for the value gradient (when p > 0).
template <typename T>
__global__ void softmax_backward_kernel(T* dS, T* dropped, const float* dPd, const T* probs,
                                        int rows, int S, Dropout drop) {
  const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= rows) return;
  const float scale = 1.0f / (1.0f - drop.p);
  const uint64_t first = drop.offset + uint64_t(r) * S;
  const size_t base = size_t(r) * S;
  float dot = 0.0f;
  for (int j = lane; j < S; j += 32) {
    float d = dPd[base + j];
    if (drop.p > 0.0f) d = rng::uniform(drop.seed, first + j) >= drop.p ? d * scale : 0.0f;
    dot = fmaf(to_float(probs[base + j]), d, dot);
  }
  dot = warp_sum(dot);
  for (int j = lane; j < S; j += 32) {
    const float p = to_float(probs[base + j]);
    float d = dPd[base + j];
    if (drop.p > 0.0f) {
      const bool keep = rng::uniform(drop.seed, first + j) >= drop.p;
      d = keep ? d * scale : 0.0f;
      dropped[base + j] = from_float<T>(keep ? p * scale : 0.0f);
    }
    dS[base + j] = from_float<T>(p * (d - dot));
  }
}

constexpr int kRowsPerBlock = 8;  // warps (rows) per block of the row kernels

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::attention_forward(void* out, void* probs, const void* qkv, const int32_t* mask,
                                    int B, int S, int C, int NH, float dropout_p, uint64_t seed,
                                    uint64_t offset, DType dt) {
  const AttnShape sh = attention_shape("attention_forward", B, S, C, NH, dropout_p);
  if (B == 0) return;
  const size_t es = dtype_size(dt), Z = sh.Z(), rows = Z * S;
  const int32_t* mask_dev = upload(Slot::kInts0, mask, size_t(B) * S);
  auto* scores = static_cast<float*>(scratch(Slot::kA, Z * sh.square() * sizeof(float)));
  void* dropped = dropout_p > 0.0f ? scratch(Slot::kB, Z * sh.square() * es) : probs;
  const auto* q = static_cast<const char*>(qkv);
  const size_t row3 = 3 * size_t(C) * es, sq = sh.square();
  const HeadPointers spec{
      {q, q + C * es, reinterpret_cast<const char*>(scores), static_cast<const char*>(dropped),
       q + 2 * C * es, static_cast<const char*>(out)},
      {S * row3, S * row3, NH * sq * 4, NH * sq * es, S * row3, size_t(S) * C * es},
      {sh.hd * es, sh.hd * es, sq * 4, sq * es, sh.hd * es, sh.hd * es}};
  const void** p = head_pointers(*this, spec, 6, sh);
  const int z = int(Z), ld3 = 3 * C;
  dispatch(dt, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    const cudaDataType_t type = cuda_type<T>();
    gemm_batched(*this, false, true, S, S, sh.hd, 1.0f / std::sqrt(float(sh.hd)), p, ld3, p + Z,
                 ld3, p + 2 * Z, S, z, type, CUDA_R_32F);
    with_width<float>(S, {scores, probs, dropped}, [&](auto width) {
      softmax_kernel<decltype(width)::value, T>
          <<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock, 0,
             stream()>>>(static_cast<T*>(probs), static_cast<T*>(dropped), scores, mask_dev,
                         int(rows), S, NH, {dropout_p, seed, offset});
    });
    check(cudaGetLastError(), "attention softmax launch");
    gemm_batched(*this, false, false, S, sh.hd, S, 1.0f, p + 3 * Z, S, p + 4 * Z, ld3, p + 5 * Z, C,
                 z, type, type);
  });
}

void CudaBackend::attention_backward(void* dqkv, const void* dout, const void* qkv,
                                     const void* probs, const int32_t* mask, int B, int S, int C,
                                     int NH, float dropout_p, uint64_t seed, uint64_t offset,
                                     DType dt) {
  // probs already hold the padding's zeros, so the mask is not needed here.
  (void)mask;
  const AttnShape sh = attention_shape("attention_backward", B, S, C, NH, dropout_p);
  if (B == 0) return;
  const size_t es = dtype_size(dt), Z = sh.Z(), rows = Z * S, sq = sh.square();
  auto* dPd = static_cast<float*>(scratch(Slot::kA, Z * sq * sizeof(float)));
  const void* dropped = dropout_p > 0.0f ? scratch(Slot::kB, Z * sq * es) : probs;
  void* dS = scratch(Slot::kD, Z * sq * es);
  const auto* q = static_cast<const char*>(qkv);
  const auto* dq = static_cast<const char*>(dqkv);
  const auto* d = static_cast<const char*>(dout);
  const size_t row3 = 3 * size_t(C) * es, hd = sh.hd * es;
  const size_t sb = S * row3, ob = size_t(S) * C * es;
  // dout_h, v, dPd | dropped, dout_h, dv | dS, k, dq | dS, q, dk
  const HeadPointers spec{
      {d, q + 2 * C * es, reinterpret_cast<const char*>(dPd), static_cast<const char*>(dropped),
       dq + 2 * C * es, static_cast<const char*>(dS), q + C * es, dq, q, dq + C * es},
      {ob, sb, NH * sq * 4, NH * sq * es, sb, NH * sq * es, sb, sb, sb, sb},
      {hd, hd, sq * 4, sq * es, hd, sq * es, hd, hd, hd, hd}};
  const void** p = head_pointers(*this, spec, 10, sh);
  const int z = int(Z), ld3 = 3 * C;
  const float s = 1.0f / std::sqrt(float(sh.hd));
  dispatch(dt, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const cudaDataType_t type = cuda_type<T>();
    gemm_batched(*this, false, true, S, S, sh.hd, 1.0f, p, C, p + Z, ld3, p + 2 * Z, S, z, type,
                 CUDA_R_32F);
    softmax_backward_kernel<T>
        <<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock, 0, stream()>>>(
            static_cast<T*>(dS), static_cast<T*>(const_cast<void*>(dropped)), dPd,
            static_cast<const T*>(probs), int(rows), S, {dropout_p, seed, offset});
    check(cudaGetLastError(), "attention softmax backward launch");
    // dv = dropped^T dout_h; dq = s dS k; dk = s dS^T q
    gemm_batched(*this, true, false, S, sh.hd, S, 1.0f, p + 3 * Z, S, p + 0 * Z, C, p + 4 * Z, ld3,
                 z, type, type);
    gemm_batched(*this, false, false, S, sh.hd, S, s, p + 5 * Z, S, p + 6 * Z, ld3, p + 7 * Z, ld3,
                 z, type, type);
    gemm_batched(*this, true, false, S, sh.hd, S, s, p + 5 * Z, S, p + 8 * Z, ld3, p + 9 * Z, ld3,
                 z, type, type);
  });
}

}  // namespace kolo::trainer
