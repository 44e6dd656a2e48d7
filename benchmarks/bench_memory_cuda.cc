// engine_overhead's device memory: cudaMalloc'd floats on device 0, and the floor a raw NCCL
// allreduce (comm/nccl, joined through the job's store) on its own stream, waited for.
#include <cuda_runtime.h>

#include <vector>

#include "benchmarks/bench_memory.h"
#include "comm/base/cuda_check.h"
#include "comm/base/error.h"
#include "comm/nccl/nccl_communicator.h"
#include "fusion/cuda_device.h"

namespace kolo::bench {
namespace {

void check(cudaError_t status, const char* what) {
  check_cuda(status, "engine_overhead --device cuda", what);
}

class CudaMemory final : public BenchMemory {
 public:
  explicit CudaMemory(Communicator& comm) {
    check(cudaSetDevice(0), "cudaSetDevice(0)");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    nccl_ = std::make_unique<nccl::NcclCommunicator>(*comm.store(), "bench.nccl", comm.rank(),
                                                     comm.size(), std::chrono::seconds(60));
  }
  ~CudaMemory() override {
    nccl_.reset();
    for (void* p : buffers_) cudaFree(p);
    cudaStreamDestroy(stream_);
  }
  float* alloc(size_t count) override {
    void* p = nullptr;
    check(cudaMalloc(&p, count * sizeof(float)), "cudaMalloc");
    buffers_.push_back(p);
    const std::vector<float> ones(count, 1.0f);
    check(cudaMemcpy(p, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    return static_cast<float*>(p);
  }
  int device() const override { return 0; }
  void direct_allreduce(float* data, size_t count) override {
    nccl_->allreduce(data, data, count, DType::kFloat32, ReduceOp::kSum, stream_);
    nccl_->wait(stream_);
  }
  std::shared_ptr<engine::DeviceBackend> backend() const override {
    return engine::cuda_device_backend(std::chrono::seconds(60));
  }

 private:
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<nccl::NcclCommunicator> nccl_;
  std::vector<void*> buffers_;
};

}  // namespace

std::unique_ptr<BenchMemory> cuda_memory(Communicator& comm) {
  return std::make_unique<CudaMemory>(comm);
}

}  // namespace kolo::bench
