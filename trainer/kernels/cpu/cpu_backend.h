// The CPU implementation of kolo::trainer::Backend: OpenBLAS sgemm for every matrix product,
// AVX2/FMA/F16C kernels for the rest. Each group of methods lives in its own .cc file here.
#pragma once

#include <map>
#include <mutex>

#include "trainer/kernels/backend.h"

namespace kolo::trainer {

// Sets the number of threads of the kernels' pool (parallel.h), which runs the GEMMs too
// (OpenBLAS itself is kept single-threaded). Programs and benchmarks choose (1 for the
// one-thread comparison with PyTorch; one per core for a single process); the pool starts
// with 1. n must be >= 1.
void set_num_threads(int n);
int num_threads();

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  const char* name() const override { return "cpu"; }

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

 private:
  // Buffers of kMapBytes and more are anonymous mappings (zero pages from the kernel, resident
  // only once written), so discard() can give their pages back: start -> the length asked
  // for and the length mapped (whole pages).
  static constexpr size_t kMapBytes = size_t{1} << 20;
  struct Mapping {
    size_t bytes, mapped;
  };
  std::mutex mutex_;
  std::map<const char*, Mapping> mapped_;
};

}  // namespace kolo::trainer
