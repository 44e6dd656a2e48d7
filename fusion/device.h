// The engine's device path, behind an interface so that the engine itself links no CUDA or
// NCCL: a DeviceBackend (EngineOptions::device) turns tensors in device memory into work on one
// stream per process set, with a device fusion buffer and a collective communicator of its own.
// kolo_engine_cuda provides the CUDA + NCCL one (fusion/cuda_device.h); the engine's
// tests drive the same code with a host stand-in. See docs/gpu.md.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "fusion/cuda/convert.h"

namespace kolo {
class Communicator;
}

namespace kolo::engine {

// One process set's device context: every call is queued on the context's stream, in order,
// and synchronize() waits for them. Calls come from the engine's loop only, identically on
// every rank of the set.
class DeviceSet {
 public:
  virtual ~DeviceSet() = default;
  // The device this context runs on.
  virtual int device() const = 0;
  // The stream waits for a producer's work marked by DeviceBackend::ready (null: nothing).
  virtual void wait_ready(const std::shared_ptr<void>& ready) = 0;
  // A device fusion buffer of at least `bytes`; grows only, its contents not kept.
  virtual char* reserve(size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;
  // Pack / unpack: every span converted from `from` to `to` and scaled, in one pass
  // (fusion::cuda::convert_path's rules).
  virtual void convert(const fusion::cuda::Span* spans, size_t n, DType from, DType to,
                       double scale) = 0;
  virtual void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  // Counts are elements per rank of the set, blocks packed in rank order (Communicator's
  // allgatherv / alltoallv / reduce_scatter).
  virtual void allgatherv(const void* send, size_t count, void* recv,
                          const std::vector<size_t>& counts, DType dtype) = 0;
  virtual void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                         const std::vector<size_t>& recv_counts, DType dtype) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                              ReduceOp op) = 0;
  // `count` elements reduced into root's recv (recv is not written on the other ranks).
  virtual void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      int root) = 0;
  // Copies between host memory and device memory, in stream order; both return once done.
  virtual void copy_to_host(void* host, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host, size_t bytes) = 0;
  // Device memory for a result the engine sizes, freed with the last holder (after the
  // stream's use of it: the executor synchronizes before a handle completes).
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  // Returns once the queued work is done; throws kolo::Error (a lost peer, a passed deadline)
  // after which the context is unusable.
  virtual void synchronize() = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // On the submitting thread: marks the work queued so far on `stream` (a cudaStream_t; null:
  // the legacy default stream) of `device`, which produces a tensor's contents. Null when there
  // is nothing to wait for.
  virtual std::shared_ptr<void> ready(int device, void* stream) = 0;
  // On the loop, at the same response on every rank of the set (collective over `comm`): the
  // set's context on `device`.
  virtual std::unique_ptr<DeviceSet> open(Communicator& comm, int device) = 0;
};

}  // namespace kolo::engine
