// The DeepSpeed-style config: defaults, a full example, validation messages (path and range),
// unknown-key warnings, overrides, the batch-size rule, and the derived scaler, schedule and
// optimizer settings.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "trainer/config/train_config.h"

namespace kolo::trainer {
namespace {

using nlohmann::json;

TrainConfig parse(const json& j, int world = 1) {
  return parse_train_config(j, world, false);
}

// Expects parse to fail with kInvalidArgument and a message containing `text`.
void expect_error(const json& j, const std::string& text, int world = 1) {
  try {
    parse(j, world);
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Config, Defaults) {
  TrainConfig c = parse(json{{"train_batch_size", 8}});
  EXPECT_EQ(c.batch.train_batch_size, 8);
  EXPECT_EQ(c.batch.micro_batch_size, 8);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.storage_dtype(), DType::kFloat32);
  EXPECT_FALSE(c.loss_scaler_options().dynamic);
  EXPECT_EQ(c.loss_scaler_options().initial_scale, 1.0f);
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
  EXPECT_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.gradient_clipping, 0.0);
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_FALSE(c.activation_checkpointing.enabled);
  EXPECT_DOUBLE_EQ(LrSchedule(c.schedule_options()).lr(12345), 1e-3);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(Config, FullExample) {
  const json j = json::parse(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
    "fp16": {"enabled": true, "initial_scale_power": 12, "loss_scale_window": 500,
             "hysteresis": 3, "min_loss_scale": 0.5},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8},
    "optimizer": {"type": "adam", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6,
                                             "weight_decay": 0.05, "adam_w_mode": false}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-4,
                             "warmup_num_steps": 10, "total_num_steps": 110}},
    "gradient_clipping": 1.0, "steps_per_print": 5,
    "activation_checkpointing": {"partition_activations": false, "number_checkpoints": 4},
    "kolo": {"model": "bert-tiny", "epochs": 3, "pretrain": {"steps": 100}}
  })");
  TrainConfig c = parse(j, 4);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 2);  // 64 = 8 * 2 * 4
  EXPECT_EQ(c.storage_dtype(), DType::kFloat16);
  LossScalerOptions s = c.loss_scaler_options();
  EXPECT_TRUE(s.dynamic);
  EXPECT_EQ(s.initial_scale, 4096.0f);
  EXPECT_EQ(s.growth_interval, 500);
  EXPECT_EQ(s.hysteresis, 3);
  EXPECT_EQ(s.min_scale, 0.5f);
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdam);
  AdamWOptions a = c.adamw_options();
  EXPECT_FALSE(a.decoupled_weight_decay);
  EXPECT_FLOAT_EQ(a.beta1, 0.8f);
  EXPECT_FLOAT_EQ(a.beta2, 0.95f);
  EXPECT_FLOAT_EQ(a.weight_decay, 0.05f);
  LrSchedule lr(c.schedule_options());
  EXPECT_DOUBLE_EQ(lr.lr(5), 1.5e-4);
  EXPECT_DOUBLE_EQ(lr.lr(60), 1.5e-4);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_TRUE(c.activation_checkpointing.enabled);
  EXPECT_EQ(c.activation_checkpointing.number_checkpoints, 4);
  EXPECT_EQ(c.kolo.get_string("model", ""), "bert-tiny");
  EXPECT_EQ(c.kolo.get_int("epochs", 1, Range::at_least(1)), 3);
  EXPECT_EQ(c.kolo.section("pretrain").get_int("steps", 0), 100);
  EXPECT_EQ(c.kolo.section("finetune").get_int("steps", 7), 7);  // absent: default
  EXPECT_TRUE(c.warnings.empty());
  ParamLayout layout;
  layout.add("w", {2}, true);
  EXPECT_STREQ(make_optimizer(c, layout)->name(), "Adam");
}

// A minimal config (train_batch_size 8) with `patch` merged in.
json with(const json& patch) {
  json j = {{"train_batch_size", 8}};
  j.merge_patch(patch);
  return j;
}

