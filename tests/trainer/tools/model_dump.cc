// Writes one model's fixed weights, inputs, loss and gradients into a directory, for
// tests/trainer/python/compare.py to check against PyTorch:
//   kolo_model_dump <bert|mlp> <float32|float16|bfloat16> <dir>
//   kolo_model_dump bert-file <weights.safetensors> <dir>   train_bert's model (BERT-tiny,
//       both heads) with these fp32 weights (e.g. kolo_ckpt export), loss bound 1e-5
// BERT-tiny runs both heads on a padded batch with some -100 labels; dropout is 0.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/base/error.h"
#include "trainer/io/safetensors.h"
#include "trainer/model/bert.h"
#include "trainer/model/mlp.h"

namespace kolo::trainer {
namespace {

// Every tensor gets non-trivial values (biases and LayerNorm included), so a mix-up of any two
// shows in the gradients.
void perturb_weights(Model& model, uint64_t seed) {
  std::vector<float> v(model.layout().total(), 0.0f);
  for (const ParamInfo& p : model.layout().params()) {
    InitRng rng(seed, p.name);
    bool norm_gain = p.name.find("LayerNorm.weight") != std::string::npos;
    for (size_t i = 0; i < p.numel; ++i)
      v[p.offset + i] = norm_gain ? 1.0f + 0.1f * rng.normal() : 0.05f * rng.normal();
  }
  model.backend().convert(model.params(), model.dtype(), v.data(), DType::kFloat32, v.size());
}

TokenBatch bert_batch(const BertConfig& c) {
  TokenBatch b;
  b.batch = 3;
  b.seq = 12;
  const int lengths[3] = {12, 9, 6};  // two padded sequences
  InitRng rng(7, "bert inputs");
  for (int s = 0; s < b.batch; ++s) {
    for (int t = 0; t < b.seq; ++t) {
      bool real = t < lengths[s];
      int id = t == 0 ? 101 : 1 + static_cast<int>(rng.uniform() * (c.vocab_size - 1));
      b.input_ids.push_back(real ? id : 0);
      b.token_type_ids.push_back(real && t >= lengths[s] / 2 ? 1 : 0);
      b.attention_mask.push_back(real ? 1 : 0);
      bool masked = real && t > 0 && (rng.uniform() < 0.3f || t == 1);
      b.mlm_labels.push_back(masked ? static_cast<int>(rng.uniform() * c.vocab_size)
                                    : kIgnoreIndex);
    }
    b.labels.push_back(s % c.num_labels);
  }
  return b;
}

float loss_scale(DType dt) {
  return dt == DType::kFloat16 ? 1024.0f : 1.0f;
}

// Unscaled fp32 gradients under the parameter names.
void write_grads(Model& model, float scale, const std::string& path) {
  std::vector<float> g(model.layout().total());
  model.backend().convert(g.data(), DType::kFloat32, model.grads(), model.dtype(), g.size(),
                          1.0f / scale);
  save_layout(path, model.layout(), g.data(), DType::kFloat32);
}

void write_config(const std::string& dir, nlohmann::json cfg) {
  std::ofstream out(dir + "/config.json");
  out << cfg.dump(2) << "\n";
  KOLO_CHECK_ARG(out.good(), "cannot write ", dir, "/config.json");
}

// `weights` empty: perturbed weights and a 3-label head; else train_bert's 2-label model
// loaded from that file (fp32).
void dump_bert(DType dt, const std::string& dir, const std::string& weights = "") {
  BertConfig c = bert_preset("tiny");
  c.hidden_dropout = c.attention_dropout = 0.0f;
  c.num_labels = weights.empty() ? 3 : 2;
  Bert model(cpu_backend(), c, dt, 3, 12, /*seed=*/1);
  if (weights.empty())
    perturb_weights(model, 1);
  else
    model.load(weights, true);
  TokenBatch b = bert_batch(c);
  float loss = model.forward(b);
  model.zero_grad();
  model.backward(loss_scale(dt));
  model.save(dir + "/weights.safetensors");
  auto i32 = [&b](const char* name, const std::vector<int32_t>& v, std::vector<int64_t> shape) {
    return TensorRef{name, DType::kInt32, std::move(shape), v.data()};
  };
  write_safetensors(
      dir + "/inputs.safetensors",
      {i32("input_ids", b.input_ids, {b.batch, b.seq}),
       i32("token_type_ids", b.token_type_ids, {b.batch, b.seq}),
       i32("attention_mask", b.attention_mask, {b.batch, b.seq}),
       i32("mlm_labels", b.mlm_labels, {b.batch, b.seq}), i32("labels", b.labels, {b.batch})});
  write_grads(model, loss_scale(dt), dir + "/grads.safetensors");
  nlohmann::json config = {{"name", std::string("bert-tiny ") + dtype_name(dt)},
                           {"model", "bert"},
                           {"dtype", dtype_name(dt)},
                           {"config", bert_config_to_json(c)},
                           {"loss", loss},
                           {"mlm_loss", model.mlm_loss()},
                           {"cls_loss", model.classification_loss()},
                           {"masked", model.mlm_count()},
                           {"loss_scale", loss_scale(dt)}};
  if (!weights.empty()) config["loss_tolerance"] = 1e-5;  // the bound for an export
  write_config(dir, config);
}

void dump_mlp(DType dt, const std::string& dir) {
  MlpConfig c;  // 784-512-256-10
  const int B = 8;
  Mlp model(cpu_backend(), c, dt, B, /*seed=*/1);
  perturb_weights(model, 2);
  FeatureBatch b;
  b.batch = B;
  b.features = c.sizes[0];
  InitRng rng(9, "mlp inputs");
  for (int i = 0; i < B * b.features; ++i) b.inputs.push_back(rng.uniform());
  for (int i = 0; i < B; ++i) b.labels.push_back(i == 3 ? kIgnoreIndex : (i * 7) % 10);
  float loss = model.forward(b);
  model.zero_grad();
  model.backward(loss_scale(dt));
  model.save(dir + "/weights.safetensors");
  write_safetensors(dir + "/inputs.safetensors",
                    {{"inputs", DType::kFloat32, {B, b.features}, b.inputs.data()},
                     {"labels", DType::kInt32, {B}, b.labels.data()}});
  write_grads(model, loss_scale(dt), dir + "/grads.safetensors");
  write_config(dir, {{"name", std::string("mlp ") + dtype_name(dt)},
                     {"model", "mlp"},
                     {"dtype", dtype_name(dt)},
                     {"config", {{"sizes", c.sizes}}},
                     {"loss", loss},
                     {"loss_scale", loss_scale(dt)}});
}

}  // namespace
}  // namespace kolo::trainer

int main(int argc, char** argv) {
  using namespace kolo::trainer;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <bert|mlp> <float32|float16|bfloat16> <dir>\n", argv[0]);
    return 2;
  }
  try {
    std::string model = argv[1], dir = argv[3];
    ::mkdir(dir.c_str(), 0755);
    if (model == "bert-file") {
      dump_bert(kolo::DType::kFloat32, dir, argv[2]);
      return 0;
    }
    kolo::DType dt = kolo::parse_dtype(argv[2], "dtype argument");
    if (model == "bert") {
      dump_bert(dt, dir);
    } else if (model == "mlp") {
      dump_mlp(dt, dir);
    } else {
      std::fprintf(stderr, "unknown model '%s' (accepted: bert, mlp)\n", model.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo_model_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
