// The cost model's formulas (n ranks, S bytes; p = largest power of two <= n):
//   ring               2(n-1) a + 2(n-1)/n S b + (n-1)/n S g
//   halving-doubling   2 log2(p) a + 2(p-1)/p S b + (p-1)/p S g  (+ 2a + 2Sb + Sg if n != p)
//   double binary tree 2 ceil(log2(n+1)) a + 2 S b + S g        (pipelined, both trees busy)
//   hierarchical       within each host (shared memory) + 2(H-1) a + 2(H-1)/H S b across hosts
// With shared memory, small messages use the low-latency slots and larger ones the direct
// collectives when they may run; the formulas decide among the message algorithms.
#include "comm/collectives/cost_model.h"

#include <algorithm>
#include <cmath>

namespace kolo::collectives {

CostModel default_cost_model(TransportKind transport) {
  switch (transport) {
    case TransportKind::kShm: return {2.0, 1.0 / 4000, 1.0 / 8000};
    case TransportKind::kMpi:
    case TransportKind::kUcx: return {6.0, 1.0 / 2500, 1.0 / 8000};
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

double predict_multi_host_us(const CostModel& link, const CostModel& local, Algorithm algorithm,
                             size_t bytes, int ranks, int hosts) {
  const double n = ranks, h = hosts, s = static_cast<double>(bytes);
  if (algorithm != Algorithm::kHierarchical)
    return 2 * (n - 1) * link.alpha_us + 2 * (n - 1) / n * s * link.beta_us_per_b +
           (n - 1) / n * s * link.gamma_us_per_b;
  const double l = n / h;  // ranks per host (on average)
  const double within = 2 * (l - 1) * local.alpha_us + 2 * (l - 1) / l * s * local.beta_us_per_b +
                        (l - 1) / l * s * local.gamma_us_per_b;
  const double across = 2 * (h - 1) * link.alpha_us + 2 * (h - 1) / h * s * link.beta_us_per_b +
                        (h - 1) / h * s / l * link.gamma_us_per_b;
  return within + across;
}

size_t low_latency_limit(size_t small_slot_bytes, int ranks) {
  return ranks <= 2 ? small_slot_bytes / 2 : small_slot_bytes;
}

Algorithm choose_allreduce(const TransportTraits& transport, size_t bytes, int ranks) {
  // Several hosts with several ranks on some: what crosses a host's link decides.
  if (transport.hosts > 1 && transport.most_per_host > 1) {
    const CostModel link = default_cost_model(transport.kind);
    const CostModel local = default_cost_model(TransportKind::kShm);
    const double flat =
        predict_multi_host_us(link, local, Algorithm::kRing, bytes, ranks, transport.hosts);
    const double hierarchical =
        predict_multi_host_us(link, local, Algorithm::kHierarchical, bytes, ranks, transport.hosts);
    if (hierarchical <= flat) return Algorithm::kHierarchical;
  }
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