TEST(Config, ValidationMessagesNamePathAndRange) {
  expect_error(with({{"fp16", {{"hysteresis", 0}}}}), "fp16.hysteresis: 0 is out of range (>= 1)");
  expect_error(with({{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}}),
               "fp16.enabled and bf16.enabled: both are true");
  expect_error(with({{"zero_optimization", {{"stage", 4}}}}),
               "zero_optimization.stage: 4 is out of range [0, 3]");
  expect_error(with({{"optimizer", {{"params", {{"lr", -1}}}}}}),
               "optimizer.params.lr: -1 is out of range (> 0)");
  expect_error(with({{"optimizer", {{"params", {{"betas", {0.9, 1.0}}}}}}}),
               "optimizer.params.betas[1]: 1.0 is out of range [0, 1)");
  expect_error(with({{"optimizer", {{"type", "Lamb"}}}}),
               "optimizer.type: \"Lamb\" is not accepted (one of AdamW, Adam, SGD)");
  expect_error(with({{"optimizer", {{"type", "SGD"}, {"params", {{"nesterov", true}}}}}}),
               "optimizer.params.nesterov: true needs optimizer.params.momentum > 0");
  expect_error(with({{"scheduler", {{"type", "OneCycle"}}}}), "scheduler.type: \"OneCycle\"");
  expect_error(with({{"scheduler",
                      {{"type", "WarmupCosineLR"},
                       {"params", {{"warmup_num_steps", 10}, {"total_num_steps", -1}}}}}}),
               "scheduler.params.total_num_steps: -1 is out of range (>= 0)");
  expect_error(with({{"scheduler",
                      {{"type", "WarmupDecayLR"},
                       {"params", {{"warmup_num_steps", 10}, {"total_num_steps", 10}}}}}}),
               "scheduler.params.total_num_steps: 10 is out of range (> 10)");
  expect_error(with({{"gradient_clipping", "1"}}),
               "gradient_clipping: expected a number, got \"1\"");
  expect_error(with({{"steps_per_print", 2.5}}), "steps_per_print: expected an integer, got 2.5");
  expect_error(with({{"fp16", {{"enabled", 1}}}}), "fp16.enabled: expected true or false, got 1");
  expect_error(with({{"fp16", {{"initial_scale_power", 4}, {"min_loss_scale", 32}}}}),
               "fp16.min_loss_scale: 32 is out of range (0, 16]");
  expect_error(with({{"fp16", 3}}), "fp16: expected a JSON object, got 3");
  // The scaler keeps its scale in fp32 (once refused only after the model was built, naming
  // the scaler instead of the key).
  expect_error(with({{"fp16", {{"loss_scale", 1e39}}}}),
               "fp16.loss_scale: 1e+39 is out of range [0, 3.40282");
}

TEST(Config, ValuesThatFloat32ChangesAreRefusedByKey) {
  // In range as doubles, but the trainer computes with them in float32: 1e-50 became 0 there
  // (refused later naming the loss scaler, or an lr of 1e-320 trained at 0), 0.99999999999 a
  // beta of 1.
  expect_error(with({{"fp16", {{"loss_scale", 1e-50}}}}),
               "fp16.loss_scale: 1e-50 becomes 0 in float32");
  expect_error(with({{"fp16", {{"min_loss_scale", 1e-50}}}}),
               "fp16.min_loss_scale: 1e-50 becomes 0 in float32");
  expect_error(with({{"optimizer", {{"params", {{"eps", 1e-50}}}}}}),
               "optimizer.params.eps: 1e-50 becomes 0 in float32");
  expect_error(with({{"optimizer", {{"params", {{"lr", 1e-320}}}}}}),
               "optimizer.params.lr: 1e-320 becomes 0 in float32");
  expect_error(with({{"optimizer", {{"params", {{"betas", {0.9, 0.99999999999}}}}}}}),
               "optimizer.params.betas[1]: 0.99999999999 becomes 1 in float32");
  expect_error(with({{"gradient_predivide_factor", 1e-50}}),
               "gradient_predivide_factor: 1e-50 becomes 0 in float32");
  // Small values float32 holds are kept as written.
  EXPECT_EQ(parse(with({{"optimizer", {{"params", {{"eps", 1e-30}}}}}})).optimizer.eps, 1e-30);
}

