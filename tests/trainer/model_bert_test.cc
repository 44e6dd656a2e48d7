// BERT model: parameter counts against closed forms and Hugging Face's published totals, the
// packed QKV layout, config parsing, save -> load -> forward bitwise, dropout reproducibility,
// and gradients against central finite differences on BERT-tiny in fp32.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/trainer/device_like_cpu.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/model/bert.h"

namespace kolo::trainer {
namespace {

// Counted from the architecture, independently of make_layout's code.
size_t bert_params(size_t V, size_t C, size_t L, size_t I, size_t P, size_t TV, bool mlm,
                   size_t labels) {
  size_t embeddings = V * C + P * C + TV * C + 2 * C;
  size_t layer = 4 * (C * C + C) + 2 * C + (C * I + I) + (I * C + C) + 2 * C;
  size_t n = embeddings + L * layer;
  if (labels > 0) n += (C * C + C) + (labels * C + labels);
  if (mlm) n += (C * C + C) + 2 * C + V;  // decoder weight tied: not counted again
  return n;
}

TEST(ModelBert, BaseParameterCountMatchesTheArchitecture) {
  BertConfig c = bert_preset("base");
  c.mlm_head = false;
  c.num_labels = 2;
  ParamLayout l = Bert::make_layout(c);
  EXPECT_EQ(l.num_params(), bert_params(30522, 768, 12, 3072, 512, 2, false, 2));
  // Hugging Face's bert-base-uncased BertModel (with pooler) has 109,482,240 parameters.
  EXPECT_EQ(l.num_params() - (2 * 768 + 2), 109482240u);
  c.mlm_head = true;
  c.num_labels = 0;
  EXPECT_EQ(Bert::make_layout(c).num_params(), bert_params(30522, 768, 12, 3072, 512, 2, true, 0));
  for (const char* name : {"tiny", "mini", "small", "medium", "large"}) {
    BertConfig p = bert_preset(name);
    EXPECT_EQ(Bert::make_layout(p).num_params(),
              bert_params(30522, p.hidden, p.layers, 4 * p.hidden, 512, 2, true, 0))
        << name;
  }
}

TEST(ModelBert, QueryKeyValueFormOneMatrixForAnyWidth) {
  for (int hidden : {128, 36}) {  // 36 * 36 is not a multiple of the 32-element alignment
    BertConfig c = parse_bert_config(nlohmann::json{{"hidden_size", hidden},
                                                    {"num_attention_heads", 2},
                                                    {"num_hidden_layers", 1},
                                                    {"vocab_size", 50}});
    ParamLayout l = Bert::make_layout(c);
    const std::string pre = "bert.encoder.layer.0.attention.self.";
    size_t C = hidden;
    EXPECT_EQ(l.find(pre + "key.weight").offset, l.find(pre + "query.weight").offset + C * C);
    EXPECT_EQ(l.find(pre + "value.weight").offset, l.find(pre + "key.weight").offset + C * C);
    EXPECT_EQ(l.find(pre + "key.bias").offset, l.find(pre + "query.bias").offset + C);
    EXPECT_EQ(l.find(pre + "value.bias").offset, l.find(pre + "key.bias").offset + C);
    EXPECT_EQ(l.find(pre + "query.weight").shape, (std::vector<int64_t>{hidden, hidden}));
  }
}

TEST(ModelBert, ConfigPresetsAndJson) {
  BertConfig mini = bert_preset("mini");
  EXPECT_EQ(mini.layers, 4);
  EXPECT_EQ(mini.hidden, 256);
  EXPECT_EQ(mini.heads, 4);
  EXPECT_EQ(mini.intermediate, 1024);
  EXPECT_EQ(bert_preset("bert-large-uncased").hidden, 1024);
  BertConfig j = parse_bert_config(std::string_view(
      R"({"preset": "small", "num_labels": 2, "hidden_dropout_prob": 0, "vocab_size": 1000})"));
  EXPECT_EQ(j.hidden, 512);
  EXPECT_EQ(j.num_labels, 2);
  EXPECT_EQ(j.vocab_size, 1000);
  EXPECT_EQ(j.hidden_dropout, 0.0f);
  BertConfig round = parse_bert_config(bert_config_to_json(j));
  EXPECT_EQ(round.hidden, j.hidden);
  EXPECT_EQ(round.intermediate, j.intermediate);
  EXPECT_EQ(round.num_labels, 2);
  EXPECT_THROW(bert_preset("huge"), Error);
  // Found by the hardening issue: integers narrowed silently (2^32 + 128 became 128).
  EXPECT_THROW(parse_bert_config(std::string_view(R"({"hidden_size": 4294967424})")), Error);
  EXPECT_THROW(parse_bert_config(std::string_view(R"({"num_labels": -4294967294})")), Error);
  EXPECT_THROW(parse_bert_config(nlohmann::json{{"hidden_size", 130}, {"num_attention_heads", 4}}),
               Error);
}

BertConfig small_config(float dropout) {
  BertConfig c = bert_preset("tiny");
  c.hidden_dropout = c.attention_dropout = dropout;
  c.num_labels = 3;
  return c;
}

TokenBatch test_batch(const BertConfig& c) {
  TokenBatch b;
  b.batch = 2;
  b.seq = 8;
  for (int s = 0; s < b.batch; ++s) {
    for (int t = 0; t < b.seq; ++t) {
      bool real = s == 0 || t < 5;
      b.input_ids.push_back(real ? (t == 0 ? 101 : (37 * t + 1000 * s + 11) % c.vocab_size) : 0);
      b.token_type_ids.push_back(real && t >= 4 ? 1 : 0);
      b.attention_mask.push_back(real ? 1 : 0);
      b.mlm_labels.push_back(real && t % 3 == 1 ? (13 * t + 7 * s) % c.vocab_size : kIgnoreIndex);
    }
    b.labels.push_back(s + 1);
  }
  return b;
}

TEST(ModelBert, SaveLoadForwardIsBitwise) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kolo_bert_" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    BertConfig c = small_config(0.1f);
    TokenBatch b = test_batch(c);
    Bert a(cpu_backend(), c, dt, 2, 8, /*seed=*/1);
    a.set_dropout_seed(5);
    float loss_a = a.forward(b);
    std::vector<float> logits_a = a.logits();
    a.save(path, {{"step", "0"}});

