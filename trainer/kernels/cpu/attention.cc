// Multi-head self-attention on the fused qkv layout [B*S, 3C]: per (batch, head) strided
// sgemm calls read q, k and v in place (lda = 3C) and write the head's slice of out (ldc = C),
// so no permute copies exist. Scale, padding mask, softmax and dropout are one pass per row;
// trailing padding keys are skipped by every product. Sequences are split across the kernel
// pool, each thread's sgemm calls running on that thread.
// probs saves the softmax BEFORE dropout: the backward regenerates the mask from (seed,
// offset) and needs the undropped probabilities for the softmax gradient anyway.
#include <cmath>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/gemm.h"
#include "trainer/kernels/cpu/philox8.h"
#include "trainer/kernels/cpu/softmax.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {
namespace {

struct AttnShape {
  int B, S, C, NH, hd;
  size_t row3() const { return 3 * static_cast<size_t>(C); }
  size_t batch_qkv() const { return S * row3(); }
  size_t batch_out() const { return static_cast<size_t>(S) * C; }
  size_t square() const { return static_cast<size_t>(S) * S; }
};

AttnShape attention_shape(const char* kernel, int B, int S, int C, int NH, float p) {
  check_attention(kernel, B, S, C, NH, p);
  return {B, S, C, NH, C / NH};
}

// Additive key mask of one sequence: 0 for real tokens, -inf for padding.
void key_bias(float* bias, const int32_t* mask, int S) {
  for (int j = 0; j < S; ++j) bias[j] = mask[j] != 0 ? 0.0f : -__builtin_inff();
}

// row = softmax(row + bias) in place (bias may be null); a row whose keys are all masked
// becomes zeros.
void softmax_row(float* row, const float* bias, size_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = neg_inf;
  for (size_t j = 0; j < n; j += kLanes) {
    const size_t left = n - j;
    __m256 v = load_n<F32>(row + j, left);
    if (bias != nullptr) v = _mm256_add_ps(v, load_n<F32>(bias + j, left));
    if (left < kLanes) v = _mm256_blendv_ps(neg_inf, v, lane_mask(left));
    store_n<F32>(row + j, v, left);
    mx = _mm256_max_ps(mx, v);
  }
  const float row_max = hmax(mx);
  if (row_max == -__builtin_inff()) {
    std::memset(row, 0, n * sizeof(float));
    return;
  }
  const __m256 inv = _mm256_set1_ps(1.0f / exp_sum<F32>(row, n, row_max, row));
  for (size_t j = 0; j < n; j += kLanes) {
    store_n<F32>(row + j, _mm256_mul_ps(load_n<F32>(row + j, n - j), inv), n - j);
  }
}

// dst = src * keep / (1 - p) for one row of n elements whose uniforms are u.
void dropout_row(float* dst, const float* src, const float* u, size_t n, __m256 p, __m256 scale) {
  for (size_t j = 0; j < n; j += kLanes) {
    store_n<F32>(dst + j,
                 _mm256_mul_ps(load_n<F32>(src + j, n - j), dropout_factor8(u + j, p, scale)),
                 n - j);
  }
}

struct Dropout {
  float p;
  uint64_t seed;
  uint64_t offset;
  bool on() const { return p > 0.0f; }
};

// Keys at and after the last real token have probability 0 (trailing padding), so every
// product below runs over the first `keys` keys only; the columns past it are zeros.
int live_keys(const int32_t* mask, int S) {
  if (mask == nullptr) return S;
  int keys = S;
  while (keys > 0 && mask[keys - 1] == 0) --keys;
  return keys;
}

// rows x cols block with leading dimension ld set to zero.
void zero_block(float* p, size_t rows, size_t cols, size_t ld) {
  for (size_t r = 0; r < rows; ++r) std::memset(p + r * ld, 0, cols * sizeof(float));
}

// One (batch, head): scores, softmax and dropout in P / Pd, then out_h = Pd . v_h.
void head_forward(float* out_h, float* P, float* Pd, float* u, const float* qkv_b,
                  const float* bias, const AttnShape& sh, int h, int keys, uint64_t first,
                  const Dropout& drop) {
  const size_t S = sh.S, L = keys;
  if (keys == 0) {  // every key is padding: zero probabilities, zero output
    std::memset(P, 0, sh.square() * sizeof(float));
    zero_block(out_h, S, sh.hd, sh.C);
    return;
  }
  const float* q = qkv_b + h * sh.hd;
  const float* k = q + sh.C;
  const float* v = k + sh.C;
  const int ld = static_cast<int>(sh.row3());
  sgemm(false, true, sh.S, keys, sh.hd, 1.0f / std::sqrt(static_cast<float>(sh.hd)), q, ld, k, ld,
        0.0f, P, sh.S);
  const __m256 p = _mm256_set1_ps(drop.p);
  const __m256 scale = _mm256_set1_ps(1.0f / (1.0f - drop.p));
  for (size_t i = 0; i < S; ++i) {
    softmax_row(P + i * S, bias, L);
    std::memset(P + i * S + L, 0, (S - L) * sizeof(float));
    if (drop.on()) {
      fill_uniforms(drop.seed, drop.offset + first + i * S, u, L);
      dropout_row(Pd + i * S, P + i * S, u, L, p, scale);
    }
  }
  sgemm(false, false, sh.S, sh.hd, keys, 1.0f, drop.on() ? Pd : P, sh.S, v, ld, 0.0f, out_h, sh.C);
}

template <typename St>
void attention_forward_kernel(void* out, void* probs, const void* qkv, const int32_t* mask,
                              const AttnShape& sh, const Dropout& drop) {
  const size_t S = sh.S;
  constexpr bool kF32 = St::kDType == DType::kFloat32;
  // One sequence per block of the pool's split; every buffer below is the thread's own.
  parallel_for(sh.B, 1, [&](size_t first_b, size_t last_b) {
    float* bias = mask != nullptr ? scratch(Slot::kC, S) : nullptr;
    float* Pd = drop.on() ? scratch(Slot::kE, sh.square()) : nullptr;
    float* u = scratch(Slot::kF, S);
    for (size_t b = first_b; b < last_b; ++b) {
      const float* qkv_b = to_f32<St>(Slot::kA, as<St>(qkv) + b * sh.batch_qkv(), sh.batch_qkv());
      float* out_b =
          kF32 ? static_cast<float*>(out) + b * sh.batch_out() : scratch(Slot::kB, sh.batch_out());
      if (mask != nullptr) key_bias(bias, mask + b * S, sh.S);
      const int keys = live_keys(mask == nullptr ? nullptr : mask + b * S, sh.S);
      for (int h = 0; h < sh.NH; ++h) {
        const size_t first = (b * sh.NH + h) * sh.square();
        float* P = kF32 ? static_cast<float*>(probs) + first : scratch(Slot::kD, sh.square());
        head_forward(out_b + h * sh.hd, P, Pd, u, qkv_b, bias, sh, h, keys, first, drop);
        if constexpr (!kF32) from_f32<St>(as<St>(probs) + first, P, sh.square());
      }
      if constexpr (!kF32) from_f32<St>(as<St>(out) + b * sh.batch_out(), out_b, sh.batch_out());
    }
  });
}

// dS = P (dP - rowsum(P dP)) in place over the first L columns of each row, after applying
// the forward's dropout to dP (and rebuilding Pd = dropout(P) for the dv product).
void softmax_backward_rows(const float* P, float* Pd, float* dP, float* u, size_t S, size_t L,
                           uint64_t first, const Dropout& drop) {
  const __m256 p = _mm256_set1_ps(drop.p);
  const __m256 scale = _mm256_set1_ps(1.0f / (1.0f - drop.p));
  for (size_t i = 0; i < S; ++i) {
    const float* pr = P + i * S;
    float* dr = dP + i * S;
    if (drop.on()) {
      fill_uniforms(drop.seed, drop.offset + first + i * S, u, L);
      dropout_row(Pd + i * S, pr, u, L, p, scale);
      dropout_row(dr, dr, u, L, p, scale);
    }
    __m256 dot = _mm256_setzero_ps();
    for (size_t j = 0; j < L; j += kLanes) {
      dot = _mm256_fmadd_ps(load_n<F32>(pr + j, L - j), load_n<F32>(dr + j, L - j), dot);
    }
    const __m256 d = _mm256_set1_ps(hsum(dot));
    for (size_t j = 0; j < L; j += kLanes) {
      const __m256 g =
          _mm256_mul_ps(load_n<F32>(pr + j, L - j), _mm256_sub_ps(load_n<F32>(dr + j, L - j), d));
      store_n<F32>(dr + j, g, L - j);
    }
  }
}

// One (batch, head) backward. With Pd = dropout(P) and dPd = dout_h . v_h^T:
// dv_h = Pd^T dout_h; dP = dropout(dPd); dS = P (dP - rowsum(P dP)); dq_h = scale dS k_h;
// dk_h = scale dS^T q_h. Keys past `keys` have P = 0, so their dk and dv rows are zero.
void head_backward(float* dqkv_b, const float* P, float* Pd, float* dP, float* u,
                   const float* qkv_b, const float* dout_b, const AttnShape& sh, int h, int keys,
                   uint64_t first, const Dropout& drop) {
  const size_t S = sh.S, L = keys;
  const int ld = static_cast<int>(sh.row3());
  const float* q = qkv_b + h * sh.hd;
  const float* k = q + sh.C;
  const float* v = k + sh.C;
  const float* dout_h = dout_b + h * sh.hd;
  float* dq = dqkv_b + h * sh.hd;
  float* dk = dq + sh.C;
  float* dv = dk + sh.C;
  zero_block(dk + L * ld, S - L, sh.hd, ld);
  zero_block(dv + L * ld, S - L, sh.hd, ld);
  if (keys == 0) {
    zero_block(dq, S, sh.hd, ld);
    return;
  }
  sgemm(false, true, sh.S, keys, sh.hd, 1.0f, dout_h, sh.C, v, ld, 0.0f, dP, sh.S);
  softmax_backward_rows(P, Pd, dP, u, S, L, first, drop);
  sgemm(true, false, keys, sh.hd, sh.S, 1.0f, drop.on() ? Pd : P, sh.S, dout_h, sh.C, 0.0f, dv, ld);
  const float s = 1.0f / std::sqrt(static_cast<float>(sh.hd));
  sgemm(false, false, sh.S, sh.hd, keys, s, dP, sh.S, k, ld, 0.0f, dq, ld);
  sgemm(true, false, keys, sh.hd, sh.S, s, dP, sh.S, q, ld, 0.0f, dk, ld);
}

template <typename St>
void attention_backward_kernel(void* dqkv, const void* dout, const void* qkv, const void* probs,
                               const int32_t* mask, const AttnShape& sh, const Dropout& drop) {
  constexpr bool kF32 = St::kDType == DType::kFloat32;
  parallel_for(sh.B, 1, [&](size_t first_b, size_t last_b) {
    float* Pd = drop.on() ? scratch(Slot::kE, sh.square()) : nullptr;
    float* dP = scratch(Slot::kG, sh.square());
    float* u = scratch(Slot::kF, sh.S);
    for (size_t b = first_b; b < last_b; ++b) {
      const float* qkv_b = to_f32<St>(Slot::kA, as<St>(qkv) + b * sh.batch_qkv(), sh.batch_qkv());
      const float* dout_b = to_f32<St>(Slot::kB, as<St>(dout) + b * sh.batch_out(), sh.batch_out());
      float* dqkv_b =
          kF32 ? static_cast<float*>(dqkv) + b * sh.batch_qkv() : scratch(Slot::kC, sh.batch_qkv());
      const int keys = live_keys(mask == nullptr ? nullptr : mask + b * sh.S, sh.S);
      for (int h = 0; h < sh.NH; ++h) {
        const size_t first = (b * sh.NH + h) * sh.square();
        const float* P = to_f32<St>(Slot::kD, as<St>(probs) + first, sh.square());
        head_backward(dqkv_b, P, Pd, dP, u, qkv_b, dout_b, sh, h, keys, first, drop);
      }
      if constexpr (!kF32) {
        from_f32<St>(as<St>(dqkv) + b * sh.batch_qkv(), dqkv_b, sh.batch_qkv());
      }
    }
  });
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void CpuBackend::attention_forward(void* out, void* probs, const void* qkv, const int32_t* mask,
                                   int B, int S, int C, int NH, float dropout_p, uint64_t seed,
                                   uint64_t offset, DType dt) {
  const AttnShape sh = attention_shape("attention_forward", B, S, C, NH, dropout_p);
  dispatch(dt, "attention_forward", [&](auto s) {
    attention_forward_kernel<decltype(s)>(out, probs, qkv, mask, sh, {dropout_p, seed, offset});
  });
}

void CpuBackend::attention_backward(void* dqkv, const void* dout, const void* qkv,
                                    const void* probs, const int32_t* mask, int B, int S, int C,
                                    int NH, float dropout_p, uint64_t seed, uint64_t offset,
                                    DType dt) {
  // The mask only tells where trailing padding starts: probs already hold its zeros.
  const AttnShape sh = attention_shape("attention_backward", B, S, C, NH, dropout_p);
  dispatch(dt, "attention_backward", [&](auto s) {
    attention_backward_kernel<decltype(s)>(dqkv, dout, qkv, probs, mask, sh,
                                           {dropout_p, seed, offset});
  });
}

}  // namespace kolo::trainer
