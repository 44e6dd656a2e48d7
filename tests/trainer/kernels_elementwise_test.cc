// Element-wise kernels: GELU within 1e-6 relative of the double-precision exact form and on
// fp16 / bf16 the fp32 result rounded once, every backward against finite differences, add with
// aliasing, conversions rounding to nearest even like kolo::convert's helpers, and sum_squares with
// its nonfinite flag.
#include <gtest/gtest.h>

#include <limits>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

double gelu_ref(double x) {
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}

TEST(KernelsGelu, Fp32WithinOneMillionthOfExact) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, 30.0f, -30.0f}) x.push_back(v);
  Tensor tx(DType::kFloat32, x), ty(DType::kFloat32, x.size());
  cpu_backend().gelu_forward(ty.data(), tx.data(), x.size(), DType::kFloat32);
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = gelu_ref(x[i]);
  // Relative to the value; below 1e-30 (x < -11.6) only an absolute 1e-36.
  testing::expect_close(ty.values(), want, 1e-36, 1e-6, "gelu");

  const float special[] = {std::numeric_limits<float>::infinity(), std::nanf("")};
  Tensor ts(DType::kFloat32, {special[0], special[1]}), to(DType::kFloat32, 2);
  cpu_backend().gelu_forward(to.data(), ts.data(), 2, DType::kFloat32);
  EXPECT_EQ(to.get(0), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(to.get(1)));
}

// fp16 / bf16 GELU (forward and backward) compute in fp32 lanes and round once on store: bit for
// bit the fp32 kernel on the widened inputs, rounded by kolo's conversion module. Every 16-bit
// pattern is an input (NaN, infinities and subnormals among them), in a length that leaves a
// partial last vector at 8 and at 16 lanes, so the in-register codecs of either width are
// checked against comm/base/convert.h.
TEST(KernelsGelu, HalfStorageRoundsTheFp32Result) {
  const size_t n = 65536 + 13;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> x(n), dy(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<uint16_t>(i);
      dy[i] = static_cast<uint16_t>(i * 40503u);  // another order of the same patterns
    }
    std::vector<float> x32(n), dy32(n), y32(n), dx32(n);
    convert(x32.data(), DType::kFloat32, x.data(), dt, n);
    convert(dy32.data(), DType::kFloat32, dy.data(), dt, n);
    Backend& be = cpu_backend();
    be.gelu_forward(y32.data(), x32.data(), n, DType::kFloat32);
    be.gelu_backward(dx32.data(), dy32.data(), x32.data(), n, DType::kFloat32);
    std::vector<uint16_t> want_y(n), want_dx(n), y(n), dx(n);
    convert(want_y.data(), dt, y32.data(), DType::kFloat32, n);
    convert(want_dx.data(), dt, dx32.data(), DType::kFloat32, n);
    be.gelu_forward(y.data(), x.data(), n, dt);
    be.gelu_backward(dx.data(), dy.data(), x.data(), n, dt);
    // Bits equal, or both NaN: which operand's payload a NaN product carries is the compiler's
    // choice (it may swap the factors).
    const auto same = [dt](uint16_t a, uint16_t b) {
      float fa, fb;
      convert(&fa, DType::kFloat32, &a, dt, 1);
      convert(&fb, DType::kFloat32, &b, dt, 1);
      return a == b || (std::isnan(fa) && std::isnan(fb));
    };
    for (size_t i = 0; i < n; ++i) {
      ASSERT_PRED2(same, y[i], want_y[i])
          << dtype_name(dt) << " gelu_forward of 0x" << std::hex << x[i];
      ASSERT_PRED2(same, dx[i], want_dx[i])
          << dtype_name(dt) << " gelu_backward at 0x" << std::hex << x[i];
    }
  }
}

class KernelsElementwise : public ::testing::TestWithParam<DType> {};

// Backward kernels against central differences of the double reference, on 37 elements (not
// a multiple of the vector width).
void check_unary_backward(
    DType dt, const std::function<double(double)>& f,
    const std::function<void(void*, const void*, const void*, size_t)>& backward, bool pass_output,
    const char* what) {
  const size_t n = 37;
  auto x = testing::random_values(n, 11, -3, 3, dt);
  for (float& v : x) {
    if (std::abs(v) < 1e-2f) v = 0.5f;  // keep ReLU's kink out of the difference
  }
  const auto dy = testing::random_values(n, 12, -1, 1, dt);
  std::vector<float> saved(n);
  for (size_t i = 0; i < n; ++i) saved[i] = testing::round_to(static_cast<float>(f(x[i])), dt);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = dy[i] * (f(x[i] + 1e-6) - f(x[i] - 1e-6)) / 2e-6;
  Tensor tdy(dt, dy), tin(dt, pass_output ? saved : x), tdx(dt, n);
  backward(tdx.data(), tdy.data(), tin.data(), n);
  const double rtol = testing::storage_rtol(dt);
  testing::expect_close(tdx.values(), want, 1e-5 + 4 * rtol, 4 * rtol, what);
}