    Bert r(cpu_backend(), c, dt, 2, 8, /*seed=*/2);
    EXPECT_NE(std::memcmp(r.params(), a.params(), a.param_bytes()), 0);
    LoadReport report = r.load(path);
    EXPECT_EQ(report.loaded.size(), a.layout().params().size());
    EXPECT_EQ(std::memcmp(r.params(), a.params(), a.param_bytes()), 0) << dtype_name(dt);
    r.set_dropout_seed(5);
    float loss_r = r.forward(b);
    EXPECT_EQ(std::memcmp(&loss_r, &loss_a, sizeof(float)), 0) << dtype_name(dt);
    EXPECT_EQ(r.logits(), logits_a);
  }
  std::filesystem::remove(path);
}

TEST(ModelBert, DropoutIsReproducibleFromTheSeedAndOffInEval) {
  BertConfig c = small_config(0.1f);
  TokenBatch b = test_batch(c);
  Bert m(cpu_backend(), c, DType::kFloat32, 2, 8, 3);
  m.set_dropout_seed(1);
  float l1 = m.forward(b);
  EXPECT_EQ(m.forward(b), l1);
  m.set_dropout_seed(2);
  EXPECT_NE(m.forward(b), l1);
  m.set_training(false);
  float eval = m.forward(b);
  BertConfig no_dropout = small_config(0.0f);
  Bert plain(cpu_backend(), no_dropout, DType::kFloat32, 2, 8, 3);
  EXPECT_EQ(plain.forward(b), eval);
  EXPECT_EQ(m.mlm_count(), 5);  // positions 1, 4, 7 of sequence 0 and 1, 4 of sequence 1
  EXPECT_GE(m.mlm_correct(), 0);
  EXPECT_EQ(m.predictions().size(), 2u);
}

TEST(ModelBert, CheckpointingGivesBitIdenticalGradientsInLessMemory) {
  // Five layers: intervals 1, 2 and 3 (a last segment shorter than the others), with dropout,
  // against the run that keeps every layer's activations.
  BertConfig c = small_config(0.1f);
  c.layers = 5;
  TokenBatch b = test_batch(c);
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    Bert plain(cpu_backend(), c, dt, 2, 8, 4);
    plain.set_dropout_seed(9);
    const float loss = plain.forward(b);
    plain.backward(2.0f);
    const size_t full = plain.activation_bytes();
    for (int interval : {1, 2, 3}) {
      Bert m(cpu_backend(), c, dt, 2, 8, 4);
      m.set_checkpoint_interval(interval);
      m.set_dropout_seed(9);
      EXPECT_EQ(m.forward(b), loss);
      m.backward(2.0f);
      EXPECT_EQ(std::memcmp(m.grads(), plain.grads(), m.param_bytes()), 0)
          << dtype_name(dt) << " interval " << interval;
      EXPECT_LT(m.activation_bytes(), full) << interval;
    }
  }
  Bert m(cpu_backend(), c, DType::kFloat32, 2, 8, 4);
  EXPECT_THROW(m.set_checkpoint_interval(-1), Error);
}

