// train_bert: MLM pretraining of BERT on the SpamAssassin mails, then spam/ham sequence
// classification fine-tuning, in one process; reports masked-LM accuracy, then test accuracy,
// precision, recall and F1.
//   build/examples/train_bert [--config examples/configs/bert_tiny.json] [--phase both|pretrain|
//                             finetune] [--set key=value ...] [--save DIR] [--load FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "comm/base/error.h"
#include "trainer/config/train_config.h"
#include "trainer/data/data_files.h"
#include "trainer/data/rng.h"
#include "trainer/data/spam.h"
#include "trainer/data/token_batches.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/metrics/classification.h"
#include "trainer/metrics/progress.h"
#include "trainer/model/bert.h"
#include "trainer/train/step_loop.h"

namespace kt = kolo::trainer;

namespace {

struct Args {
  std::string config = "examples/configs/bert_tiny.json";
  std::string phase = "both";
  std::vector<std::string> overrides;
  std::string data_dir, save_dir, load;
  int threads = 0;
};

// A phase's settings: the base config with kolo.<phase>.set applied, then the command line's.
kt::TrainConfig phase_config(const kt::TrainConfig& base, const std::string& phase,
                             const std::vector<std::string>& overrides) {
  nlohmann::json json = base.raw;
  const kt::JsonSection set = base.kolo.section(phase).section("set");
  for (const auto& [key, value] : set.json().items())
    kt::apply_override(json, key + "=" + value.dump());
  for (const std::string& o : overrides) kt::apply_override(json, o);
  kt::TrainConfig config = kt::parse_train_config(json, 1, false);
  // One model serves both phases: its storage dtype and sequence length are the base config's.
  KOLO_CHECK_EQ(std::string(kolo::dtype_name(config.storage_dtype())),
                std::string(kolo::dtype_name(base.storage_dtype())),
                kolo::ErrorCode::kInvalidArgument, "kolo.", phase,
                ".set: the precision (fp16/bf16) must be the same in every phase");
  KOLO_CHECK_EQ(config.kolo.json().value("seq_len", nlohmann::json(128)),
                base.kolo.json().value("seq_len", nlohmann::json(128)),
                kolo::ErrorCode::kInvalidArgument, "kolo.", phase,
                ".set: kolo.seq_len must be the same in every phase");
  return config;
}

// kolo.model: a preset name, or a Hugging Face style config object (docs/trainer.md).
kt::BertConfig model_config(const kt::TrainConfig& config) {
  const nlohmann::json& json = config.kolo.json();
  if (json.contains("model") && json["model"].is_object())
    return kt::parse_bert_config(json["model"]);
  return kt::parse_bert_config(std::string_view(config.kolo.get_string("model", "tiny")));
}

void check_kolo_keys(const kt::TrainConfig& config) {
  std::vector<std::string> warnings =
      config.kolo.warn_unknown({"model", "seq_len", "seed", "pretrain", "finetune"});
  for (const char* phase : {"pretrain", "finetune"}) {
    const auto more =
        config.kolo.section(phase).warn_unknown({"epochs", "max_steps", "max_windows", "set"});
    warnings.insert(warnings.end(), more.begin(), more.end());
  }
  kt::print_config_warnings(warnings);
}

void load_weights(kt::Bert& model, const std::string& path) {
  const kt::LoadReport report = model.load(path, false);
  std::printf("train_bert: loaded %zu tensors from %s", report.loaded.size(), path.c_str());
  if (!report.missing.empty())
    std::printf(", %zu missing (kept from the initialisation, e.g. %s)", report.missing.size(),
                report.missing.front().c_str());
  if (!report.unexpected.empty())
    std::printf(", %zu unexpected (ignored, e.g. %s)", report.unexpected.size(),
                report.unexpected.front().c_str());
  std::printf("\n");
}

kt::TokenBatcherOptions batcher_options(const kt::TrainConfig& config, size_t batch, bool shuffle,
                                        uint64_t seed) {
  kt::TokenBatcherOptions o;
  o.sampler = {batch, shuffle, shuffle, seed, 0, 1};
  o.seq_len = static_cast<size_t>(config.kolo.get_int("seq_len", 128, kt::Range::closed(8, 512)));
  return o;
}

void report_mlm(kt::Bert& model, const kt::TokenBatcher& test, kt::ProgressPrinter& progress) {
  model.set_training(false);
  int64_t correct = 0, counted = 0;
  double loss = 0;
  for (size_t b = 0; b < test.batches_per_epoch(); ++b) {
    const kt::TokenBatch batch = test.batch(b);
    loss += model.forward(batch) * model.mlm_count();
    correct += model.mlm_correct();
    counted += model.mlm_count();
  }
  model.set_training(true);
  char line[160];
  std::snprintf(line, sizeof line,
                "pretrain: test masked-LM loss %.4f, accuracy %.4f (%lld tokens)",
                counted ? loss / counted : 0.0, counted ? double(correct) / counted : 0.0,
                static_cast<long long>(counted));
  progress.message(line);
}

void report_classification(kt::Bert& model, const kt::TokenBatcher& test,
                           kt::ProgressPrinter& progress) {
  model.set_training(false);
  kt::ConfusionMatrix matrix(2);
  for (size_t b = 0; b < test.batches_per_epoch(); ++b) {
    const kt::TokenBatch batch = test.batch(b);
    model.forward(batch);
    const std::vector<int32_t> predicted = model.predictions();
    matrix.add(batch.labels.data(), predicted.data(), predicted.size());
  }
  model.set_training(true);
  char line[200];
  std::snprintf(line, sizeof line,
                "finetune: test accuracy %.4f, precision %.4f, recall %.4f, F1 %.4f (%lld mails, "
                "spam = positive)",
                matrix.accuracy(), matrix.precision(), matrix.recall(), matrix.f1(),
                static_cast<long long>(matrix.total()));
  progress.message(line);
}

// Trains `model` for the phase's epochs on `train`; evaluate() runs after every epoch.
template <typename Evaluate>
void train_phase(kt::Bert& model, kt::TokenBatcher& train, const kt::TrainConfig& config,
                 const std::string& name, Evaluate evaluate) {
  const kt::JsonSection phase = config.kolo.section(name);
  const int64_t epochs = phase.get_int("epochs", 1, kt::Range::at_least(0));
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  const int64_t per_epoch = static_cast<int64_t>(train.batches_per_epoch()) / accumulation;
  // max_steps (0: no limit) cuts a phase short, for smoke tests and quick looks.
  const int64_t max_steps = phase.get_int("max_steps", 0, kt::Range::at_least(0));
  const int64_t total =
      max_steps > 0 ? std::min(per_epoch * epochs, max_steps) : per_epoch * epochs;
  const uint64_t seed =
      kt::mix_seed(static_cast<uint64_t>(config.kolo.get_int("seed", 1, kt::Range::at_least(0))),
                   std::hash<std::string>{}(name));
  kt::TrainStep step(model, config, total);
  kt::ProgressPrinter progress;
  std::printf("%s: %zu sequences, %lld steps of %lld sequences\n", name.c_str(), train.examples(),
              static_cast<long long>(total), static_cast<long long>(config.batch.train_batch_size));
  kt::StepLoop loop(step, total, config.steps_per_print, progress);
  for (int64_t epoch = 0; epoch < epochs && loop.done() < total; ++epoch) {
    train.set_epoch(static_cast<uint64_t>(epoch));
    loop.run_epoch(
        epoch, std::min(per_epoch, total - loop.done()), accumulation,
        [&](size_t index, float loss_scale) {
          // A fresh dropout seed per micro-batch (a recompute of the same batch would reuse it).
          model.set_dropout_seed(kt::mix_seed(seed, static_cast<uint64_t>(epoch), index));
          const kt::TokenBatch batch = train.batch(index);
          const float loss = model.forward(batch);
          model.backward(loss_scale);
          return kt::MicroResult{loss, static_cast<double>(batch.batch) * batch.seq};
        });
    progress.message(name + ": epoch " + std::to_string(epoch + 1) + " done");
    evaluate(progress);
  }
}

int run(const Args& args) {
  const auto started = std::chrono::steady_clock::now();
  const kt::TrainConfig base = kt::load_train_config(args.config, args.overrides);
  if (args.threads > 0) kt::set_num_threads(args.threads);
  const std::filesystem::path data_dir =
      args.data_dir.empty() ? kt::default_data_dir() : std::filesystem::path(args.data_dir);
  kt::WordPieceTokenizer tokenizer(kt::Vocab::load(data_dir));
  const kt::SpamCorpus corpus = kt::load_spam_corpus(data_dir, tokenizer);
  const kt::Vocab& vocab = tokenizer.vocab();
  const uint64_t seed = static_cast<uint64_t>(base.kolo.get_int("seed", 1, kt::Range::at_least(0)));

  check_kolo_keys(base);
  kt::BertConfig bert = model_config(base);
  bert.num_labels = 2;
  const kt::TrainConfig pre = phase_config(base, "pretrain", args.overrides);
  const kt::TrainConfig fine = phase_config(base, "finetune", args.overrides);
  const size_t seq = batcher_options(base, 1, false, 0).seq_len;
  kt::Bert model(kt::cpu_backend(), bert, base.storage_dtype(),
                 static_cast<int>(pre.batch.micro_batch_size), static_cast<int>(seq), seed);
  std::printf("train_bert: BERT L%d/H%d/A%d, %zu parameters, %s, %zu train / %zu test mails\n",
              bert.layers, bert.hidden, bert.heads, model.num_params(),
              kolo::dtype_name(model.dtype()), corpus.train.size(), corpus.test.size());
  if (!args.load.empty()) load_weights(model, args.load);
  if (!args.save_dir.empty()) std::filesystem::create_directories(args.save_dir);

  if (args.phase == "both" || args.phase == "pretrain") {
    const size_t windows = static_cast<size_t>(
        pre.kolo.section("pretrain").get_int("max_windows", 2, kt::Range::at_least(1)));
    kt::TokenBatcher train(kt::mlm_examples(corpus.train, vocab, seq, windows), vocab,
                           kt::TokenTask::kMlm,
                           batcher_options(pre, pre.batch.micro_batch_size, true, seed));
    kt::TokenBatcher test(kt::mlm_examples(corpus.test, vocab, seq, 1), vocab, kt::TokenTask::kMlm,
                          batcher_options(pre, 64, false, seed + 1));
    train_phase(model, train, pre, "pretrain",
                [&](kt::ProgressPrinter& p) { report_mlm(model, test, p); });
    if (!args.save_dir.empty()) model.save(args.save_dir + "/pretrained.safetensors");
  }
  if (args.phase == "both" || args.phase == "finetune") {
    kt::TokenBatcher train(kt::classification_examples(corpus.train, vocab, seq), vocab,
                           kt::TokenTask::kClassification,
                           batcher_options(fine, fine.batch.micro_batch_size, true, seed + 2));
    kt::TokenBatcher test(kt::classification_examples(corpus.test, vocab, seq), vocab,
                          kt::TokenTask::kClassification, batcher_options(fine, 64, false, 0));
    train_phase(model, train, fine, "finetune",
                [&](kt::ProgressPrinter& p) { report_classification(model, test, p); });
    if (!args.save_dir.empty()) model.save(args.save_dir + "/finetuned.safetensors");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("train_bert: done in %.1f s\n", seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Pretrain (MLM) and fine-tune (spam/ham) BERT with kolo's trainer (docs/trainer.md)"};
  Args args;
  app.add_option("--config", args.config, "DeepSpeed-style JSON config")->capture_default_str();
  app.add_option("--phase", args.phase, "both, pretrain or finetune")
      ->check(CLI::IsMember({"both", "pretrain", "finetune"}))
      ->capture_default_str();
  app.add_option("--set", args.overrides, "override a config key: --set optimizer.params.lr=1e-3");
  app.add_option("--data", args.data_dir, "data directory (default $KOLO_DATA_DIR or data/)");
  app.add_option("--save", args.save_dir, "write pretrained/finetuned weights (safetensors) here");
  app.add_option("--load", args.load, "start from these weights (safetensors, Hugging Face names)");
  app.add_option("--threads", args.threads, "OpenBLAS threads (default: OpenBLAS's choice)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(args);
  } catch (const kolo::Error& e) {
    std::fprintf(stderr, "train_bert: %s\n", e.what());
    return 1;
  }
}
