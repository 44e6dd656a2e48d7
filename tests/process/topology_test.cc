// Local and cross communicators from host identity: four processes that claim two hosts
// (KOLO_HOSTNAME) get local ranks per host, a shm local communicator and a tcp cross one.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/base/algorithm.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "comm/bootstrap/host.h"
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

// Ranks bound one per CPU (mpirun's default at 2 ranks) each may use one CPU, but the host's
// ranks run on as many CPUs as there are ranks: not oversubscribed. Ranks bound to one shared
// CPU are.
TEST(Topology, HostCpusAreTheUnionOfTheRanksBindings) {
  const int cpus = bootstrap::usable_cpus();
  for (bool shared : {false, true}) {
    ForkedJob job(2, TransportKind::kShm, 20.0);
    for (int r = 0; r < 2; ++r) job.set_cpu(r, shared ? 0 : r % cpus);
    const int want = shared ? 1 : std::min(2, cpus);
    job.start([want](Communicator& comm, int) {
      if (bootstrap::usable_cpus() != 1) throw std::runtime_error("the rank is not bound");
      if (comm.host_cpus() != want)
        throw std::runtime_error("host_cpus " + std::to_string(comm.host_cpus()) + ", want " +
                                 std::to_string(want));
      std::vector<int64_t> v(8, 1);  // and the shm transport works either way
      comm.allreduce(v.data(), v.data(), v.size(), DType::kInt64, ReduceOp::kSum);
      if (v[7] != 2) throw std::runtime_error("allreduce result");
    });
    for (const Outcome& o : job.collect(30.0)) EXPECT_TRUE(o.ok) << o.message;
  }
}

// kAuto across hosts: hierarchical allreduce, reduce-scatter and allgather where every host has
// the same number of consecutive ranks; with hosts interleaved (ranks 0 and 2 on one host) only
// the allreduce is hierarchical, and asking for the others names what is accepted.
TEST(Topology, HierarchicalChoiceFollowsTheRankLayout) {
  for (bool interleaved : {false, true}) {
    ForkedJob job(4, TransportKind::kAuto, 20.0);
    for (int r = 0; r < 4; ++r)
      job.set_env(r, "KOLO_HOSTNAME", (interleaved ? r % 2 : r / 2) == 0 ? "host-a" : "host-b");
    job.start([interleaved](Communicator& comm, int) {
      auto expect = [](bool ok, const std::string& what) {
        if (!ok) throw std::runtime_error(what);
      };
      const size_t mib = size_t{1} << 20;
      expect(comm.choose_algorithm(Collective::kAllreduce, mib) == Algorithm::kHierarchical,
             "allreduce across hosts should be hierarchical");
      const Algorithm want = interleaved ? Algorithm::kRing : Algorithm::kHierarchical;
      for (Collective c : {Collective::kReduceScatter, Collective::kAllgather})
        expect(
            comm.choose_algorithm(c, mib) == want,
            std::string(collective_name(c)) + ": " + algorithm_name(comm.choose_algorithm(c, mib)));
      if (interleaved) {
        try {
          comm.choose_algorithm(Collective::kAllgather, mib,
                                CollectiveOptions{Algorithm::kHierarchical});
          expect(false, "a forced hierarchical allgather on interleaved hosts should throw");
        } catch (const Error& e) {
          // The layout is named, not the transport (it was "not available with the tcp
          // transport", which runs it for ranks in host order).
          const std::string what = e.what();
          expect(what.find("accepted: auto, ring") != std::string::npos &&
                     what.find("its ranks are not in one block per host") != std::string::npos &&
                     what.find("transport") == std::string::npos,
                 what);
        }
      }
      // Results match the closed form both ways (in place, as ZeRO's buffers are).
      std::vector<int64_t> v(4 * 1000);
      for (size_t i = 0; i < v.size(); ++i) v[i] = comm.rank() * 10000 + static_cast<int64_t>(i);
      comm.reduce_scatter(v.data(), v.data() + comm.rank() * 1000, 1000, DType::kInt64,
                          ReduceOp::kSum);
      for (size_t i = 0; i < 1000; ++i) {
        const int64_t at = comm.rank() * 1000 + static_cast<int64_t>(i);
        expect(v[comm.rank() * 1000 + i] == 60000 + 4 * at, "reduce_scatter element");
      }
      comm.allgather(v.data() + comm.rank() * 1000, v.data(), 1000, DType::kInt64);
      for (size_t i = 0; i < v.size(); ++i)
        expect(v[i] == 60000 + 4 * static_cast<int64_t>(i), "allgather element");
    });
    for (const Outcome& o : job.collect(30.0)) EXPECT_TRUE(o.ok) << o.message;
  }
}

}  // namespace
}  // namespace kolo::testing
