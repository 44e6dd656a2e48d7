// The allreduce algorithms other than the ring (double binary tree, halving-doubling) with ranks
// as threads over shm: the allreduce and random_sum parts of the sweep at 1..8 ranks, counts at
// and around the boundaries of their blocks, halves and segments, and run-to-run determinism.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <tuple>
#include <vector>

#include "comm/collectives/collectives.h"
#include "tests/common/sweep.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

using collectives::kSegmentBytes;

const std::vector<std::string> kAllreduceParts{"allreduce", "random_sum"};

// Runs the sweep on `size` thread ranks; every rank must pass and agree on the digest.
std::vector<SweepResult> sweep(int size, const SweepConfig& config,
                               TransportKind transport = TransportKind::kShm) {
  auto results = run_thread_ranks(size, transport,
                                  [&](Communicator& comm) { return run_sweep(comm, config); });
  for (auto& r : results) {
    for (auto& f : r.failures) ADD_FAILURE() << f;
    EXPECT_EQ(r.failed, 0);
    EXPECT_GT(r.passed, 0);
    EXPECT_EQ(r.digest, results[0].digest);
  }
  return results;
}

// Counts where the split changes: around the rank count and the halving-doubling participants
// p (blocks of zero, one or two elements), and around one and two segments of the element size
// (a tree half is count / 2 elements; a halving step first exchanges half the buffer).
std::vector<size_t> boundary_counts(int size, size_t esize) {
  const auto n = static_cast<size_t>(size), p = std::bit_floor(n);
  const size_t segment = kSegmentBytes / esize;
  std::vector<size_t> counts{n - 1, n, n + 1, 2 * n - 1, 2 * n + 1, p - 1, p + 1, 2 * p, 1000};
  for (size_t edge : {segment, 2 * segment, 4 * segment})
    for (size_t c : {edge - 1, edge, edge + 1}) counts.push_back(c);
  return counts;
}

using Param = std::tuple<Algorithm, int>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(algorithm_name(std::get<0>(info.param))) + "_np" +
         std::to_string(std::get<1>(info.param));
}

class AlgorithmSweep : public ::testing::TestWithParam<Param> {};

TEST_P(AlgorithmSweep, AllreduceEveryDtypeOpAndSize) {
  SweepConfig config;
  config.collectives = kAllreduceParts;
  config.algorithm = std::get<0>(GetParam());
  sweep(std::get<1>(GetParam()), config);
}

TEST_P(AlgorithmSweep, CountsAtBlockAndSegmentBoundaries) {
  const int size = std::get<1>(GetParam());
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kUInt8,
                      DType::kInt8, DType::kInt16}) {
    SweepConfig config;
    config.collectives = kAllreduceParts;
    config.algorithm = std::get<0>(GetParam());
    config.sizes = boundary_counts(size, dtype_size(dtype));
    config.dtypes = {dtype};
    config.ops = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax};
    sweep(size, config);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AlgorithmSweep,
                         ::testing::Combine(::testing::Values(Algorithm::kTree,
                                                              Algorithm::kHalvingDoubling),
                                            ::testing::Range(1, 9)),
                         param_name);

// Random inputs reduce to the same bits on every run: the reduction order is fixed.
TEST(Algorithms, RandomSumsAreReproducible) {
  for (Algorithm algorithm : {Algorithm::kTree, Algorithm::kHalvingDoubling}) {
    SweepConfig config;
    config.collectives = {"random_sum"};
    config.algorithm = algorithm;
    config.sizes = {7, 1000, 65537};
    for (int size : {3, 6}) {
      auto first = sweep(size, config);
      auto second = sweep(size, config);
      EXPECT_EQ(first[0].digest, second[0].digest) << algorithm_name(algorithm) << " np=" << size;
    }
  }
}

// Over tcp, where one link may carry both trees' messages as a byte stream: the two ends must
// post them in the same order.
TEST(Algorithms, TcpTransport) {
  for (Algorithm algorithm : {Algorithm::kTree, Algorithm::kHalvingDoubling}) {
    SweepConfig config;
    config.collectives = kAllreduceParts;
    config.algorithm = algorithm;
    config.sizes = {1, 1000, 3 * (kSegmentBytes / 4) + 5};
    config.dtypes = {DType::kFloat32};
    config.ops = {ReduceOp::kSum, ReduceOp::kAverage};
    for (int size : {2, 3, 5}) sweep(size, config, TransportKind::kTcp);
  }
}

}  // namespace
}  // namespace kolo::testing
