// parse_train_config: the DeepSpeed sections one function each, validated through JsonSection
// so every error names its JSON path and range; overrides and the batch-size rule.
#include "trainer/config/train_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>

#include "comm/base/error.h"
#include "trainer/io/file_bytes.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Batch keys: positive and at most 2^31 - 1 (the trainer counts micro-batches in int).
std::optional<int64_t> optional_int(const JsonSection& s, std::string_view key) {
  if (!s.has(key)) return std::nullopt;
  return s.get_int(key, 0, Range::closed(1, 2147483647.0));
}

// a * b, refused naming `what` when it does not fit an int64.
int64_t checked_product(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  KOLO_CHECK_ARG(!__builtin_mul_overflow(a, b, &out), what, ": ", a, " * ", b,
                 " overflows a 64-bit integer");
  return out;
}

Fp16Config parse_fp16(const JsonSection& s) {
  s.warn_unknown({"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                  "consecutive_hysteresis", "min_loss_scale"});
  Fp16Config c;
  c.enabled = s.get_bool("enabled", c.enabled);
  // The scaler keeps its scale in fp32: a larger one would become infinity there.
  constexpr double kMaxScale = std::numeric_limits<float>::max();
  c.loss_scale = s.get_float("loss_scale", c.loss_scale, Range::closed(0, kMaxScale));
  c.initial_scale_power =
      s.get_int("initial_scale_power", c.initial_scale_power, Range::closed(0, 64));
  c.loss_scale_window = s.get_int("loss_scale_window", c.loss_scale_window, Range::at_least(1));
  c.hysteresis = s.get_int("hysteresis", c.hysteresis, Range::at_least(1));
  c.consecutive_hysteresis = s.get_bool("consecutive_hysteresis", c.consecutive_hysteresis);
  const double initial = std::ldexp(1.0, static_cast<int>(c.initial_scale_power));
  c.min_loss_scale = s.get_float("min_loss_scale", c.min_loss_scale,
                                 {0, c.loss_scale > 0 ? kMaxScale : initial, false, true});
  return c;
}

ZeroConfig parse_zero(const JsonSection& root) {
  ZeroConfig c;
  // DeepSpeed's legacy form: "zero_optimization": true means stage 1.
  const nlohmann::json& raw = root.json().contains("zero_optimization")
                                  ? root.json()["zero_optimization"]
                                  : nlohmann::json();
  if (raw.is_boolean()) {
    c.stage = raw.get<bool>() ? 1 : 0;
    return c;
  }
  const JsonSection s = root.section("zero_optimization");
  s.warn_unknown({"stage", "reduce_bucket_size", "allgather_bucket_size", "overlap_comm",
                  "contiguous_gradients", "reduce_scatter", "stage3_prefetch_bucket_size",
                  "stage3_param_persistence_threshold"});
  c.stage = s.get_int("stage", c.stage, Range::closed(0, 3));
  c.reduce_bucket_size = s.get_int("reduce_bucket_size", c.reduce_bucket_size, Range::at_least(1));
  c.allgather_bucket_size =
      s.get_int("allgather_bucket_size", c.allgather_bucket_size, Range::at_least(1));
  c.overlap_comm = s.get_bool("overlap_comm", c.overlap_comm);
  c.contiguous_gradients = s.get_bool("contiguous_gradients", c.contiguous_gradients);
  c.reduce_scatter = s.get_bool("reduce_scatter", c.reduce_scatter);
  c.stage3_prefetch_bucket_size =
      s.get_int("stage3_prefetch_bucket_size", c.stage3_prefetch_bucket_size, Range::at_least(0));
  c.stage3_param_persistence_threshold =
      s.get_int("stage3_param_persistence_threshold", c.stage3_param_persistence_threshold,
                Range::at_least(0));
  return c;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

OptimizerConfig parse_optimizer(const JsonSection& s) {
  s.warn_unknown({"type", "params"});
  OptimizerConfig c;
  // DeepSpeed compares optimizer names case-insensitively.
  const std::string type = s.get_string("type", "AdamW");
  const std::string t = lower(type);
  KOLO_CHECK_ARG(t == "adamw" || t == "adam" || t == "sgd", s.key_path("type"), ": \"", type,
                 "\" is not accepted (one of AdamW, Adam, SGD)");
  c.type = t == "adamw" ? OptimizerType::kAdamW
                        : (t == "adam" ? OptimizerType::kAdam : OptimizerType::kSgd);
  const JsonSection p = s.section("params");
  c.lr = p.get_float("lr", c.lr, Range::above(0));
  c.weight_decay =
      p.get_float("weight_decay", c.type == OptimizerType::kAdamW ? 0.01 : 0.0, Range::at_least(0));
  if (c.type == OptimizerType::kSgd) {
    p.warn_unknown({"lr", "weight_decay", "momentum", "nesterov"});
    c.momentum = p.get_float("momentum", c.momentum, Range::half_open(0, 1));
    c.nesterov = p.get_bool("nesterov", c.nesterov);
    KOLO_CHECK_ARG(!c.nesterov || c.momentum > 0, p.key_path("nesterov"), ": true needs ",
                   p.key_path("momentum"), " > 0");
    return c;
  }
  if (c.type == OptimizerType::kAdam) {
    p.warn_unknown({"lr", "weight_decay", "betas", "eps", "adam_w_mode"});
    c.adam_w_mode = p.get_bool("adam_w_mode", c.adam_w_mode);
  } else {
    p.warn_unknown({"lr", "weight_decay", "betas", "eps"});
  }
  const std::vector<double> betas =
      p.get_floats("betas", {c.beta1, c.beta2}, 2, Range::half_open(0, 1));
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = p.get_float("eps", c.eps, Range::above(0));
  return c;
}

WarmupType parse_warmup_type(const JsonSection& p) {
  return p.get_string("warmup_type", "linear", {"linear", "log"}) == "log" ? WarmupType::kLog
                                                                           : WarmupType::kLinear;
}

SchedulerConfig parse_scheduler(const JsonSection& s) {
  SchedulerConfig c;
  if (s.json().empty()) return c;
  s.warn_unknown({"type", "params"});
  const std::string type =
      s.get_string("type", "", {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"});
  KOLO_CHECK_ARG(!type.empty(), s.key_path("type"),
                 ": missing (one of WarmupLR, WarmupDecayLR, WarmupCosineLR)");
  const JsonSection p = s.section("params");
  c.warmup_num_steps = p.get_int("warmup_num_steps", c.warmup_num_steps, Range::at_least(0));
  c.warmup_type = parse_warmup_type(p);
  if (type == "WarmupCosineLR") {
    c.type = SchedulerType::kWarmupCosineLR;
    p.warn_unknown({"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio",
                    "warmup_type"});
    c.warmup_min_ratio = p.get_double("warmup_min_ratio", c.warmup_min_ratio, Range::closed(0, 1));
    c.cos_min_ratio = p.get_double("cos_min_ratio", c.cos_min_ratio, Range::closed(0, 1));
  } else {
    const bool decay = type == "WarmupDecayLR";
    c.type = decay ? SchedulerType::kWarmupDecayLR : SchedulerType::kWarmupLR;
    std::vector<std::string> known = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                                      "warmup_type"};
    if (decay) known.push_back("total_num_steps");
    p.warn_unknown(known);
    c.warmup_min_lr = p.get_float("warmup_min_lr", c.warmup_min_lr, Range::at_least(0));
    c.warmup_max_lr = p.get_float("warmup_max_lr", c.warmup_max_lr, Range::at_least(0));
    if (!decay) return c;
  }
  // The log warm-up needs two steps at least (DeepSpeed raises it to 2 as well).
  const int64_t warmup = c.warmup_type == WarmupType::kLog
                             ? std::max<int64_t>(2, c.warmup_num_steps)
                             : c.warmup_num_steps;
  // Absent (or 0): the training program fills in its run length (trainer/train/train_step.h).
  if (p.get_int("total_num_steps", 0, Range::at_least(0)) == 0) return c;
  c.total_num_steps =
      p.get_int("total_num_steps", 0, {static_cast<double>(warmup), kInf, false, true});
  return c;
}

ActivationCheckpointingConfig parse_checkpointing(const JsonSection& root,
                                                  std::vector<std::string>& warnings) {
  ActivationCheckpointingConfig c;
  c.enabled = root.has("activation_checkpointing");
  const JsonSection s = root.section("activation_checkpointing");
  s.warn_unknown({"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                  "number_checkpoints", "synchronize_checkpoint_boundary", "profile"});
  c.partition_activations = s.get_bool("partition_activations", false);
  c.cpu_checkpointing = s.get_bool("cpu_checkpointing", false);
  c.contiguous_memory_optimization = s.get_bool("contiguous_memory_optimization", false);
  c.number_checkpoints = s.get_int("number_checkpoints", 0, Range::at_least(0));
  c.synchronize_checkpoint_boundary = s.get_bool("synchronize_checkpoint_boundary", false);
  c.profile = s.get_bool("profile", false);
  if (c.partition_activations)
    warnings.push_back(
        "activation_checkpointing.partition_activations: accepted and ignored: kolo's trainer "
        "has no model parallelism, so there is no group to partition the checkpoints across");
  if (c.cpu_checkpointing)
    warnings.push_back(
        "activation_checkpointing.cpu_checkpointing: accepted and ignored: the checkpoints are "
        "already in host memory (the CPU backend has no device memory to offload from)");
  return c;
}

}  // namespace

BatchSizes resolve_batch_sizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                               std::optional<int64_t> accumulation, int world_size) {
  KOLO_CHECK_ARG(world_size >= 1, "world size: ", world_size, " is out of range (>= 1)");
  const int64_t w = world_size;
  const char* product = "train_micro_batch_size_per_gpu * gradient_accumulation_steps * world size";
  BatchSizes b;
  if (train && micro && accumulation) {
    b = {*train, *micro, *accumulation};
  } else if (train && micro) {
    const int64_t per_step = checked_product(*micro, w, product);
    KOLO_CHECK_ARG(*train % per_step == 0, "train_batch_size: ", *train,
                   " is not a multiple of train_micro_batch_size_per_gpu (", *micro,
                   ") * world size (", w, ")");
    b = {*train, *micro, *train / per_step};
  } else if (train && accumulation) {
    const int64_t per_micro = checked_product(*accumulation, w, product);
    KOLO_CHECK_ARG(*train % per_micro == 0, "train_batch_size: ", *train,
                   " is not a multiple of gradient_accumulation_steps (", *accumulation,
                   ") * world size (", w, ")");
    b = {*train, *train / per_micro, *accumulation};
  } else if (micro) {
    const int64_t acc = accumulation.value_or(1);
    b = {checked_product(checked_product(*micro, acc, product), w, product), *micro, acc};
  } else if (train) {
    KOLO_CHECK_ARG(*train % w == 0, "train_batch_size: ", *train,
                   " is not a multiple of the world size (", w, ")");
    b = {*train, *train / w, 1};
  } else {
    KOLO_THROW(ErrorCode::kInvalidArgument,
               "train_batch_size or train_micro_batch_size_per_gpu: one of them is required");
  }
  const int64_t expected = checked_product(
      checked_product(b.micro_batch_size, b.gradient_accumulation_steps, product), w, product);
  KOLO_CHECK_ARG(b.train_batch_size == expected, "train_batch_size: ", b.train_batch_size,
                 " is not train_micro_batch_size_per_gpu (", b.micro_batch_size,
                 ") * gradient_accumulation_steps (", b.gradient_accumulation_steps,
                 ") * world size (", w, ") = ", expected);
  return b;
}

TrainConfig parse_train_config(const nlohmann::json& config, int world_size, bool print_warnings) {
  TrainConfig c;
  c.world_size = world_size;
  c.raw = config;
  const JsonSection root(config, "", &c.warnings);
  root.warn_unknown({"train_batch_size", "train_micro_batch_size_per_gpu",
                     "gradient_accumulation_steps", "fp16", "bf16", "bfloat16", "zero_optimization",
                     "optimizer", "scheduler", "gradient_clipping", "activation_checkpointing",
                     "steps_per_print", "prescale_gradients", "gradient_predivide_factor", "kolo"});
  c.batch = resolve_batch_sizes(optional_int(root, "train_batch_size"),
                                optional_int(root, "train_micro_batch_size_per_gpu"),
                                optional_int(root, "gradient_accumulation_steps"), world_size);
  c.fp16 = parse_fp16(root.section("fp16"));
  // DeepSpeed accepts "bfloat16" as another name of the bf16 section; with both, bf16 counts.
  if (root.has("bf16") && root.has("bfloat16"))
    c.warnings.push_back("both 'bf16' and 'bfloat16' are given: 'bfloat16' is ignored");
  const JsonSection bf16 = root.section(root.has("bf16") ? "bf16" : "bfloat16");
  bf16.warn_unknown({"enabled"});
  c.bf16 = bf16.get_bool("enabled", false);
  KOLO_CHECK_ARG(!(c.fp16.enabled && c.bf16),
                 "fp16.enabled and bf16.enabled: both are true (enable at most one)");
  c.zero = parse_zero(root);
  c.optimizer = parse_optimizer(root.section("optimizer"));
  c.scheduler = parse_scheduler(root.section("scheduler"));
  c.gradient_clipping = root.get_double("gradient_clipping", 0.0, Range::at_least(0));
  c.prescale_gradients = root.get_bool("prescale_gradients", false);
  c.gradient_predivide_factor = root.get_float("gradient_predivide_factor", 1.0, Range::above(0));
  c.activation_checkpointing = parse_checkpointing(root, c.warnings);
  c.steps_per_print = root.get_int("steps_per_print", c.steps_per_print, Range::at_least(1));
  c.kolo = JsonSection(config.contains("kolo") ? config["kolo"] : nlohmann::json::object(), "kolo");
  if (print_warnings) print_config_warnings(c.warnings);
  return c;
}

DType TrainConfig::storage_dtype() const {
  if (fp16.enabled) return DType::kFloat16;
  return bf16 ? DType::kBFloat16 : DType::kFloat32;
}

LossScalerOptions TrainConfig::loss_scaler_options() const {
  if (!fp16.enabled) return no_loss_scaling();
  LossScalerOptions o;
  o.dynamic = fp16.loss_scale == 0;
  o.initial_scale = static_cast<float>(
      o.dynamic ? std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power)) : fp16.loss_scale);
  o.growth_interval = fp16.loss_scale_window;
  o.hysteresis = fp16.hysteresis;
  o.consecutive_hysteresis = fp16.consecutive_hysteresis;
  o.min_scale = static_cast<float>(fp16.min_loss_scale);
  return o;
}

ScheduleOptions TrainConfig::schedule_options() const {
  ScheduleOptions o;
  const SchedulerConfig& s = scheduler;
  o.warmup = s.warmup_type;
  o.total_steps = s.total_num_steps;
  switch (s.type) {
    case SchedulerType::kNone:
      o.start_lr = o.peak_lr = optimizer.lr;
      o.warmup_steps = 0;
      o.decay = DecayType::kConstant;
      return o;
    case SchedulerType::kWarmupLR:
    case SchedulerType::kWarmupDecayLR:
      // DeepSpeed's WarmupLR family sets the rate itself; optimizer.params.lr is not used.
      o.start_lr = s.warmup_min_lr;
      o.peak_lr = s.warmup_max_lr;
      o.end_lr = s.warmup_min_lr;
      o.warmup_steps = s.warmup_num_steps;
      o.decay = s.type == SchedulerType::kWarmupLR ? DecayType::kConstant : DecayType::kLinear;
      return o;
    case SchedulerType::kWarmupCosineLR:
      // Ratios of the optimizer's rate, as DeepSpeed's WarmupCosineLR.
      o.start_lr = optimizer.lr * s.warmup_min_ratio;
      o.peak_lr = optimizer.lr;
      o.end_lr = optimizer.lr * s.cos_min_ratio;
      o.warmup_steps = s.warmup_num_steps;
      o.decay = DecayType::kCosine;
      return o;
  }
  KOLO_ASSERT(false);
  return o;
}

AdamWOptions TrainConfig::adamw_options() const {
  AdamWOptions o;
  o.beta1 = static_cast<float>(optimizer.beta1);
  o.beta2 = static_cast<float>(optimizer.beta2);
  o.eps = static_cast<float>(optimizer.eps);
  o.weight_decay = static_cast<float>(optimizer.weight_decay);
  o.decoupled_weight_decay = optimizer.type == OptimizerType::kAdamW || optimizer.adam_w_mode;
  return o;
}

SgdOptions TrainConfig::sgd_options() const {
  return SgdOptions{static_cast<float>(optimizer.momentum),
                    static_cast<float>(optimizer.weight_decay), optimizer.nesterov};
}

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& config, const ParamLayout& layout) {
  if (config.optimizer.type == OptimizerType::kSgd)
    return std::make_unique<Sgd>(layout, config.sgd_options());
  return std::make_unique<AdamW>(layout, config.adamw_options());
}

nlohmann::json read_config_file(const std::string& path) {
  constexpr uintmax_t kMaxConfigBytes = 16 << 20;
  return parse_json(read_file_bytes(path, "config file", kMaxConfigBytes), "config file " + path);
}

void apply_override(nlohmann::json& config, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  KOLO_CHECK_ARG(eq != std::string_view::npos, "config override '", assignment,
                 "': expected key.path=value");
  // nlohmann-json stores any bytes in a string but cannot write them back unless they are
  // UTF-8 (type_error 316), and the config is written into every checkpoint's index.
  try {
    (void)nlohmann::json(std::string(assignment)).dump();
  } catch (const nlohmann::json::type_error&) {
    KOLO_THROW(ErrorCode::kInvalidArgument, "config override '", assignment, "': not valid UTF-8");
  }
  const std::string_view path = assignment.substr(0, eq);
  const std::string value(assignment.substr(eq + 1));
  if (config.is_null()) config = nlohmann::json::object();
  nlohmann::json* node = &config;
  std::string walked;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
    KOLO_CHECK_ARG(!key.empty(), "config override '", assignment, "': empty key in the path");
    KOLO_CHECK_ARG(node->is_object(), "config override '", assignment,
                   "': ", walked.empty() ? "the config" : walked, " is not an object");
    walked += (walked.empty() ? "" : ".") + key;
    node = &(*node)[key];
    if (dot == std::string_view::npos) break;
    if (node->is_null()) *node = nlohmann::json::object();
    start = dot + 1;
  }
  nlohmann::json parsed =
      parse_json_or_discarded(value, "config override '" + std::string(assignment) + "'");
  *node = parsed.is_discarded() ? nlohmann::json(value) : std::move(parsed);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              int world_size, bool print_warnings) {
  nlohmann::json config = path.empty() ? nlohmann::json::object() : read_config_file(path);
  // Named here: an override's path, or the sections' reads, would blame themselves.
  KOLO_CHECK_ARG(config.is_object(), "config file ", path, ": expected a JSON object, got ",
                 config.type_name());
  for (const std::string& o : overrides) apply_override(config, o);
  return parse_train_config(config, world_size, print_warnings);
}

}  // namespace kolo::trainer
