// Host memory for engine_overhead; cuda_memory() is in bench_memory_cuda.cc where the build has
// CUDA and NCCL, and refuses otherwise.
#include "benchmarks/bench_memory.h"

#include <deque>
#include <vector>

#include "comm/base/error.h"

namespace kolo::bench {
namespace {

class HostMemory final : public BenchMemory {
 public:
  explicit HostMemory(Communicator& comm) : comm_(comm) {}
  float* alloc(size_t count) override { return buffers_.emplace_back(count, 1.0f).data(); }
  int device() const override { return -1; }
  void direct_allreduce(float* data, size_t count) override {
    comm_.allreduce(data, data, count, DType::kFloat32, ReduceOp::kSum);
  }

 private:
  Communicator& comm_;
  std::deque<std::vector<float>> buffers_;
};

}  // namespace

std::unique_ptr<BenchMemory> host_memory(Communicator& comm) {
  return std::make_unique<HostMemory>(comm);
}

#ifndef KOLO_BENCH_CUDA
std::unique_ptr<BenchMemory> cuda_memory(Communicator&) {
  KOLO_THROW(ErrorCode::kInvalidArgument,
             "--device cuda: this build of kolo has no CUDA and NCCL (KOLO_WITH_CUDA, "
             "KOLO_WITH_NCCL)");
}
#endif

}  // namespace kolo::bench
