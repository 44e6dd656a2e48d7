// MLP model: layout names and sizes, config parsing, gradients against finite differences,
// predictions, and save -> load -> forward bitwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "comm/base/error.h"
#include "trainer/model/mlp.h"

namespace kolo::trainer {
namespace {

FeatureBatch batch(int B, int F, int classes) {
  FeatureBatch b;
  b.batch = B;
  b.features = F;
  for (int i = 0; i < B * F; ++i) b.inputs.push_back(std::sin(0.37f * i));
  for (int i = 0; i < B; ++i) b.labels.push_back(i == 1 ? kIgnoreIndex : i % classes);
  return b;
}

TEST(ModelMlp, LayoutAndConfig) {
  MlpConfig def;
  EXPECT_EQ(def.sizes, (std::vector<int>{784, 512, 256, 10}));
  ParamLayout l = Mlp::make_layout(def);
  EXPECT_EQ(l.num_params(), 784u * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(l.find("layers.1.weight").shape, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(l.find("layers.2.bias").shape, (std::vector<int64_t>{10}));
  EXPECT_EQ(parse_mlp_config("784-128-10").sizes, (std::vector<int>{784, 128, 10}));
  EXPECT_THROW(parse_mlp_config("784-x-10"), Error);
  EXPECT_THROW(parse_mlp_config("784"), Error);
  for (const char* wide : {"784-2000000-10", "784-1000000000-10"}) {
    try {
      parse_mlp_config(wide);
      ADD_FAILURE() << wide;
    } catch (const Error& e) {  // the width named, not "expected widths joined by '-'"
      EXPECT_NE(std::string(e.what()).find("outside [1, 1048576]"), std::string::npos) << e.what();
    }
  }
}

TEST(ModelMlp, GradientsMatchFiniteDifferences) {
  MlpConfig c;
  c.sizes = {12, 9, 7, 4};
  Mlp m(cpu_backend(), c, DType::kFloat32, 5, 3);
  FeatureBatch b = batch(5, 12, 4);
  m.zero_grad();
  const double f0 = m.forward(b);
  m.backward(1.0f);
  int checked = 0;
  for (const ParamInfo& p : m.layout().params()) {
    const float* g = static_cast<const float*>(m.grad(p.name));
    for (size_t i = 0; i < p.numel; i += 3) {
      float* w = static_cast<float*>(m.param(p.name)) + i;
      const float saved = *w, h = 1e-3f;
      *w = saved + h;
      double up = m.forward(b);
      *w = saved - h;
      double down = m.forward(b);
      *w = saved;
      // A ReLU kink inside [w - h, w + h] makes the one-sided slopes disagree: skip those.
      double right = (up - f0) / h, left = (f0 - down) / h;
      if (std::fabs(right - left) > 0.1 * std::fabs(right + left) / 2 + 1e-3) continue;
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 1e-2 * std::fabs(numeric) + 5e-4) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
  m.forward(b);
  std::vector<float> logits = m.logits();
  std::vector<int32_t> pred = m.predictions();
  for (int r = 0; r < 5; ++r)
    for (int k = 0; k < 4; ++k) EXPECT_LE(logits[r * 4 + k], logits[r * 4 + pred[r]]);
}

TEST(ModelMlp, SaveLoadForwardIsBitwise) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kolo_mlp_" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  MlpConfig c;
  FeatureBatch b = batch(4, 784, 10);
  Mlp a(cpu_backend(), c, DType::kBFloat16, 4, 1);
  float loss = a.forward(b);
  a.save(path);
  Mlp r(cpu_backend(), c, DType::kBFloat16, 2, 2);
  r.load(path);
  EXPECT_EQ(std::memcmp(a.params(), r.params(), a.param_bytes()), 0);
  float loss_r = r.forward(b);  // batch 4 > 2: the arena grows
  EXPECT_EQ(std::memcmp(&loss, &loss_r, 4), 0);
  EXPECT_THROW(r.forward(batch(4, 783, 10)), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kolo::trainer
