// Algorithm choice for Algorithm::kAuto from an alpha-beta-gamma cost model: a message costs
// alpha (latency, us) + bytes * beta (us per byte on the wire), and reducing costs bytes *
// gamma. Constants are shipped per transport (measured on a 2-core x86 VM, see
// docs/performance.md); the model only ranks the algorithms, so rough values are enough.
#pragma once

#include <cstddef>

#include "comm/base/dtype.h"

namespace kolo::collectives {

struct CostModel {
  double alpha_us;        // per message / per synchronisation
  double beta_us_per_b;   // per byte moved between ranks
  double gamma_us_per_b;  // per byte reduced
};

CostModel default_cost_model(TransportKind transport);

// Predicted microseconds of an allreduce of `bytes` over `ranks` with `algorithm`.
double predict_allreduce_us(const CostModel& model, Algorithm algorithm, size_t bytes, int ranks);

// Largest allreduce (bytes) that kAuto sends through the shm low-latency slots: 32 KiB at 2
// ranks, where the direct path is as fast from there, and the whole slot (64 KiB) at more ranks,
// where the direct path's two barriers and staging rounds cost more than reading every slot.
size_t low_latency_limit(int ranks);

// What kAuto picks for an allreduce. `shm_direct`: the shm transport can read peers' memory.
Algorithm choose_allreduce(TransportKind transport, bool shm_direct, size_t bytes, int ranks);

}  // namespace kolo::collectives
