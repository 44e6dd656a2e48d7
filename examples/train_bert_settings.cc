// train_bert's settings (train_bert_settings.h).
#include "examples/train_bert_settings.h"

#include <algorithm>
#include <utility>

#include "comm/base/error.h"
#include "trainer/checkpoint/index_check.h"

namespace train_bert {

// A phase's settings: the base config with kolo.<phase>.set applied, then the command line's.
kt::TrainConfig phase_config(const kt::TrainConfig& base, const std::string& phase,
                             const std::vector<std::string>& overrides, bool print) {
  nlohmann::json json = base.raw;
  const kt::JsonSection set = base.kolo.section(phase).section("set");
  for (const auto& [key, value] : set.json().items()) {
    try {
      kt::apply_override(json, key + "=" + value.dump());
    } catch (const kolo::Error& e) {  // which section the override came from
      KOLO_THROW(e.code(), set.path(), ": ", e.message());
    }
  }
  for (const std::string& o : overrides) kt::apply_override(json, o);
  kt::TrainConfig config = kt::parse_train_config(json, base.world_size, false);
  // Unknown keys the phase's set brought in (the base config's are reported already).
  std::vector<std::string> added;
  for (const std::string& w : config.warnings)
    if (std::find(base.warnings.begin(), base.warnings.end(), w) == base.warnings.end())
      added.push_back("kolo." + phase + ".set: " + w);
  if (print) kt::print_config_warnings(added);
  // One model serves both phases: its storage dtype, shape and sequence length are the base
  // config's.
  const char* dtype = kolo::dtype_name(config.storage_dtype());
  const char* base_dtype = kolo::dtype_name(base.storage_dtype());
  KOLO_CHECK_ARG(std::string(dtype) == base_dtype, "kolo.", phase,
                 ".set: the precision (fp16/bf16) must be the same in every phase: ", dtype,
                 " here, ", base_dtype, " in the base config");
  const nlohmann::json seq_len = config.kolo.json().value("seq_len", nlohmann::json(128));
  const nlohmann::json base_seq_len = base.kolo.json().value("seq_len", nlohmann::json(128));
  KOLO_CHECK_ARG(seq_len == base_seq_len, "kolo.", phase,
                 ".set: kolo.seq_len must be the same in every phase: ", seq_len.dump(), " here, ",
                 base_seq_len.dump(), " in the base config");
  const nlohmann::json model = config.kolo.json().value("model", nlohmann::json("tiny"));
  const nlohmann::json base_model = base.kolo.json().value("model", nlohmann::json("tiny"));
  KOLO_CHECK_ARG(model == base_model, "kolo.", phase,
                 ".set: kolo.model must be the same in every phase (one model trains in both): ",
                 model.dump(), " here, ", base_model.dump(), " in the base config");
  return config;
}

PhaseSettings phase_settings(const kt::TrainConfig& config, const std::string& phase) {
  const kt::JsonSection section = config.kolo.section(phase);
  PhaseSettings s;
  s.epochs = section.get_int("epochs", s.epochs, kt::Range::at_least(0));
  s.max_steps = section.get_int("max_steps", s.max_steps, kt::Range::at_least(0));
  s.evaluate = section.get_bool("evaluate", s.evaluate);
  s.max_windows = max_windows_of(config);
  s.seed = config.kolo.get_int("seed", s.seed, kt::Range::at_least(0));
  return s;
}

// kolo.model: a preset name, or a Hugging Face style config object (docs/trainer.md).
kt::BertConfig model_config(const kt::TrainConfig& config) {
  const nlohmann::json& json = config.kolo.json();
  if (json.contains("model") && json["model"].is_object())
    return kt::parse_bert_config(json["model"]);
  return kt::parse_bert_config(std::string_view(config.kolo.get_string("model", "tiny")));
}

void check_kolo_keys(const kt::TrainConfig& config, bool print) {
  std::vector<std::string> warnings =
      config.kolo.warn_unknown({"model", "seq_len", "seed", "pretrain", "finetune"});
  for (const char* phase : {"pretrain", "finetune"}) {
    const auto more = config.kolo.section(phase).warn_unknown(
        {"epochs", "max_steps", "max_windows", "evaluate", "set"});
    warnings.insert(warnings.end(), more.begin(), more.end());
  }
  if (print) kt::print_config_warnings(warnings);
}

// kolo.seq_len and kolo.pretrain.max_windows (the MLM windows each mail gives).
int64_t seq_len_of(const kt::TrainConfig& config) {
  return config.kolo.get_int("seq_len", 128, kt::Range::closed(8, 512));
}
int64_t max_windows_of(const kt::TrainConfig& config) {
  return config.kolo.section("pretrain").get_int("max_windows", 2, kt::Range::at_least(1));
}

// The settings that fix the order of a phase's training samples. A resume continues at the
// checkpoint's step of its epoch, so with another global batch, seed or set of examples it
// would skip or repeat samples (and a larger batch could end the epoch at once). World size,
// ZeRO stage and accumulation may change: rank r takes micro-batch i * world + r of the same
// global order.
namespace {

std::vector<std::pair<std::string, nlohmann::json>> data_order(const kt::TrainConfig& config,
                                                               const std::string& phase) {
  std::vector<std::pair<std::string, nlohmann::json>> out = {
      {"train_batch_size", config.batch.train_batch_size},
      {"kolo.seed", config.kolo.get_int("seed", 1, kt::Range::at_least(0))}};
  if (phase == "pretrain") {  // the MLM examples each mail gives
    out.push_back({"kolo.seq_len", seq_len_of(config)});
    out.push_back({"kolo.pretrain.max_windows", max_windows_of(config)});
  }
  return out;
}

}  // namespace

// --resume: each of data_order() the checkpoint's, or a refusal naming the setting, both
// values and the index (on every rank alike, before training).
void check_resume_settings(const std::string& folder, const nlohmann::json& index,
                           const kt::TrainConfig& config, const std::string& phase) {
  const std::string index_path = folder + "/index.json";
  // What the index's config gives, read like the user's own config: its errors name the index
  // (the config itself was checked with the index, as every kolo_ckpt command checks it; its
  // kolo.* keys are train_bert's and read here).
  const kt::TrainConfig saved_config = kt::checkpoint_config(index, index_path);
  kt::BertConfig saved_model;
  std::vector<std::pair<std::string, nlohmann::json>> saved;
  try {
    saved_model = model_config(saved_config);
    saved = data_order(saved_config, phase);
  } catch (const kolo::Error& e) {
    KOLO_THROW(kolo::ErrorCode::kInvalidArgument, index_path, ": config: ", e.message());
  }
  kt::check_same_bert(saved_model, model_config(config), "--resume", index_path);
  const auto now = data_order(config, phase);
  for (size_t i = 0; i < now.size(); ++i)
    KOLO_CHECK_ARG(now[i].second == saved[i].second, "--resume: ", now[i].first, " ",
                   now[i].second.dump(), " differs from the checkpoint's ", saved[i].second.dump(),
                   " (", index_path, ", step ", index.at("step").get<int64_t>(), " of ", phase,
                   "): the resumed run would skip or repeat samples; resume with ", now[i].first,
                   "=", saved[i].second.dump(), " or start a new run");
}

}  // namespace train_bert
