// allreduce_bw's --check (benchmarks/bench_case.cc) tells the right output from the wrong outputs
// that a broken collective gives. Found by sweeps: prod replaced by max passed (one rank held 2,
// the others 1); a reduce_scatter or alltoall that handed a rank another rank's block passed
// when the block's size fit the pattern's period (17, then any size = 9 mod 17), int8 at 8 ranks
// gave ranks 0 and 5 the same values, and a band over 4 ranks was 0 everywhere, like the zeroed
// output of a collective that wrote nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "benchmarks/bench_case.h"

namespace kolo::bench {
namespace {

template <typename T>
DType dtype_of();
template <>
DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
DType dtype_of<int8_t>() {
  return DType::kInt8;
}

// Every rank's input for the case at `n` ranks, as fill_inputs writes it.
template <typename T>
std::vector<std::vector<T>> all_inputs(Collective coll, ReduceOp op, int n, size_t bytes) {
  std::vector<std::vector<T>> inputs;
  for (int r = 0; r < n; ++r) {
    BenchCase c = *make_case(coll, dtype_of<T>(), op, n, r, bytes);
    Buffers b(c.bytes, false);
    fill_inputs(c, b);
    const T* send = static_cast<const T*>(b.send());
    inputs.emplace_back(send, send + (coll == Collective::kAllgather ? c.block : c.count));
  }
  return inputs;
}

// The wrong count of case `c` (its rank's) when its output is `output`.
template <typename T>
int64_t wrong_with(const BenchCase& c, const std::vector<T>& output) {
  Buffers b(c.bytes, false);
  fill_inputs(c, b);
  std::memcpy(b.recv(), output.data(), output.size() * sizeof(T));
  return count_wrong(c, b);
}

// Element-wise fold of every rank's input.
template <typename T>
std::vector<T> fold(const std::vector<std::vector<T>>& in, const std::function<T(T, T)>& f) {
  std::vector<T> out = in[0];
  for (size_t r = 1; r < in.size(); ++r)
    for (size_t i = 0; i < out.size(); ++i) out[i] = f(out[i], in[r][i]);
  return out;
}

template <typename T>
std::vector<T> slice(const std::vector<T>& v, size_t first, size_t count) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(first),
                        v.begin() + static_cast<std::ptrdiff_t>(first + count));
}

TEST(BenchCheck, ProductIsToldFromMaxMinAndSum) {
  for (int n : {2, 3, 4, 8}) {
    const size_t bytes = 4096;
    const auto in = all_inputs<float>(Collective::kAllreduce, ReduceOp::kProduct, n, bytes);
    const BenchCase c =
        *make_case(Collective::kAllreduce, DType::kFloat32, ReduceOp::kProduct, n, 0, bytes);
    using F = std::function<float(float, float)>;
    EXPECT_EQ(wrong_with(c, fold(in, F([](float a, float b) { return a * b; }))), 0) << n;
    EXPECT_GT(wrong_with(c, fold(in, F([](float a, float b) { return std::max(a, b); }))), 0);
    EXPECT_GT(wrong_with(c, fold(in, F([](float a, float b) { return std::min(a, b); }))), 0);
    EXPECT_GT(wrong_with(c, fold(in, F([](float a, float b) { return a + b; }))), 0) << n;
  }
}

// Rank r's reduce_scatter output checked against every rank's block of the reduction: only its
// own passes.
template <typename T>
void expect_only_own_block(ReduceOp op, int n, size_t block, const std::function<T(T, T)>& f) {
  const size_t bytes = block * static_cast<size_t>(n) * sizeof(T);
  const auto reduced = fold(all_inputs<T>(Collective::kReduceScatter, op, n, bytes), f);
  for (int r = 0; r < n; ++r) {
    const BenchCase c = *make_case(Collective::kReduceScatter, dtype_of<T>(), op, n, r, bytes);
    for (int from = 0; from < n; ++from) {
      const int64_t wrong = wrong_with(c, slice(reduced, static_cast<size_t>(from) * block, block));
      if (from == r)
        EXPECT_EQ(wrong, 0) << "n " << n << " block " << block << " rank " << r;
      else
        EXPECT_GT(wrong, 0) << "n " << n << " block " << block << " rank " << r << " got " << from
                            << "'s block";
    }
  }
}

TEST(BenchCheck, AReduceScatterBlockOfAnotherRankIsWrong) {
  // Sizes around the old periods: 17, 17^2, and 9 mod 17 (128, 1034).
  for (int n : {2, 3, 4, 8})
    for (size_t block : {16, 17, 128, 136, 289, 1034}) {
      expect_only_own_block<float>(ReduceOp::kSum, n, block,
                                   [](float a, float b) { return a + b; });
      expect_only_own_block<float>(ReduceOp::kProduct, n, block,
                                   [](float a, float b) { return a * b; });
    }
}

TEST(BenchCheck, AnAlltoallBlockMeantForAnotherRankIsWrong) {
  for (int n : {2, 4})
    for (size_t block : {17, 128, 289}) {
      const size_t bytes = block * static_cast<size_t>(n) * sizeof(float);
      const auto in = all_inputs<float>(Collective::kAlltoall, ReduceOp::kSum, n, bytes);
      const BenchCase c =
          *make_case(Collective::kAlltoall, DType::kFloat32, ReduceOp::kSum, n, 0, bytes);
      // Rank 0's output: from each peer p, block `dest` of p's input (dest 0 is right).
      for (size_t dest = 0; dest < static_cast<size_t>(n); ++dest) {
        std::vector<float> out;
        for (const auto& input : in) {
          const auto part = slice(input, dest * block, block);
          out.insert(out.end(), part.begin(), part.end());
        }
        if (dest == 0)
          EXPECT_EQ(wrong_with(c, out), 0) << n << " " << block;
        else
          EXPECT_GT(wrong_with(c, out), 0) << n << " " << block << " dest " << dest;
      }
    }
}

TEST(BenchCheck, Int8RanksHoldDistinctValuesAtEightRanks) {
  const int n = 8;
  const size_t block = 100;
  const auto in = all_inputs<int8_t>(Collective::kAllgather, ReduceOp::kSum, n, block * n);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      EXPECT_NE(in[static_cast<size_t>(a)], in[static_cast<size_t>(b)]) << a << " " << b;
}

TEST(BenchCheck, BitwiseResultsAreNeverTheZeroedOutput) {
  for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor})
    for (int n : {2, 4, 8}) {
      const BenchCase c = *make_case(Collective::kAllreduce, DType::kInt32, op, n, 0, 4096);
      Buffers b(c.bytes, false);
      fill_inputs(c, b);  // the output stays zeroed, as a collective that wrote nothing leaves it
      EXPECT_EQ(count_wrong(c, b), static_cast<int64_t>(c.count)) << op_name(op) << " " << n;
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
