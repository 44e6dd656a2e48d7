// The engine's CUDA + NCCL device backend (library kolo_engine_cuda, built with CUDA and NCCL):
// per process set, a non-blocking stream on the tensors' device, a device fusion buffer packed
// and unpacked by the fusion kernels (convert.h), and an NCCL communicator whose unique id
// travels through the set's own store. Producers are waited for through CUDA events recorded on
// their streams at submission. The header needs no CUDA headers. See docs/gpu.md.
#pragma once

#include <chrono>
#include <memory>

#include "fusion/device.h"

namespace kolo::engine {

// `timeout` bounds joining each set's NCCL communicator and every wait for its stream; a lost
// peer or a passed deadline aborts the communicator (ncclCommAbort) and fails the engine's ops.
std::shared_ptr<DeviceBackend> cuda_device_backend(
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace kolo::engine
