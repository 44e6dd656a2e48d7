// The trainer's configuration: a DeepSpeed-style JSON file (the same key names, defaults and
// batch-size rule) parsed into typed settings, with command-line overrides and a free-form
// "kolo" section for the programs. Every key, default and range is in docs/trainer_config.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/base/dtype.h"
#include "trainer/config/json_section.h"
#include "trainer/layout/param_layout.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/schedule.h"
#include "trainer/optim/sgd.h"
#include "trainer/precision/loss_scaler.h"

namespace kolo::trainer {

struct Fp16Config {
  bool enabled = false;
  double loss_scale = 0;  // 0: dynamic; > 0: this static scale
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 2000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
};

struct ZeroConfig {
  int64_t stage = 0;                          // 0..3
  int64_t reduce_bucket_size = 500000000;     // elements
  int64_t allgather_bucket_size = 500000000;  // elements
  bool overlap_comm = false;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t stage3_prefetch_bucket_size = 50000000;       // elements; 0: no prefetch
  int64_t stage3_param_persistence_threshold = 100000;  // elements
};

enum class OptimizerType { kAdamW, kAdam, kSgd };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // default 0.01 for AdamW, 0 for Adam and SGD (torch's)
  double momentum = 0;         // SGD
  bool nesterov = false;       // SGD
  bool adam_w_mode = true;     // Adam: decoupled weight decay (DeepSpeed's default)
};

enum class SchedulerType { kNone, kWarmupLR, kWarmupDecayLR, kWarmupCosineLR };

struct SchedulerConfig {
  SchedulerType type = SchedulerType::kNone;  // none: constant optimizer.params.lr
  double warmup_min_lr = 0;                   // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 1e-3;                // WarmupLR, WarmupDecayLR
  int64_t warmup_num_steps = 1000;
  int64_t total_num_steps = 0;  // WarmupDecayLR, WarmupCosineLR (required there)
  WarmupType warmup_type = WarmupType::kLinear;
  double warmup_min_ratio = 0;    // WarmupCosineLR: start = ratio * optimizer lr
  double cos_min_ratio = 0.0001;  // WarmupCosineLR: end = ratio * optimizer lr
};

struct ActivationCheckpointingConfig {
  bool enabled = false;  // the section is present: models recompute their layers in backward
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  int64_t number_checkpoints = 0;  // 0: not set
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;

  // Encoder layers per recomputed segment for a model of `layers` layers: 0 when disabled;
  // else ceil(layers / number_checkpoints), with an unset number_checkpoints meaning one
  // checkpoint per layer (interval 1).
  int interval(int layers) const {
    if (!enabled) return 0;
    if (number_checkpoints <= 0 || number_checkpoints >= layers) return 1;
    return static_cast<int>((layers + number_checkpoints - 1) / number_checkpoints);
  }
};

struct BatchSizes {
  int64_t train_batch_size = 0;
  int64_t micro_batch_size = 0;  // train_micro_batch_size_per_gpu
  int64_t gradient_accumulation_steps = 0;
};

// DeepSpeed's rule train_batch_size = micro * accumulation * world_size: any two given
// determine the third; only train given: accumulation 1; only micro given: accumulation 1;
// all three: must agree. Throws kInvalidArgument naming the keys and values otherwise.
BatchSizes resolve_batch_sizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                               std::optional<int64_t> accumulation, int world_size);

struct TrainConfig {
  int world_size = 1;
  BatchSizes batch;
  Fp16Config fp16;
  bool bf16 = false;  // bf16.enabled
  ZeroConfig zero;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  double gradient_clipping = 0;  // max global norm; 0: off
  // DeepSpeed's gradient scaling around the data-parallel average: each rank's gradients are
  // divided by the predivide factor before the reduction and the average multiplied back
  // after; prescale_gradients divides by the world size instead (so the sum is the average).
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;  // > 0
  ActivationCheckpointingConfig activation_checkpointing;
  int64_t steps_per_print = 10;
  JsonSection kolo;                   // the "kolo" object: read with its typed getters
  nlohmann::json raw;                 // the whole config, overrides applied
  std::vector<std::string> warnings;  // unknown keys

  DType storage_dtype() const;                    // float16 / bfloat16 / float32
  LossScalerOptions loss_scaler_options() const;  // fp16 dynamic/static; else no scaling
  ScheduleOptions schedule_options() const;
  AdamWOptions adamw_options() const;
  SgdOptions sgd_options() const;
  // What the gradients are divided by before the reduction (DataParallel::set_predivide).
  double gradient_predivide() const {
    return prescale_gradients ? world_size : gradient_predivide_factor;
  }
};

// Parses and validates a config object. Unknown keys are collected in warnings (and printed to
// stderr when print_warnings); invalid values throw kolo::Error(kInvalidArgument) naming the
// JSON path and the accepted range, e.g. "fp16.hysteresis: 0 is out of range (>= 1)".
TrainConfig parse_train_config(const nlohmann::json& config, int world_size = 1,
                               bool print_warnings = true);

// Reads a JSON file (kIo when unreadable, kInvalidArgument with the parser's message when not
// JSON).
nlohmann::json read_config_file(const std::string& path);

// Applies "dotted.path=value" to config: the value is parsed as JSON when it is valid JSON
// (3e-4, true, [0.9,0.95], {"a":1}), else taken as a string; missing objects on the path are
// created. Throws kInvalidArgument when there is no '=', the text is not UTF-8, a path segment
// is empty, or the path runs through a value that is not an object.
void apply_override(nlohmann::json& config, std::string_view assignment);

// read_config_file + apply_override for each + parse_train_config. An empty path starts from
// an empty object (all defaults; a batch size must then come from an override).
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              int world_size = 1, bool print_warnings = true);

// The configured optimizer over a model's layout.
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& config, const ParamLayout& layout);

}  // namespace kolo::trainer
