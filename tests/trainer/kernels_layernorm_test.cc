// LayerNorm forward against a double reference (saved mean / rstd too) and its backward
// against finite differences of that reference, in every storage dtype and at odd widths.
#include <gtest/gtest.h>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                  const std::vector<double>& b, int T, int C, double eps,
                                  std::vector<double>* mean = nullptr,
                                  std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (int t = 0; t < T; ++t) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[t * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[t * C + c] - m) * (x[t * C + c] - m);
    const double r = 1.0 / std::sqrt(v / C + eps);
    for (int c = 0; c < C; ++c) y[t * C + c] = (x[t * C + c] - m) * r * g[c] + b[c];
    if (mean != nullptr) mean->push_back(m);
    if (rstd != nullptr) rstd->push_back(r);
  }
  return y;
}

class KernelsLayerNorm : public ::testing::TestWithParam<DType> {};

TEST_P(KernelsLayerNorm, ForwardMatchesReference) {
  const DType dt = GetParam();
  for (const int C : {1, 7, 8, 13, 256}) {
    const int T = 5;
    // An offset mean checks that the variance is centred (no E[x^2] - E[x]^2 cancellation).
    const auto x = testing::random_values(T * C, 1, 2.0f, 4.0f, dt);
    const auto g = testing::random_values(C, 2, 0.5f, 1.5f, dt);
    const auto b = testing::random_values(C, 3, -1, 1, dt);
    Tensor tx(dt, x), tg(dt, g), tb(dt, b), ty(dt, T * C);
    std::vector<float> mean(T), rstd(T);
    cpu_backend().layernorm_forward(ty.data(), mean.data(), rstd.data(), tx.data(), tg.data(),
                                    tb.data(), T, C, 1e-5f, dt);
    std::vector<double> want_mean, want_rstd;
    const auto want = layernorm_ref(testing::to_double(x), testing::to_double(g),
                                    testing::to_double(b), T, C, 1e-5, &want_mean, &want_rstd);
    const double rtol = testing::storage_rtol(dt);
    testing::expect_close(ty.values(), want, 1e-4 + 2 * rtol, rtol, "y C=" + std::to_string(C));
    testing::expect_close(mean, want_mean, 1e-6, 1e-6, "mean");
    testing::expect_close(rstd, want_rstd, 1e-4, 1e-4, "rstd");
  }
}

TEST_P(KernelsLayerNorm, BackwardMatchesFiniteDifferences) {
  const DType dt = GetParam();
  const int T = 3, C = 13;
  const double eps = 1e-12;  // BERT's
  const auto x = testing::random_values(T * C, 4, -2, 2, dt);
  const auto g = testing::random_values(C, 5, 0.5f, 1.5f, dt);
  const auto b = testing::random_values(C, 6, -1, 1, dt);
  const auto dy = testing::random_values(T * C, 7, -1, 1, dt);
  const auto xd = testing::to_double(x), gd = testing::to_double(g), bd = testing::to_double(b);
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv,
                  const std::vector<double>& bv) {
    return testing::dot(layernorm_ref(xv, gv, bv, T, C, eps), dy);
  };
  const auto gx = testing::finite_difference([&](const auto& v) { return loss(v, gd, bd); }, xd);
  const auto gg = testing::finite_difference([&](const auto& v) { return loss(xd, v, bd); }, gd);
  const auto gb = testing::finite_difference([&](const auto& v) { return loss(xd, gd, v); }, bd);

  Tensor tx(dt, x), tg(dt, g), tb(dt, b), ty(dt, T * C), tdy(dt, dy), tdx(dt, T * C);
  Tensor tdg(dt, std::vector<float>(C, 1.0f)), tdb(dt, std::vector<float>(C, -1.0f));
  std::vector<float> mean(T), rstd(T);
  cpu_backend().layernorm_forward(ty.data(), mean.data(), rstd.data(), tx.data(), tg.data(),
                                  tb.data(), T, C, static_cast<float>(eps), dt);
  cpu_backend().layernorm_backward(tdx.data(), tdg.data(), tdb.data(), tdy.data(), tx.data(),
                                   mean.data(), rstd.data(), tg.data(), T, C, dt);
  std::vector<double> want_dg(gg), want_db(gb);
  for (auto& v : want_dg) v += 1.0;
  for (auto& v : want_db) v -= 1.0;
  const double rtol = testing::storage_rtol(dt);
  testing::expect_close(tdx.values(), gx, 1e-4 + 4 * rtol, 2 * rtol, "dx");
  testing::expect_close(tdg.values(), want_dg, 1e-4 + 4 * rtol, 2 * rtol, "dgamma (accumulated)");
  testing::expect_close(tdb.values(), want_db, 1e-4 + 4 * rtol, 2 * rtol, "dbeta (accumulated)");
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsLayerNorm, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
