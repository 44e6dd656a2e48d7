// Linear kernels against a double-precision reference and finite differences, in every storage
// dtype; the weight and bias gradients must accumulate (+=) and nullptr outputs be skipped.
#include <gtest/gtest.h>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

struct LinearCase {
  int T, K, N;
};

std::vector<double> linear_ref(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b, const LinearCase& c) {
  std::vector<double> y(static_cast<size_t>(c.T) * c.N);
  for (int t = 0; t < c.T; ++t) {
    for (int n = 0; n < c.N; ++n) {
      double s = b.empty() ? 0.0 : b[n];
      for (int k = 0; k < c.K; ++k) s += x[t * c.K + k] * w[n * c.K + k];
      y[t * c.N + n] = s;
    }
  }
  return y;
}

class KernelsLinear : public ::testing::TestWithParam<DType> {};

TEST_P(KernelsLinear, ForwardMatchesReference) {
  const DType dt = GetParam();
  for (const LinearCase c :
       {LinearCase{5, 7, 3}, LinearCase{1, 1, 1}, LinearCase{33, 64, 17}, LinearCase{0, 4, 4}}) {
    const auto x = testing::random_values(c.T * c.K, 1, -1, 1, dt);
    const auto w = testing::random_values(c.N * c.K, 2, -1, 1, dt);
    const auto b = testing::random_values(c.N, 3, -1, 1, dt);
    Tensor tx(dt, x), tw(dt, w), tb(dt, b), ty(dt, c.T * c.N), ty_nob(dt, c.T * c.N);
    cpu_backend().linear_forward(ty.data(), tx.data(), tw.data(), tb.data(), c.T, c.K, c.N, dt);
    cpu_backend().linear_forward(ty_nob.data(), tx.data(), tw.data(), nullptr, c.T, c.K, c.N, dt);
    const double rtol = testing::storage_rtol(dt);
    testing::expect_close(
        ty.values(),
        linear_ref(testing::to_double(x), testing::to_double(w), testing::to_double(b), c),
        1e-5 + rtol, rtol, "y");
    testing::expect_close(ty_nob.values(),
                          linear_ref(testing::to_double(x), testing::to_double(w), {}, c),
                          1e-5 + rtol, rtol, "y without bias");
  }
}

TEST_P(KernelsLinear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const DType dt = GetParam();
  const LinearCase c{5, 7, 3};
  const auto x = testing::random_values(c.T * c.K, 4, -1, 1, dt);
  const auto w = testing::random_values(c.N * c.K, 5, -1, 1, dt);
  const auto b = testing::random_values(c.N, 6, -1, 1, dt);
  const auto dy = testing::random_values(c.T * c.N, 7, -1, 1, dt);
  const auto xd = testing::to_double(x), wd = testing::to_double(w), bd = testing::to_double(b);
  const auto gx = testing::finite_difference(
      [&](const std::vector<double>& v) { return testing::dot(linear_ref(v, wd, bd, c), dy); }, xd);
  const auto gw = testing::finite_difference(
      [&](const std::vector<double>& v) { return testing::dot(linear_ref(xd, v, bd, c), dy); }, wd);
  const auto gb = testing::finite_difference(
      [&](const std::vector<double>& v) { return testing::dot(linear_ref(xd, wd, v, c), dy); }, bd);

  // dw and db start from a known value: the kernel must add to it.
  const auto w0 = testing::random_values(c.N * c.K, 8, -1, 1, dt);
  const auto b0 = testing::random_values(c.N, 9, -1, 1, dt);
  Tensor tx(dt, x), tw(dt, w), tdy(dt, dy), tdx(dt, c.T * c.K), tdw(dt, w0), tdb(dt, b0);
  cpu_backend().linear_backward(tdx.data(), tdw.data(), tdb.data(), tdy.data(), tx.data(),
                                tw.data(), c.T, c.K, c.N, dt);
  std::vector<double> want_dw(gw), want_db(gb);
  for (size_t i = 0; i < want_dw.size(); ++i) want_dw[i] += w0[i];
  for (size_t i = 0; i < want_db.size(); ++i) want_db[i] += b0[i];
  const double rtol = testing::storage_rtol(dt);
  testing::expect_close(tdx.values(), gx, 1e-5 + 2 * rtol, rtol, "dx");
  testing::expect_close(tdw.values(), want_dw, 1e-5 + 2 * rtol, rtol, "dw");
  testing::expect_close(tdb.values(), want_db, 1e-5 + 2 * rtol, rtol, "db");

  // Null outputs are skipped; dw alone still accumulates the same product.
  Tensor tdw2(dt, c.N * c.K);
  cpu_backend().linear_backward(nullptr, tdw2.data(), nullptr, tdy.data(), tx.data(), tw.data(),
                                c.T, c.K, c.N, dt);
  testing::expect_close(tdw2.values(), gw, 1e-5 + 2 * rtol, rtol, "dw alone");
}

// Half-precision weight gradients accumulate in fp32 and round once: summing 64 rows of
// products that each fall below half an ulp of the running value must not lose them.
TEST_P(KernelsLinear, HalfWeightGradientRoundsOnce) {
  const DType dt = GetParam();
  const int T = 64, K = 1, N = 1;
  Tensor x(dt, std::vector<float>(T, 1.0f)), w(dt, std::vector<float>{1.0f}),
      dy(dt, std::vector<float>(T, 1.0f / 1024));
  Tensor dw(dt, std::vector<float>{1.0f});
  cpu_backend().linear_backward(nullptr, dw.data(), nullptr, dy.data(), x.data(), w.data(), T, K, N,
                                dt);
  EXPECT_NEAR(dw.get(0), testing::round_to(1.0f + 64.0f / 1024, dt), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsLinear, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(KernelsDType, UnsupportedDTypeIsAnInvalidArgumentNamingTheKernel) {
  Tensor x(DType::kFloat32, 4), w(DType::kFloat32, 4), y(DType::kFloat32, 4);
  try {
    cpu_backend().linear_forward(y.data(), x.data(), w.data(), nullptr, 2, 2, 2, DType::kInt32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("linear_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cpu_backend().gelu_forward(y.data(), x.data(), 4, DType::kFloat64), Error);
  EXPECT_THROW(
      cpu_backend().linear_forward(y.data(), x.data(), w.data(), nullptr, 2, 0, 2, DType::kFloat32),
      Error);
}

}  // namespace
}  // namespace kolo::trainer
