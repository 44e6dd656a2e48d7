// The engine with ranks as threads: many named tensors submitted from several threads in a
// different order on each rank, fusion and cache statistics, mismatches, stalls, duplicate
// names, the non-allreduce ops, join and fp16 compression.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <thread>

#include "comm/bootstrap/host.h"
#include "tests/unit/engine_testing.h"
#include "tests/unit/expect_error.h"

namespace kolo::testing {
namespace {

struct Tensor {
  DType dtype;
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<int32_t> i32;
  TensorView view() {
    if (dtype == DType::kFloat32) return {f32.data(), dtype, {int64_t(f32.size())}};
    if (dtype == DType::kFloat64) return {f64.data(), dtype, {int64_t(f64.size())}};
    return {i32.data(), dtype, {int64_t(i32.size())}};
  }
  double at(size_t i) const {
    return dtype == DType::kFloat32 ? f32[i] : dtype == DType::kFloat64 ? f64[i] : i32[i];
  }
};

// 200 tensors of random sizes and dtypes (the same on every rank: seeded by index); rank r
// contributes (r + 1) * (i % 7 + 1) at element i, so the sum is size(size+1)/2 * (i % 7 + 1).
std::vector<Tensor> make_tensors(int rank) {
  std::mt19937 rng(12345);
  std::vector<Tensor> tensors(200);
  for (auto& t : tensors) {
    size_t n = 1 + rng() % 5000;
    t.dtype = std::array{DType::kFloat32, DType::kFloat64, DType::kInt32}[rng() % 3];
    for (size_t i = 0; i < n; ++i) {
      double v = (rank + 1) * double(i % 7 + 1);
      if (t.dtype == DType::kFloat32)
        t.f32.push_back(float(v));
      else if (t.dtype == DType::kFloat64)
        t.f64.push_back(v);
      else
        t.i32.push_back(int32_t(v));
    }
  }
  return tensors;
}

std::vector<engine::EngineStats> many_tensors(size_t cache_capacity) {
  const int size = 3;
  return run_thread_ranks(size, TransportKind::kShm, [&](Communicator& comm) {
    EngineOptions options = quick_options();
    options.cache_capacity = cache_capacity;
    Engine eng(borrowed(comm), options);
    std::mt19937 rng(comm.rank() * 7 + 1);
    for (int step = 0; step < 3; ++step) {
      auto tensors = make_tensors(comm.rank());
      std::vector<int> order(tensors.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<Handle> handles(tensors.size());
      std::vector<std::thread> threads;
      for (int t = 0; t < 3; ++t)
        threads.emplace_back([&, t] {
          for (size_t k = t; k < order.size(); k += 3) {
            int i = order[k];
            handles[i] =
                eng.allreduce("grad." + std::to_string(i), tensors[i].view(), tensors[i].view());
          }
        });
      for (auto& th : threads) th.join();
      for (size_t i = 0; i < tensors.size(); ++i) {
        handles[i].check();
        for (size_t e = 0; e < tensors[i].view().count(); e += 97)
          EXPECT_EQ(tensors[i].at(e), size * (size + 1) / 2 * double(e % 7 + 1)) << i;
      }
    }
    return eng.stats();
  });
}

TEST(Engine, ManyTensorsFromSeveralThreadsInRandomOrder) {
  for (auto& s : many_tensors(1024)) {
    EXPECT_GT(s.fused_collectives, 0u) << "no fusion happened";
    EXPECT_GT(s.cache_hits, 0u) << "no cache hits in steps 2 and 3";
    EXPECT_EQ(s.responses, 600u);
  }
}

TEST(Engine, ASmallCacheEvictsConsistentlyAndZeroDisablesIt) {
  for (auto& s : many_tensors(16)) EXPECT_EQ(s.responses, 600u);  // evictions every step
  for (auto& s : many_tensors(0)) {
    EXPECT_EQ(s.responses, 600u);
    EXPECT_EQ(s.cache_hits, 0u);
  }
}

TEST(Engine, ProcessSetsReduceAmongTheirMembersOnly) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    int evens = eng.add_process_set({0, 2});
    std::vector<float> v(100, float(comm.rank() + 1));
    TensorView tv{v.data(), DType::kFloat32, {100}};
    OpOptions in_set;
    in_set.process_set = evens;
    if (comm.rank() != 1) {
      eng.allreduce("evens", tv, tv, in_set).check();
      EXPECT_EQ(v[99], 4.0f);  // ranks 0 and 2 contribute 1 and 3
    } else {
      const std::string m =
          error_of([&] { eng.allreduce("evens", tv, tv, in_set); }, ErrorCode::kInvalidArgument);
      EXPECT_NE(m.find("rank 1 is not a member of process set 1 (ranks [0, 2])"), std::string::npos)
          << m;
    }
    eng.allreduce("all", tv, tv).check();
    EXPECT_EQ(v[0], 10.0f);  // after "evens": 4 + 2 + 4
    if (comm.rank() != 1) {
      // Splits are per rank of the set (2 here), not of the world (3): they were refused.
      std::vector<int32_t> rows{comm.rank(), comm.rank(), comm.rank()};
      TensorView rv{rows.data(), DType::kInt32, {3}};
      in_set.splits = {1, 2};
      Handle h = eng.alltoall("evens_a2a", rv, in_set);
      h.check();
      const auto* got = reinterpret_cast<const int32_t*>(h.output().data());
      // Set rank 0 (world 0) gets 1 row from each: {0, 2}; set rank 1 gets 2 from each.
      const size_t expected_rows = comm.rank() == 0 ? 2 : 4;
      EXPECT_EQ(h.output().size(), expected_rows * sizeof(int32_t));
      if (h.output().size() == expected_rows * sizeof(int32_t)) {
        EXPECT_EQ(got[0], 0);
        EXPECT_EQ(got[expected_rows - 1], 2);
      }
    }
    eng.allreduce("done", tv, tv).check();  // rank 1 keeps its engine until the set is done
    return 0;
  });
}

