// Softmax cross-entropy: losses and mean against a double log-softmax, the gradient against
// finite differences of the mean loss, ignore_index rows contributing nothing, large logits
// staying finite, and out-of-range targets rejected.
#include <gtest/gtest.h>

#include <limits>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

constexpr int kIgnore = -100;

// Per-row losses; returns the mean over counted rows.
double cross_entropy_ref(const std::vector<double>& logits, const std::vector<int32_t>& targets,
                         int N, int V, std::vector<double>* losses = nullptr) {
  double total = 0;
  int counted = 0;
  for (int n = 0; n < N; ++n) {
    double loss = 0;
    if (targets[n] != kIgnore) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int v = 0; v < V; ++v) mx = std::max(mx, logits[n * V + v]);
      for (int v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - mx);
      loss = std::log(sum) + mx - logits[n * V + targets[n]];
      total += loss;
      ++counted;
    }
    if (losses != nullptr) losses->push_back(loss);
  }
  return counted == 0 ? 0 : total / counted;
}

class KernelsCrossEntropy : public ::testing::TestWithParam<DType> {};

TEST_P(KernelsCrossEntropy, ForwardAndBackward) {
  const DType dt = GetParam();
  const double rtol = testing::storage_rtol(dt);
  for (const int V : {1, 7, 8, 37, 1000}) {
    const int N = 5;
    const std::vector<int32_t> targets = {0, kIgnore, V - 1, V / 2, kIgnore};
    // Logits near 80 would overflow a naive exp.
    auto logits = testing::random_values(N * V, 31, -3, 3, dt);
    for (int v = 0; v < V; ++v)
      logits[2 * V + v] = testing::round_to(logits[2 * V + v] + 80.0f, dt);
    std::vector<double> want_losses;
    const double want = cross_entropy_ref(testing::to_double(logits), targets, N, V, &want_losses);
    Tensor tl(dt, logits);
    std::vector<float> losses(N, -1.0f);
    std::vector<int32_t> argmax(N, -1), argmax_alone(N, -2);
    const float mean = cpu_backend().cross_entropy_forward(losses.data(), argmax.data(), tl.data(),
                                                           targets.data(), N, V, kIgnore, dt);
    const std::string what = "V=" + std::to_string(V);
    EXPECT_NEAR(mean, want, 1e-5 + 1e-5 * std::abs(want)) << what;
    testing::expect_close(losses, want_losses, 1e-5, 1e-5, "losses " + what);
    // The argmax of every row, ignored ones included, as argmax_rows gives it alone.
    cpu_backend().argmax_rows(argmax_alone.data(), tl.data(), N, V, dt);
    EXPECT_EQ(argmax, argmax_alone) << what;

    const float dloss = 0.7f;
    auto grad = testing::finite_difference(
        [&](const std::vector<double>& v) { return cross_entropy_ref(v, targets, N, V); },
        testing::to_double(logits), 1e-4);
    for (auto& g : grad) g *= dloss;
    Tensor dl(dt, N * V);
    cpu_backend().cross_entropy_backward(dl.data(), tl.data(), targets.data(), N, V, kIgnore, dloss,
                                         dt);
    testing::expect_close(dl.values(), grad, 1e-6 + 1e-3 * rtol, 2 * rtol, "dlogits " + what);
  }
}

// Rows longer than the kernel's chunk (2048 elements): the maximum in the last chunk (every
// chunk rescales the sum so far), in the first, and in the middle 80 above the rest; the
// gradient against softmax - onehot in double, the argmax against argmax_rows.
TEST_P(KernelsCrossEntropy, LongRowsAgainstTheClosedForm) {
  const DType dt = GetParam();
  const double rtol = testing::storage_rtol(dt);
  const int N = 3, V = 4500;
  auto logits = testing::random_values(N * V, 33, -1, 1, dt);
  for (int v = 0; v < V; ++v) {
    logits[v] = testing::round_to(logits[v] + 6.0f * v / V, dt);          // rising
    logits[V + v] = testing::round_to(logits[V + v] - 6.0f * v / V, dt);  // falling
  }
  logits[2 * V + 3000] = testing::round_to(80.0f, dt);
  const std::vector<int32_t> targets = {4499, 10, 2047};
  std::vector<double> want_losses;
  cross_entropy_ref(testing::to_double(logits), targets, N, V, &want_losses);
  std::vector<double> want_grad(N * V);
  const auto x = testing::to_double(logits);
  const float dloss = 0.9f;
  for (int n = 0; n < N; ++n) {
    // softmax = e^{x - logsumexp}, and the reference's loss is logsumexp - x[target].
    const double lse = want_losses[n] + x[n * V + targets[n]];
    for (int v = 0; v < V; ++v) {
      want_grad[n * V + v] =
          (std::exp(x[n * V + v] - lse) - (v == targets[n] ? 1.0 : 0.0)) * dloss / N;
    }
  }
  Tensor tl(dt, logits), dl(dt, N * V);
  std::vector<float> losses(N);
  std::vector<int32_t> argmax(N), argmax_alone(N);
  cpu_backend().cross_entropy_forward(losses.data(), argmax.data(), tl.data(), targets.data(), N, V,
                                      kIgnore, dt);
  testing::expect_close(losses, want_losses, 1e-5, 1e-5, "losses");
  cpu_backend().argmax_rows(argmax_alone.data(), tl.data(), N, V, dt);
  EXPECT_EQ(argmax, argmax_alone);
  EXPECT_EQ(argmax[2], 3000);
  cpu_backend().cross_entropy_backward(dl.data(), tl.data(), targets.data(), N, V, kIgnore, dloss,
                                       dt);
  // fp16 stores the smallest gradients (about 1e-5) as subnormals, 6e-8 apart.
  const double atol = dt == DType::kFloat16 ? 1e-7 : 1e-9;
  testing::expect_close(dl.values(), want_grad, atol, 2 * rtol + 1e-5, "dlogits");
  // In place (the MLM head's use): the same bits.
  cpu_backend().cross_entropy_backward(tl.data(), tl.data(), targets.data(), N, V, kIgnore, dloss,
                                       dt);
  EXPECT_EQ(tl.values(), dl.values());
}

