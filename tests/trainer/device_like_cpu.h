// The CPU kernels behind a backend that calls itself a device (device 0, with a stream of its
// own): the trainer must reach its buffers only through copy_from_host / copy_to_host and hand
// them to the engine as device tensors, as it does with the CUDA backend. Counts the copies.
#pragma once

#include <cstdint>

#include "trainer/kernels/cpu/cpu_backend.h"

namespace kolo::trainer {

class DeviceLikeCpu final : public CpuBackend {
 public:
  Device device() const override { return Device::kCuda; }
  const char* name() const override { return "device-like cpu"; }
  int device_id() const override { return 0; }
  void* device_stream() const override { return reinterpret_cast<void*>(uintptr_t{7}); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    ++copies;
    CpuBackend::copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    ++copies;
    CpuBackend::copy_to_host(dst, src, bytes);
  }
  int copies = 0;
};

}  // namespace kolo::trainer
