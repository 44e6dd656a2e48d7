// The cost model's formulas (n ranks, S bytes; p = largest power of two <= n):
//   ring               2(n-1) a + 2(n-1)/n S b + (n-1)/n S g
//   halving-doubling   2 log2(p) a + 2(p-1)/p S b + (p-1)/p S g  (+ 2a + 2Sb + Sg if n != p)
//   double binary tree 2 ceil(log2(n+1)) a + 2 S b + S g        (pipelined, both trees busy)
// With shared memory, small messages use the low-latency slots and larger ones the direct
// collectives when they may run; the formulas decide among the message algorithms.
#include "comm/collectives/cost_model.h"

#include <algorithm>
#include <cmath>

namespace kolo::collectives {

CostModel default_cost_model(TransportKind transport) {
  switch (transport) {
    case TransportKind::kShm: return {2.0, 1.0 / 4000, 1.0 / 8000};
    case TransportKind::kMpi: return {6.0, 1.0 / 2500, 1.0 / 8000};
    case TransportKind::kTcp:
    case TransportKind::kAuto: break;
  }
  return {30.0, 1.0 / 1200, 1.0 / 8000};
}

double predict_allreduce_us(const CostModel& m, Algorithm algorithm, size_t bytes, int ranks) {
  const double n = ranks, s = static_cast<double>(bytes);
  switch (algorithm) {
    case Algorithm::kHalvingDoubling: {
      const double p = std::exp2(std::floor(std::log2(n)));
      double t = 2 * std::log2(p) * m.alpha_us + 2 * (p - 1) / p * s * m.beta_us_per_b +
                 (p - 1) / p * s * m.gamma_us_per_b;
      if (p != n) t += 2 * m.alpha_us + 2 * s * m.beta_us_per_b + s * m.gamma_us_per_b;
      return t;
    }
    case Algorithm::kTree:
      return 2 * std::ceil(std::log2(n + 1)) * m.alpha_us + 2 * s * m.beta_us_per_b +
             s * m.gamma_us_per_b;
    default:
      return 2 * (n - 1) * m.alpha_us + 2 * (n - 1) / n * s * m.beta_us_per_b +
             (n - 1) / n * s * m.gamma_us_per_b;
  }
}

size_t low_latency_limit(size_t small_slot_bytes, int ranks) {
  return ranks <= 2 ? small_slot_bytes / 2 : small_slot_bytes;
}

Algorithm choose_allreduce(const TransportTraits& transport, size_t bytes, int ranks) {
  if (transport.small_slot_bytes > 0 &&
      bytes <= low_latency_limit(transport.small_slot_bytes, ranks))
    return Algorithm::kLowLatency;
  if (transport.direct) return Algorithm::kDirect;
  const CostModel model = default_cost_model(transport.kind);
  Algorithm best = Algorithm::kRing;
  double best_us = predict_allreduce_us(model, best, bytes, ranks);
  for (Algorithm candidate : {Algorithm::kHalvingDoubling, Algorithm::kTree}) {
    double us = predict_allreduce_us(model, candidate, bytes, ranks);
    if (us < best_us) {
      best = candidate;
      best_us = us;
    }
  }
  return best;
}

}  // namespace kolo::collectives
