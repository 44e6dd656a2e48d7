// The engine's grouped allreduce (one negotiated unit whose members complete together, and the
// errors when ranks or members disagree) and reduce_scatter with rows that do not divide
// evenly.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/unit/engine_testing.h"

namespace kolo::testing {
namespace {

TEST(EngineGroup, MembersAreReducedAndCompleteTogether) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options(2));
    const int r = comm.rank();
    // Three members of different sizes, one larger than the unfused limit (128 KiB), and a
    // fusion threshold smaller than the group: a group is never split.
    std::vector<std::vector<float>> data{std::vector<float>(5, float(r + 1)),
                                         std::vector<float>(70000, float(2 * r)),
                                         std::vector<float>(1, 0.5f)};
    std::vector<TensorView> views;
    for (auto& d : data) views.push_back({d.data(), DType::kFloat32, {int64_t(d.size())}});
    OpOptions avg;
    avg.op = ReduceOp::kAverage;
    auto handles = eng.grouped_allreduce({"g.a", "g.b", "g.c"}, views, avg);
    EXPECT_EQ(handles.size(), 3u);
    handles[0].check();
    for (const Handle& h : handles) EXPECT_TRUE(h.done());  // completed with the first
    EXPECT_FLOAT_EQ(data[0][4], 2.0f);                      // (1 + 2 + 3) / 3
    EXPECT_FLOAT_EQ(data[1][69999], 2.0f);                  // (0 + 2 + 4) / 3
    EXPECT_FLOAT_EQ(data[2][0], 0.5f);
    const auto stats = eng.stats();
    EXPECT_EQ(stats.fused_collectives, 1u);
    EXPECT_EQ(stats.fused_tensors, 3u);
    return 0;
  });
}

TEST(EngineGroup, RanksThatGroupDifferentlyGetAnErrorNamingTheGroup) {
  auto messages = run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options(2));
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    TensorView va{a.data(), DType::kFloat32, {4}}, vb{b.data(), DType::kFloat32, {4}};
    std::vector<Handle> handles;
    if (comm.rank() == 0) {
      handles = eng.grouped_allreduce({"a", "b"}, {va, vb});
    } else {
      handles = {eng.allreduce("a", va, va), eng.allreduce("b", vb, vb)};
    }
    handles[0].wait(30s);
    return handles[0].status().message;
  });
  for (const auto& m : messages) {
    EXPECT_NE(m.find("group mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find("'a'"), std::string::npos) << m;
  }
}

// Ranks whose groups hold different members: every member any rank holds fails on every rank
// at once (none stays pending on one rank, where a later op of its name would meet it), and
// the same names then work. Without the stall shutdown (20 s) a member left behind would
// never finish; the waits below give it 10 s.
TEST(EngineGroup, GroupsWithDifferentMembersFailEveryMemberEverywhere) {
  // Members per rank: a group of 1 against 2; 3 against 2 at three ranks; two plain ops on
  // rank 0 against a group of three on rank 1.
  const std::vector<std::vector<int>> cases{{1, 2}, {3, 2, 3}, {0, 3}};
  for (const auto& sizes : cases) {
    auto messages =
        run_thread_ranks(int(sizes.size()), TransportKind::kShm, [&](Communicator& comm) {
          Engine eng(borrowed(comm), quick_options(20));
          const int r = comm.rank(), mine = sizes[size_t(r)];
          std::vector<std::vector<float>> data(3, std::vector<float>(4, 1.0f));
          std::vector<TensorView> views;
          for (auto& d : data) views.push_back({d.data(), DType::kFloat32, {4}});
          const std::vector<std::string> names{"g.0", "g.1", "g.2"};
          std::vector<Handle> handles;
          if (mine == 0) {
            handles = {eng.allreduce("g.0", views[0], views[0]),
                       eng.allreduce("g.1", views[1], views[1])};
          } else {
            handles = eng.grouped_allreduce({names.begin(), names.begin() + mine},
                                            {views.begin(), views.begin() + mine});
          }
          std::string message;
          for (const Handle& h : handles) {
            EXPECT_TRUE(h.wait(10s)) << "rank " << r << " of " << sizes.size();
            EXPECT_FALSE(h.status().ok);
            message = h.status().message;
          }
          // The names are free again everywhere: a group of two gives the closed form.
          for (size_t i = 0; i < 2; ++i)
            std::fill(data[i].begin(), data[i].end(), float(r + 1 + 10 * i));
          auto again = eng.grouped_allreduce({"g.0", "g.1"}, {views[0], views[1]});
          again[0].check();
          const int n = comm.size();
          EXPECT_FLOAT_EQ(data[0][3], float(n * (n + 1) / 2));
          EXPECT_FLOAT_EQ(data[1][3], float(n * (n + 1) / 2 + 10 * n));
          return message;
        });
    for (const auto& m : messages) EXPECT_NE(m.find("group mismatch"), std::string::npos) << m;
  }
}

TEST(EngineGroup, MembersWithDifferentDtypesAreRefused) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), quick_options(2));
    std::vector<float> a(4, 1.0f);
    std::vector<double> b(4, 1.0);
    auto handles = eng.grouped_allreduce(
        {"x", "y"}, {{a.data(), DType::kFloat32, {4}}, {b.data(), DType::kFloat64, {4}}});
    handles[1].wait(30s);
    const std::string m = handles[1].status().message;
    EXPECT_FALSE(handles[1].status().ok);
    EXPECT_NE(m.find("grouped allreduce 'x'"), std::string::npos) << m;
    EXPECT_NE(m.find("member 'y'"), std::string::npos) << m;
    return 0;
  });
}

// 7 rows of 3 over n ranks: rank p holds rows with value (p + 1) * (row + 1), so row i sums
// to n(n+1)/2 * (i + 1); ranks get 7 / n rows, the first 7 % n one more.
TEST(EngineReduceScatter, UnevenRowsWithScaleFactors) {
  for (int n : {2, 3, 4}) {
    run_thread_ranks(n, TransportKind::kShm, [n](Communicator& comm) {
      Engine eng(borrowed(comm), quick_options(2));
      const int r = comm.rank();
      std::vector<double> in(21);
      for (size_t i = 0; i < in.size(); ++i) in[i] = double(r + 1) * double(i / 3 + 1);
      OpOptions o;
      o.prescale = 2.0;
      o.postscale = 0.25;
      auto h = eng.reduce_scatter("rs", {in.data(), DType::kFloat64, {7, 3}}, o);
      h.check();
      const int base = 7 / n, extra = 7 % n;
      const int mine = base + (r < extra ? 1 : 0), first = r * base + std::min(r, extra);
      EXPECT_EQ(h.output_shape(), (std::vector<int64_t>{mine, 3}));
      const auto* out = reinterpret_cast<const double*>(h.output().data());
      for (int row = 0; row < mine; ++row)
        for (int c = 0; c < 3; ++c)
          EXPECT_DOUBLE_EQ(out[row * 3 + c], 0.5 * n * (n + 1) / 2.0 * (first + row + 1))
              << "rank " << r << " of " << n << " row " << row;
      return 0;
    });
  }
}

}  // namespace
}  // namespace kolo::testing