TEST_P(KernelsElementwise, BackwardsMatchFiniteDifferences) {
  const DType dt = GetParam();
  Backend& be = cpu_backend();
  check_unary_backward(
      dt, gelu_ref,
      [&](void* dx, const void* dy, const void* x, size_t n) {
        be.gelu_backward(dx, dy, x, n, dt);
      },
      false, "gelu_backward");
  check_unary_backward(
      dt, [](double x) { return x > 0 ? x : 0.0; },
      [&](void* dx, const void* dy, const void* x, size_t n) {
        be.relu_backward(dx, dy, x, n, dt);
      },
      false, "relu_backward");
  check_unary_backward(
      dt, [](double x) { return std::tanh(x); },
      [&](void* dx, const void* dy, const void* y, size_t n) {
        be.tanh_backward(dx, dy, y, n, dt);
      },
      true, "tanh_backward");
}

TEST_P(KernelsElementwise, ForwardsMatchReference) {
  const DType dt = GetParam();
  const size_t n = 29;
  const auto x = testing::random_values(n, 13, -4, 4, dt);
  std::vector<double> gelu(n), relu(n), tanh(n);
  for (size_t i = 0; i < n; ++i) {
    gelu[i] = gelu_ref(x[i]);
    relu[i] = std::max(0.0, static_cast<double>(x[i]));
    tanh[i] = std::tanh(static_cast<double>(x[i]));
  }
  Tensor tx(dt, x), ty(dt, n);
  const double rtol = testing::storage_rtol(dt) / 2;
  cpu_backend().gelu_forward(ty.data(), tx.data(), n, dt);
  testing::expect_close(ty.values(), gelu, 1e-6, rtol, "gelu");
  cpu_backend().relu_forward(ty.data(), tx.data(), n, dt);
  testing::expect_close(ty.values(), relu, 0, 0, "relu");
  cpu_backend().tanh_forward(ty.data(), tx.data(), n, dt);
  testing::expect_close(ty.values(), tanh, 1e-6, rtol, "tanh");
}

TEST_P(KernelsElementwise, AddMayAliasItsInputs) {
  const DType dt = GetParam();
  const size_t n = 19;
  const auto a = testing::random_values(n, 14, -1, 1, dt),
             b = testing::random_values(n, 15, -1, 1, dt);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = testing::round_to(a[i] + b[i], dt);
  Tensor ta(dt, a), tb(dt, b);
  cpu_backend().add(ta.data(), ta.data(), tb.data(), n, dt);
  testing::expect_close(ta.values(), want, 0, 0, "a += b");
}

TEST_P(KernelsElementwise, ConvertRoundsToNearestEven) {
  const DType dt = GetParam();
  const size_t n = 1000;
  auto x = testing::random_values(n, 16, -70000, 70000);
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = 1e-7f;  // an fp16 subnormal
  x[2] = std::nanf("");
  Tensor src(DType::kFloat32, x), dst(dt, n), back(DType::kFloat32, n);
  cpu_backend().convert(dst.data(), dt, src.data(), DType::kFloat32, n, 0.5f);
  cpu_backend().convert(back.data(), DType::kFloat32, dst.data(), dt, n, 2.0f);
  for (size_t i = 0; i < n; ++i) {
    const float want = testing::round_to(x[i] * 0.5f, dt);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(dst.get(i)));
    } else {
      ASSERT_EQ(dst.get(i), want) << "element " << i << " = " << x[i];
      ASSERT_EQ(back.get(i), 2 * want) << "element " << i;
    }
  }
}

TEST_P(KernelsElementwise, SumSquaresAndNonfinite) {
  const DType dt = GetParam();
  const size_t n = 10007;
  const auto x = testing::random_values(n, 17, -2, 2, dt);
  double want = 0;
  for (float v : x) want += static_cast<double>(v) * v;
  Tensor tx(dt, x);
  bool nonfinite = false;
  EXPECT_NEAR(cpu_backend().sum_squares(tx.data(), n, dt, &nonfinite), want, want * 1e-5);
  EXPECT_FALSE(nonfinite);
  for (const float bad : {std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::nanf("")}) {
    tx.set(n - 1, bad);  // in the partial last vector
    bool flag = false;
    cpu_backend().sum_squares(tx.data(), n, dt, &flag);
    EXPECT_TRUE(flag) << bad;
  }
  bool flag = true;  // never reset
  cpu_backend().sum_squares(tx.data(), 3, dt, &flag);
  EXPECT_TRUE(flag);
  EXPECT_EQ(cpu_backend().sum_squares(tx.data(), 0, dt, &flag), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsElementwise, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