// remove_process_set frees a set at the same cycle everywhere: an op of it still pending fails,
// later ones are refused, removing it twice or removing different sets is refused, and sets
// added later work (the engine kept every set until shutdown).
TEST(Engine, ARemovedProcessSetFailsItsPendingOpsAndRefusesNewOnes) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    const int r = comm.rank();
    const int evens = eng.add_process_set({0, 2});
    std::vector<float> v(8, float(r + 1));
    TensorView tv{v.data(), DType::kFloat32, {8}};
    OpOptions in_set;
    in_set.process_set = evens;
    std::optional<Handle> waiting;
    if (r == 0) waiting = eng.allreduce("only_rank0", tv, tv, in_set);  // rank 2 never sends it
    const int all = eng.add_process_set({0, 1, 2});
    const std::string mismatch =
        error_of([&] { eng.remove_process_set(r == 2 ? all : evens); }, ErrorCode::kMismatch);
    EXPECT_NE(mismatch.find("the process set removed differs between ranks: rank 0 uses 1, "
                            "rank 2 uses 2"),
              std::string::npos)
        << mismatch;
    EXPECT_NE(error_of([&] { eng.remove_process_set(0); }, ErrorCode::kInvalidArgument)
                  .find("the global process set (0) cannot be removed"),
              std::string::npos);
    eng.remove_process_set(evens);
    if (waiting) {
      const std::string m = error_of([&] { waiting->check(); }, ErrorCode::kInvalidArgument);
      EXPECT_NE(m.find("process set 1 (ranks [0, 2]) was removed (remove_process_set) while the "
                       "op was pending"),
                std::string::npos)
          << m;
    }
    if (r != 1) {
      const std::string m =
          error_of([&] { eng.allreduce("later", tv, tv, in_set); }, ErrorCode::kInvalidArgument);
      EXPECT_NE(m.find("process set 1 (ranks [0, 2]) was removed"), std::string::npos) << m;
    }
    EXPECT_NE(error_of([&] { eng.remove_process_set(evens); }, ErrorCode::kInvalidArgument)
                  .find("was removed already"),
              std::string::npos);
    const int odds = eng.add_process_set({1, 2});
    EXPECT_EQ(odds, 3);
    std::vector<float> w(8, float(r + 1));
    TensorView tw{w.data(), DType::kFloat32, {8}};
    in_set.process_set = odds;
    if (r != 0) {
      eng.allreduce("odds", tw, tw, in_set).check();
      EXPECT_EQ(w[7], 5.0f);  // ranks 1 and 2 contribute 2 and 3
    }
    eng.remove_process_set(all);
    eng.allreduce("done", tw, tw).check();
    return 0;
  });
}

