// Ops that cannot complete because another rank has not submitted them: a wait with a timeout
// returns on time, and the stall inspector names the missing ranks (in job ranks) also for a
// name in the response cache and inside a process set, marking each rank ready in the timeline
// once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/unit/engine_testing.h"

namespace kolo::testing {
namespace {

TEST(EngineStall, AWaitWithATimeoutReturnsWhileTheWaiterRunsCycles) {
  // In waiter mode the waiting thread runs the engine's cycles itself; each cycle ran, and the
  // wait looked at its deadline only when none could: wait(300 ms) never returned.
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions o = quick_options(1.0);
    o.progress = EngineOptions::Progress::kWaiter;
    Engine eng(borrowed(comm), o);
    std::vector<float> f(8, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {8}};
    Handle h = eng.allreduce(comm.rank() == 0 ? "a" : "b", fv, fv);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(h.wait(300ms));
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, 300ms);
    EXPECT_LT(waited, 900ms);
    EXPECT_FALSE(status_of(h).ok);  // the stall shutdown (1 s) ends it
    return 0;
  });
}

TEST(EngineStall, ABarrierRefusedAfterAJoinLeavesLaterBarriersInStep) {
  // Rank 0 joins; the others' barrier is refused (only allreduce continues after a join). It
  // had counted a barrier on ranks 1 and 2 only: once all had joined, their next barrier was
  // "barrier.1" against rank 0's "barrier.0" and waited forever.
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    if (comm.rank() == 0) {
      Handle j = eng.join();
      EXPECT_TRUE(status_of(j).ok);
    } else {
      const engine::Status refused = status_of(eng.barrier());
      EXPECT_FALSE(refused.ok);
      EXPECT_NE(refused.message.find("joined"), std::string::npos) << refused.message;
      EXPECT_TRUE(status_of(eng.join()).ok);
    }
    for (int i = 0; i < 2; ++i) {
      Handle b = eng.barrier();
      const bool done = b.wait(20s);
      EXPECT_TRUE(done) << "barrier " << i << " after the join never completed";
      if (!done) return 1;
      EXPECT_TRUE(b.status().ok) << b.status().message;
    }
    return 0;
  });
}

// Ranks that each wait for a tensor the other never submits: the stall shutdown fails both ops
// on every rank with kMismatch (the ranks disagree on which tensors come next; docs/errors.md),
// the message naming the stall and the setting.
TEST(EngineStall, AStallShutdownFailsEveryRankWithMismatch) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions o = quick_options(0.5);
    o.stall_check_seconds = 0.2;
    Engine eng(borrowed(comm), o);
    std::vector<float> f(8, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {8}};
    const engine::Status s =
        status_of(eng.allreduce("only.on." + std::to_string(comm.rank()), fv, fv));
    EXPECT_FALSE(s.ok);
    EXPECT_EQ(s.code, ErrorCode::kMismatch) << s.message;
    EXPECT_NE(s.message.find("stall"), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("failed after KOLO_STALL_SHUTDOWN_SECONDS=0.5"), std::string::npos)
        << s.message;
    return 0;
  });
}

TEST(EngineStall, ACachedNameThatOneRankSkipsIsReported) {
  // A name in the response cache runs without negotiation, so the coordinator never saw it
  // waiting: a rank skipping a tensor it sent in earlier steps (the classic stall) hung with
  // no report. Both the warning and the shutdown now come.
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions o = quick_options(0.6);
    o.stall_check_seconds = 0.2;
    Engine eng(borrowed(comm), o);
    std::vector<float> f(8, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {8}};
    for (int i = 0; i < 3; ++i) eng.allreduce("grad", fv, fv).check();
    EXPECT_GE(eng.stats().cache_hits, 1u);
    if (comm.rank() == 0) {
      auto s = status_of(eng.allreduce("grad", fv, fv));
      EXPECT_FALSE(s.ok);
      EXPECT_NE(s.message.find("tensor 'grad' waits for ranks 1 (ready on ranks 0)"),
                std::string::npos)
          << s.message;
      std::this_thread::sleep_for(1000ms);  // meet rank 1 again
    } else {
      std::this_thread::sleep_for(1500ms);
    }
    eng.allreduce("grad", fv, fv).check();  // both submit it again: a cache hit as before
    EXPECT_EQ(f[0], 16.0f);                 // 1 -> 2 -> 4 -> 8 -> 16
    return 0;
  });
}

TEST(EngineStall, AStallInAProcessSetNamesJobRanks) {
  // In the set of job ranks {1, 2}, job rank 2 is the set's rank 1: the message said "waits
  // for ranks 1" on job rank 1, naming itself.
  auto messages = run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions o = quick_options(0.6);
    o.stall_check_seconds = 0.2;
    Engine eng(borrowed(comm), o);
    OpOptions in_set;
    in_set.process_set = eng.add_process_set({1, 2});
    std::vector<float> f(8, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {8}};
    std::string message;
    if (comm.rank() == 1) message = status_of(eng.allreduce("in_set", fv, fv, in_set)).message;
    std::this_thread::sleep_for(comm.rank() == 1 ? 800ms : 1500ms);  // then all meet again
    eng.allreduce("all", fv, fv).check();
    return message;
  });
  EXPECT_NE(messages[1].find("tensor 'in_set' waits for ranks 2 (ready on ranks 1)"),
            std::string::npos)
      << messages[1];
}

TEST(EngineStall, TheTimelineMarksEachRankReadyOnce) {
  // A waiting name is negotiated in every cycle: a "ready rank 0" tick each time wrote about
  // 8 MB of timeline a second.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kolo_stall_timeline_" + std::to_string(getpid())))
          .string();
  run_thread_ranks(2, TransportKind::kShm, [&](Communicator& comm) {
    EngineOptions o = quick_options(0.5);
    o.stall_check_seconds = 0.2;
    o.timeline_path = path;
    Engine eng(borrowed(comm), o);
    std::vector<float> f(8, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {8}};
    if (comm.rank() == 0) {
      EXPECT_FALSE(status_of(eng.allreduce("lonely", fv, fv)).ok);
    } else {
      std::this_thread::sleep_for(1000ms);
    }
    eng.allreduce("together", fv, fv).check();
    return 0;
  });
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  int ticks = 0;
  for (const auto& e : trace)
    if (e.value("ph", "") == "i" && e.value("name", "") == "ready rank 0") ++ticks;
  EXPECT_EQ(ticks, 2);  // "lonely" once, "together" once
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".rank1");
}

}  // namespace
}  // namespace kolo::testing
