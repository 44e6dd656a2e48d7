// What a training program reports about each phase: the ZeRO paper's model-state bytes for a
// run's settings, this process's peak resident memory, and the one-line summary that users and
// the benchmarks read:
//   summary: phase P world W stage S dtype D steps K tokens_per_s T peak_rss_mib M
//            model_state_bytes B formula_bytes F            (one line)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/base/dtype.h"
#include "trainer/config/train_config.h"

namespace kolo::trainer {

// Model-state bytes per rank by the ZeRO paper's accounting, for `params` parameters in
// `storage` with the configured optimizer at `stage` over `world` ranks: with p = g = the
// storage element size and k = the optimizer's fp32 bytes per parameter (Adam: m and v, plus
// the fp32 master copy when storage is 16-bit; SGD: momentum if any, plus the master),
// stage 0: (p+g+k) Psi, 1: (p+g) Psi + k Psi/N, 2: p Psi + (g+k) Psi/N, 3: (p+g+k) Psi/N.
// Mixed precision with Adam gives the paper's 16 Psi, 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N, 16 Psi/N.
size_t zero_formula_bytes(size_t params, DType storage, const TrainConfig& config, int world);

// Refuses, before anything is allocated, a run whose model state cannot fit this host:
// `local_ranks` x `per_rank_bytes` (the formula above) against the kernel's MemAvailable.
// Throws kInvalidArgument with the numbers and what to change; does nothing when MemAvailable
// cannot be read.
void check_memory_estimate(size_t per_rank_bytes, int local_ranks, size_t params,
                           const TrainConfig& config);

// Peak resident set size of this process so far (getrusage), in bytes.
size_t peak_rss_bytes();

struct PhaseSummary {
  std::string phase;
  int world = 1;
  int64_t stage = 0;
  DType dtype = DType::kFloat32;
  int64_t steps = 0;
  double tokens_per_s = 0;  // every rank's tokens together per second of wall time
  size_t model_state_bytes = 0;
  size_t formula_bytes = 0;
};

// What every rank prints before training (no newline): "model state on rank R: B bytes
// allocated, ZeRO formula F bytes (B/F = 1.25)".
std::string format_model_state(int rank, size_t allocated_bytes, size_t formula_bytes);

// The summary line (no newline), with this process's peak RSS in MiB.
std::string format_summary(const PhaseSummary& summary);

}  // namespace kolo::trainer
