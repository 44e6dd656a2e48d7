// train_bert's settings: a phase's config (the base config with kolo.<phase>.set and the
// command line's --set applied), the model config, the kolo.* keys it reads, and the check that
// a --resume keeps the checkpoint's model and sample order.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/train_config.h"
#include "trainer/model/bert_config.h"

namespace train_bert {

namespace kt = kolo::trainer;

// A phase's settings: the base config with kolo.<phase>.set applied, then the command line's.
kt::TrainConfig phase_config(const kt::TrainConfig& base, const std::string& phase,
                             const std::vector<std::string>& overrides, bool print);

// A phase's kolo.<phase> settings (and kolo.seed), read from the phase's config before the
// rendezvous: a bad one found when its phase starts stopped the run after the earlier phase had
// trained, or after the phase's first epoch (evaluate).
struct PhaseSettings {
  int64_t epochs = 1;
  int64_t max_steps = 0;  // 0: no limit
  bool evaluate = true;   // after every epoch
  int64_t max_windows = 2;
  int64_t seed = 1;
};
PhaseSettings phase_settings(const kt::TrainConfig& config, const std::string& phase);

// kolo.model: a preset name, or a Hugging Face style config object (docs/trainer.md).
kt::BertConfig model_config(const kt::TrainConfig& config);

// Warns (when `print`) of kolo.* keys train_bert does not read.
void check_kolo_keys(const kt::TrainConfig& config, bool print);

// kolo.seq_len and kolo.pretrain.max_windows (the MLM windows each mail gives).
int64_t seq_len_of(const kt::TrainConfig& config);
int64_t max_windows_of(const kt::TrainConfig& config);

// --resume from `folder` (its index.json parsed as `index`): the checkpoint's model config and
// the settings that fix the order of `phase`'s samples must be `config`'s, or a refusal names
// the setting, both values and the index (on every rank alike, before training).
void check_resume_settings(const std::string& folder, const nlohmann::json& index,
                           const kt::TrainConfig& config, const std::string& phase);

}  // namespace train_bert
