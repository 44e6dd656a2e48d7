// AdamW and SGD against PyTorch and closed forms: three steps on two tensors (one without
// weight decay), the expected values printed by torch.optim in float64 (script in the comment
// of kTorchRef), plus constant-gradient closed forms, grad_scale and padding.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/data/rng.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/sgd.h"
#include "trainer/precision/mixed_precision.h"

namespace kolo::trainer {
namespace {

// w = [0.5, -1, 2] (decay), b = [0.1, -0.2] (no decay); grads for three steps:
//   w: [0.1,-0.3,0.5], [-0.2,0.4,0.05], [0.3,0.3,-0.7];  b: [1,-2], [0.5,0.5], [-1.5,0.25]
// Reference: torch 1.13, float64, param groups [{w}, {b, weight_decay: 0}], e.g.
//   torch.optim.AdamW([...], lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
struct Expected {
  std::vector<double> w, b;
};

class TwoTensors {
 public:
  TwoTensors() {
    layout.add("w", {3}, true);
    layout.add("b", {2}, false);
    params.assign(layout.total(), 0.0f);
    grads.assign(layout.total(), 0.0f);
    set(params, {0.5f, -1.0f, 2.0f}, {0.1f, -0.2f});
  }
  void set(std::vector<float>& buf, std::vector<float> w, std::vector<float> b) {
    for (size_t i = 0; i < 3; ++i) buf[i] = w[i];
    for (size_t i = 0; i < 2; ++i) buf[layout.find("b").offset + i] = b[i];
  }
  void run(Optimizer& opt, float lr, float grad_scale = 1.0f) {
    const std::vector<std::vector<float>> gw = {
        {0.1f, -0.3f, 0.5f}, {-0.2f, 0.4f, 0.05f}, {0.3f, 0.3f, -0.7f}};
    const std::vector<std::vector<float>> gb = {{1.0f, -2.0f}, {0.5f, 0.5f}, {-1.5f, 0.25f}};
    for (size_t s = 0; s < 3; ++s) {
      std::vector<float> w = gw[s], b = gb[s];
      for (float& x : w) x /= grad_scale;  // the optimizer multiplies back
      for (float& x : b) x /= grad_scale;
      set(grads, w, b);
      opt.step(params.data(), grads.data(), lr, grad_scale);
    }
  }
  void expect(const Expected& e, double tol) {
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(params[i], e.w[i], tol) << "w" << i;
    for (size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(params[layout.find("b").offset + i], e.b[i], tol) << "b" << i;
    for (size_t i = 3; i < layout.find("b").offset; ++i) EXPECT_EQ(params[i], 0.0f) << "pad " << i;
  }

  ParamLayout layout;
  std::vector<float> params, grads;
};

AdamWOptions adam_options(bool decoupled) {
  AdamWOptions o;
  o.beta1 = 0.9f;
  o.beta2 = 0.99f;
  o.eps = 1e-6f;
  o.weight_decay = 0.1f;
  o.decoupled_weight_decay = decoupled;
  return o;
}

TEST(AdamW, MatchesTorchAdamW) {
  TwoTensors t;
  AdamW opt(t.layout, adam_options(true));
  t.run(opt, 0.01f);
  t.expect({{0.4887504319440412, -0.9935257196567994, 1.9784601452360773},
            {0.08148398260845297, -0.18245137615660534}},
           2e-6);
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_STREQ(opt.name(), "AdamW");
}

TEST(AdamW, L2ModeMatchesTorchAdam) {
  TwoTensors t;
  AdamW opt(t.layout, adam_options(false));
  t.run(opt, 0.01f);
  t.expect({{0.4853434260748314, -0.9908790392499884, 1.979112065746518},
            {0.08148398260845297, -0.18245137615660534}},
           2e-6);
  EXPECT_STREQ(opt.name(), "Adam");
}

TEST(AdamW, GradScaleIsApplied) {
  TwoTensors t;
  AdamW opt(t.layout, adam_options(true));
  t.run(opt, 0.01f, 0.25f);
  t.expect({{0.4887504319440412, -0.9935257196567994, 1.9784601452360773},
            {0.08148398260845297, -0.18245137615660534}},
           2e-6);
}

TEST(AdamW, ConstantGradientClosedForm) {
  // With a constant gradient g the bias-corrected moments are exactly g and g^2, so every
  // step moves p by -lr * g / (|g| + eps) after the decoupled shrink p *= 1 - lr * wd.
  ParamLayout layout;
  layout.add("p", {1}, true);
  std::vector<float> p(layout.total(), 1.0f), g(layout.total(), 0.0f);
  g[0] = -0.5f;
  AdamWOptions o;
  o.weight_decay = 0.1f;
  AdamW opt(layout, o);
  double expected = 1.0;
  for (int s = 0; s < 5; ++s) {
    opt.step(p.data(), g.data(), 0.1f);
    expected = expected * (1 - 0.1 * 0.1) + 0.1 * 0.5 / (0.5 + 1e-8);
    EXPECT_NEAR(p[0], expected, 1e-5) << "step " << s + 1;
  }
  auto state = opt.state();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].name, "exp_avg");
  EXPECT_NEAR((*state[0].data)[0], -0.5 * (1 - std::pow(0.9, 5)), 1e-6);
  EXPECT_EQ(state[1].name, "exp_avg_sq");
  EXPECT_NEAR((*state[1].data)[0], 0.25 * (1 - std::pow(0.999, 5)), 1e-6);
}

TEST(Sgd, MomentumMatchesTorch) {
  TwoTensors t;
  Sgd opt(t.layout, SgdOptions{0.9f, 0.1f, false});
  t.run(opt, 0.1f);
  t.expect({{0.45326849999999996, -0.9698159999999999, 1.815703},
            {-0.11599999999999999, 0.22200000000000003}},
           1e-6);
  ASSERT_EQ(opt.state().size(), 1u);
  EXPECT_EQ(opt.state()[0].name, "momentum_buffer");
}

TEST(Sgd, NesterovMatchesTorch) {
  TwoTensors t;
  Sgd opt(t.layout, SgdOptions{0.9f, 0.1f, true});
  t.run(opt, 0.1f);
  t.expect({{0.4235579115, -0.984748764, 1.794583087}, {-0.0944, 0.3048}}, 1e-6);
}

TEST(Sgd, PlainMatchesClosedForm) {
  // No momentum: p -= lr * (g + wd * p) each step; b has no decay, so b = b0 - lr * sum(g).
  TwoTensors t;
  Sgd opt(t.layout, SgdOptions{0.0f, 0.1f, false});
  t.run(opt, 0.1f);
  t.expect({{0.4651485, -1.010496, 1.956643}, {0.1 - 0.1 * 0.0, -0.2 - 0.1 * (-2 + 0.5 + 0.25)}},
           1e-6);
  EXPECT_TRUE(opt.state().empty());
}

TEST(Optimizers, RejectOutOfRangeOptions) {
  ParamLayout layout;
  layout.add("p", {1}, true);
  AdamWOptions a;
  a.beta2 = 1.0f;
  try {
    AdamW opt(layout, a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.params.betas[1]: 1 is out of range [0, 1)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Sgd(layout, SgdOptions{0.0f, 0.0f, true}), Error);
  EXPECT_THROW(Sgd(layout, SgdOptions{-0.1f, 0.0f, false}), Error);
}

// Backend::adamw_update / sgd_update (what a model on a device updates with) on the CPU
// backend, tensor by tensor through Optimizer::update_on, against the host path (the gradient
// converted with the multiplier, then Optimizer::update piece by piece): the same bits for every
// optimizer form and gradient dtype, on tensors longer than the kernels' pieces, at 1 and 2
// kernel threads.
TEST(Optimizers, BackendUpdatesGiveTheHostPathsBits) {
  ParamLayout layout;
  layout.add("w", {40000}, true);
  layout.add("b", {333}, false);
  const size_t n = layout.total();
  auto adamw = [&](bool decoupled) {
    return std::make_unique<AdamW>(layout, adam_options(decoupled));
  };
  auto sgd = [&](float momentum, bool nesterov) {
    return std::make_unique<Sgd>(layout, SgdOptions{momentum, 0.05f, nesterov});
  };
  using Make = std::function<std::unique_ptr<Optimizer>()>;
  const std::vector<Make> forms = {
      [&] { return adamw(true); }, [&] { return adamw(false); }, [&] { return sgd(0.0f, false); },
      [&] { return sgd(0.9f, false); }, [&] { return sgd(0.9f, true); }};
  Rng rng(11);
  std::vector<float> start(n, 0.0f), values(n, 0.0f);
  for (const ParamInfo& p : layout.params())
    for (size_t i = 0; i < p.numel; ++i) {
      start[p.offset + i] = static_cast<float>(rng.uniform() - 0.5);
      values[p.offset + i] = static_cast<float>(rng.uniform() * 600.0 - 300.0);
    }
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (size_t f = 0; f < forms.size(); ++f) {
      for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        std::vector<char> grads(n * dtype_size(dt));
        kolo::convert(grads.data(), dt, values.data(), DType::kFloat32, n);
        std::unique_ptr<Optimizer> host = forms[f](), backend = forms[f]();
        std::vector<float> host_params = start, backend_params = start;
        MixedPrecision precision(layout, DType::kFloat32, host_params.data());
        for (int step = 0; step < 3; ++step) {
          const float multiplier = 1.0f / 256, grad_scale = 0.75f, lr = 0.01f;
          precision.step(*host, grads.data(), dt, multiplier, lr, grad_scale);
          backend->begin_step(lr);
          for (const ParamInfo& p : layout.params()) {
            std::vector<float*> state;
            for (const OptimizerStateBuffer& b : backend->state())
              state.push_back(b.data->data() + p.offset);
            backend->update_on(cpu_backend(), p, backend_params.data() + p.offset,
                               grads.data() + p.offset * dtype_size(dt), dt, multiplier, grad_scale,
                               state.data());
          }
        }
        const std::string what = std::string(host->name()) + " form " + std::to_string(f) + " " +
                                 dtype_name(dt) + " threads " + std::to_string(threads);
        EXPECT_EQ(backend_params, host_params) << what;
        EXPECT_NE(backend_params, start) << what;
        const auto hs = host->state(), bs = backend->state();
        ASSERT_EQ(hs.size(), bs.size()) << what;
        for (size_t k = 0; k < hs.size(); ++k) EXPECT_EQ(*bs[k].data, *hs[k].data) << what << k;
      }
    }
  }
  set_num_threads(1);
}

}  // namespace
}  // namespace kolo::trainer