TEST(ModelBert, DeviceBuffersGoThroughHostCopies) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kolo_bert_device_" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  cpu_backend();  // the kernels' one-time setup
  DeviceLikeCpu device;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    BertConfig c = small_config(0.1f);
    TokenBatch b = test_batch(c);
    Bert host(cpu_backend(), c, dt, 2, 8, /*seed=*/1);
    Bert dev(device, c, dt, 2, 8, /*seed=*/1);
    EXPECT_GT(device.copies, 0);  // initial weights uploaded
    ASSERT_EQ(std::memcmp(host.params(), dev.params(), host.param_bytes()), 0) << dtype_name(dt);
    host.set_dropout_seed(5);
    dev.set_dropout_seed(5);
    const float loss = host.forward(b);
    EXPECT_EQ(dev.forward(b), loss);
    EXPECT_EQ(dev.logits(), host.logits());
    EXPECT_EQ(dev.predictions(), host.predictions());
    EXPECT_EQ(dev.mlm_correct(), host.mlm_correct());
    // save -> load round trip through host copies.
    const int before = device.copies;
    dev.save(path);
    Bert other(device, c, dt, 2, 8, /*seed=*/2);
    other.load(path);
    EXPECT_GT(device.copies, before);
    EXPECT_EQ(std::memcmp(other.params(), host.params(), host.param_bytes()), 0) << dtype_name(dt);
  }
  std::filesystem::remove(path);
}

TEST(ModelBert, ArenaGrowsForLargerBatchesAndInputsAreChecked) {
  BertConfig c = small_config(0.0f);
  Bert m(cpu_backend(), c, DType::kFloat32, 1, 4, 3);
  size_t before = m.activation_bytes();
  TokenBatch b = test_batch(c);
  float loss = m.forward(b);
  EXPECT_GT(m.activation_bytes(), before);
  EXPECT_TRUE(std::isfinite(loss));
  TokenBatch bad = b;
  bad.input_ids[3] = c.vocab_size;
  EXPECT_THROW(m.forward(bad), Error);
  bad = b;
  bad.labels[0] = 3;
  EXPECT_THROW(m.forward(bad), Error);
  bad = b;
  bad.attention_mask.pop_back();
  EXPECT_THROW(m.forward(bad), Error);
  bad = b;
  std::fill(bad.attention_mask.begin() + 8, bad.attention_mask.end(), 0);
  EXPECT_THROW(m.forward(bad), Error);
  BertConfig mlm_only = c;
  mlm_only.num_labels = 0;
  Bert p(cpu_backend(), mlm_only, DType::kFloat32, 2, 8, 3);
  float loss_p = p.forward(b);  // labels for the absent classification head are ignored
  EXPECT_EQ(loss_p, p.mlm_loss());
  EXPECT_GT(loss_p, 0.0f);
}

// The MLM loss's backward writes the logits' gradient over the logits: a second backward
// without a new forward is refused, naming the forward, and after a new forward the gradients
// accumulate exactly twice the first pass's.
TEST(ModelBert, BackwardNeedsItsOwnForward) {
  BertConfig c = small_config(0.0f);
  TokenBatch b = test_batch(c);
  Bert m(cpu_backend(), c, DType::kFloat32, 2, 8, 3);
  m.zero_grad();
  m.forward(b);
  m.backward(1.0f);
  const ParamInfo& p = m.layout().find("cls.predictions.bias");
  const auto* g = static_cast<const float*>(m.grad("cls.predictions.bias"));
  const std::vector<float> once(g, g + p.numel);
  try {
    m.backward(1.0f);
    ADD_FAILURE() << "a second backward ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("before forward"), std::string::npos) << e.what();
  }
  m.forward(b);
  m.backward(1.0f);
  for (size_t i = 0; i < p.numel; ++i) EXPECT_EQ(g[i], 2.0f * once[i]) << i;
}

// Central differences of the loss in double-checked fp32: each chosen tensor's element with
// the largest analytic gradient, so the signal dominates the rounding of the loss.
void check_finite_differences(float dropout) {
  BertConfig c = small_config(dropout);
  TokenBatch b = test_batch(c);
  Bert m(cpu_backend(), c, DType::kFloat32, 2, 8, 11);
  m.set_dropout_seed(9);  // the same masks in every forward
  m.zero_grad();
  m.forward(b);
  m.backward(1.0f);
  for (const char* name :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.0.attention.self.value.bias",
        "bert.encoder.layer.1.intermediate.dense.weight",
        "bert.encoder.layer.1.output.LayerNorm.bias", "bert.pooler.dense.weight", "classifier.bias",
        "cls.predictions.transform.dense.weight", "cls.predictions.bias"}) {
    const ParamInfo& p = m.layout().find(name);
    const float* g = static_cast<const float*>(m.grad(name));
    size_t best = 0;
    for (size_t i = 1; i < p.numel; ++i)
      if (std::fabs(g[i]) > std::fabs(g[best])) best = i;
    float* w = static_cast<float*>(m.param(name)) + best;
    const float saved = *w, h = 1e-2f;
    *w = saved + h;
    double up = m.forward(b);
    *w = saved - h;
    double down = m.forward(b);
    *w = saved;
    double numeric = (up - down) / (2.0 * h);
    EXPECT_NEAR(g[best], numeric, 2e-2 * std::fabs(numeric) + 2e-4)
        << name << "[" << best << "], dropout " << dropout;
  }
}

TEST(ModelBert, GradientsMatchFiniteDifferences) {
  check_finite_differences(0.0f);
}
TEST(ModelBert, GradientsMatchFiniteDifferencesWithDropout) {
  check_finite_differences(0.1f);
}

}  // namespace
}  // namespace kolo::trainer
