// Device-side element codecs shared by kolo's CUDA code (the fusion packer, the trainer's CUDA
// kernels): a storage element to fp32 and back, rounding to nearest even as kolo::convert does
// on the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kolo::fusion::cuda {

__device__ inline float to_float(float v) {
  return v;
}
__device__ inline float to_float(__half v) {
  return __half2float(v);
}
__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace kolo::fusion::cuda
