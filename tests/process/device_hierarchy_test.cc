// The engine's hierarchical device path (KOLO_DEVICE_HIERARCHICAL; fusion/device_hierarchical.h)
// on processes that claim two and three hosts (KOLO_HOSTNAME), with the host stand-in for the
// device (tests/common/host_device.h): allreduces reduce inside each host, cross hosts from the
// hosts' first ranks only, and broadcast back; the other ops take the whole set's context.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusion/engine.h"
#include "tests/common/host_device.h"
#include "tests/process/job.h"
#include "tests/unit/thread_ranks.h"

namespace kolo::testing {
namespace {

using engine::Engine;
using engine::EngineOptions;
using engine::OpOptions;
using engine::TensorView;

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// `hosts` hosts of ranks_per_host consecutive ranks each.
void run_hierarchy(int hosts, int ranks_per_host) {
  const int size = hosts * ranks_per_host;
  ForkedJob job(size, TransportKind::kAuto, 60.0);
  for (int r = 0; r < size; ++r)
    job.set_env(r, "KOLO_HOSTNAME", "host-" + std::to_string(r / ranks_per_host));
  job.start([&](Communicator& comm, int rank) {
    auto calls = std::make_shared<Calls>();
    EngineOptions o;
    o.stall_check_seconds = 10;
    o.device = std::make_shared<HostDevice>(calls);
    o.device_hierarchical = true;
    Engine eng(borrowed(comm), o);
    const int n = comm.size();
    const float total = float(n * (n + 1) / 2);
    // Fused, averaged with a postscale; then large and unfused, summed; then max.
    std::vector<float> small(100, float(rank + 1)), big(70000, float(rank + 1));
    OpOptions avg;
    avg.op = ReduceOp::kAverage;
    avg.postscale = 2.0;
    eng.allreduce("small", {small.data(), DType::kFloat32, {100}, 0},
                  {small.data(), DType::kFloat32, {100}, 0}, avg)
        .check();
    expect(small[99] == 2.0f * total / float(n), "fused average: " + std::to_string(small[99]));
    std::vector<float> out(big.size());
    eng.allreduce("big", {big.data(), DType::kFloat32, {70000}, 0},
                  {out.data(), DType::kFloat32, {70000}, 0})
        .check();
    expect(out[69999] == total && big[0] == float(rank + 1), "unfused sum");
    OpOptions max;
    max.op = ReduceOp::kMax;
    std::vector<int32_t> m(10, rank * 7);
    eng.allreduce("max", {m.data(), DType::kInt32, {10}, 0}, {m.data(), DType::kInt32, {10}, 0},
                  max)
        .check();
    expect(m[3] == (n - 1) * 7, "max");
    // The whole set's context: a broadcast from the last rank.
    std::vector<float> b(5, float(rank));
    eng.broadcast("b", {b.data(), DType::kFloat32, {5}, 0}, n - 1).check();
    expect(b[4] == float(n - 1), "broadcast");
    // Only a host's first rank crossed hosts, on host memory.
    const bool first = comm.local_rank() == 0;
    expect(calls->count("reduce") == 3, "one reduce inside the host per allreduce");
    expect(calls->count("copy_to_host") == (first ? 3u : 0u), "host copies on first ranks only");
    expect(calls->count("broadcast") == 4, "three broadcasts back and the broadcast op");
    expect(calls->opened == std::vector<int>{0, 0}, "a host context and a whole-set context");
  });
  for (const Outcome& outcome : job.collect(90.0)) EXPECT_TRUE(outcome.ok) << outcome.message;
}

TEST(DeviceHierarchy, TwoHostsOfTwoRanks) {
  run_hierarchy(2, 2);
}
TEST(DeviceHierarchy, ThreeHostsOfTwoRanks) {
  run_hierarchy(3, 2);
}

}  // namespace
}  // namespace kolo::testing
