// A host stand-in for the engine's device backend (fusion/device.h), for tests on machines
// without a GPU: "device" memory is host memory, the stream is the engine loop's thread, and
// the collectives are the process set's Communicator. It records what the engine asked, in
// order, so tests can check the device path's calls as well as its results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "comm/communicator.h"
#include "fusion/device.h"

namespace kolo::testing {

using engine::DeviceBackend;
using engine::DeviceSet;

// What the engine asked of one rank's stand-in, in order.
struct Calls {
  std::mutex mutex;
  std::vector<std::string> seen;
  std::vector<int> opened;  // the device of every open()
  bool fail_synchronize = false;
  void add(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(std::move(what));
  }
  size_t count(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex);
    return static_cast<size_t>(std::count_if(
        seen.begin(), seen.end(), [&](const auto& s) { return s.rfind(prefix, 0) == 0; }));
  }
  size_t first(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i].rfind(prefix, 0) == 0) return i;
    return seen.size();
  }
};

class HostDeviceSet final : public DeviceSet {
 public:
  HostDeviceSet(Communicator& comm, int device, std::shared_ptr<Calls> calls)
      : comm_(comm), device_(device), calls_(std::move(calls)) {}
  int device() const override { return device_; }
  void wait_ready(const std::shared_ptr<void>& ready) override {
    if (ready) calls_->add("wait " + *static_cast<std::string*>(ready.get()));
  }
  char* reserve(size_t bytes) override {
    if (bytes > buffer_.size()) buffer_.assign(bytes, 0x7f);  // not zero: zero() must be asked
    return buffer_.data();
  }
  void zero(void* dst, size_t bytes) override {
    calls_->add("zero");
    std::memset(dst, 0, bytes);
  }
  void convert(const fusion::cuda::Span* spans, size_t n, DType from, DType to,
               double scale) override {
    calls_->add("convert " + std::to_string(n));
    for (size_t i = 0; i < n; ++i)
      kolo::convert(spans[i].dst, to, spans[i].src, from, spans[i].count, scale);
  }
  void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    calls_->add(std::string("allreduce ") + dtype_name(dtype));
    comm_.allreduce(send, recv, count, dtype, op);
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    calls_->add("broadcast");
    comm_.broadcast(data, count, dtype, root);
  }
  void allgatherv(const void* send, size_t count, void* recv, const std::vector<size_t>& counts,
                  DType dtype) override {
    calls_->add("allgatherv");
    comm_.allgatherv(send, count, recv, counts, dtype);
  }
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType dtype) override {
    calls_->add("alltoallv");
    comm_.alltoallv(send, send_counts, recv, recv_counts, dtype);
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override {
    calls_->add("reduce_scatter");
    comm_.reduce_scatter(send, recv, recv_count, dtype, op);
  }
  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
              int root) override {
    calls_->add("reduce");
    std::vector<char> all(count * dtype_size(dtype));
    comm_.allreduce(send, all.data(), count, dtype, op);
    if (comm_.rank() == root) std::memcpy(recv, all.data(), all.size());
  }
  void copy_to_host(void* host, const void* src, size_t bytes) override {
    calls_->add("copy_to_host");
    std::memcpy(host, src, bytes);
  }
  void copy_from_host(void* dst, const void* host, size_t bytes) override {
    calls_->add("copy_from_host");
    std::memcpy(dst, host, bytes);
  }
  std::shared_ptr<void> allocate(size_t bytes) override {
    calls_->add("allocate");
    auto held = std::make_shared<std::vector<char>>(bytes, 0x5a);
    return std::shared_ptr<void>(held, held->data());
  }
  void synchronize() override {
    if (calls_->fail_synchronize)
      throw Error(ErrorCode::kPeerLost,
                  "stand-in device: rank " + std::to_string(comm_.rank()) + " lost its peer");
    calls_->add("synchronize");
  }

 private:
  Communicator& comm_;
  int device_;
  std::shared_ptr<Calls> calls_;
  std::vector<char> buffer_;
};

class HostDevice final : public DeviceBackend {
 public:
  explicit HostDevice(std::shared_ptr<Calls> calls) : calls_(std::move(calls)) {}
  std::shared_ptr<void> ready(int device, void* stream) override {
    return std::make_shared<std::string>("device " + std::to_string(device) + " stream " +
                                         std::to_string(reinterpret_cast<uintptr_t>(stream)));
  }
  std::unique_ptr<DeviceSet> open(Communicator& comm, int device) override {
    {
      std::lock_guard<std::mutex> lock(calls_->mutex);
      calls_->opened.push_back(device);
    }
    return std::make_unique<HostDeviceSet>(comm, device, calls_);
  }

 private:
  std::shared_ptr<Calls> calls_;
};

}  // namespace kolo::testing
