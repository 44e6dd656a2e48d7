// Where engine_overhead's tensors live and what its direct floor is: host memory reduced by
// the Communicator, or (--device cuda, builds with NCCL) device memory reduced by a raw NCCL
// allreduce on a stream of its own, waited for, which is what the engine's device path adds
// its cost to.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.h"
#include "fusion/engine.h"

namespace kolo::bench {

class BenchMemory {
 public:
  virtual ~BenchMemory() = default;
  // `count` floats, all 1.0; freed with the BenchMemory.
  virtual float* alloc(size_t count) = 0;
  virtual int device() const = 0;  // -1: host memory
  // The floor: one allreduce (sum) of `count` floats in place, done when this returns.
  virtual void direct_allreduce(float* data, size_t count) = 0;
  // What the engine needs to run these tensors (EngineOptions::device; null for host memory).
  virtual std::shared_ptr<engine::DeviceBackend> backend() const { return nullptr; }
};

std::unique_ptr<BenchMemory> host_memory(Communicator& comm);
// Device 0's memory (throws kInvalidArgument in builds without CUDA and NCCL).
std::unique_ptr<BenchMemory> cuda_memory(Communicator& comm);

}  // namespace kolo::bench
