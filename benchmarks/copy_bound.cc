// Copy rates for allreduce_bw's bound column. Every rank copies at the same time (a barrier
// before each timed loop), as every rank moves data at once in a collective; the time per copy
// is the slowest rank's, from its start until every rank has finished (a barrier after the
// loop), as a collective's time is. Without the closing barrier, ranks that share a core (more
// ranks than CPUs) could copy in turns, each timing only its own turn, and the bound reported
// the rate of a core per rank: np=4 on 2 cores, 4 MiB rows read 19-41 GB/s from run to run,
// as much as np=2's 40-45.
#include "benchmarks/copy_bound.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "comm/base/copy.h"

namespace kolo::bench {
namespace {

template <typename Copy>
double rate_gbps(Communicator& comm, const void* src, void* dst, size_t bytes, int iters,
                 Copy copy) {
  copy(dst, src, bytes);  // pages touched, caches in their steady state
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) copy(dst, src, bytes);
  comm.barrier();  // until every rank has copied: see the file's comment
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  double seconds = elapsed.count() / iters;
  comm.allreduce(&seconds, &seconds, 1, DType::kFloat64, ReduceOp::kMax);
  return static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace

CopyBound measure_copy_bound(Communicator& comm, const void* src, void* dst, size_t bytes,
                             int iters) {
  CopyBound bound;
  if (bytes == 0) return bound;
  constexpr size_t kMinBytesCopied = size_t{64} << 20;
  size_t n = static_cast<size_t>(std::max(iters, 1));
  if (n * bytes < kMinBytesCopied)
    n = std::max(n, std::min<size_t>(1000, (kMinBytesCopied + bytes - 1) / bytes));
  bound.memcpy_gbps = rate_gbps(comm, src, dst, bytes, static_cast<int>(n),
                                [](void* d, const void* s, size_t b) { std::memcpy(d, s, b); });
  bound.stream_gbps = rate_gbps(comm, src, dst, bytes, static_cast<int>(n), kolo::copy_streaming);
  return bound;
}

}  // namespace kolo::bench
