// The ZeRO formula, peak RSS and the summary line.
#include "trainer/train/summary.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include "comm/base/error.h"

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

namespace {

// MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read.
size_t mem_available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<size_t>(kib) * 1024;
}

double gib(size_t bytes) {
  return static_cast<double>(bytes) / (1ull << 30);
}

}  // namespace

void check_memory_estimate(size_t per_rank_bytes, int local_ranks, size_t params,
                           const TrainConfig& config) {
  const size_t available = mem_available_bytes();
  const size_t needed = per_rank_bytes * static_cast<size_t>(std::max(1, local_ranks));
  if (available == 0 || needed <= available) return;
  char text[600];
  std::snprintf(text, sizeof text,
                "memory estimate: %d rank(s) on this host x %.2f GiB of model state (ZeRO stage "
                "%lld formula for %zu parameters: %.1f bytes each) = %.2f GiB, more than the "
                "%.2f GiB available (MemAvailable), before any activation; use a higher "
                "zero_optimization.stage or fewer ranks per host",
                local_ranks, gib(per_rank_bytes), static_cast<long long>(config.zero.stage), params,
                static_cast<double>(per_rank_bytes) / static_cast<double>(params), gib(needed),
                gib(available));
  KOLO_THROW(ErrorCode::kInvalidArgument, text);
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
