// LayerNorm over the last dimension: two passes per row for the statistics (mean, then the
// centred variance, which cannot go negative), one fused pass for the output. Rows are split
// across the kernel pool. The backward sums dgamma and dbeta in fp32 per block of kRows rows,
// adds the blocks in order (the same sums at any thread count) and the total to the gradients
// once.
#include <cmath>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {
namespace {

constexpr size_t kRows = 64;

template <typename S>
void layernorm_forward_kernel(typename S::T* out, float* mean, float* rstd, const typename S::T* x,
                              const typename S::T* gamma, const typename S::T* beta, int T, int C,
                              float eps) {
  const size_t c = C;
  const __m256 inv_c = _mm256_set1_ps(1.0f / C);
  parallel_for(T, kRows, [&](size_t first, size_t last) {
    for (size_t t = first; t < last; ++t) {
      const auto* row = x + t * c;
      __m256 sum = _mm256_setzero_ps();
      for (size_t j = 0; j < c; j += kLanes) sum = _mm256_add_ps(sum, load_n<S>(row + j, c - j));
      const __m256 m = _mm256_set1_ps(hsum(_mm256_mul_ps(sum, inv_c)));
      __m256 var = _mm256_setzero_ps();
      for (size_t j = 0; j < c; j += kLanes) {
        // The zero lanes of a partial load must not count: mask them out of the centred value.
        const size_t left = c - j;
        __m256 d = _mm256_sub_ps(load_n<S>(row + j, left), m);
        if (left < kLanes) d = _mm256_and_ps(d, lane_mask(left));
        var = _mm256_fmadd_ps(d, d, var);
      }
      const float mu = _mm256_cvtss_f32(m);
      const float rs = 1.0f / std::sqrt(hsum(var) / C + eps);
      if (mean != nullptr) mean[t] = mu;  // null: inference, nothing saved
      if (rstd != nullptr) rstd[t] = rs;
      const __m256 r = _mm256_set1_ps(rs);
      auto* o = out + t * c;
      for (size_t j = 0; j < c; j += kLanes) {
        const size_t left = c - j;
        const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load_n<S>(row + j, left), m), r);
        store_n<S>(o + j,
                   _mm256_fmadd_ps(xhat, load_n<S>(gamma + j, left), load_n<S>(beta + j, left)),
                   left);
      }
    }
  });
}

// With g = dout * gamma and xhat = (x - mean) rstd:
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dgamma += sum_t dout xhat; dbeta += sum_t dout.
template <typename S>
void layernorm_backward_kernel(typename S::T* dx, typename S::T* dgamma, typename S::T* dbeta,
                               const typename S::T* dout, const typename S::T* x, const float* mean,
                               const float* rstd, const typename S::T* gamma, int T, int C) {
  const size_t c = C, blocks = (static_cast<size_t>(T) + kRows - 1) / kRows;
  // Per block: dgamma's sums at [2 c b, 2 c b + c), dbeta's after them.
  float* partial = scratch(Slot::kA, 2 * c * blocks);
  const __m256 inv_c = _mm256_set1_ps(1.0f / C);
  parallel_for(T, kRows, [&](size_t first, size_t last) {
    float* dgamma_acc = nullptr;
    float* dbeta_acc = nullptr;
    for (size_t t = first; t < last; ++t) {
      if (t % kRows == 0) {
        dgamma_acc = partial + 2 * c * (t / kRows);
        dbeta_acc = dgamma_acc + c;
        std::memset(dgamma_acc, 0, 2 * c * sizeof(float));
      }
      const auto* xr = x + t * c;
      const auto* dr = dout + t * c;
      const __m256 m = _mm256_set1_ps(mean[t]);
      const __m256 r = _mm256_set1_ps(rstd[t]);
      __m256 sum_g = _mm256_setzero_ps(), sum_gx = _mm256_setzero_ps();
      for (size_t j = 0; j < c; j += kLanes) {
        const size_t left = c - j;
        const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load_n<S>(xr + j, left), m), r);
        const __m256 d = load_n<S>(dr + j, left);
        const __m256 g = _mm256_mul_ps(d, load_n<S>(gamma + j, left));
        sum_g = _mm256_add_ps(sum_g, g);
        sum_gx = _mm256_fmadd_ps(g, xhat, sum_gx);
        store_n<F32>(dbeta_acc + j, _mm256_add_ps(load_n<F32>(dbeta_acc + j, left), d), left);
        store_n<F32>(dgamma_acc + j, _mm256_fmadd_ps(d, xhat, load_n<F32>(dgamma_acc + j, left)),
                     left);
      }
      const __m256 mean_g = _mm256_set1_ps(hsum(_mm256_mul_ps(sum_g, inv_c)));
      const __m256 mean_gx = _mm256_set1_ps(hsum(_mm256_mul_ps(sum_gx, inv_c)));
      auto* o = dx + t * c;
      for (size_t j = 0; j < c; j += kLanes) {
        const size_t left = c - j;
        const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load_n<S>(xr + j, left), m), r);
        const __m256 g = _mm256_mul_ps(load_n<S>(dr + j, left), load_n<S>(gamma + j, left));
        const __m256 v = _mm256_sub_ps(_mm256_sub_ps(g, mean_g), _mm256_mul_ps(xhat, mean_gx));
        store_n<S>(o + j, _mm256_mul_ps(v, r), left);
      }
    }
  });
  for (size_t j = 0; j < c; j += kLanes) {
    const size_t left = c - j;
    __m256 sum_gamma = _mm256_setzero_ps(), sum_beta = _mm256_setzero_ps();
    for (size_t b = 0; b < blocks; ++b) {
      sum_gamma = _mm256_add_ps(sum_gamma, load_n<F32>(partial + 2 * c * b + j, left));
      sum_beta = _mm256_add_ps(sum_beta, load_n<F32>(partial + 2 * c * b + c + j, left));
    }
    if (dgamma != nullptr) {
      store_n<S>(dgamma + j, _mm256_add_ps(load_n<S>(dgamma + j, left), sum_gamma), left);
    }
    if (dbeta != nullptr) {
      store_n<S>(dbeta + j, _mm256_add_ps(load_n<S>(dbeta + j, left), sum_beta), left);
    }
  }
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void CpuBackend::layernorm_forward(void* out, float* mean, float* rstd, const void* x,
                                   const void* gamma, const void* beta, int T, int C, float eps,
                                   DType dt) {
  check_layernorm("layernorm_forward", T, C);
  KOLO_CHECK_ARG(eps >= 0.0f, "layernorm_forward: eps must be >= 0, got ", eps);
  dispatch(dt, "layernorm_forward", [&](auto s) {
    using S = decltype(s);
    layernorm_forward_kernel<S>(as<S>(out), mean, rstd, as<S>(x), as<S>(gamma), as<S>(beta), T, C,
                                eps);
  });
}

void CpuBackend::layernorm_backward(void* dx, void* dgamma, void* dbeta, const void* dout,
                                    const void* x, const float* mean, const float* rstd,
                                    const void* gamma, int T, int C, DType dt) {
  check_layernorm("layernorm_backward", T, C);
  dispatch(dt, "layernorm_backward", [&](auto s) {
    using S = decltype(s);
    layernorm_backward_kernel<S>(as<S>(dx), as<S>(dgamma), as<S>(dbeta), as<S>(dout), as<S>(x),
                                 mean, rstd, as<S>(gamma), T, C);
  });
}

}  // namespace kolo::trainer
