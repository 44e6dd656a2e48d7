// kolo_gpu_nccl_tests: comm/nccl on one GPU (world 1, ranks cannot share a device): the
// communicator joins through a MemoryStore, every collective gives its closed-form result
// (world 1: allreduce and average are the identity, the others copy), an alltoall of int8, and
// after abort() every call fails at once with the reason. A plain program run by
// scripts/gpu_check.sh; prints "kolo_gpu_nccl_tests: N checks, M failed".
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/bootstrap/store.h"
#include "comm/nccl/nccl_communicator.h"
#include "tests/gpu/tally.h"

namespace {

using kolo::gpu_test::expect;

// Runs op(send, recv, stream) on n float inputs 0.5 i, then compares recv with want(i).
template <typename Op, typename Want>
void check_floats(const char* name, kolo::nccl::NcclCommunicator& comm, size_t n, Op op,
                  Want want) {
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = 0.5f * float(i);
  void *send = nullptr, *recv = nullptr;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  cudaMalloc(&send, n * sizeof(float));
  cudaMalloc(&recv, n * sizeof(float));
  cudaMemcpy(send, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(recv, 0, n * sizeof(float));
  try {
    op(send, recv, stream);
    comm.wait(stream);
    cudaMemcpy(host.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = n, wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      if (host[i] == want(i)) continue;
      if (bad == n) bad = i;
      ++wrong;
    }
    expect(wrong == 0,
           std::string(name) + ": " + std::to_string(wrong) + " of " + std::to_string(n) +
               " wrong, the first at " + std::to_string(bad) +
               (bad < n ? ": " + std::to_string(host[bad]) + " for " + std::to_string(want(bad))
                        : std::string()));
  } catch (const std::exception& e) {
    expect(false, std::string(name) + ": " + e.what());
  }
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
}

}  // namespace

int main() {
  using kolo::DType;
  using kolo::ReduceOp;
  using namespace std::chrono_literals;
  kolo::bootstrap::MemoryStore store;
  try {
    kolo::nccl::NcclCommunicator comm(store, "nccl/test", 0, 1, 30s);
    const size_t n = (1 << 20) + 3;
    auto same = [](size_t i) { return 0.5f * float(i); };
    check_floats(
        "allreduce sum", comm, n,
        [&](void* s, void* r, cudaStream_t st) {
          comm.allreduce(s, r, n, DType::kFloat32, ReduceOp::kSum, st);
        },
        same);
    check_floats(
        "allreduce avg", comm, n,
        [&](void* s, void* r, cudaStream_t st) {
          comm.allreduce(s, r, n, DType::kFloat32, ReduceOp::kAverage, st);
        },
        same);
    check_floats(
        "reduce_scatter", comm, n,
        [&](void* s, void* r, cudaStream_t st) {
          comm.reduce_scatter(s, r, n, DType::kFloat32, ReduceOp::kMax, st);
        },
        same);
    check_floats(
        "allgather", comm, n,
        [&](void* s, void* r, cudaStream_t st) { comm.allgather(s, r, n, DType::kFloat32, st); },
        same);
    check_floats(
        "broadcast", comm, n,
        [&](void* s, void* r, cudaStream_t st) { comm.broadcast(s, r, n, DType::kFloat32, 0, st); },
        same);
    check_floats(
        "alltoall", comm, n,
        [&](void* s, void* r, cudaStream_t st) {
          comm.alltoall(s, r, n * 4, DType::kInt8, st);  // the same bytes as int8
        },
        same);
    try {
      comm.allreduce(nullptr, nullptr, 1, DType::kInt16, ReduceOp::kSum, nullptr);
      expect(false, "int16 accepted");
    } catch (const kolo::Error& e) {
      expect(e.code() == kolo::ErrorCode::kInvalidArgument, "int16: wrong error code");
    }
    comm.abort("test abort");
    try {
      comm.allreduce(nullptr, nullptr, 1, DType::kFloat32, ReduceOp::kSum, nullptr);
      expect(false, "a call after abort() ran");
    } catch (const kolo::Error& e) {
      expect(std::string(e.what()).find("test abort") != std::string::npos,
             std::string("after abort: ") + e.what());
    }
  } catch (const std::exception& e) {
    expect(false, std::string("communicator: ") + e.what());
  }
  return kolo::gpu_test::summary("kolo_gpu_nccl_tests");
}
