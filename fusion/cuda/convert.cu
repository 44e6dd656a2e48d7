// The device converter's kernels. One launch takes up to kMaxSpansPerLaunch spans: blockIdx.y
// picks the span, the blocks along x stride over its elements four at a time (one 16- or
// 8-byte load and store per thread and step where both ends are aligned, element by element
// otherwise and for the tail). Values go through fp32: x * scale, rounded to nearest even on
// store, as kolo::convert does on the host.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "comm/base/cuda_check.h"
#include "comm/base/error.h"
#include "fusion/cuda/codec.cuh"
#include "fusion/cuda/convert.h"

namespace kolo::fusion::cuda {
namespace {

struct SpanTable {
  Span spans[kMaxSpansPerLaunch];
};

// Scale 1 never multiplies (a multiply would quieten a signalling NaN), as on the host.
__device__ inline float scaled(float v, float scale) {
  return scale == 1.0f ? v : v * scale;
}

template <typename T>
struct alignas(4 * sizeof(T)) Four {
  T v[4];
};

template <typename From, typename To>
__global__ void convert_kernel(SpanTable table, float scale) {
  const Span span = table.spans[blockIdx.y];
  const auto* src = static_cast<const From*>(span.src);
  auto* dst = static_cast<To*>(span.dst);
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t first = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool aligned = reinterpret_cast<uintptr_t>(src) % sizeof(Four<From>) == 0 &&
                       reinterpret_cast<uintptr_t>(dst) % sizeof(Four<To>) == 0;
  uint64_t done = 0;
  if (aligned) {
    const uint64_t quads = span.count / 4;
    const auto* in = reinterpret_cast<const Four<From>*>(src);
    auto* out = reinterpret_cast<Four<To>*>(dst);
    for (uint64_t q = first; q < quads; q += stride) {
      const Four<From> x = in[q];
      Four<To> y;
#pragma unroll
      for (int k = 0; k < 4; ++k) y.v[k] = from_float<To>(scaled(to_float(x.v[k]), scale));
      out[q] = y;
    }
    done = quads * 4;
  }
  for (uint64_t i = done + first; i < span.count; i += stride)
    dst[i] = from_float<To>(scaled(to_float(src[i]), scale));
}

void check(cudaError_t status, const char* what) {
  check_cuda(status, "device pack", what);
}

template <typename From, typename To>
void launch(const Span* spans, size_t n, float scale, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr uint64_t kMaxBlocks = 2048;  // per span; each thread then strides
  for (size_t at = 0; at < n; at += kMaxSpansPerLaunch) {
    const size_t batch = std::min(kMaxSpansPerLaunch, n - at);
    SpanTable table{};
    uint64_t most = 0;
    for (size_t i = 0; i < batch; ++i) {
      table.spans[i] = spans[at + i];
      most = std::max(most, spans[at + i].count);
    }
    const uint64_t blocks =
        std::clamp<uint64_t>((most / 4 + kThreads - 1) / kThreads, 1, kMaxBlocks);
    convert_kernel<From, To>
        <<<dim3(unsigned(blocks), unsigned(batch)), kThreads, 0, stream>>>(table, scale);
    check(cudaGetLastError(), "kernel launch");
  }
}

template <typename From>
void launch_to(DType to, const Span* spans, size_t n, float scale, cudaStream_t stream) {
  switch (to) {
    case DType::kFloat32: return launch<From, float>(spans, n, scale, stream);
    case DType::kFloat16: return launch<From, __half>(spans, n, scale, stream);
    default: return launch<From, __nv_bfloat16>(spans, n, scale, stream);
  }
}

}  // namespace

void convert_spans(const Span* spans, size_t n, DType from, DType to, double scale,
                   void* stream_ptr) {
  const ConvertPath path = convert_path(from, to, scale);
  KOLO_CHECK_ARG(spans != nullptr || n == 0, "device pack: the span list is null");
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (path == ConvertPath::kCopy) {
    for (size_t i = 0; i < n; ++i)
      check(cudaMemcpyAsync(spans[i].dst, spans[i].src, spans[i].count * dtype_size(from),
                            cudaMemcpyDeviceToDevice, stream),
            "device copy");
    return;
  }
  const float s = static_cast<float>(scale);
  switch (from) {
    case DType::kFloat32: return launch_to<float>(to, spans, n, s, stream);
    case DType::kFloat16: return launch_to<__half>(to, spans, n, s, stream);
    default: return launch_to<__nv_bfloat16>(to, spans, n, s, stream);
  }
}

}  // namespace kolo::fusion::cuda
