// CudaDeviceBackend: the engine's device path on CUDA streams and NCCL (cuda_device.h).
#include "fusion/cuda_device.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "comm/base/cuda_check.h"
#include "comm/base/error.h"
#include "comm/communicator.h"
#include "comm/nccl/nccl_communicator.h"

namespace kolo::engine {
namespace {

void check(cudaError_t status, const char* what) {
  check_cuda(status, "engine device path", what);
}

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

class CudaDeviceSet final : public DeviceSet {
 public:
  CudaDeviceSet(Communicator& comm, int device, std::chrono::milliseconds timeout)
      : device_(device < 0 ? current_device() : device) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      nccl_ = std::make_unique<nccl::NcclCommunicator>(*comm.store(), "engine.nccl", comm.rank(),
                                                       comm.size(), timeout);
    } catch (...) {
      cudaStreamDestroy(stream_);
      throw;
    }
  }
  ~CudaDeviceSet() override {
    cudaSetDevice(device_);
    if (!nccl_->aborted()) cudaStreamSynchronize(stream_);
    nccl_.reset();
    cudaFree(buffer_);
    cudaStreamDestroy(stream_);
  }

  int device() const override { return device_; }

  void wait_ready(const std::shared_ptr<void>& ready) override {
    if (!ready) return;
    on_device();
    check(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(ready.get()), 0),
          "cudaStreamWaitEvent on the producer's event");
  }

  char* reserve(size_t bytes) override {
    if (bytes > capacity_) {
      on_device();
      const size_t grown = std::max(bytes, capacity_ * 2);
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize before growing the buffer");
      check(cudaFree(buffer_), "cudaFree");
      buffer_ = nullptr;
      capacity_ = 0;
      check(cudaMalloc(&buffer_, grown), "cudaMalloc of the device fusion buffer");
      capacity_ = grown;
    }
    return static_cast<char*>(buffer_);
  }

  void zero(void* dst, size_t bytes) override {
    on_device();
    check(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
  }

  void convert(const fusion::cuda::Span* spans, size_t n, DType from, DType to,
               double scale) override {
    on_device();
    fusion::cuda::convert_spans(spans, n, from, to, scale, stream_);
  }

  void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    on_device();
    nccl_->allreduce(send, recv, count, dtype, op, stream_);
  }

  void broadcast(void* data, size_t count, DType dtype, int root) override {
    on_device();
    nccl_->broadcast(data, data, count, dtype, root, stream_);
  }

  void allgatherv(const void* send, size_t count, void* recv, const std::vector<size_t>& counts,
                  DType dtype) override {
    on_device();
    nccl_->allgatherv(send, count, recv, counts, dtype, stream_);
  }

  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType dtype) override {
    on_device();
    nccl_->alltoallv(send, send_counts, recv, recv_counts, dtype, stream_);
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override {
    on_device();
    nccl_->reduce_scatter(send, recv, recv_count, dtype, op, stream_);
  }

  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
              int root) override {
    on_device();
    nccl_->reduce(send, recv, count, dtype, op, root, stream_);
  }

  void copy_to_host(void* host, const void* src, size_t bytes) override {
    on_device();
    check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    nccl_->wait(stream_);
  }

  void copy_from_host(void* dst, const void* host, size_t bytes) override {
    on_device();
    check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    nccl_->wait(stream_);
  }

  std::shared_ptr<void> allocate(size_t bytes) override {
    on_device();
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc of a result");
    return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  }

  void synchronize() override {
    on_device();
    nccl_->wait(stream_);
  }

 private:
  // The engine's loop runs on its own thread or on a waiting caller's: set the device each time.
  void on_device() { check(cudaSetDevice(device_), "cudaSetDevice"); }

  int device_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<nccl::NcclCommunicator> nccl_;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
};

class CudaDeviceBackend final : public DeviceBackend {
 public:
  explicit CudaDeviceBackend(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  std::shared_ptr<void> ready(int device, void* stream) override {
    int previous = current_device();
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    std::shared_ptr<void> held(event,
                               [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check(cudaEventRecord(event, static_cast<cudaStream_t>(stream)),
          "cudaEventRecord on the producer's stream");
    check(cudaSetDevice(previous), "cudaSetDevice");
    return held;
  }

  std::unique_ptr<DeviceSet> open(Communicator& comm, int device) override {
    return std::make_unique<CudaDeviceSet>(comm, device, timeout_);
  }

 private:
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::shared_ptr<DeviceBackend> cuda_device_backend(std::chrono::milliseconds timeout) {
  KOLO_CHECK_ARG(timeout.count() > 0, "cuda_device_backend: timeout must be positive, got ",
                 timeout.count(), " ms");
  return std::make_shared<CudaDeviceBackend>(timeout);
}

}  // namespace kolo::engine
