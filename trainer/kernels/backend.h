// The per-device kernel interface of the trainer: every forward and backward kernel the models
// need, over raw buffers in a storage dtype (float32, float16 or bfloat16) with fp32
// accumulation. The CPU backend is kernels/cpu/, the CUDA backend kernels/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "comm/base/dtype.h"
#include "trainer/kernels/optimizer_math.h"

namespace kolo::trainer {

// The storage dtypes every backend's kernels take: float32, float16 and bfloat16, and their names
// as the errors that refuse another dtype list them.
inline bool is_storage_dtype(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16;
}
inline constexpr const char* kStorageDTypeNames = "float32, float16, bfloat16";

// Where a Backend's buffers live: kCpu (cpu_backend()) or kCuda (cuda_backend() in
// kernels/cuda/cuda_backend.h, in builds with CUDA). Host code reaches a backend's buffers only
// through copy_from_host / copy_to_host.
enum class Device : uint8_t { kCpu, kCuda };

// Conventions shared by every kernel:
// - Every buffer argument is the backend's memory (alloc()), except the integer index arrays
//   (ids, type_ids, mask, targets) and the argmax outputs, which are host memory on every
//   backend: they come from the data pipeline, and a device backend copies them in itself.
// - Tensors are row-major and contiguous. "T" is the number of rows (tokens or samples).
// - `dt` is the storage dtype of every floating-point buffer passed to the call, except the
//   ones documented as float (saved statistics, losses), which are always fp32.
// - Backward kernels ACCUMULATE (+=) into parameter gradients (dw, db, dgamma, ...), so that
//   gradient accumulation over micro-batches and tied weights need no extra buffer, and
//   OVERWRITE input gradients (dx) unless the name says `accumulate`.
// - Dropout uses a counter-based generator: element i of a call with (seed, offset) keeps its
//   value iff uniform(seed, offset + i) >= p, so a recompute (activation checkpointing) and the
//   backward pass regenerate the same mask without storing it.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;

  // Where code outside the backend (the engine's device path) finds its buffers: the device id
  // (-1 on the host) and the stream its kernels write them on (a cudaStream_t; null on the
  // host). Work queued there before a call is the work such a consumer waits for.
  virtual int device_id() const { return -1; }
  virtual void* device_stream() const { return nullptr; }

  // --- memory -----------------------------------------------------------------------------
  virtual void* alloc(size_t bytes) = 0;  // 64-byte aligned, zero-filled
  virtual void free(void* ptr) = 0;
  virtual void zero(void* ptr, size_t bytes) = 0;
  // [ptr, ptr + bytes) of an alloc() buffer is not needed for now: it reads as zero afterwards,
  // and whole pages inside it go back to the system until written again (ZeRO keeps only a
  // rank's shard of a buffer resident this way).
  virtual void discard(void* ptr, size_t bytes) = 0;
  // bytes between host memory and an alloc() buffer; both return once the copy is done.
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // dst (dst_dt) = src (src_dt) * scale, n elements; dst and src may be the same buffer only
  // when the dtypes have the same size.
  virtual void convert(void* dst, DType dst_dt, const void* src, DType src_dt, size_t n,
                       float scale = 1.0f) = 0;

  // --- linear: y[T,N] = x[T,K] . w[N,K]^T + b[N] (PyTorch nn.Linear layout; b may be null) --
  virtual void linear_forward(void* y, const void* x, const void* w, const void* b, int T, int K,
                              int N, DType dt) = 0;
  // dx[T,K] = dy . w (skipped when dx is null); dw[N,K] += dy^T . x; db[N] += sum_t dy.
  virtual void linear_backward(void* dx, void* dw, void* db, const void* dy, const void* x,
                               const void* w, int T, int K, int N, DType dt) = 0;

  // --- embeddings ---------------------------------------------------------------------------
  // BERT input embeddings: out[b,s,:] = word[ids[b,s]] + pos[s] + type[type_ids[b,s]].
  // type_ids may be null (all zero). out is [B*S, C].
  virtual void embed_forward(void* out, const int32_t* ids, const int32_t* type_ids,
                             const void* word, const void* pos, const void* type, int B, int S,
                             int C, DType dt) = 0;
  // dword/dpos/dtype += scatter of dout. Any of the three may be null (not trained).
  virtual void embed_backward(void* dword, void* dpos, void* dtype_emb, const void* dout,
                              const int32_t* ids, const int32_t* type_ids, int B, int S, int C,
                              DType dt) = 0;

  // --- layer norm over the last dimension C -------------------------------------------------
  // out = (x - mean) * rstd * gamma + beta; mean[T] and rstd[T] (float) are saved (either may
  // be null when no backward follows).
  virtual void layernorm_forward(void* out, float* mean, float* rstd, const void* x,
                                 const void* gamma, const void* beta, int T, int C, float eps,
                                 DType dt) = 0;
  // dx = ...; dgamma += ...; dbeta += ...  (dx overwritten)
  virtual void layernorm_backward(void* dx, void* dgamma, void* dbeta, const void* dout,
                                  const void* x, const float* mean, const float* rstd,
                                  const void* gamma, int T, int C, DType dt) = 0;

