// Softmax cross-entropy fused with its log-softmax, and the argmax of logits rows. Per row one
// walk from memory, chunk by chunk, for the maximum and the sum of e^{x - max} (row_softmax),
// loss = log(sum) + max - x[target]; the search for the first maximum follows while the row
// sits in cache, so a caller that wants the loss and the argmax reads the logits once. The backward
// recomputes the two statistics and writes (softmax - onehot) * dloss / counted (keeping the
// exponentials of the sum in fp32 and scaling them); it reads each element before writing it, so
// dlogits may alias logits. Rows are split across the kernel pool; the loss is summed over rows in
// order, at any thread count.
#include <algorithm>
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

// Rows are walked in chunks of this many elements: the chunk's maximum, then its exponentials
// against the running maximum while the next chunk is prefetched, so each row comes from
// memory once, behind the arithmetic. A larger maximum in a later chunk rescales the sum so far.
constexpr size_t kChunk = 2048;

struct RowSoftmax {
  float max;  // the row's largest value (NaN skipped)
  float sum;  // of e^{x - max}
};

// With `out`, the exponentials are stored there (fp32) and shifts[c] is the running maximum that
// chunk c's were taken against: out[i] e^{shifts[c] - max} = e^{x[i] - max}.
template <typename S>
RowSoftmax row_softmax(const typename S::T* x, size_t V, float* out, float* shifts) {
  float mx = -__builtin_inff(), sum = 0.0f;
  for (size_t c = 0, first = 0; first < V; ++c, first += kChunk) {
    const size_t len = std::min(kChunk, V - first);
    const float m = std::max(mx, row_max<S>(x + first, len));
    if (m > mx) {
      sum *= std::exp(mx - m);
      mx = m;
    }
    sum += exp_sum<S>(x + first, len, mx, out == nullptr ? nullptr : out + first, true);
    if (shifts != nullptr) shifts[c] = mx;
  }
  return {mx, sum};
}

template <typename S>
float cross_entropy_forward_kernel(float* losses, int32_t* argmax, const typename S::T* logits,
                                   const int32_t* targets, int N, int V, int ignore_index,
                                   int counted) {
  float* row_loss = scratch(Slot::kA, N);
  parallel_for(N, 1, [&](size_t first, size_t last) {
    for (size_t n = first; n < last; ++n) {
      const auto* x = logits + n * V;
      row_loss[n] = 0.0f;
      const bool counts = targets[n] != ignore_index;
      if (!counts && argmax == nullptr) continue;
      float mx;
      if (counts) {
        const RowSoftmax st = row_softmax<S>(x, V, nullptr, nullptr);
        row_loss[n] = std::log(st.sum) + st.max - S::load1(x + targets[n]);
        mx = st.max;
      } else {
        mx = row_max<S>(x, V);
      }
      // The row is in cache now.
      if (argmax != nullptr) argmax[n] = first_index_of<S>(x, V, mx);
    }
  });
  double total = 0;
  for (int n = 0; n < N; ++n) {
    if (targets[n] != ignore_index) total += row_loss[n];
    if (losses != nullptr) losses[n] = row_loss[n];
  }
  return counted == 0 ? 0.0f : static_cast<float>(total / counted);
}

template <typename S>
void cross_entropy_backward_kernel(typename S::T* dlogits, const typename S::T* logits,
                                   const int32_t* targets, int N, int V, int ignore_index,
                                   int counted, float dloss) {
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
      float* shifts = scratch(Slot::kC, (v + kChunk - 1) / kChunk);
      const RowSoftmax st = row_softmax<S>(x, v, e, shifts);
      for (size_t c = 0, first = 0; first < v; ++c, first += kChunk) {
        const size_t end = std::min(v, first + kChunk);
        const __m256 k = _mm256_set1_ps(row_scale / st.sum * std::exp(shifts[c] - st.max));
        // The target's -dloss/counted is applied in the vector that holds it, before its store.
        for (size_t j = first; j < end; j += kLanes) {
          const size_t left = end - j;
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
  const int counted = counted_rows("cross_entropy_forward", targets, N, V, ignore_index);
  return dispatch(dt, "cross_entropy_forward", [&](auto s) {
    using S = decltype(s);
    return cross_entropy_forward_kernel<S>(losses, argmax, as<S>(logits), targets, N, V,
                                           ignore_index, counted);
  });
}

void CpuBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                        int N, int V, int ignore_index, float dloss, DType dt) {
  check_cross_entropy("cross_entropy_backward", N, V);
  const int counted = counted_rows("cross_entropy_backward", targets, N, V, ignore_index);
  dispatch(dt, "cross_entropy_backward", [&](auto s) {
    using S = decltype(s);
    cross_entropy_backward_kernel<S>(as<S>(dlogits), as<S>(logits), targets, N, V, ignore_index,
                                     counted, dloss);
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
