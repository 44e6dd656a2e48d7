// allreduce_demo: every rank contributes its rank number; after an allreduce each holds
// 0 + 1 + ... + (n-1). Run it with any launcher:
//   kolorun -np 4 ./allreduce_demo        mpirun -np 4 ./allreduce_demo
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/communicator.h"

int main() try {
  auto comm = kolo::Communicator::init();
  const int n = comm->size();
  const size_t count = size_t{1} << 22;  // 16 MiB of float32
  std::vector<float> data(count, static_cast<float>(comm->rank()));
  comm->allreduce(data.data(), data.data(), count, kolo::DType::kFloat32, kolo::ReduceOp::kSum);
  auto start = std::chrono::steady_clock::now();
  const int iterations = 10;
  for (int i = 0; i < iterations; ++i)
    comm->allreduce(data.data(), data.data(), count, kolo::DType::kFloat32,
                    kolo::ReduceOp::kAverage);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const float expected = static_cast<float>(n * (n - 1) / 2);
  bool ok = data[0] == expected && data[count - 1] == expected;
  if (comm->rank() == 0) {
    double busbw = 2.0 * (n - 1) / n * count * sizeof(float) * iterations / seconds / 1e9;
    std::printf(
        "allreduce_demo: %d ranks over %s, 16 MiB float32: %.2f ms per allreduce, "
        "busbw %.2f GB/s, result %s (%.0f)\n",
        n, kolo::transport_name(comm->transport()), seconds / iterations * 1e3, busbw,
        ok ? "correct" : "WRONG", data[0]);
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "allreduce_demo: %s\n", e.what());
  return 1;
}
