// Algorithm::kAuto around its switch points: the sizes where the choice changes (the shm
// small-slot limit, and the cost model's crossovers on tcp) are found from the model itself,
// and allreduces just below, at and above each are checked against closed-form results.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "comm/collectives/cost_model.h"
#include "comm/transport/shm/pair.h"
#include "tests/common/values.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

// Byte sizes (multiples of 4) where choose_allreduce changes its answer, up to `limit`: a
// coarse scan, then a bisection to the first size with the new answer.
// What a communicator over `transport` reports: shm has the small slots and direct reads.
collectives::TransportTraits traits(TransportKind transport) {
  const bool shm = transport == TransportKind::kShm;
  return {transport, shm ? transport::shm::kSmallSlotBytes : 0, shm};
}

std::set<size_t> switch_points(TransportKind transport, int ranks, size_t limit) {
  auto choose = [&](size_t bytes) {
    return collectives::choose_allreduce(traits(transport), bytes, ranks);
  };
  std::set<size_t> points;
  for (size_t lo = 4, hi = 1024; hi <= limit; lo = hi, hi += 1024) {
    if (choose(lo) == choose(hi)) continue;
    size_t a = lo, b = hi;  // choose(a) != choose(b); narrow to adjacent multiples of 4
    while (b - a > 4) {
      size_t mid = (a + b) / 2 / 4 * 4;
      (choose(mid) == choose(a) ? a : b) = mid;
    }
    points.insert(b);
  }
  return points;
}

void check_allreduce_at(Communicator& comm, size_t count, DType dtype, ReduceOp op) {
  auto data = make_buffer(dtype, count);
  tile(dtype, data.data(), count, input_pattern(dtype, op, comm.rank()), 0);
  comm.allreduce(data.data(), data.data(), count, dtype, op);
  auto want = expected_pattern(dtype, op, comm.size());
  size_t bad = first_mismatch(dtype, data.data(), count, want, 0);
  EXPECT_EQ(bad, count) << "allreduce of " << count << " " << dtype_name(dtype) << " "
                        << op_name(op) << " with "
                        << algorithm_name(comm.choose_algorithm(Collective::kAllreduce, count * 4))
                        << " wrong at element " << bad;
}

void check_around(TransportKind transport, int ranks, const std::set<size_t>& points) {
  ASSERT_FALSE(points.empty());
  run_thread_ranks(ranks, transport, [&](Communicator& comm) {
    std::set<Algorithm> seen;
    for (size_t bytes : points)
      for (size_t count : {bytes / 4 - 1, bytes / 4, bytes / 4 + 1}) {
        seen.insert(comm.choose_algorithm(Collective::kAllreduce, count * 4));
        check_allreduce_at(comm, count, DType::kFloat32, ReduceOp::kSum);
        check_allreduce_at(comm, count, DType::kInt32, ReduceOp::kMax);
      }
    EXPECT_GE(seen.size(), 2u) << "the sizes tested should span a change of algorithm";
    return 0;
  });
}

TEST(AutoSelection, ShmAroundTheLowLatencyLimit) {
  for (int ranks : {2, 5, 8}) {
    auto points = switch_points(TransportKind::kShm, ranks, 1 << 18);
    // The first multiple of 4 (float32 sizes) above the limit.
    EXPECT_EQ(
        points,
        std::set<size_t>{
            (collectives::low_latency_limit(transport::shm::kSmallSlotBytes, ranks) / 4 + 1) * 4});
    check_around(TransportKind::kShm, ranks, points);
  }
}

TEST(AutoSelection, TcpAroundTheCostModelCrossovers) {
  for (int ranks : {5, 6, 7}) {  // powers of two always pick halving-doubling
    auto points = switch_points(TransportKind::kTcp, ranks, 8 << 20);
    check_around(TransportKind::kTcp, ranks, points);
  }
}

TEST(AutoSelection, ExplicitChoicesThatDoNotFitAreRefused) {
  run_thread_ranks(2, TransportKind::kTcp, [](Communicator& comm) {
    EXPECT_THROW(comm.choose_algorithm(Collective::kAllreduce, 8, {Algorithm::kLowLatency}), Error);
    EXPECT_THROW(comm.choose_algorithm(Collective::kAllgather, 8, {Algorithm::kTree}), Error);
    EXPECT_EQ(comm.choose_algorithm(Collective::kAllgather, 8), Algorithm::kRing);
    return 0;
  });
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EXPECT_EQ(comm.choose_algorithm(Collective::kAllreduce, 8), Algorithm::kLowLatency);
    EXPECT_EQ(comm.choose_algorithm(Collective::kAllreduce, 1 << 20), Algorithm::kDirect);
    EXPECT_THROW(comm.choose_algorithm(Collective::kAllreduce, 1 << 20, {Algorithm::kLowLatency}),
                 Error);
    return 0;
  });
}

// Ranks on several hosts: the model charges every byte that leaves a host to its link, so the
// hierarchical allreduce (2(H-1)/H S per host) beats the flat ring (2(n-1)/n S) wherever some
// host has several ranks, and the ratio of large messages tends to (n-1)/n / ((H-1)/H).
TEST(AutoSelection, SeveralHostsWithSeveralRanksPickHierarchical) {
  using collectives::TransportTraits;
  for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(collectives::choose_allreduce(TransportTraits{TransportKind::kTcp, 0, false, 2, 2},
                                            bytes, 4),
              Algorithm::kHierarchical)
        << bytes;
    EXPECT_NE(collectives::choose_allreduce(TransportTraits{TransportKind::kTcp, 0, false, 4, 1},
                                            bytes, 4),
              Algorithm::kHierarchical)
        << bytes;
  }
  const collectives::CostModel link{30.0, 1.0 / 250, 1.0 / 8000};  // 2 Gbit/s
  const auto local = collectives::default_cost_model(TransportKind::kShm);
  const size_t big = size_t{1} << 30;
  for (auto [ranks, hosts, want] : {std::tuple{4, 2, 1.5}, std::tuple{8, 2, 1.75}}) {
    const double ratio =
        collectives::predict_multi_host_us(link, local, Algorithm::kRing, big, ranks, hosts) /
        collectives::predict_multi_host_us(link, local, Algorithm::kHierarchical, big, ranks,
                                           hosts);
    // The link-only ratio, less the shared-memory phases' share.
    EXPECT_NEAR(ratio, want, 0.2) << ranks << " ranks on " << hosts << " hosts";
  }
}

TEST(AutoSelection, HierarchicalNeedsSeveralHosts) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    auto m = error_of(
        [&] { comm.choose_algorithm(Collective::kAllreduce, 1 << 20, {Algorithm::kHierarchical}); },
        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("'hierarchical' is not available"), std::string::npos) << m;
    return 0;
  });
}

}  // namespace
}  // namespace kolo::testing
