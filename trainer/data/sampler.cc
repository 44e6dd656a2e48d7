// Seeded epoch orders and per-rank batch slices.
#include "trainer/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "comm/base/error.h"
#include "trainer/data/rng.h"

namespace kolo::trainer {

EpochSampler::EpochSampler(size_t examples, SamplerOptions options)
    : options_(options), order_(examples) {
  KOLO_CHECK_ARG(options_.batch_size > 0, "batch size must be positive");
  KOLO_CHECK_ARG(
      options_.world_size > 0 && options_.rank >= 0 && options_.rank < options_.world_size, "rank ",
      options_.rank, " outside world size ", options_.world_size);
  set_epoch(0);
}

void EpochSampler::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (!options_.shuffle) return;
  Rng rng(mix_seed(options_.seed, epoch));
  shuffle(order_, rng);
}

size_t EpochSampler::batches_per_epoch() const {
  const size_t n = order_.size(), b = options_.batch_size;
  const size_t global = options_.drop_last ? n / b : (n + b - 1) / b;
  return global / static_cast<size_t>(options_.world_size);
}

std::span<const size_t> EpochSampler::batch_indices(size_t index) const {
  KOLO_CHECK_ARG(index < batches_per_epoch(), "batch ", index, " past the epoch's ",
                 batches_per_epoch(), " batches");
  const size_t global =
      index * static_cast<size_t>(options_.world_size) + static_cast<size_t>(options_.rank);
  const size_t begin = global * options_.batch_size;
  const size_t end = std::min(order_.size(), begin + options_.batch_size);
  return std::span<const size_t>(order_).subspan(begin, end - begin);
}

}  // namespace kolo::trainer
