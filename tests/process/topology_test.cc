// Local and cross communicators from host identity: four processes that claim two hosts
// (KOLO_HOSTNAME) get local ranks per host, a shm local communicator and a tcp cross one.
#include <gtest/gtest.h>

#include <vector>

#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "tests/process/job.h"

namespace kolo::testing {
namespace {

TEST(Topology, TwoFakeHostsGiveLocalAndCrossCommunicators) {
  ForkedJob job(4, TransportKind::kAuto, 20.0);
  for (int r = 0; r < 4; ++r) job.set_env(r, "KOLO_HOSTNAME", r < 2 ? "host-a" : "host-b");
  job.start([](Communicator& comm, int rank) {
    auto expect = [](bool ok, const char* what) {
      if (!ok) throw std::runtime_error(what);
    };
    expect(comm.transport() == TransportKind::kTcp, "two hosts should resolve auto to tcp");
    expect(comm.local_rank() == rank % 2 && comm.local_size() == 2, "local rank/size");
    expect(comm.cross_rank() == rank / 2 && comm.cross_size() == 2, "cross rank/size");
    auto local = comm.local();
    auto cross = comm.cross();
    expect(local->size() == 2 && local->rank() == rank % 2, "local communicator");
    expect(local->transport() == TransportKind::kShm, "local communicator should use shm");
    expect(cross->size() == 2 && cross->rank() == rank / 2, "cross communicator");
    // Hierarchical sum by hand: within each host, then across hosts.
    std::vector<int64_t> v(1000, rank + 1);
    local->allreduce(v.data(), v.data(), v.size(), DType::kInt64, ReduceOp::kSum);
    cross->allreduce(v.data(), v.data(), v.size(), DType::kInt64, ReduceOp::kSum);
    expect(v[0] == 10 && v[999] == 10, "hierarchical allreduce result");
    auto odd = comm.split(rank % 2 ? 1 : kUndefinedColor, -rank);
    expect((rank % 2 == 0) == (odd == nullptr), "undefined color gives no communicator");
    if (odd) expect(odd->size() == 2 && odd->rank() == (rank == 3 ? 0 : 1), "split key order");
  });
  for (const Outcome& o : job.collect(30.0)) EXPECT_TRUE(o.ok) << o.message;
}

}  // namespace
}  // namespace kolo::testing
