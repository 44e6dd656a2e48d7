// Element-wise kernels: GELU (exact erf form), ReLU, tanh, add and dropout, fp32 math over the
// storage dtype with grid-stride loops. Dropout keeps element i iff rng::uniform(seed, offset + i)
// >= p, the same Philox stream the CPU backend draws, so both backends drop the same elements.
#include "trainer/kernels/checks.h"
#include "trainer/kernels/cpu/rng.h"
#include "trainer/kernels/cuda/common.cuh"

namespace kolo::trainer {
namespace cuda {
namespace {

// With `packed` (every pointer 16-byte aligned) each thread moves 16 bytes at a time and the
// elements past the last whole pack one by one; otherwise all one by one. f sees each element
// with its index either way, so both give the same values.
template <typename T, typename F>
__global__ void map1_kernel(T* out, const T* a, size_t n, bool packed, F f) {
  using P = Pack16<T>;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t packs = packed ? n / P::kSize : 0;
  for (size_t p = first; p < packs; p += stride) {
    const P x = reinterpret_cast<const P*>(a)[p];
    P y;
#pragma unroll
    for (int k = 0; k < P::kSize; ++k)
      y.v[k] = from_float<T>(f(to_float(x.v[k]), p * P::kSize + k));
    reinterpret_cast<P*>(out)[p] = y;
  }
  for (size_t i = packs * P::kSize + first; i < n; i += stride)
    out[i] = from_float<T>(f(to_float(a[i]), i));
}
template <typename T, typename F>
__global__ void map2_kernel(T* out, const T* a, const T* b, size_t n, bool packed, F f) {
  using P = Pack16<T>;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t packs = packed ? n / P::kSize : 0;
  for (size_t p = first; p < packs; p += stride) {
    const P x = reinterpret_cast<const P*>(a)[p], z = reinterpret_cast<const P*>(b)[p];
    P y;
#pragma unroll
    for (int k = 0; k < P::kSize; ++k)
      y.v[k] = from_float<T>(f(to_float(x.v[k]), to_float(z.v[k])));
    reinterpret_cast<P*>(out)[p] = y;
  }
  for (size_t i = packs * P::kSize + first; i < n; i += stride)
    out[i] = from_float<T>(f(to_float(a[i]), to_float(b[i])));
}

// Blocks for n elements of T: one pack of 16 bytes a thread where packed.
template <typename T>
unsigned map_blocks(size_t n, bool packed) {
  return blocks_for(packed ? (n + Pack16<T>::kSize - 1) / Pack16<T>::kSize : n);
}

constexpr float kSqrtHalf = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

struct Gelu {
  __device__ float operator()(float x, size_t) const {
    return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
  }
};
struct GeluGrad {  // d/dx of x Phi(x) = Phi(x) + x phi(x)
  __device__ float operator()(float d, float x) const {
    return d * (0.5f * (1.0f + erff(x * kSqrtHalf)) + x * kInvSqrt2Pi * __expf(-0.5f * x * x));
  }
};
struct Relu {
  __device__ float operator()(float x, size_t) const { return fmaxf(x, 0.0f); }
};
struct ReluGrad {
  __device__ float operator()(float d, float x) const { return x > 0.0f ? d : 0.0f; }
};
struct Tanh {
  __device__ float operator()(float x, size_t) const { return tanhf(x); }
};
struct TanhGrad {  // from the saved output y
  __device__ float operator()(float d, float y) const { return d * (1.0f - y * y); }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Dropout {
  float p, scale;
  uint64_t seed, offset;
  __device__ float operator()(float x, size_t i) const {
    return rng::uniform(seed, offset + i) >= p ? x * scale : 0.0f;
  }
};

template <typename F>
void map1(CudaBackend& be, DType dt, const char* kernel, void* out, const void* a, size_t n, F f) {
  if (n == 0) return;
  dispatch(dt, kernel, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = aligned16(out) && aligned16(a);
    map1_kernel<T><<<map_blocks<T>(n, packed), kThreads, 0, be.stream()>>>(
        static_cast<T*>(out), static_cast<const T*>(a), n, packed, f);
  });
  check(cudaGetLastError(), kernel);
}
template <typename F>
void map2(CudaBackend& be, DType dt, const char* kernel, void* out, const void* a, const void* b,
          size_t n, F f) {
  if (n == 0) return;
  dispatch(dt, kernel, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = aligned16(out) && aligned16(a) && aligned16(b);
    map2_kernel<T><<<map_blocks<T>(n, packed), kThreads, 0, be.stream()>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, packed, f);
  });
  check(cudaGetLastError(), kernel);
}

void dropout(CudaBackend& be, const char* kernel, void* out, const void* in, size_t n, float p,
             uint64_t seed, uint64_t offset, DType dt) {
  check_dropout_p(kernel, p);
  if (p == 0.0f) {
    dispatch(dt, kernel, [](auto) {});
    if (out != in && n > 0) {
      check(cudaMemcpyAsync(out, in, n * dtype_size(dt), cudaMemcpyDeviceToDevice, be.stream()),
            kernel);
    }
    return;
  }
  map1(be, dt, kernel, out, in, n, Dropout{p, 1.0f / (1.0f - p), seed, offset});
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::gelu_forward(void* out, const void* x, size_t n, DType dt) {
  map1(*this, dt, "gelu_forward", out, x, n, Gelu{});
}
void CudaBackend::gelu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) {
  map2(*this, dt, "gelu_backward", dx, dout, x, n, GeluGrad{});
}
void CudaBackend::relu_forward(void* out, const void* x, size_t n, DType dt) {
  map1(*this, dt, "relu_forward", out, x, n, Relu{});
}
void CudaBackend::relu_backward(void* dx, const void* dout, const void* x, size_t n, DType dt) {
  map2(*this, dt, "relu_backward", dx, dout, x, n, ReluGrad{});
}
void CudaBackend::tanh_forward(void* out, const void* x, size_t n, DType dt) {
  map1(*this, dt, "tanh_forward", out, x, n, Tanh{});
}
void CudaBackend::tanh_backward(void* dx, const void* dout, const void* y, size_t n, DType dt) {
  map2(*this, dt, "tanh_backward", dx, dout, y, n, TanhGrad{});
}
void CudaBackend::add(void* out, const void* a, const void* b, size_t n, DType dt) {
  map2(*this, dt, "add", out, a, b, n, Add{});
}
void CudaBackend::dropout_forward(void* out, const void* in, size_t n, float p, uint64_t seed,
                                  uint64_t offset, DType dt) {
  dropout(*this, "dropout_forward", out, in, n, p, seed, offset, dt);
}
void CudaBackend::dropout_backward(void* dx, const void* dout, size_t n, float p, uint64_t seed,
                                   uint64_t offset, DType dt) {
  dropout(*this, "dropout_backward", dx, dout, n, p, seed, offset, dt);
}

}  // namespace kolo::trainer
