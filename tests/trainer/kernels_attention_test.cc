// Self-attention on the fused qkv layout against a double reference (scale, padding mask,
// softmax, dropout from rng::uniform), the backward against finite differences of it, fully
// masked rows giving zeros, and half-precision storage against fp32.
#include <gtest/gtest.h>

#include <limits>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/rng.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

struct AttnCase {
  int B, S, C, NH;
  float p;
  std::vector<int32_t> mask;  // empty: no mask
  uint64_t seed = 11, offset = 3;
  int hd() const { return C / NH; }
};

// out[B*S, C]; probs (pre-dropout) [B, NH, S, S] when asked.
std::vector<double> attention_ref(const std::vector<double>& qkv, const AttnCase& c,
                                  std::vector<double>* probs = nullptr) {
  const int S = c.S, C = c.C, hd = c.hd();
  std::vector<double> out(static_cast<size_t>(c.B) * S * C, 0.0);
  if (probs != nullptr) probs->assign(static_cast<size_t>(c.B) * c.NH * S * S, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int b = 0; b < c.B; ++b) {
    for (int h = 0; h < c.NH; ++h) {
      for (int i = 0; i < S; ++i) {
        const double* q = &qkv[(b * S + i) * 3 * C + h * hd];
        std::vector<double> p(S);
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          const double* k = &qkv[(b * S + j) * 3 * C + C + h * hd];
          double s = 0;
          for (int d = 0; d < hd; ++d) s += q[d] * k[d];
          p[j] = (!c.mask.empty() && c.mask[b * S + j] == 0)
                     ? -std::numeric_limits<double>::infinity()
                     : s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int j = 0; j < S; ++j) sum += p[j] = std::isinf(mx) ? 0.0 : std::exp(p[j] - mx);
        const size_t row = ((static_cast<size_t>(b) * c.NH + h) * S + i) * S;
        for (int j = 0; j < S; ++j) {
          p[j] = sum == 0 ? 0.0 : p[j] / sum;
          if (probs != nullptr) (*probs)[row + j] = p[j];
          const bool keep = c.p == 0 || rng::uniform(c.seed, c.offset + row + j) >= c.p;
          const double pd = keep ? p[j] / (1.0 - c.p) : 0.0;
          const double* v = &qkv[(b * S + j) * 3 * C + 2 * C + h * hd];
          for (int d = 0; d < hd; ++d) out[(b * S + i) * C + h * hd + d] += pd * v[d];
        }
      }
    }
  }
  return out;
}

struct AttnRun {
  std::vector<float> out, probs;
};

AttnRun run_forward(const Tensor& qkv, const AttnCase& c, DType dt) {
  Tensor out(dt, c.B * c.S * c.C), probs(dt, c.B * c.NH * c.S * c.S);
  cpu_backend().attention_forward(out.data(), probs.data(), qkv.data(),
                                  c.mask.empty() ? nullptr : c.mask.data(), c.B, c.S, c.C, c.NH,
                                  c.p, c.seed, c.offset, dt);
  return {out.values(), probs.values()};
}

// B sequences of S tokens, sequence b real for its first lengths[b] tokens.
std::vector<int32_t> padded(int B, int S, const std::vector<int>& lengths) {
  std::vector<int32_t> mask(static_cast<size_t>(B) * S, 0);
  for (int b = 0; b < B; ++b) {
    for (int s = 0; s < lengths[b]; ++s) mask[b * S + s] = 1;
  }
  return mask;
}

std::vector<AttnCase> cases() {
  return {
      {2, 5, 6, 2, 0.0f, {}},
      // Batch 1 pads its last two tokens; batch 2 is all padding (its rows must be zeros).
      {3, 5, 6, 2, 0.0f, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
      {3, 5, 6, 2, 0.25f, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
      {1, 3, 7, 1, 0.0f, {}},
      // Padding inside the sequence as well as at its end.
      {2, 5, 6, 3, 0.2f, {1, 0, 1, 1, 0, 0, 1, 1, 0, 1}},
      {2, 37, 16, 2, 0.1f, std::vector<int32_t>(74, 1)},
      {2, 37, 16, 2, 0.1f, padded(2, 37, {30, 9})},
      {2, 37, 16, 2, 0.1f, {}},
  };
}

class KernelsAttention : public ::testing::TestWithParam<DType> {};

TEST_P(KernelsAttention, ForwardMatchesReference) {
  const DType dt = GetParam();
  const double rtol = testing::storage_rtol(dt);
  for (const AttnCase& c : cases()) {
    const auto qkv = testing::random_values(c.B * c.S * 3 * c.C, 21, -1.5f, 1.5f, dt);
    std::vector<double> want_probs;
    const auto want = attention_ref(testing::to_double(qkv), c, &want_probs);
    const AttnRun got = run_forward(Tensor(dt, qkv), c, dt);
    const std::string what =
        "B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) + " p=" + std::to_string(c.p);
    testing::expect_close(got.out, want, 1e-5 + 2 * rtol, 2 * rtol, "out " + what);
    testing::expect_close(got.probs, want_probs, 1e-6 + rtol, rtol, "probs " + what);
    for (float v : got.out) ASSERT_FALSE(std::isnan(v)) << what;
  }
}

TEST_P(KernelsAttention, BackwardMatchesFiniteDifferences) {
  const DType dt = GetParam();
  const double rtol = testing::storage_rtol(dt);
  for (const AttnCase& c : cases()) {
    const auto qkv = testing::random_values(c.B * c.S * 3 * c.C, 22, -1.5f, 1.5f, dt);
    const auto dout = testing::random_values(c.B * c.S * c.C, 23, -1, 1, dt);
    const auto want = testing::finite_difference(
        [&](const std::vector<double>& v) { return testing::dot(attention_ref(v, c), dout); },
        testing::to_double(qkv));
    Tensor tqkv(dt, qkv), tout(dt, c.B * c.S * c.C), probs(dt, c.B * c.NH * c.S * c.S);
    Tensor tdout(dt, dout), dqkv(dt, std::vector<float>(qkv.size(), 123.0f));  // overwritten
    const int32_t* mask = c.mask.empty() ? nullptr : c.mask.data();
    cpu_backend().attention_forward(tout.data(), probs.data(), tqkv.data(), mask, c.B, c.S, c.C,
                                    c.NH, c.p, c.seed, c.offset, dt);
    cpu_backend().attention_backward(dqkv.data(), tdout.data(), tqkv.data(), probs.data(), mask,
                                     c.B, c.S, c.C, c.NH, c.p, c.seed, c.offset, dt);
    const std::string what =
        "dqkv B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) + " p=" + std::to_string(c.p);
    testing::expect_close(dqkv.values(), want, 1e-4 + 8 * rtol, 4 * rtol, what);
  }
}

TEST(KernelsAttention, RejectsBadShapes) {
  Tensor t(DType::kFloat32, 64);
  EXPECT_THROW(cpu_backend().attention_forward(t.data(), t.data(), t.data(), nullptr, 1, 2, 6, 4,
                                               0.0f, 0, 0, DType::kFloat32),
               Error);
  EXPECT_THROW(cpu_backend().attention_forward(t.data(), t.data(), t.data(), nullptr, 1, 2, 4, 2,
                                               1.0f, 0, 0, DType::kFloat32),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsAttention, ::testing::ValuesIn(testing::kStorageDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kolo::trainer
