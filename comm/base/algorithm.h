// The collectives a Communicator runs and the algorithms that can run them, with names and the
// parser of KOLO_ALGORITHM / --algorithm. Every value here is implemented; the names of the mpi
// and gloo baselines (benchmark-only) are refused by the parser with the accepted list.
#pragma once

#include <cstdint>
#include <string_view>

namespace kolo {

enum class Collective : uint8_t {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kBarrier,
};
const char* collective_name(Collective collective);  // "allreduce", "reduce_scatter", ...

// kAuto lets kolo choose; the others force one. kLowLatency and kDirect are shared-memory
// algorithms (transports with the shared-memory capability): small allreduces through flags
// and slots, and single-copy reads of the peers' buffers. kHierarchical (allreduce of a
// communicator on several hosts): within each host over shared memory, across hosts only
// between the ranks that hold the same shard (docs/algorithms.md).
enum class Algorithm : uint8_t {
  kAuto,
  kRing,
  kTree,
  kHalvingDoubling,
  kLowLatency,
  kDirect,
  kHierarchical,
};

const char* algorithm_name(Algorithm algorithm);
Algorithm parse_algorithm(std::string_view text, std::string_view setting);

}  // namespace kolo