TEST_P(KernelsCrossEntropy, AllIgnoredAndInPlace) {
  const DType dt = GetParam();
  const int N = 3, V = 9;
  const auto logits = testing::random_values(N * V, 32, -2, 2, dt);
  const std::vector<int32_t> ignored(N, kIgnore), targets = {1, 8, 0};
  Tensor tl(dt, logits), dl(dt, std::vector<float>(N * V, 5.0f));
  EXPECT_EQ(cpu_backend().cross_entropy_forward(nullptr, nullptr, tl.data(), ignored.data(), N, V,
                                                kIgnore, dt),
            0.0f);
  cpu_backend().cross_entropy_backward(dl.data(), tl.data(), ignored.data(), N, V, kIgnore, 1.0f,
                                       dt);
  for (float v : dl.values()) EXPECT_EQ(v, 0.0f);
  // dlogits may be the logits buffer itself.
  Tensor expected(dt, N * V);
  cpu_backend().cross_entropy_backward(expected.data(), tl.data(), targets.data(), N, V, kIgnore,
                                       1.0f, dt);
  cpu_backend().cross_entropy_backward(tl.data(), tl.data(), targets.data(), N, V, kIgnore, 1.0f,
                                       dt);
  EXPECT_EQ(tl.values(), expected.values());
}

TEST(KernelsCrossEntropy, RejectsTargetsOutOfRange) {
  Tensor tl(DType::kFloat32, 6);
  const std::vector<int32_t> targets = {0, 3};
  EXPECT_THROW(cpu_backend().cross_entropy_forward(nullptr, nullptr, tl.data(), targets.data(), 2,
                                                   3, -100, DType::kFloat32),
               Error);
  EXPECT_THROW(cpu_backend().cross_entropy_backward(tl.data(), tl.data(), targets.data(), 2, 3,
                                                    -100, 1.0f, DType::kFloat32),
               Error);
  // Null targets are refused by name (a crash before), and nothing is written first.
  std::vector<int32_t> argmax(2, -7);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      if (pass == 0) {
        cpu_backend().cross_entropy_forward(nullptr, argmax.data(), tl.data(), nullptr, 2, 3, -100,
                                            DType::kFloat32);
      } else {
        cpu_backend().cross_entropy_backward(tl.data(), tl.data(), nullptr, 2, 3, -100, 1.0f,
                                             DType::kFloat32);
      }
      ADD_FAILURE() << "null targets accepted, pass " << pass;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("targets is null"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(argmax, (std::vector<int32_t>{-7, -7}));
}

TEST(KernelsArgmax, FirstMaximumWinsAtEveryLanePosition) {
  // 37 columns: full vectors and a 5-lane tail; the maximum (twice) at each position in turn.
  constexpr int V = 37;
  for (DType dt : testing::kStorageDTypes) {
    for (int at = 0; at < V; ++at) {
      std::vector<float> row(V);
      for (int j = 0; j < V; ++j) row[j] = -0.25f * static_cast<float>((j * 7) % 11);
      row[at] = 3.0f;
      if (at + 3 < V) row[at + 3] = 3.0f;  // a later tie loses
      Tensor t(dt, row);
      int32_t got = -1, from_loss = -1;
      cpu_backend().argmax_rows(&got, t.data(), 1, V, dt);
      EXPECT_EQ(got, at) << dtype_name(dt);
      const int32_t target = (at + 1) % V;  // a counted row: the loss is computed too
      cpu_backend().cross_entropy_forward(nullptr, &from_loss, t.data(), &target, 1, V, kIgnore,
                                          dt);
      EXPECT_EQ(from_loss, at) << dtype_name(dt);
    }
  }
}

TEST(KernelsArgmax, NanNeverWinsAndBadInputsAreRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor t(DType::kFloat32, {nan, 1.0f, 2.0f, nan, nan, nan, nan, nan, nan, nan});
  std::vector<int32_t> got(2, -1);
  cpu_backend().argmax_rows(got.data(), t.data(), 2, 5, DType::kFloat32);
  EXPECT_EQ(got, (std::vector<int32_t>{2, 0}));
  const std::vector<int32_t> ignored(2, kIgnore);
  std::vector<int32_t> from_loss(2, -1);
  cpu_backend().cross_entropy_forward(nullptr, from_loss.data(), t.data(), ignored.data(), 2, 5,
                                      kIgnore, DType::kFloat32);
  EXPECT_EQ(from_loss, got);
  EXPECT_THROW(cpu_backend().argmax_rows(got.data(), t.data(), 2, 0, DType::kFloat32), Error);
  EXPECT_THROW(cpu_backend().argmax_rows(nullptr, t.data(), 2, 5, DType::kFloat32), Error);
  EXPECT_THROW(cpu_backend().argmax_rows(got.data(), t.data(), 2, 5, DType::kInt32), Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsCrossEntropy, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
