// fp16 and bf16 storage against the fp32 path on the same (representable) inputs: a small
// transformer block (linear -> attention -> residual + LayerNorm -> GELU FFN -> loss) run
// forward and backward in each dtype. The tolerances state how far half storage may drift.
#include <gtest/gtest.h>

#include "tests/trainer/kernels_test_util.h"
#include "trainer/kernels/backend.h"

namespace kolo::trainer {
namespace {

using testing::Tensor;

constexpr int kB = 2, kS = 9, kC = 16, kNH = 2, kI = 40, kV = 11;
constexpr int kT = kB * kS;

struct BlockResult {
  float loss;
  std::vector<float> dx, dw_qkv, dw_ffn, dgamma;
};

// x -> qkv = linear -> attention -> h = LN(att + x) -> f = gelu(linear(h)) -> logits = linear(f)
// -> cross-entropy; then the whole backward. All buffers in dt.
BlockResult run_block(DType dt) {
  Backend& be = cpu_backend();
  const auto x = testing::random_values(kT * kC, 1, -1, 1, DType::kBFloat16);
  const auto wq = testing::random_values(3 * kC * kC, 2, -0.4f, 0.4f, DType::kBFloat16);
  const auto w1 = testing::random_values(kI * kC, 3, -0.4f, 0.4f, DType::kBFloat16);
  const auto w2 = testing::random_values(kV * kI, 4, -0.4f, 0.4f, DType::kBFloat16);
  const std::vector<float> ones(kC, 1.0f);
  std::vector<int32_t> mask(kT, 1), targets(kT);
  for (int s = 6; s < kS; ++s) mask[kS + s] = 0;
  for (int t = 0; t < kT; ++t) targets[t] = mask[t] != 0 ? (t * 5) % kV : -100;
  Tensor tx(dt, x), twq(dt, wq), tw1(dt, w1), tw2(dt, w2), g(dt, ones), beta(dt, kC);
  Tensor qkv(dt, kT * 3 * kC), probs(dt, kB * kNH * kS * kS), att(dt, kT * kC), res(dt, kT * kC);
  Tensor h(dt, kT * kC), a1(dt, kT * kI), f(dt, kT * kI), logits(dt, kT * kV);
  std::vector<float> mean(kT), rstd(kT);
  be.linear_forward(qkv.data(), tx.data(), twq.data(), nullptr, kT, kC, 3 * kC, dt);
  be.attention_forward(att.data(), probs.data(), qkv.data(), mask.data(), kB, kS, kC, kNH, 0.1f, 5,
                       0, dt);
  be.add(res.data(), att.data(), tx.data(), kT * kC, dt);
  be.layernorm_forward(h.data(), mean.data(), rstd.data(), res.data(), g.data(), beta.data(), kT,
                       kC, 1e-12f, dt);
  be.linear_forward(a1.data(), h.data(), tw1.data(), nullptr, kT, kC, kI, dt);
  be.gelu_forward(f.data(), a1.data(), kT * kI, dt);
  be.linear_forward(logits.data(), f.data(), tw2.data(), nullptr, kT, kI, kV, dt);
  BlockResult r;
  r.loss =
      be.cross_entropy_forward(nullptr, nullptr, logits.data(), targets.data(), kT, kV, -100, dt);

  Tensor dlogits(dt, kT * kV), df(dt, kT * kI), da1(dt, kT * kI), dh(dt, kT * kC),
      dres(dt, kT * kC);
  Tensor dqkv(dt, kT * 3 * kC), dx(dt, kT * kC), dwq(dt, 3 * kC * kC), dw1(dt, kI * kC),
      dw2(dt, kV * kI);
  Tensor dg(dt, kC), db(dt, kC);
  be.cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), kT, kV, -100, 1.0f, dt);
  be.linear_backward(df.data(), dw2.data(), nullptr, dlogits.data(), f.data(), tw2.data(), kT, kI,
                     kV, dt);
  be.gelu_backward(da1.data(), df.data(), a1.data(), kT * kI, dt);
  be.linear_backward(dh.data(), dw1.data(), nullptr, da1.data(), h.data(), tw1.data(), kT, kC, kI,
                     dt);
  be.layernorm_backward(dres.data(), dg.data(), db.data(), dh.data(), res.data(), mean.data(),
                        rstd.data(), g.data(), kT, kC, dt);
  be.attention_backward(dqkv.data(), dres.data(), qkv.data(), probs.data(), mask.data(), kB, kS, kC,
                        kNH, 0.1f, 5, 0, dt);
  be.linear_backward(dx.data(), dwq.data(), nullptr, dqkv.data(), tx.data(), twq.data(), kT, kC,
                     3 * kC, dt);
  be.add(dx.data(), dx.data(), dres.data(), kT * kC, dt);  // the residual branch
  r.dx = dx.values();
  r.dw_qkv = dwq.values();
  r.dw_ffn = dw1.values();
  r.dgamma = dg.values();
  return r;
}

// Largest |a - b| over the largest |b|: the error relative to the tensor's scale.
double scaled_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return err / scale;
}

TEST(KernelsMixed, HalfStorageTracksFp32) {
  const BlockResult ref = run_block(DType::kFloat32);
  // fp16 keeps 11 significant bits, bf16 8: after ~10 rounded stages the errors stay within a
  // few percent (bf16) and a few tenths of a percent (fp16) of each tensor's scale.
  for (const auto& [dt, tol] :
       {std::pair{DType::kFloat16, 1e-2}, std::pair{DType::kBFloat16, 6e-2}}) {
    const BlockResult got = run_block(dt);
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_NEAR(got.loss, ref.loss, tol * ref.loss);
    EXPECT_LT(scaled_error(got.dx, ref.dx), tol);
    EXPECT_LT(scaled_error(got.dw_qkv, ref.dw_qkv), tol);
    EXPECT_LT(scaled_error(got.dw_ffn, ref.dw_ffn), tol);
    EXPECT_LT(scaled_error(got.dgamma, ref.dgamma), tol);
  }
}

}  // namespace
}  // namespace kolo::trainer
