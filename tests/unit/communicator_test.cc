// Communicator behaviour beyond the sweep: argument errors, split, the tcp transport with
// thread ranks, timeouts and the failed state.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <numeric>
#include <thread>

#include "comm/base/algorithm.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/shm/shared_buffer.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

using namespace std::chrono_literals;

// Ranks told different job sizes, or two processes with one rank, waited for a rank that never
// came and timed out naming a store key; now each names the fault.
TEST(Communicator, DifferentSizesAndASharedRankAreNamed) {
  auto store = std::make_shared<bootstrap::MemoryStore>();
  CommunicatorOptions options;
  options.timeout = 2000ms;
  std::string messages[2];
  std::thread a([&] {
    messages[0] =
        error_of([&] { Communicator::create(store, 0, 2, options); }, ErrorCode::kMismatch);
  });
  std::thread b([&] {
    messages[1] =
        error_of([&] { Communicator::create(store, 1, 3, options); }, ErrorCode::kMismatch);
  });
  a.join();
  b.join();
  EXPECT_NE(messages[0].find("this rank was told 2, rank 1 was told 3"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("this rank was told 3, rank 0 was told 2"), std::string::npos)
      << messages[1];
  auto second = std::make_shared<bootstrap::MemoryStore>();
  second->add("w/claim/1", 1);  // another process took rank 1 first
  auto message =
      error_of([&] { Communicator::create(second, 1, 2, options); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("rank 1 of 2 was claimed on this rendezvous store already"),
            std::string::npos)
      << message;
}

TEST(Communicator, BadArgumentsAreRefusedWithTheirNames) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    std::vector<float> v(8);
    auto m = error_of([&] { comm.broadcast(v.data(), 8, DType::kFloat32, 2); },
                      ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("root 2"), std::string::npos) << m;
    m = error_of([&] { comm.allreduce(nullptr, v.data(), 8, DType::kFloat32, ReduceOp::kSum); },
                 ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("send buffer is null"), std::string::npos) << m;
    m = error_of(
        [&] {
          comm.allgatherv(v.data(), 1, v.data(), {1, 1, 1}, DType::kFloat32);
        },
        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("3 recv_counts for 2 ranks"), std::string::npos) << m;
    CollectiveOptions tree{Algorithm::kTree};  // tree exists for allreduce only
    m = error_of(
        [&] { comm.allgather(v.data() + 4 * comm.rank(), v.data(), 4, DType::kFloat32, tree); },
        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("'tree'"), std::string::npos) << m;
    // Buffers that overlap other than in the call's in-place form, on every path and size
    // (only shm's direct reduction noticed, and only once the call had begun).
    m = error_of(
        [&] { comm.allreduce(v.data(), v.data() + 1, 4, DType::kFloat32, ReduceOp::kSum); },
        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("allreduce: the send and receive buffers overlap, but not in place"),
              std::string::npos)
        << m;
    m = error_of([&] { comm.allgather(v.data() + 1, v.data(), 4, DType::kFloat32); },
                 ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("allgather: the send and receive buffers overlap"), std::string::npos) << m;
    m = error_of(
        [&] {
          comm.reduce_scatter(v.data(), v.data() + 1 - comm.rank(), 2, DType::kFloat32,
                              ReduceOp::kSum);
        },
        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("recv == send + rank * recv_count"), std::string::npos) << m;
    comm.reduce_scatter(v.data(), v.data() + 2 * comm.rank(), 2, DType::kFloat32, ReduceOp::kSum);
    error_of([&] { comm.split(-5, 0); }, ErrorCode::kInvalidArgument);
    // Bad input fails before anything is sent: the communicator still works.
    comm.allreduce(v.data(), v.data(), 8, DType::kFloat32, ReduceOp::kSum);
    return 0;
  });
}

TEST(Communicator, SplitOrdersByKeyAndReducesWithinColors) {
  auto sizes = run_thread_ranks(6, TransportKind::kShm, [](Communicator& comm) {
    auto sub = comm.split(comm.rank() % 2, -comm.rank());  // reversed order within a color
    int64_t v = comm.rank();
    sub->allreduce(&v, &v, 1, DType::kInt64, ReduceOp::kSum);
    int64_t want = comm.rank() % 2 ? 1 + 3 + 5 : 0 + 2 + 4;
    EXPECT_EQ(v, want);
    EXPECT_EQ(sub->rank(), 2 - comm.rank() / 2);
    EXPECT_EQ(sub->world_ranks()[static_cast<size_t>(sub->rank())], comm.rank());
    auto nested = sub->split(0, sub->rank());  // a split of a split
    nested->barrier();
    return sub->size();
  });
  for (int s : sizes) EXPECT_EQ(s, 3);
}