TEST(Config, FileErrorsNameTheFileAndEscapeItsBytes) {
  const std::string path = ::testing::TempDir() + "/kolo_config_bytes.json";
  auto refusal = [&](const std::string& text, const std::vector<std::string>& overrides) {
    std::ofstream(path) << text;
    try {
      load_train_config(path, overrides, 1, false);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // The parser quotes the invalid byte: it is escaped, not written to the terminal raw.
  const std::string bad = refusal("{\"a\": \"\xff\"}", {});
  EXPECT_NE(bad.find("last read: '\"\\xff'"), std::string::npos) << bad;
  EXPECT_EQ(bad.find('\xff'), std::string::npos) << bad;
  // A document that is not an object is blamed on the file, with or without a --set.
  for (const auto& overrides : {std::vector<std::string>{}, {"kolo.epochs=1"}})
    EXPECT_NE(refusal("[1, 2, 3]", overrides)
                  .find("config file " + path + ": expected a JSON object, got array"),
              std::string::npos);
  std::remove(path.c_str());
  // "bfloat16" beside "bf16" was ignored without a word.
  const TrainConfig c =
      parse({{"train_batch_size", 8}, {"bf16", {{"enabled", true}}}, {"bfloat16", json::object()}});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "both 'bf16' and 'bfloat16' are given: 'bfloat16' is ignored");
}

TEST(Config, UnknownKeysWarnWithTheirPath) {
  json j = {{"train_batch_size", 8},
            {"wall_clock_breakdown", false},
            {"fp16", {{"enabled", true}, {"auto_cast", false}}},
            {"optimizer", {{"type", "SGD"}, {"params", {{"lr", 0.1}, {"betas", {0.9, 0.9}}}}}}};
  TrainConfig c = parse(j);
  ASSERT_EQ(c.warnings.size(), 3u);
  EXPECT_EQ(c.warnings[0], "unknown key 'wall_clock_breakdown' (ignored)");
  EXPECT_EQ(c.warnings[1], "unknown key 'fp16.auto_cast' (ignored)");
  EXPECT_EQ(c.warnings[2], "unknown key 'optimizer.params.betas' (ignored)");  // not SGD's
}

TEST(Config, Overrides) {
  json j = {{"train_batch_size", 8}, {"optimizer", {{"type", "AdamW"}}}};
  apply_override(j, "optimizer.params.lr=3e-4");
  apply_override(j, "fp16.enabled=true");
  apply_override(j, "optimizer.params.betas=[0.9,0.95]");
  apply_override(j, "kolo.model=bert-mini");  // not JSON: a string
  apply_override(j, "kolo.data_dir=\"/tmp/x\"");
  apply_override(j, "train_batch_size=16");  // replaces
  EXPECT_DOUBLE_EQ(j["optimizer"]["params"]["lr"].get<double>(), 3e-4);
  EXPECT_EQ(j["fp16"]["enabled"], true);
  EXPECT_EQ(j["optimizer"]["params"]["betas"], json({0.9, 0.95}));
  EXPECT_EQ(j["kolo"]["model"], "bert-mini");
  EXPECT_EQ(j["kolo"]["data_dir"], "/tmp/x");
  TrainConfig c = parse(j);
  EXPECT_EQ(c.batch.train_batch_size, 16);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_THROW(apply_override(j, "no_equals_sign"), Error);
  EXPECT_THROW(apply_override(j, "fp16..enabled=true"), Error);
  try {
    apply_override(j, "train_batch_size.x=1");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train_batch_size is not an object"), std::string::npos)
        << e.what();
  }
}

TEST(Config, BatchSizeRule) {
  auto b = resolve_batch_sizes(32, 4, std::nullopt, 2);
  EXPECT_EQ(b.gradient_accumulation_steps, 4);
  b = resolve_batch_sizes(32, std::nullopt, 2, 2);
  EXPECT_EQ(b.micro_batch_size, 8);
  b = resolve_batch_sizes(std::nullopt, 4, 3, 2);
  EXPECT_EQ(b.train_batch_size, 24);
  b = resolve_batch_sizes(std::nullopt, 4, std::nullopt, 3);
  EXPECT_EQ(b.train_batch_size, 12);
  EXPECT_EQ(b.gradient_accumulation_steps, 1);
  b = resolve_batch_sizes(12, std::nullopt, std::nullopt, 3);
  EXPECT_EQ(b.micro_batch_size, 4);
  b = resolve_batch_sizes(24, 4, 3, 2);
  EXPECT_EQ(b.train_batch_size, 24);
  expect_error(json{{"train_batch_size", 30},
                    {"train_micro_batch_size_per_gpu", 4},
                    {"gradient_accumulation_steps", 2}},
               "train_batch_size: 30 is not train_micro_batch_size_per_gpu (4) * "
               "gradient_accumulation_steps (2) * world size (4) = 32",
               4);
  expect_error(json{{"train_batch_size", 30}, {"train_micro_batch_size_per_gpu", 4}},
               "train_batch_size: 30 is not a multiple of train_micro_batch_size_per_gpu (4)");
  expect_error(json::object(), "train_batch_size or train_micro_batch_size_per_gpu");
  expect_error(json{{"train_batch_size", 0}}, "train_batch_size: 0 is out of range");
  // Found by the hardening issue: 2^32 accumulation steps became 0 (and a SIGFPE) in an int,
  // and the product of large values wrapped.
  expect_error(
      json{{"train_micro_batch_size_per_gpu", 1}, {"gradient_accumulation_steps", 4294967296LL}},
      "gradient_accumulation_steps: 4294967296 is out of range");
  expect_error(json{{"train_micro_batch_size_per_gpu", 2147483647},
                    {"gradient_accumulation_steps", 2147483647}},
               "overflows a 64-bit integer", 4);
}

TEST(Config, SchedulersAndStaticScale) {
  json j = json::parse(R"({"train_micro_batch_size_per_gpu": 2,
    "fp16": {"enabled": true, "loss_scale": 128},
    "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 10,
       "total_num_steps": 110, "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01}}})");
  TrainConfig c = parse(j);
  EXPECT_FALSE(c.loss_scaler_options().dynamic);
  EXPECT_EQ(c.loss_scaler_options().initial_scale, 128.0f);
  LrSchedule lr(c.schedule_options());
  EXPECT_DOUBLE_EQ(lr.lr(0), 0.01);
  EXPECT_NEAR(lr.lr(109), 0.001, 1e-12);
  SgdOptions s = c.sgd_options();
  EXPECT_FLOAT_EQ(s.momentum, 0.9f);
  EXPECT_TRUE(s.nesterov);
  EXPECT_EQ(s.weight_decay, 0.0f);
  ParamLayout layout;
  layout.add("w", {2}, true);
  EXPECT_STREQ(make_optimizer(c, layout)->name(), "SGD");

  j = json{
      {"train_batch_size", 4},
      {"bf16", {{"enabled", true}}},
      {"scheduler",
       {{"type", "WarmupLR"},
        {"params", {{"warmup_max_lr", 0.5}, {"warmup_num_steps", 4}, {"warmup_type", "log"}}}}}};
  c = parse(j);
  EXPECT_EQ(c.storage_dtype(), DType::kBFloat16);
  EXPECT_EQ(c.loss_scaler_options().initial_scale, 1.0f);
  LrSchedule warm(c.schedule_options());
  EXPECT_NEAR(warm.lr(1), 0.5 * std::log(2.0) / std::log(4.0), 1e-15);
  EXPECT_DOUBLE_EQ(warm.lr(100), 0.5);
}

TEST(Config, KoloSectionGetters) {
  TrainConfig c = parse(
      json{{"train_batch_size", 1}, {"kolo", {{"seq_len", 0}, {"model", "huge"}, {"seed", 7}}}});
  try {
    c.kolo.get_int("seq_len", 128, Range::closed(1, 512));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kolo.seq_len: 0 is out of range [1, 512]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(c.kolo.get_string("model", "tiny", {"tiny", "mini"}), Error);
  EXPECT_EQ(c.kolo.get_int("seed", 0), 7);
  const auto w = c.kolo.warn_unknown({"seq_len", "model"});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "unknown key 'kolo.seed' (ignored)");
}

TEST(Config, LoadFileWithOverrides) {
  const std::string path = ::testing::TempDir() + "/kolo_config_test.json";
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 8, "optimizer": {"params": {"lr": 0.01}}})";
  }
  TrainConfig c = load_train_config(path, {"optimizer.params.lr=0.02"}, 1, false);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.02);
  EXPECT_EQ(c.raw["optimizer"]["params"]["lr"], 0.02);
  {
    std::ofstream out(path);
    out << "{not json";
  }
  EXPECT_THROW(read_config_file(path), Error);
  std::remove(path.c_str());
  try {
    read_config_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
  // Neither a folder, a FIFO (whose open would block) nor a device is read.
  const std::string fifo = path + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& odd : {std::string("/tmp"), fifo, std::string("/dev/zero")}) {
    try {
      read_config_file(odd);
      ADD_FAILURE() << odd;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(odd + " is not a regular file"), std::string::npos)
          << e.what();
    }
  }
  std::remove(fifo.c_str());
}

TEST(Config, DocumentedExampleParses) {
  // The example of docs/trainer_config.md, so the documentation cannot drift from the parser.
  std::ifstream in(std::string(KOLO_SOURCE_DIR) + "/docs/trainer_config.md");
  ASSERT_TRUE(in) << "docs/trainer_config.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t begin = doc.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("```", begin + 8);
  TrainConfig c = parse(json::parse(doc.substr(begin + 8, end - begin - 8)), 2);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.storage_dtype(), DType::kFloat16);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_TRUE(c.zero.overlap_comm);
  EXPECT_TRUE(c.warnings.empty());
}

}  // namespace
}  // namespace kolo::trainer
