// The kernel pool: parallel_for's contract (every index once, ranges on grain boundaries,
// nesting, exceptions, concurrent callers), and every CPU kernel giving the same bytes at 1, 2
// and 3 threads on shapes with ragged tails (the pool splits rows, columns, sequences and
// GEMM blocks; none of that may change a result).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/parallel.h"

namespace kolo::trainer {
namespace {

using cpu::parallel_for;
using testing::random_values;
using testing::Tensor;

// Restores one thread after each test, as the other tests expect.
class KernelsParallel : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(1); }
};

TEST_F(KernelsParallel, EveryIndexOnceOnGrainBoundaries) {
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{4099}}) {
      for (size_t grain : {size_t{1}, size_t{8}, size_t{100}}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> bad_boundary{0};
        parallel_for(n, grain, [&](size_t begin, size_t end) {
          if (begin % grain != 0 || (end != n && end % grain != 0) || begin >= end) ++bad_boundary;
          for (size_t i = begin; i < end; ++i) ++hits[i];
        });
        EXPECT_EQ(bad_boundary.load(), 0) << threads << " threads, n " << n << ", grain " << grain;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
      }
    }
  }
}

TEST_F(KernelsParallel, NestedCallsRunInlineAndExceptionsReachTheCaller) {
  set_num_threads(3);
  std::atomic<size_t> total{0};
  parallel_for(300, 1, [&](size_t begin, size_t end) {
    parallel_for(end - begin, 1, [&](size_t b, size_t e) { total += e - b; });
  });
  EXPECT_EQ(total.load(), 300u);
  // A throwing range: the caller gets the exception once every range has returned, and the
  // pool still works after.
  EXPECT_THROW(parallel_for(300, 1,
                            [&](size_t begin, size_t) {
                              if (begin > 0) throw std::runtime_error("range failed");
                            }),
               std::runtime_error);
  total = 0;
  parallel_for(300, 1, [&](size_t begin, size_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 300u);
}

TEST_F(KernelsParallel, ConcurrentCallersBothFinish) {
  set_num_threads(2);
  std::atomic<size_t> sums[2] = {0, 0};
  auto caller = [&](int c) {
    for (int round = 0; round < 200; ++round) {
      parallel_for(1000, 16, [&](size_t begin, size_t end) { sums[c] += end - begin; });
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  EXPECT_EQ(sums[0].load(), 200u * 1000);
  EXPECT_EQ(sums[1].load(), 200u * 1000);
}

// Runs `kernel` (which writes into the tensors it was given) at 1, 2 and 3 threads on the
// same inputs and expects the same bytes each time.
void expect_same_at_every_thread_count(const char* what, std::vector<Tensor*> outputs,
                                       const std::function<void()>& kernel) {
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (Tensor* t : outputs) std::memset(t->data(), 0, t->size() * dtype_size(t->dtype()));
    kernel();
    std::vector<std::vector<float>> got;
    for (Tensor* t : outputs) got.push_back(t->values());
    if (threads == 1) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(got[i].data(), first[i].data(), got[i].size() * sizeof(float)), 0)
          << what << ": output " << i << " differs at " << threads << " threads";
    }
  }
}

class KernelsParallelDType : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override { set_num_threads(1); }
  DType dt() const { return GetParam(); }
  Tensor random(size_t n, uint32_t seed) { return Tensor(dt(), random_values(n, seed)); }
};

TEST_P(KernelsParallelDType, LinearLayerNormAndElementwise) {
  Backend& k = cpu_backend();
  const int T = 301, K = 136, N = 200;  // T N K above the size at which GEMMs are split
  Tensor x = random(size_t(T) * K, 1), w = random(size_t(N) * K, 2), b = random(N, 3);
  Tensor dy = random(size_t(T) * N, 4), y(dt(), size_t(T) * N), dx(dt(), size_t(T) * K);
  Tensor dw(dt(), size_t(N) * K), db(dt(), N);
  expect_same_at_every_thread_count("linear", {&y, &dx, &dw, &db}, [&] {
    k.linear_forward(y.data(), x.data(), w.data(), b.data(), T, K, N, dt());
    k.linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), T, K, N,
                      dt());
  });
  // A thin product (fewer rows than a block) runs whole.
  Tensor xs = random(size_t(40) * 512, 5), ws = random(size_t(900) * 512, 6);
  Tensor ys(dt(), size_t(40) * 900);
  expect_same_at_every_thread_count("linear, thin", {&ys}, [&] {
    k.linear_forward(ys.data(), xs.data(), ws.data(), nullptr, 40, 512, 900, dt());
  });

  const int C = 72;
  Tensor lx = random(size_t(T) * C, 7), g = random(C, 8), be = random(C, 9);
  Tensor ldo = random(size_t(T) * C, 10), lo(dt(), size_t(T) * C), ldx(dt(), size_t(T) * C);
  Tensor dg(dt(), C), dbe(dt(), C), stats(DType::kFloat32, 2 * size_t(T));
  float* mean = static_cast<float*>(stats.data());
  expect_same_at_every_thread_count("layernorm", {&lo, &ldx, &dg, &dbe}, [&] {
    k.layernorm_forward(lo.data(), mean, mean + T, lx.data(), g.data(), be.data(), T, C, 1e-5f,
                        dt());
    k.layernorm_backward(ldx.data(), dg.data(), dbe.data(), ldo.data(), lx.data(), mean, mean + T,
                         g.data(), T, C, dt());
  });

  const size_t n = 100003;
  Tensor a = random(n, 11), d = random(n, 12), o1(dt(), n), o2(dt(), n), o3(dt(), n);
  Tensor o4(dt(), n), o5(dt(), n);
  expect_same_at_every_thread_count("element-wise", {&o1, &o2, &o3, &o4, &o5}, [&] {
    k.gelu_forward(o1.data(), a.data(), n, dt());
    k.gelu_backward(o2.data(), d.data(), a.data(), n, dt());
    k.add(o3.data(), a.data(), d.data(), n, dt());
    k.dropout_forward(o4.data(), a.data(), n, 0.3f, 77, 5, dt());
    k.dropout_backward(o5.data(), d.data(), n, 0.3f, 77, 5, dt());
  });
}