// add_process_set is collective: ranks that pass different lists, or a list that is not a set
// of the job's ranks, get the same error everywhere, and no set is added (the next set takes
// the id; every rank agrees on it).
TEST(Engine, ProcessSetListsAreComparedAndCheckedOnEveryRank) {
  auto messages = run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    const int r = comm.rank();
    std::string all;
    auto refused = [&](const std::vector<int>& ranks, ErrorCode code) {
      all += error_of([&] { eng.add_process_set(ranks); }, code) + "\n";
    };
    refused(r == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 1}, ErrorCode::kMismatch);
    refused(r == 0 ? std::vector<int>{0} : std::vector<int>{}, ErrorCode::kMismatch);
    refused({}, ErrorCode::kInvalidArgument);
    refused({0, 3}, ErrorCode::kInvalidArgument);
    refused({-1, 0}, ErrorCode::kInvalidArgument);
    refused({2, 0, 2}, ErrorCode::kInvalidArgument);
    const int id = eng.add_process_set({2, 0});  // any order
    EXPECT_EQ(id, 1);
    std::vector<float> v(4, float(r + 1));
    TensorView tv{v.data(), DType::kFloat32, {4}};
    OpOptions in_set;
    in_set.process_set = id;
    if (r != 1) {
      eng.allreduce("set", tv, tv, in_set).check();
      EXPECT_EQ(v[3], 4.0f);
    }
    eng.allreduce("done", tv, tv).check();
    return all;
  });
  for (const auto& m : messages) {
    EXPECT_NE(m.find("the ranks of process set 1 differs between ranks: rank 0 uses [0, 1], "
                     "rank 2 uses [0, 2]"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rank 0 uses [0], rank 1 uses []"), std::string::npos) << m;
    EXPECT_NE(m.find("a process set needs at least one rank"), std::string::npos) << m;
    EXPECT_NE(m.find("3 is not a rank of this job of 3 (ranks [0, 3])"), std::string::npos) << m;
    EXPECT_NE(m.find("-1 is not a rank of this job of 3 (ranks [-1, 0])"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2 is given twice (ranks [0, 2, 2])"), std::string::npos) << m;
  }
}

TEST(Engine, MismatchesFailOnEveryRankAndTheEngineCarriesOn) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    std::vector<float> f(10, 1.0f);
    std::vector<int32_t> i(10, 1);
    TensorView fv{f.data(), DType::kFloat32, {10}}, iv{i.data(), DType::kInt32, {10}};
    auto s = status_of(eng.allreduce("x", comm.rank() ? iv : fv, comm.rank() ? iv : fv));
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.message.find("tensor 'x': dtype mismatch: rank 0 has float32, rank 1 has int32"),
              std::string::npos)
        << s.message;
    TensorView small{f.data(), DType::kFloat32, {comm.rank() ? 5 : 10}};
    s = status_of(eng.allreduce("y", small, small));
    EXPECT_NE(s.message.find("shape mismatch"), std::string::npos) << s.message;
    OpOptions op;
    op.op = comm.rank() ? ReduceOp::kMax : ReduceOp::kSum;
    s = status_of(eng.allreduce("z", fv, fv, op));
    EXPECT_NE(s.message.find("reduce op mismatch"), std::string::npos) << s.message;
    s = status_of(eng.broadcast("b", fv, comm.rank()));
    EXPECT_NE(s.message.find("root mismatch"), std::string::npos) << s.message;
    // A duplicate pending name is refused on the spot.
    auto first = eng.allreduce("dup", fv, fv);
    EXPECT_THROW(eng.allreduce("dup", fv, fv), Error);
    first.check();
    // And the engine still works.
    eng.allreduce("after", fv, fv).check();
    EXPECT_EQ(f[0], 4.0f);  // "dup" made it 2
    return 0;
  });
}

