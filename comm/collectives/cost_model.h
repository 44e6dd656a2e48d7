// Algorithm choice for Algorithm::kAuto from an alpha-beta-gamma cost model: a message costs
// alpha (latency, us) + bytes * beta (us per byte on the wire), and reducing costs bytes *
// gamma. Constants are shipped per transport (measured on a 2-core x86 VM, see
// docs/performance.md); the model only ranks the algorithms, so rough values are enough.
#pragma once

#include <cstddef>

#include "comm/base/algorithm.h"
#include "comm/base/transport_kind.h"

namespace kolo::collectives {

struct CostModel {
  double alpha_us;        // per message / per synchronisation
  double beta_us_per_b;   // per byte moved between ranks
  double gamma_us_per_b;  // per byte reduced
};

CostModel default_cost_model(TransportKind transport);

// Predicted microseconds of an allreduce of `bytes` over `ranks` with `algorithm`.
double predict_allreduce_us(const CostModel& model, Algorithm algorithm, size_t bytes, int ranks);

// What the choice needs to know of a communicator's transport, from its capabilities, and of
// where its ranks are.
struct TransportTraits {
  TransportKind kind = TransportKind::kTcp;
  size_t small_slot_bytes = 0;  // shared-memory small slots (low_latency); 0: none
  bool direct = false;          // the shared-memory direct collectives may run
  int hosts = 1;                // hosts the ranks are on
  int most_per_host = 1;        // ranks on the most crowded host
  bool host_blocks = false;     // every host has most_per_host consecutive ranks
};

// Predicted microseconds of an allreduce of `bytes` over `ranks` on `hosts` hosts, ranks in
// host order, when every byte that leaves a host costs `link` (the flat algorithms: the ring's
// host-crossing edge carries 2(n-1)/n S; kHierarchical: each host sends 2(H-1)/H S, plus its
// shared-memory reduce-scatter and allgather at `local`).
double predict_multi_host_us(const CostModel& link, const CostModel& local, Algorithm algorithm,
                             size_t bytes, int ranks, int hosts);

// Largest allreduce (bytes) that kAuto sends through the shared-memory small slots: half a
// slot at 2 ranks (32 KiB with 64 KiB slots), where the direct path is as fast from there, and
// the whole slot at more ranks, where the direct path's two barriers and staging rounds cost
// more than reading every slot.
size_t low_latency_limit(size_t small_slot_bytes, int ranks);

// What kAuto picks for an allreduce.
Algorithm choose_allreduce(const TransportTraits& transport, size_t bytes, int ranks);

}  // namespace kolo::collectives