TEST(Communicator, TcpTransportWithThreadRanks) {
  run_thread_ranks(3, TransportKind::kTcp, [](Communicator& comm) {
    EXPECT_EQ(comm.transport(), TransportKind::kTcp);
    std::vector<double> v(100003);
    std::iota(v.begin(), v.end(), comm.rank());
    comm.allreduce(v.data(), v.data(), v.size(), DType::kFloat64, ReduceOp::kMax);
    EXPECT_EQ(v[0], 2.0);
    EXPECT_EQ(v[100002], 100004.0);
    return 0;
  });
}

TEST(Communicator, AMissingRankTimesOutAndLeavesTheCommunicatorFailed) {
  CommunicatorOptions options;
  options.timeout = 300ms;
  run_thread_ranks(
      2, TransportKind::kShm,
      [](Communicator& comm) {
        std::vector<float> v(1000, 1.0f);
        if (comm.rank() == 1) {
          std::this_thread::sleep_for(1s);  // joins the first allreduce after rank 0 gave up
          // Rank 0's part is still in its segment: the call succeeded here (a sweep's 16 B
          // allreduce returned the right sum) while it failed on rank 0.
          auto m = error_of(
              [&] {
                comm.allreduce(v.data(), v.data(), v.size(), DType::kFloat32, ReduceOp::kSum);
              },
              ErrorCode::kPeerLost);
          EXPECT_NE(m.find("lost rank 0: it gave up before this rank arrived"), std::string::npos)
              << m;
          return 0;
        }
        auto start = std::chrono::steady_clock::now();
        auto m = error_of(
            [&] { comm.allreduce(v.data(), v.data(), v.size(), DType::kFloat32, ReduceOp::kSum); },
            ErrorCode::kTimeout);
        EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
        EXPECT_NE(m.find("allreduce of 4000 B on rank 0"), std::string::npos) << m;
        EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
        m = error_of([&] { comm.barrier(); }, ErrorCode::kPeerLost);
        EXPECT_NE(m.find("already failed"), std::string::npos) << m;
        return 0;
      },
      options);
}

TEST(Communicator, EnvironmentSelectsTransportAndRejectsBadValues) {
  ::setenv("KOLO_TRANSPORT", "tcp", 1);
  run_thread_ranks(2, TransportKind::kAuto, [](Communicator& comm) {
    EXPECT_EQ(comm.transport(), TransportKind::kTcp);
    return 0;
  });
  ::setenv("KOLO_TRANSPORT", "smoke-signals", 1);
  auto m =
      error_of([] { run_thread_ranks(1, TransportKind::kAuto, [](Communicator&) { return 0; }); },
               ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("KOLO_TRANSPORT"), std::string::npos) << m;
  ::unsetenv("KOLO_TRANSPORT");
}

// The baselines' names (benchmark-only) are refused, naming every accepted value, instead of
// being accepted and ignored.
TEST(Communicator, UnimplementedAlgorithmsAreRefusedWithTheAcceptedList) {
  for (const char* planned : {"mpi", "gloo", "MPI"}) {
    ::setenv("KOLO_ALGORITHM", planned, 1);
    auto m =
        error_of([] { run_thread_ranks(2, TransportKind::kShm, [](Communicator&) { return 0; }); },
                 ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find(std::string("KOLO_ALGORITHM='") + planned + "' is not implemented"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("accepted: auto, ring, tree, halving_doubling, low_latency, direct, "
                     "hierarchical"),
              std::string::npos)
        << m;
  }
  ::setenv("KOLO_ALGORITHM", "fastest", 1);
  auto m =
      error_of([] { run_thread_ranks(1, TransportKind::kShm, [](Communicator&) { return 0; }); },
               ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("'fastest' is not a valid algorithm; accepted: auto, ring"), std::string::npos)
      << m;
  ::unsetenv("KOLO_ALGORITHM");
}

}  // namespace
}  // namespace kolo::testing

TEST(SharedBuffers, AreZeroedRegisteredAndFreedOnce) {
  auto* p = static_cast<unsigned char*>(kolo::alloc_shared(10000));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(p[i], 0);
  const auto region = kolo::transport::shm::find_shared_region(p + 9999);
  EXPECT_NE(region.id, 0u);
  EXPECT_EQ(region.base, reinterpret_cast<uint64_t>(p));
  EXPECT_GE(region.bytes, 10000u);
  int local = 0;
  EXPECT_EQ(kolo::transport::shm::find_shared_region(&local).id, 0u);
  kolo::free_shared(p);
  EXPECT_EQ(kolo::transport::shm::find_shared_region(p).id, 0u);
  const std::string message = kolo::testing::error_of([&] { kolo::free_shared(&local); },
                                                      kolo::ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("was not allocated by alloc_shared"), std::string::npos) << message;
  kolo::free_shared(nullptr);
}