TEST(Engine, APendingNameStaysRefusedWhileThousandsOfOthersComeAndGo) {
  // The engine keeps finished names (a step reuses them) and forgets them in bulk once their
  // table has doubled: the pending one must survive every such pruning.
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    float held = 1.0f, x = 1.0f;
    TensorView hv{&held, DType::kFloat32, {1}}, xv{&x, DType::kFloat32, {1}};
    Handle first;
    if (comm.rank() == 0) first = eng.allreduce("held", hv, hv);  // rank 1 submits it later
    OpOptions max;
    max.op = ReduceOp::kMax;
    for (int i = 0; i < 3000; ++i) eng.allreduce("name." + std::to_string(i), xv, xv, max).check();
    EXPECT_EQ(x, 1.0f);
    if (comm.rank() == 0) {
      EXPECT_THROW(eng.allreduce("held", hv, hv), Error);
    }
    if (comm.rank() == 1) first = eng.allreduce("held", hv, hv);
    first.check();
    EXPECT_EQ(held, 2.0f);
    eng.allreduce("held", hv, hv).check();  // done: the name may be used again
    EXPECT_EQ(held, 4.0f);
    return 0;
  });
}

TEST(Engine, BadArgumentsAreRefusedAtSubmissionAndTheEngineCarriesOn) {
  // Found by the hardening issue: an invalid dtype, op or root reached the engine thread and
  // ended it for good; a huge count wrapped the byte count; negative splits passed.
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    std::vector<float> f(4, 1.0f);
    auto refused = [](auto&& call, const char* fragment) {
      try {
        call();
        ADD_FAILURE() << "expected an error containing " << fragment;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      }
    };
    TensorView bad_dtype{f.data(), static_cast<DType>(42), {4}};
    refused([&] { eng.allreduce("d", bad_dtype, bad_dtype); }, "dtype 42");
    TensorView fv{f.data(), DType::kFloat32, {4}};
    OpOptions bad_op;
    bad_op.op = static_cast<ReduceOp>(9);
    refused([&] { eng.allreduce("o", fv, fv, bad_op); }, "reduce op 9");
    refused([&] { eng.broadcast("r", fv, 5); }, "root 5");
    TensorView huge{f.data(), DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 30}};
    refused([&] { eng.allreduce("h", huge, huge); }, "too many elements");
    TensorView negative{f.data(), DType::kFloat32, {-4}};
    refused([&] { eng.allgather("n", negative); }, "negative dimension");
    OpOptions splits;
    splits.splits = {-1, 5};
    refused([&] { eng.alltoall("s", fv, splits); }, "split -1");
    splits.splits = {1, 2};
    refused([&] { eng.alltoall("s", fv, splits); },
            "the splits add up to 3 rows, but the tensor has 4");
    splits.splits = {4};
    refused([&] { eng.alltoall("s", fv, splits); }, "1 splits for a process set of 2 ranks");
    eng.allreduce("after", fv, fv).check();
    EXPECT_EQ(f[0], 2.0f);
    return 0;
  });
}

