// Element-wise kernels: GELU (exact erf form), ReLU, tanh, add and dropout, each one pass of
// 8-lane fp32 math over the storage dtype (GELU 16 lanes wide where the CPU has AVX-512). Dropout
// draws its mask from Philox by position, so the forward and the backward (or a recompute) see the
// same mask without storing it.
#include <cmath>

#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/avx512.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"
#include "trainer/kernels/cpu/philox8.h"
#include "trainer/kernels/cpu/vec.h"
#include "trainer/kernels/cpu/vec_math.h"

namespace kolo::trainer {
namespace cpu {
namespace {

// Elements per block of the pool's split: a multiple of the lanes and of the dropout chunk.
constexpr size_t kGrain = 16384;

// out[i] = f(a[i]) and out[i] = f(a[i], b[i]) over the storage dtype; out may alias an input.
template <typename S, typename F>
void map1(void* out, const void* a, size_t n, F f) {
  auto* o = as<S>(out);
  const auto* x = as<S>(a);
  for_each_vector(n, kGrain, [&](size_t i, size_t left) {
    store_n<S>(o + i, f(load_n<S>(x + i, left)), left);
  });
}
template <typename S, typename F>
void map2(void* out, const void* a, const void* b, size_t n, F f) {
  auto* o = as<S>(out);
  const auto* x = as<S>(a);
  const auto* y = as<S>(b);
  for_each_vector(n, kGrain, [&](size_t i, size_t left) {
    store_n<S>(o + i, f(load_n<S>(x + i, left), load_n<S>(y + i, left)), left);
  });
}

inline __m256 tanh8(__m256 x) {
  // Only the pooler uses tanh ([B, C] elements): libm's tanhf per lane is accurate and cheap
  // enough there.
  alignas(32) float v[kLanes];
  _mm256_store_ps(v, x);
  for (float& e : v) e = std::tanh(e);
  return _mm256_load_ps(v);
}

// out = in * keep / (1 - p), the uniforms generated a chunk at a time into scratch.
template <typename S>
void dropout_kernel(void* out, const void* in, size_t n, float p, uint64_t seed, uint64_t offset) {
  if (p == 0.0f) {
    if (out != in) std::memcpy(out, in, n * sizeof(typename S::T));
    return;
  }
  constexpr size_t kChunk = 1024;
  static_assert(kGrain % kChunk == 0);
  const __m256 pv = _mm256_set1_ps(p);
  const __m256 scale = _mm256_set1_ps(1.0f / (1.0f - p));
  auto* o = as<S>(out);
  const auto* x = as<S>(in);
  parallel_for(n, kGrain, [&](size_t begin, size_t end) {
    float* u = scratch(Slot::kF, kChunk);
    for (size_t start = begin; start < end; start += kChunk) {
      const size_t len = std::min(kChunk, end - start);
      fill_uniforms(seed, offset + start, u, len);
      for (size_t i = 0; i < len; i += kLanes) {
        const size_t left = len - i;
        const __m256 v =
            _mm256_mul_ps(load_n<S>(x + start + i, left), dropout_factor8(u + i, pv, scale));
        store_n<S>(o + start + i, v, left);
      }
    }
  });
}

}  // namespace
}  // namespace cpu

using namespace cpu;

void CpuBackend::gelu_forward(void* out, const void* x, size_t n, DType dt) {
  dispatch(dt, "gelu_forward", [&](auto s) {
    using S = decltype(s);
    if (!use_avx512()) return map1<S>(out, x, n, [](__m256 v) { return gelu8(v); });
    parallel_for(n, kGrain, [&](size_t b, size_t e) {
      avx512::gelu_forward(as<S>(out) + b, as<S>(x) + b, e - b, dt);
    });
  });
}

void CpuBackend::gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) {
  dispatch(dt, "gelu_backward", [&](auto s) {
    using S = decltype(s);
    if (!use_avx512()) {
      return map2<S>(dx, dout, x, n,
                     [](__m256 d, __m256 v) { return _mm256_mul_ps(d, gelu_grad8(v)); });
    }
    parallel_for(n, kGrain, [&](size_t b, size_t e) {
      avx512::gelu_backward(as<S>(dx) + b, as<S>(dout) + b, as<S>(x) + b, e - b, dt);
    });
  });
}

void CpuBackend::relu_forward(void* out, const void* x, size_t n, DType dt) {
  dispatch(dt, "relu_forward", [&](auto s) {
    map1<decltype(s)>(out, x, n, [](__m256 v) { return _mm256_max_ps(v, _mm256_setzero_ps()); });
  });
}

void CpuBackend::relu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) {
  dispatch(dt, "relu_backward", [&](auto s) {
    map2<decltype(s)>(dx, dout, x, n, [](__m256 d, __m256 v) {
      return _mm256_and_ps(d, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
    });
  });
}

void CpuBackend::tanh_forward(void* out, const void* x, size_t n, DType dt) {
  dispatch(dt, "tanh_forward",
           [&](auto s) { map1<decltype(s)>(out, x, n, [](__m256 v) { return tanh8(v); }); });
}

void CpuBackend::tanh_backward(void* dx, const void* dout, const void* y, size_t n, DType dt) {
  dispatch(dt, "tanh_backward", [&](auto s) {
    map2<decltype(s)>(dx, dout, y, n, [](__m256 d, __m256 v) {
      return _mm256_mul_ps(d, _mm256_fnmadd_ps(v, v, _mm256_set1_ps(1.0f)));
    });
  });
}

void CpuBackend::add(void* out, const void* a, const void* b, size_t n, DType dt) {
  dispatch(dt, "add", [&](auto s) {
    map2<decltype(s)>(out, a, b, n, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); });
  });
}

void CpuBackend::dropout_forward(void* out, const void* in, size_t n, float p, uint64_t seed,
                                 uint64_t offset, DType dt) {
  check_dropout_p("dropout_forward", p);
  dispatch(dt, "dropout_forward",
           [&](auto s) { dropout_kernel<decltype(s)>(out, in, n, p, seed, offset); });
}

void CpuBackend::dropout_backward(void* dx, const void* dout, size_t n, float p, uint64_t seed,
                                  uint64_t offset, DType dt) {
  check_dropout_p("dropout_backward", p);
  dispatch(dt, "dropout_backward",
           [&](auto s) { dropout_kernel<decltype(s)>(dx, dout, n, p, seed, offset); });
}

}  // namespace kolo::trainer
