// Device-side packing of fusion buffers: one launch converts a batch of spans (a fused group's
// tensors into the buffer, or the buffer back into them), every element scaled and cast in the
// same pass, as fusion/pack.h does on the host. The header needs no CUDA headers: streams are
// passed as void* (a cudaStream_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/base/dtype.h"

namespace kolo::fusion::cuda {

// count elements from src (dtype `from`) to dst (dtype `to`), both device pointers.
struct Span {
  const void* src;
  void* dst;
  uint64_t count;
};

enum class ConvertPath { kKernel, kCopy };

// How spans from `from` to `to` scaled by `scale` are converted: the kernel between the float
// types (float32, float16, bfloat16, either way; the scale applied in fp32), or a device copy
// for any dtype to itself at scale 1. Anything else throws kInvalidArgument naming the dtypes
// and the scale. Host code: no device needed.
ConvertPath convert_path(DType from, DType to, double scale);

// Spans per kernel launch (their table travels as the kernel's argument).
inline constexpr size_t kMaxSpansPerLaunch = 128;

// Converts every span on `stream` (a cudaStream_t; null: the legacy default stream), without
// waiting for it. Throws kolo::Error with CUDA's message when a launch or copy fails. Only in
// builds with CUDA (KOLO_HAVE_CUDA, library kolo_fusion_cuda).
void convert_spans(const Span* spans, size_t n, DType from, DType to, double scale, void* stream);

}  // namespace kolo::fusion::cuda
