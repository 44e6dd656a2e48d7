// allreduce_bw's --check (benchmarks/bench_case.cc) tells the right output from the wrong outputs
// that a broken collective gives. Found by a sweep with a shim around kolo's collectives: prod
// replaced by max passed (one rank held 2, the others 1), and a reduce_scatter or alltoall that
// handed a rank another rank's block passed when the block was a multiple of the pattern's 17.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "benchmarks/bench_case.h"

namespace kolo::bench {
namespace {

// Every rank's float32 input for the case at `n` ranks, as fill_inputs writes it.
std::vector<std::vector<float>> all_inputs(Collective coll, ReduceOp op, int n, size_t bytes) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) {
    BenchCase c = *make_case(coll, DType::kFloat32, op, n, r, bytes);
    Buffers b(c.bytes, false);
    fill_inputs(c, b);
    const float* send = static_cast<const float*>(b.send());
    inputs.emplace_back(send, send + c.count);
  }
  return inputs;
}

// Rank `rank`'s wrong count when its output is `output`.
int64_t wrong_with(const BenchCase& c, const std::vector<float>& output) {
  Buffers b(c.bytes, false);
  fill_inputs(c, b);
  std::memcpy(b.recv(), output.data(), output.size() * sizeof(float));
  return count_wrong(c, b);
}

// Element-wise fold of every rank's input.
std::vector<float> fold(const std::vector<std::vector<float>>& in,
                        const std::function<float(float, float)>& f) {
  std::vector<float> out = in[0];
  for (size_t r = 1; r < in.size(); ++r)
    for (size_t i = 0; i < out.size(); ++i) out[i] = f(out[i], in[r][i]);
  return out;
}

TEST(BenchCheck, ProductIsToldFromMaxMinAndSum) {
  for (int n : {2, 3, 4, 8}) {
    const size_t bytes = 4096;
    const auto in = all_inputs(Collective::kAllreduce, ReduceOp::kProduct, n, bytes);
    const BenchCase c =
        *make_case(Collective::kAllreduce, DType::kFloat32, ReduceOp::kProduct, n, 0, bytes);
    EXPECT_EQ(wrong_with(c, fold(in, [](float a, float b) { return a * b; })), 0) << n;
    EXPECT_GT(wrong_with(c, fold(in, [](float a, float b) { return std::max(a, b); })), 0) << n;
    EXPECT_GT(wrong_with(c, fold(in, [](float a, float b) { return std::min(a, b); })), 0) << n;
    EXPECT_GT(wrong_with(c, fold(in, [](float a, float b) { return a + b; })), 0) << n;
  }
}

TEST(BenchCheck, AReduceScatterBlockOfAnotherRankIsWrong) {
  // Blocks of 16, 17 (the pattern's modulus), 136 and 289 (17^2) elements at 2 and 3 ranks.
  for (int n : {2, 3})
    for (size_t block : {16, 17, 136, 289}) {
      const size_t bytes = block * static_cast<size_t>(n) * sizeof(float);
      const auto in = all_inputs(Collective::kReduceScatter, ReduceOp::kSum, n, bytes);
      const auto sum = fold(in, [](float a, float b) { return a + b; });
      for (int r = 0; r < n; ++r) {
        const BenchCase c =
            *make_case(Collective::kReduceScatter, DType::kFloat32, ReduceOp::kSum, n, r, bytes);
        for (int from = 0; from < n; ++from) {
          const auto first = sum.begin() + static_cast<std::ptrdiff_t>(from * block);
          const int64_t wrong = wrong_with(c, std::vector<float>(first, first + block));
          if (from == r)
            EXPECT_EQ(wrong, 0) << "n " << n << " block " << block << " rank " << r;
          else
            EXPECT_GT(wrong, 0) << "n " << n << " block " << block << " rank " << r << " got "
                                << from << "'s block";
        }
      }
    }
}

TEST(BenchCheck, AnAlltoallBlockMeantForAnotherRankIsWrong) {
  const int n = 2;
  for (size_t block : {17, 289}) {
    const size_t bytes = block * n * sizeof(float);
    const auto in = all_inputs(Collective::kAlltoall, ReduceOp::kSum, n, bytes);
    const BenchCase c =
        *make_case(Collective::kAlltoall, DType::kFloat32, ReduceOp::kSum, n, 0, bytes);
    // Rank 0's output: from each peer p, block `dest` of p's input (dest 0 is right).
    for (size_t dest : {0, 1}) {
      std::vector<float> out;
      for (int p = 0; p < n; ++p) {
        const auto first =
            in[static_cast<size_t>(p)].begin() + static_cast<std::ptrdiff_t>(dest * block);
        out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(block));
      }
      if (dest == 0)
        EXPECT_EQ(wrong_with(c, out), 0) << block;
      else
        EXPECT_GT(wrong_with(c, out), 0) << block;
    }
  }
}

TEST(BenchCheck, AnOutputLeftAsFilledIsWrongEverywhere) {
  const BenchCase c =
      *make_case(Collective::kAllreduce, DType::kFloat32, ReduceOp::kSum, 4, 1, 1024);
  Buffers b(c.bytes, false);
  fill_inputs(c, b);
  EXPECT_EQ(count_wrong(c, b), static_cast<int64_t>(c.count));
}

}  // namespace
}  // namespace kolo::bench
