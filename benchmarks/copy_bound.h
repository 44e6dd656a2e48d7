// The memory bound next to allreduce_bw's rows: the rate at which one process copies a buffer
// of the row's size while every rank copies its own at the same time, the faster of memcpy and
// a streaming-store copy (docs/performance.md, "The copy bound").
#pragma once

#include <cstddef>

#include "comm/communicator.h"

namespace kolo::bench {

struct CopyBound {
  double memcpy_gbps = 0;  // GB/s (1e9 B/s), the slowest rank's
  double stream_gbps = 0;
  double best() const { return memcpy_gbps > stream_gbps ? memcpy_gbps : stream_gbps; }
};

// Collective over `comm`: every rank copies `bytes` from `src` to `dst` (both at least that
// large; their contents are overwritten) `iters` times or more (small sizes repeat until 64 MiB
// have been copied, at most 1000 times) with each method, after one untimed copy.
CopyBound measure_copy_bound(Communicator& comm, const void* src, void* dst, size_t bytes,
                             int iters);

}  // namespace kolo::bench
