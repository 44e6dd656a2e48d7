// Epoch orders: seeded and repeatable, different per epoch, a permutation, and per-rank slices
// that partition the global batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "trainer/data/rng.h"
#include "trainer/data/sampler.h"

namespace kolo::trainer {
namespace {

std::vector<size_t> epoch_order(const EpochSampler& sampler) {
  std::vector<size_t> order;
  for (size_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    const auto indices = sampler.batch_indices(b);
    order.insert(order.end(), indices.begin(), indices.end());
  }
  return order;
}

TEST(DataSampler, SeededPermutationPerEpoch) {
  EpochSampler a(1000, {.batch_size = 64, .seed = 42});
  EpochSampler b(1000, {.batch_size = 64, .seed = 42});
  EXPECT_EQ(a.batches_per_epoch(), 16u);
  const std::vector<size_t> first = epoch_order(a);
  EXPECT_EQ(first, epoch_order(b));
  std::vector<size_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> expected(1000);
  std::iota(expected.begin(), expected.end(), size_t{0});
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(first, expected);
  a.set_epoch(1);
  EXPECT_NE(epoch_order(a), first);
  a.set_epoch(0);
  EXPECT_EQ(epoch_order(a), first);
  EpochSampler other_seed(1000, {.batch_size = 64, .seed = 43});
  EXPECT_NE(epoch_order(other_seed), first);
}

TEST(DataSampler, InOrderAndDropLast) {
  EpochSampler sampler(10, {.batch_size = 4, .shuffle = false, .drop_last = true});
  ASSERT_EQ(sampler.batches_per_epoch(), 2u);
  EXPECT_EQ(std::vector<size_t>(sampler.batch_indices(1).begin(), sampler.batch_indices(1).end()),
            (std::vector<size_t>{4, 5, 6, 7}));
  EpochSampler keep(10, {.batch_size = 4, .shuffle = false});
  ASSERT_EQ(keep.batches_per_epoch(), 3u);
  EXPECT_EQ(keep.batch_indices(2).size(), 2u);
  EpochSampler empty(0, {.batch_size = 4});
  EXPECT_EQ(empty.batches_per_epoch(), 0u);
}

TEST(DataSampler, RanksPartitionTheGlobalBatches) {
  // 103 examples, batch 5 per rank, 3 ranks: 21 global batches, 7 per rank, none shared.
  std::vector<size_t> all;
  for (int rank = 0; rank < 3; ++rank) {
    EpochSampler sampler(103, {.batch_size = 5, .seed = 9, .rank = rank, .world_size = 3});
    ASSERT_EQ(sampler.batches_per_epoch(), 7u);
    const std::vector<size_t> mine = epoch_order(sampler);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 103u);
}

TEST(DataSampler, RngBelowIsUniform) {
  Rng rng(1);
  std::vector<int> counts(10);
  for (int i = 0; i < 100000; ++i) ++counts[rng.below(10)];
  for (const int c : counts) EXPECT_NEAR(c, 10000, 500);  // > 5 standard deviations
}

}  // namespace
}  // namespace kolo::trainer
