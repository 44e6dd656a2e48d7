// Direct Communicator calls that disagree across ranks (the hardening issue: they hung or
// returned wrong bits on the shm paths): every rank fails with kMismatch, quickly, naming both
// calls, on the shm transport (barrier flags carry the call, and a wait about to sleep
// publishes it) and on tcp (every message's header does; a rank that only sends in the call
// fails at its next call). The job's timeout is long,
// so a hang would show as a late report.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "tests/process/job.h"

namespace kolo::testing {
namespace {

constexpr double kTimeout = 60.0;  // KOLO_TIMEOUT_SECONDS of the job: a hang would take this long
constexpr double kReportWithin = 20.0;

class Mismatch : public ::testing::TestWithParam<TransportKind> {
 protected:
  // Runs `body` on 3 ranks; every rank must fail with kMismatch and the text `expected`.
  void expect_mismatch(const std::function<void(Communicator&, int)>& body,
                       const std::string& expected) {
    ForkedJob job(3, GetParam(), kTimeout);
    job.start([&](Communicator& comm, int rank) {
      mark_started(comm);
      std::vector<float> warm(64, 1.0f);  // one agreed call first: the mismatch is call #2
      comm.allreduce(warm.data(), warm.data(), warm.size(), DType::kFloat32, ReduceOp::kSum);
      body(comm, rank);
      // On tcp a rank whose part only sends (a broadcast root) can finish the mismatched call;
      // it learns at its next one, from the peer that found the mismatch.
      comm.allreduce(warm.data(), warm.data(), warm.size(), DType::kFloat32, ReduceOp::kSum);
    });
    job.wait_started(60.0);
    auto outcomes = job.collect(job.elapsed() + kReportWithin);
    for (int r = 0; r < 3; ++r) {
      const Outcome& o = outcomes[static_cast<size_t>(r)];
      ASSERT_TRUE(o.exited) << "rank " << r << " hung";
      EXPECT_FALSE(o.ok) << "rank " << r << " finished a mismatched call";
      EXPECT_NE(o.message.find("kolo mismatch error"), std::string::npos) << o.message;
      EXPECT_NE(o.message.find(expected), std::string::npos) << o.message;
      std::printf("rank %d: %s\n", r, o.message.c_str());
    }
  }
};

TEST_P(Mismatch, DifferentCountsFailOnEveryRank) {
  // 1000 vs 300000 floats: on shm one rank takes the low-latency path, the others the direct.
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<float> data(rank == 1 ? 1000 : 300000, 1.0f);
        comm.allreduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
      },
      "call #2");
}

TEST_P(Mismatch, SameBytesOtherDtypeFailsOnEveryRank) {
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<int32_t> data(4096, 1);
        comm.allreduce(data.data(), data.data(), data.size(),
                       rank == 2 ? DType::kFloat32 : DType::kInt32, ReduceOp::kSum);
      },
      "float32");
}

TEST_P(Mismatch, DifferentCollectivesFailOnEveryRank) {
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<float> data(3 * 50000, 1.0f);
        if (rank == 0)
          comm.broadcast(data.data(), data.size(), DType::kFloat32, 0);
        else
          comm.allreduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
      },
      "ranks called different collectives");
}

TEST_P(Mismatch, ABarrierAgainstAnotherCollectiveFailsOnEveryRank) {
  // On shm a barrier waits for ring messages and a direct allreduce for its peers' barrier
  // flags: each waited for what the other never sends, until the timeout. A rank that waits
  // long enough to sleep now publishes its call for the others to compare.
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<float> data(16, 1.0f);
        if (rank == 1)
          comm.barrier();
        else
          comm.allreduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum);
      },
      // Over ucx the allreduce's message may reach the barrier before its header is compared:
      // "rank 0 sent a message larger than the 1 B this rank expects in call #2, barrier".
      "call #2");
}

TEST_P(Mismatch, DifferentAlgorithmsFailOnEveryRank) {
  // Rank 1 asks for the tree, the others for the ring: their messages would mix (every element
  // came out wrong) or wait for each other until the timeout.
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<float> data(4096, 1.0f);
        CollectiveOptions options;
        options.algorithm = rank == 1 ? Algorithm::kTree : Algorithm::kRing;
        comm.allreduce(data.data(), data.data(), data.size(), DType::kFloat32, ReduceOp::kSum,
                       options);
      },
      "algorithm tree");
}

TEST_P(Mismatch, DifferentRootsFailOnEveryRank) {
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<double> data(20000, 1.0);
        comm.broadcast(data.data(), data.size(), DType::kFloat64, rank == 2 ? 1 : 0);
      },
      "root");
}

TEST_P(Mismatch, AlltoallvSplitsThatDoNotMatchFailOnEveryRank) {
  // Rank 0 sends 3 elements to rank 1, which expects 2 from it.
  expect_mismatch(
      [](Communicator& comm, int rank) {
        std::vector<size_t> send_counts(3, 2), recv_counts(3, 2);
        if (rank == 0) send_counts[1] = 3;
        std::vector<float> send(7, 1.0f), recv(7, 0.0f);
        comm.alltoallv(send.data(), send_counts, recv.data(), recv_counts, DType::kFloat32);
      },
      "alltoall");
}

INSTANTIATE_TEST_SUITE_P(Transports, Mismatch, ::testing::ValuesIn(process_transports()),
                         [](const auto& info) { return std::string(transport_name(info.param)); });

}  // namespace
}  // namespace kolo::testing
