// Softmax cross-entropy fused with its log-softmax, and the argmax of logits rows: per row one max
// pass from memory, then an exp-sum pass and the search for the first maximum while the row sits
// in cache, loss = log(sum e^{x - max}) + max - x[target]; the forward returns the argmax too, so
// a caller that wants both reads the logits from memory once. The backward recomputes the two
// statistics and writes (softmax - onehot) * dloss / counted (keeping the exponentials of the sum
// in fp32 and scaling them); it reads each element before writing it, so dlogits may alias logits.
// Rows are split across the kernel pool; the loss is summed over rows in order, at any thread
// count.
#include <cmath>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"
#include "trainer/kernels/cpu/softmax.h"
#include "trainer/kernels/cpu/vec.h"

namespace kolo::trainer {
namespace cpu {
namespace {

// The row's largest value; NaN entries are skipped (the max instruction returns its second
// operand when either is NaN), so a NaN reaches the loss through the exponentials instead.
template <typename S>
float row_max(const typename S::T* x, size_t V) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = neg_inf;
  for (size_t j = 0; j < V; j += kLanes) {
    const size_t left = V - j;
    __m256 v = load_n<S>(x + j, left);
    if (left < kLanes) v = _mm256_blendv_ps(neg_inf, v, lane_mask(left));
    mx = _mm256_max_ps(v, mx);
  }
  return hmax(mx);
}

// The first index whose value equals `best`, the row's maximum (NaN entries never equal it; a
// row without any, all NaN, gives 0).
template <typename S>
int32_t first_index_of(const typename S::T* x, size_t V, float best) {
  const __m256 b = _mm256_set1_ps(best);
  for (size_t j = 0; j < V; j += kLanes) {
    const size_t left = V - j;
    int hits = _mm256_movemask_ps(_mm256_cmp_ps(load_n<S>(x + j, left), b, _CMP_EQ_OQ));
    if (left < kLanes) hits &= (1 << left) - 1;
    if (hits != 0) return static_cast<int32_t>(j + __builtin_ctz(hits));
  }
  return 0;
}

template <typename S>
float cross_entropy_forward_kernel(float* losses, int32_t* argmax, const typename S::T* logits,
                                   const int32_t* targets, int N, int V, int ignore_index) {
  float* row_loss = scratch(Slot::kA, N);
  parallel_for(N, 1, [&](size_t first, size_t last) {
    for (size_t n = first; n < last; ++n) {
      const auto* x = logits + n * V;
      row_loss[n] = 0.0f;
      const bool counts =
          target_counts("cross_entropy_forward", targets, static_cast<int>(n), V, ignore_index);
      if (!counts && argmax == nullptr) continue;
      // One pass from memory for the maximum; the row then sits in cache for the others.
      const float mx = row_max<S>(x, V);
      if (counts) {
        const float sum = exp_sum<S>(x, V, mx, nullptr);
        row_loss[n] = std::log(sum) + mx - S::load1(x + targets[n]);
      }
      if (argmax != nullptr) argmax[n] = first_index_of<S>(x, V, mx);
    }
  });
  double total = 0;
  int counted = 0;
  for (int n = 0; n < N; ++n) {
    if (targets[n] != ignore_index) {
      total += row_loss[n];
      ++counted;
    }
    if (losses != nullptr) losses[n] = row_loss[n];
  }
  return counted == 0 ? 0.0f : static_cast<float>(total / counted);
}

template <typename S>
void cross_entropy_backward_kernel(typename S::T* dlogits, const typename S::T* logits,
                                   const int32_t* targets, int N, int V, int ignore_index,
                                   float dloss) {
  int counted = 0;
  for (int n = 0; n < N; ++n)
    counted += target_counts("cross_entropy_backward", targets, n, V, ignore_index);
  const float row_scale = counted == 0 ? 0.0f : dloss / counted;
  const size_t v = V;
  parallel_for(N, 1, [&](size_t first, size_t last) {
    for (size_t n = first; n < last; ++n) {
      const auto* x = logits + n * v;
      auto* d = dlogits + n * v;
      if (targets[n] == ignore_index) {
        for (size_t j = 0; j < v; j += kLanes) store_n<S>(d + j, _mm256_setzero_ps(), v - j);
        continue;
      }
      const size_t target = targets[n];
      // The exponentials are stored in fp32 (in place for fp32 storage) while they are summed,
      // then scaled while the row is in cache: one exponential per element.
      float* e;
      if constexpr (S::kDType == DType::kFloat32) {
        e = d;
      } else {
        e = scratch(Slot::kB, v);
      }
      const float sum = exp_sum<S>(x, v, row_max<S>(x, v), e);
      const __m256 k = _mm256_set1_ps(row_scale / sum);
      // The target's -dloss/counted is applied in the vector that holds it, before its store.
      for (size_t j = 0; j < v; j += kLanes) {
        const size_t left = v - j;
        __m256 g = _mm256_mul_ps(load_n<F32>(e + j, left), k);
        if (target - j < kLanes) {
          alignas(32) float lanes[kLanes];
          _mm256_store_ps(lanes, g);
          lanes[target - j] -= row_scale;
          g = _mm256_load_ps(lanes);
        }
        store_n<S>(d + j, g, left);
      }
    }
  });
}

}  // namespace
}  // namespace cpu

using namespace cpu;

float CpuBackend::cross_entropy_forward(float* losses, int32_t* argmax, const void* logits,
                                        const int32_t* targets, int N, int V, int ignore_index,
                                        DType dt) {
  check_cross_entropy("cross_entropy_forward", N, V);
  return dispatch(dt, "cross_entropy_forward", [&](auto s) {
    using S = decltype(s);
    return cross_entropy_forward_kernel<S>(losses, argmax, as<S>(logits), targets, N, V,
                                           ignore_index);
  });
}

void CpuBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                        int N, int V, int ignore_index, float dloss, DType dt) {
  check_cross_entropy("cross_entropy_backward", N, V);
  dispatch(dt, "cross_entropy_backward", [&](auto s) {
    using S = decltype(s);
    cross_entropy_backward_kernel<S>(as<S>(dlogits), as<S>(logits), targets, N, V, ignore_index,
                                     dloss);
  });
}

void CpuBackend::argmax_rows(int32_t* out, const void* logits, int N, int V, DType dt) {
  check_cross_entropy("argmax_rows", N, V);
  KOLO_CHECK_ARG(out != nullptr || N == 0, "argmax_rows: out is null");
  dispatch(dt, "argmax_rows", [&](auto s) {
    using S = decltype(s);
    const auto* x = as<S>(logits);
    parallel_for(N, 1, [&](size_t first, size_t last) {
      for (size_t n = first; n < last; ++n) {
        const auto* row = x + n * V;
        out[n] = first_index_of<S>(row, V, row_max<S>(row, V));
      }
    });
  });
}

}  // namespace kolo::trainer
