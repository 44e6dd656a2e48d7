// The full collective sweep with ranks as threads of this process (1..8 ranks) over the shm
// transport and an in-process MemoryStore: fast, and every rank's result is checked.
#include <gtest/gtest.h>

#include <thread>

#include "comm/base/transport_kind.h"
#include "comm/bootstrap/store.h"
#include "tests/common/sweep.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

class ThreadSweep : public ::testing::TestWithParam<int> {};

TEST_P(ThreadSweep, EveryCollectiveDtypeOpAndSize) {
  const int size = GetParam();
  auto results = run_thread_ranks(
      size, TransportKind::kShm, [](Communicator& comm) { return run_sweep(comm, SweepConfig{}); });
  for (auto& r : results) {
    for (auto& f : r.failures) ADD_FAILURE() << f;
    EXPECT_EQ(r.failed, 0);
    EXPECT_GT(r.passed, 0);
    EXPECT_EQ(r.digest, results[0].digest);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadSweep, ::testing::Range(1, 9));

}  // namespace
}  // namespace kolo::testing