TEST_P(KernelsParallelDType, AttentionLossEmbeddingAndReductions) {
  Backend& k = cpu_backend();
  const int B = 5, S = 19, C = 32, NH = 4;
  std::vector<int32_t> mask(size_t(B) * S, 1);
  for (int s = 15; s < S; ++s) mask[size_t(2) * S + s] = 0;  // trailing padding in sequence 2
  Tensor qkv = random(size_t(B) * S * 3 * C, 20), dout = random(size_t(B) * S * C, 21);
  Tensor out(dt(), size_t(B) * S * C), probs(dt(), size_t(B) * NH * S * S);
  Tensor dqkv(dt(), size_t(B) * S * 3 * C);
  expect_same_at_every_thread_count("attention", {&out, &probs, &dqkv}, [&] {
    k.attention_forward(out.data(), probs.data(), qkv.data(), mask.data(), B, S, C, NH, 0.2f, 9, 3,
                        dt());
    k.attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), mask.data(), B, S, C,
                         NH, 0.2f, 9, 3, dt());
  });

  const int N = 33, V = 1001;
  Tensor logits = random(size_t(N) * V, 30), dlogits(dt(), size_t(N) * V);
  Tensor losses(DType::kFloat32, N), argmax(DType::kInt32, N), argmax_alone(DType::kInt32, N);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = i % 3 == 0 ? -100 : (i * 37) % V;
  std::vector<float> means;
  expect_same_at_every_thread_count("cross-entropy", {&dlogits, &losses, &argmax}, [&] {
    means.push_back(k.cross_entropy_forward(static_cast<float*>(losses.data()),
                                            static_cast<int32_t*>(argmax.data()), logits.data(),
                                            targets.data(), N, V, -100, dt()));
    k.cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), N, V, -100, 0.5f, dt());
    k.argmax_rows(static_cast<int32_t*>(argmax_alone.data()), logits.data(), N, V, dt());
  });
  EXPECT_EQ(argmax.values(), argmax_alone.values());
  EXPECT_EQ(means[0], means[1]);
  EXPECT_EQ(means[0], means[2]);

  const int EB = 4, ES = 50, EC = 40, vocab = 30;
  std::vector<int32_t> ids(size_t(EB) * ES), types(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t((i * 7) % vocab);  // every id repeats
    types[i] = int32_t(i % 2);
  }
  Tensor word = random(size_t(vocab) * EC, 40), pos = random(size_t(ES) * EC, 41);
  Tensor type = random(2 * size_t(EC), 42), edout = random(ids.size() * EC, 43);
  Tensor eout(dt(), ids.size() * EC), dword(dt(), size_t(vocab) * EC), dpos(dt(), size_t(ES) * EC);
  Tensor dtype_emb(dt(), 2 * size_t(EC));
  expect_same_at_every_thread_count("embedding", {&eout, &dword, &dpos, &dtype_emb}, [&] {
    k.embed_forward(eout.data(), ids.data(), types.data(), word.data(), pos.data(), type.data(), EB,
                    ES, EC, dt());
    k.embed_backward(dword.data(), dpos.data(), dtype_emb.data(), edout.data(), ids.data(),
                     types.data(), EB, ES, EC, dt());
  });

  const size_t big = 300001;
  Tensor values = random(big, 50), widened(DType::kFloat32, big);
  std::vector<double> sums;
  expect_same_at_every_thread_count("sum_squares and convert", {&widened}, [&] {
    bool nonfinite = false;
    sums.push_back(k.sum_squares(values.data(), big, dt(), &nonfinite));
    EXPECT_FALSE(nonfinite);
    k.convert(widened.data(), DType::kFloat32, values.data(), dt(), big, 0.5f);
  });
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], sums[2]);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsParallelDType,
                         ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
