// The ZeRO formula, peak RSS and the summary line.
#include "trainer/train/summary.h"

#include <sys/resource.h>

#include <cstdio>

namespace kolo::trainer {

size_t zero_formula_bytes(size_t params, DType storage, const TrainConfig& config, int world) {
  const double psi = static_cast<double>(params), n = world;
  const double p = static_cast<double>(dtype_size(storage)), g = p;
  const double master = storage == DType::kFloat32 ? 0 : 4;
  double k = master;
  if (config.optimizer.type == OptimizerType::kSgd)
    k += config.optimizer.momentum != 0 ? 4 : 0;
  else
    k += 8;  // Adam's exp_avg and exp_avg_sq
  switch (config.zero.stage) {
    case 1: return static_cast<size_t>((p + g) * psi + k * psi / n);
    case 2: return static_cast<size_t>(p * psi + (g + k) * psi / n);
    case 3: return static_cast<size_t>((p + g + k) * psi / n);
    default: return static_cast<size_t>((p + g + k) * psi);
  }
}

size_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string format_model_state(int rank, size_t allocated_bytes, size_t formula_bytes) {
  char line[200];
  std::snprintf(line, sizeof line,
                "model state on rank %d: %zu bytes allocated, ZeRO formula %zu bytes (ratio %.3f)",
                rank, allocated_bytes, formula_bytes,
                formula_bytes ? static_cast<double>(allocated_bytes) / formula_bytes : 0.0);
  return line;
}

std::string format_summary(const PhaseSummary& s) {
  char line[400];
  std::snprintf(line, sizeof line,
                "summary: phase %s world %d stage %lld dtype %s steps %lld tokens_per_s %.1f "
                "peak_rss_mib %.1f model_state_bytes %zu formula_bytes %zu",
                s.phase.c_str(), s.world, static_cast<long long>(s.stage), dtype_name(s.dtype),
                static_cast<long long>(s.steps), s.tokens_per_s,
                static_cast<double>(peak_rss_bytes()) / (1 << 20), s.model_state_bytes,
                s.formula_bytes);
  return line;
}

}  // namespace kolo::trainer