  // --- element-wise ---------------------------------------------------------------------------
  // GELU, exact erf form: 0.5 x (1 + erf(x / sqrt 2)) (Hugging Face "gelu").
  virtual void gelu_forward(void* out, const void* x, size_t n, DType dt) = 0;
  virtual void gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) = 0;
  virtual void relu_forward(void* out, const void* x, size_t n, DType dt) = 0;
  virtual void relu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) = 0;
  // tanh: backward uses the saved output y (dx = dout * (1 - y^2)).
  virtual void tanh_forward(void* out, const void* x, size_t n, DType dt) = 0;
  virtual void tanh_backward(void* dx, const void* dout, const void* y, size_t n, DType dt) = 0;
  // out = a + b (out may alias a or b).
  virtual void add(void* out, const void* a, const void* b, size_t n, DType dt) = 0;
  // out = in * keep / (1 - p) with keep from (seed, offset); p == 0 copies.
  virtual void dropout_forward(void* out, const void* in, size_t n, float p, uint64_t seed,
                               uint64_t offset, DType dt) = 0;
  // dx = dout * keep / (1 - p), the same mask as the forward call with (seed, offset).
  virtual void dropout_backward(void* dx, const void* dout, size_t n, float p, uint64_t seed,
                                uint64_t offset, DType dt) = 0;

  // --- multi-head self-attention ------------------------------------------------------------
  // qkv[B*S, 3C] holds q | k | v per token (heads of size C/NH inside each). mask[B*S] is 1
  // for real tokens and 0 for padding (padded keys get -inf before the softmax; may be null).
  // probs[B, NH, S, S] (storage dtype) is saved for the backward: the post-softmax
  // probabilities BEFORE dropout (the backward regenerates the dropout mask from (seed, offset);
  // the softmax gradient needs the undropped values). out[B*S, C] = dropout(probs) . v with
  // heads concatenated.
  // Attention dropout on the probabilities uses (seed, offset) as dropout_forward does.
  virtual void attention_forward(void* out, void* probs, const void* qkv, const int32_t* mask,
                                 int B, int S, int C, int NH, float dropout_p, uint64_t seed,
                                 uint64_t offset, DType dt) = 0;
  // dqkv[B*S, 3C] overwritten. The same (seed, offset) as the forward call.
  virtual void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* probs,
                                  const int32_t* mask, int B, int S, int C, int NH, float dropout_p,
                                  uint64_t seed, uint64_t offset, DType dt) = 0;

  // --- loss ---------------------------------------------------------------------------------
  // Softmax cross-entropy over logits[N, V] with targets[N]; rows whose target equals
  // ignore_index do not count. losses[N] (float) gets each row's loss (0 when ignored).
  // Returns the mean loss over counted rows (0 when none). argmax[N] (host memory, may be null)
  // gets argmax_rows' answer for every row, ignored ones included, from the same pass.
  virtual float cross_entropy_forward(float* losses, int32_t* argmax, const void* logits,
                                      const int32_t* targets, int N, int V, int ignore_index,
                                      DType dt) = 0;
  // dlogits = (softmax(logits) - onehot(target)) * dloss / counted_rows; 0 on ignored rows.
  virtual void cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                      int N, int V, int ignore_index, float dloss, DType dt) = 0;
  // out[n] (host memory) = the index of the largest value of row n of logits[N, V]: the first
  // one on ties, as torch.argmax; NaN entries never win (a row of NaNs gives 0).
  virtual void argmax_rows(int32_t* out, const void* logits, int N, int V, DType dt) = 0;

  // --- reductions for mixed precision and clipping -------------------------------------------
  // Sum of squares of x (fp32 accumulation, returned as double); sets *nonfinite to true when
  // any element is inf or NaN (never resets it).
  virtual double sum_squares(const void* x, size_t n, DType dt, bool* nonfinite) = 0;

  // --- optimizer updates (optim/: AdamW, Sgd) on fp32 master weights in this memory -------------
  // n elements of params (fp32) and of the states (fp32) updated in place from grads (grad_dt:
  // a storage dtype, or float32); the gradient used is (grads * multiplier) * grad_scale, each
  // product rounded to fp32, as the host path's conversion and update compute it. The element
  // arithmetic is kernels/optimizer_math.h's.
  virtual void adamw_update(float* params, float* exp_avg, float* exp_avg_sq, const void* grads,
                            DType grad_dt, size_t n, float multiplier, float grad_scale,
                            const AdamWScalars& s) = 0;
  // momentum_buffer: n fp32, or null when s.momentum is 0.
  virtual void sgd_update(float* params, float* momentum_buffer, const void* grads, DType grad_dt,
                          size_t n, float multiplier, float grad_scale, const SgdScalars& s) = 0;
};

// An alloc() buffer of a backend that frees itself: for state a trainer component keeps in the
// model's memory (host or device alike). Movable, not copyable; empty when default-made.
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(Backend& backend, size_t bytes)
      : backend_(&backend), data_(bytes > 0 ? backend.alloc(bytes) : nullptr), bytes_(bytes) {}
  ~BackendBuffer() {
    if (data_ != nullptr) backend_->free(data_);
  }
  BackendBuffer(BackendBuffer&& other) noexcept { swap(other); }
  BackendBuffer& operator=(BackendBuffer&& other) noexcept {
    BackendBuffer(std::move(other)).swap(*this);
    return *this;
  }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  void swap(BackendBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The CPU backend (OpenBLAS for GEMM). Single instance, thread-compatible.
Backend& cpu_backend();

}  // namespace kolo::trainer