TEST(Engine, ProgressSettingIsCheckedNamingIt) {
  ::setenv("KOLO_ENGINE_PROGRESS", "sometimes", 1);
  try {
    EngineOptions::from_env();
    ADD_FAILURE() << "KOLO_ENGINE_PROGRESS=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("KOLO_ENGINE_PROGRESS='sometimes'"), std::string::npos)
        << e.what();
  }
  ::setenv("KOLO_ENGINE_PROGRESS", "waiter", 1);
  EXPECT_EQ(EngineOptions::from_env().progress, EngineOptions::Progress::kWaiter);
  ::setenv("KOLO_ENGINE_PROGRESS", "thread", 1);
  EXPECT_EQ(EngineOptions::from_env().progress, EngineOptions::Progress::kThread);
  ::unsetenv("KOLO_ENGINE_PROGRESS");
  EXPECT_EQ(EngineOptions::from_env().progress, EngineOptions::Progress::kAuto);
  EXPECT_TRUE(engine::waiters_drive(EngineOptions::Progress::kWaiter, 1, 64));
  EXPECT_FALSE(engine::waiters_drive(EngineOptions::Progress::kThread, 1 << 20, 1));
  EXPECT_TRUE(engine::waiters_drive(EngineOptions::Progress::kAuto, 1 << 20, 64));
  EXPECT_TRUE(engine::waiters_drive(EngineOptions::Progress::kAuto, 2, 2));  // bound one per core
  if (bootstrap::usable_cpus() > 1) {  // a spare CPU on the host: the loop thread drives
    EXPECT_FALSE(engine::waiters_drive(EngineOptions::Progress::kAuto, 1, 2));
  }
}

TEST(Engine, InWaiterModeAnOpNobodyWaitsForStillCompletes) {
  // The loop thread defers to a busy application, but never longer than kMaxDeferMs in a row:
  // here the grace period is far longer than that, and rank 1 only polls.
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions options = quick_options();
    options.progress = EngineOptions::Progress::kWaiter;
    options.waiter_grace_ms = 10000;
    Engine eng(borrowed(comm), options);
    std::vector<float> f(16, float(comm.rank() + 1));
    TensorView fv{f.data(), DType::kFloat32, {16}};
    Handle h = eng.allreduce("polled", fv, fv);
    const auto start = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      h.check();
    } else {
      while (!h.done()) std::this_thread::sleep_for(1ms);
      h.check();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_EQ(f[15], 3.0f);
    return 0;
  });
}

TEST(Engine, ATimelineOneRankCannotOpenFailsEveryRank) {
  // Rank 0's path is a directory. Rank 1's engine started, and its first op waited for rank 0
  // until the timeout; now both fail at once, rank 1 naming rank 0, and both can start over.
  const std::string dir = ::testing::TempDir();
  auto messages = run_thread_ranks(2, TransportKind::kShm, [&](Communicator& comm) {
    EngineOptions o = quick_options();
    o.timeline_path = comm.rank() == 0 ? dir : dir + "/kolo_timeline_rank1.json";
    std::string message;
    try {
      Engine eng(borrowed(comm), o);
    } catch (const Error& e) {
      message = e.what();
    }
    Engine eng(borrowed(comm), quick_options());
    std::vector<float> f(4, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {4}};
    eng.allreduce("after", fv, fv).check();
    EXPECT_EQ(f[0], 2.0f);
    return message;
  });
  EXPECT_NE(messages[0].find("timeline"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("rank 0 could not open its timeline file"), std::string::npos)
      << messages[1];
  std::remove((dir + "/kolo_timeline_rank1.json.rank1").c_str());
}

TEST(Engine, StallShutdownNamesTheMissingRank) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions o = quick_options();
    o.stall_check_seconds = 0.2;
    o.stall_shutdown_seconds = 0.5;
    Engine eng(borrowed(comm), o);
    std::vector<float> f(10, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {10}};
    if (comm.rank() == 0) {
      auto s = status_of(eng.allreduce("lonely", fv, fv));
      EXPECT_FALSE(s.ok);
      EXPECT_NE(s.message.find("tensor 'lonely' waits for ranks 1"), std::string::npos)
          << s.message;
      std::this_thread::sleep_for(1000ms);  // meet rank 1 again
    } else {
      std::this_thread::sleep_for(1500ms);
    }
    eng.allreduce("together", fv, fv).check();
    return 0;
  });
}

