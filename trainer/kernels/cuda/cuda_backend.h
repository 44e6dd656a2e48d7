// The CUDA implementation of kolo::trainer::Backend (kernels/cuda/), in builds with CUDA
// (KOLO_HAVE_CUDA; library kolo_trainer_cuda). The header needs no CUDA headers.
#pragma once

#include "trainer/kernels/backend.h"

namespace kolo::trainer {

// The backend of the current CUDA device: cuBLASLt for the linear layers, cuBLAS batched GEMMs
// for attention, CUDA kernels for the rest, all on one stream of its own. Buffers are device
// memory; the integer index arrays and argmax_rows' output stay host memory (backend.h).
// Created on first use; throws kolo::Error naming CUDA's message when no device can be used.
Backend& cuda_backend();
// One process per GPU: makes device local_rank % (visible devices) current on this thread, then
// returns cuda_backend() (the device is the one current at its first use).
Backend& cuda_backend_for(int local_rank);

}  // namespace kolo::trainer
