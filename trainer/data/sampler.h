// The order in which a data set is visited: seeded per-epoch shuffles cut into batches, and the
// share of each batch that belongs to one data-parallel rank. Every rank builds the same order
// from the same seed, so no indices need to be exchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kolo::trainer {

struct SamplerOptions {
  size_t batch_size = 32;  // examples per batch on one rank
  bool shuffle = true;     // false: examples in order (evaluation)
  bool drop_last = false;  // drop a last batch smaller than batch_size
  uint64_t seed = 0;       // the epoch's shuffle is a function of (seed, epoch) only
  int rank = 0;            // this rank's share: global batch index * world_size + rank
  int world_size = 1;
};

class EpochSampler {
 public:
  EpochSampler(size_t examples, SamplerOptions options);

  // Fixes the order of `epoch`; epoch 0 is in effect after construction.
  void set_epoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }

  // Batches this rank sees per epoch; all ranks see the same number (with world_size > 1 the
  // global batches that do not fill all ranks are left out).
  size_t batches_per_epoch() const;
  // Example indices of this rank's batch `index` in the current epoch.
  std::span<const size_t> batch_indices(size_t index) const;

  size_t examples() const { return order_.size(); }
  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  uint64_t epoch_ = 0;
  std::vector<size_t> order_;
};

}  // namespace kolo::trainer
