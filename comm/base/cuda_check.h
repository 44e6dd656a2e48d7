// The one check of a CUDA runtime call's status for kolo's device code (included only where
// CUDA is built): kIo naming the caller and the call, with CUDA's name and text for the error.
#pragma once

#include <cuda_runtime_api.h>

#include "comm/base/error.h"

namespace kolo {

inline void check_cuda(cudaError_t status, const char* who, const char* what) {
  if (status != cudaSuccess)
    KOLO_THROW(ErrorCode::kIo, who, ": ", what, " failed: ", cudaGetErrorName(status), " (",
               cudaGetErrorString(status), ")");
}

}  // namespace kolo