// A rank whose engine stops (its program ends or fails) while another rank waits for an op:
// the waiting rank's op fails naming the rank that stopped (it said "a rank"), and the
// stopping rank's own pending op says that its engine was shut down.
TEST(Engine, AnEngineThatStopsIsNamedToTheOthers) {
  auto messages = run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    std::vector<float> f(10, 1.0f);
    TensorView fv{f.data(), DType::kFloat32, {10}};
    std::string message;
    {
      Engine eng(borrowed(comm), quick_options());
      Handle h = eng.allreduce(comm.rank() == 0 ? "only.on.0" : "only.on.1", fv, fv);
      if (comm.rank() == 0) {
        EXPECT_TRUE(h.wait(20s));
        message = h.status().message;
      } else {
        std::this_thread::sleep_for(300ms);  // rank 0 waits; then this engine goes
      }
    }
    return message;
  });
  EXPECT_NE(messages[0].find("rank 1 shut its engine down"), std::string::npos) << messages[0];
}

TEST(Engine, OtherOpsJoinAndCompression) {
  const int size = 3;
  run_thread_ranks(size, TransportKind::kShm, [&](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    const int r = comm.rank();
    // allgather with a different first dimension on each rank
    std::vector<int32_t> rows(static_cast<size_t>(2 * (r + 1)), r);
    auto g = eng.allgather("g", {rows.data(), DType::kInt32, {r + 1, 2}});
    g.check();
    EXPECT_EQ(g.output_shape(), (std::vector<int64_t>{6, 2}));
    auto* out = reinterpret_cast<const int32_t*>(g.output().data());
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[2], 1);
    EXPECT_EQ(out[11], 2);
    // broadcast from rank 2
    std::vector<double> b(5, r == 2 ? 42.0 : 0.0);
    eng.broadcast("b", {b.data(), DType::kFloat64, {5}}, 2).check();
    EXPECT_EQ(b[4], 42.0);
    // alltoall with splits: rank r sends p + 1 rows to rank p
    std::vector<int64_t> splits{1, 2, 3};
    std::vector<float> a(6, float(r));
    OpOptions ao;
    ao.splits = splits;
    auto t = eng.alltoall("a", {a.data(), DType::kFloat32, {6}}, ao);
    t.check();
    EXPECT_EQ(t.output_shape(), (std::vector<int64_t>{3 * (r + 1)}));
    // reduce_scatter: rows split evenly
    std::vector<float> rs(6, 1.0f);
    auto s = eng.reduce_scatter("rs", {rs.data(), DType::kFloat32, {6}});
    s.check();
    EXPECT_EQ(s.output_shape(), (std::vector<int64_t>{2}));
    eng.barrier().check();
    // fp16 compression of fp32 values: within fp16 rounding of the exact sum
    std::vector<float> c(1000);
    for (size_t i = 0; i < c.size(); ++i) c[i] = 0.001f * float(i) * float(r + 1);
    OpOptions co;
    co.compression = engine::Compression::kFp16;
    eng.allreduce("c", {c.data(), DType::kFloat32, {1000}}, {c.data(), DType::kFloat32, {1000}}, co)
        .check();
    for (size_t i = 0; i < c.size(); ++i) {
      double want = 0.001 * double(i) * 6;
      EXPECT_NEAR(c[i], want, std::abs(want) * 3 * std::ldexp(1.0, -11) + 1e-6) << i;
    }
    auto st = eng.stats();
    EXPECT_LT(st.bytes_sent, st.bytes_submitted);
    // join: rank 0 runs out of data first; the others' allreduce counts it as zeros
    if (r == 0) {
      auto j = eng.join();
      j.check();
      EXPECT_EQ(j.output_value(), 2);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * r));
      std::vector<float> v(4, 1.0f);
      eng.allreduce("after_join", {v.data(), DType::kFloat32, {4}},
                    {v.data(), DType::kFloat32, {4}})
          .check();
      EXPECT_EQ(v[0], 2.0f);  // ranks 1 and 2; rank 0 contributed zeros
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // join last
      auto j = eng.join();
      j.check();
      EXPECT_EQ(j.output_value(), 2);
    }
    return 0;
  });
}

// After rank 0 joins, the others' Min, Max and Product are theirs alone: the joined rank
// contributes each op's identity (it contributed zeros: max of -3 and -4 was 0, products 0).
TEST(Engine, AfterAJoinEveryReduceOpIgnoresTheJoinedRank) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    const int r = comm.rank();
    if (r == 0) {
      eng.join().check();
      return 0;
    }
    const float v = float(r + 2);  // 3 on rank 1, 4 on rank 2
    const std::vector<std::pair<ReduceOp, std::vector<float>>> cases{
        {ReduceOp::kMin, {-4, 3, 3}},
        {ReduceOp::kMax, {-3, 4, 3}},
        {ReduceOp::kProduct, {12, 12, 9}}};
    for (const auto& [op, want] : cases) {
      std::vector<float> x{-v, v, 3};
      std::vector<int32_t> i{int32_t(-v), int32_t(v), 3};
      OpOptions o;
      o.op = op;
      const TensorView fx{x.data(), DType::kFloat32, {3}}, ix{i.data(), DType::kInt32, {3}};
      Handle hf = eng.allreduce(std::string("f.") + op_name(op), fx, fx, o);
      Handle hi = eng.allreduce(std::string("i.") + op_name(op), ix, ix, o);
      hf.check();
      hi.check();
      EXPECT_EQ(x, want) << op_name(op);
      EXPECT_EQ(i, (std::vector<int32_t>(want.begin(), want.end()))) << op_name(op);
    }
    eng.join().check();
    return 0;
  });
}

// Integer averages are the sum divided exactly, truncating toward zero: a 1/n postscale through
// a double rounded (2^53 + 1) + (2^53 + 1) = 2^54 + 2 to 2^54, giving 2^53.
TEST(Engine, IntegerAveragesAreExact) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    const int64_t big = (int64_t{1} << 53) + 1;
    std::vector<int64_t> v{big, comm.rank() == 0 ? -3 : 0, 7};
    OpOptions avg;
    avg.op = ReduceOp::kAverage;
    const TensorView view{v.data(), DType::kInt64, {3}};
    eng.allreduce("avg.i64", view, view, avg).check();
    EXPECT_EQ(v, (std::vector<int64_t>{big, -1, 7}));
    return 0;
  });
}

TEST(Engine, Fp16CompressionSendsHalfTheBytes) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options());
    std::vector<float> plain(4096), packed(4096);
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = packed[i] = 0.37f * float(i % 100);
    OpOptions co;
    co.compression = engine::Compression::kFp16;
    TensorView pv{plain.data(), DType::kFloat32, {4096}},
        cv{packed.data(), DType::kFloat32, {4096}};
    eng.allreduce("compressed", cv, cv, co).check();
    auto st = eng.stats();
    EXPECT_EQ(st.bytes_submitted, 4096u * 4);
    EXPECT_EQ(st.bytes_sent, 4096u * 2);  // half: fp16 on the wire
    eng.allreduce("plain", pv, pv).check();
    for (size_t i = 0; i < plain.size(); ++i)  // two fp16 roundings of values below 100
      EXPECT_NEAR(packed[i], plain[i], std::abs(plain[i]) * 2 * std::ldexp(1.0, -11)) << i;
    return 0;
  });
}

}  // namespace
}  // namespace kolo::testing
