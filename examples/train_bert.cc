// train_bert: MLM pretraining of BERT on the SpamAssassin mails, then spam/ham sequence
// classification fine-tuning, data-parallel over as many processes as the launcher starts
// (one is fine); reports masked-LM accuracy, then test accuracy, precision, recall and F1, and a
// summary line per phase. Only rank 0 prints progress.
//   [mpirun -np N | kolorun -np N] build/examples/train_bert [--config examples/configs/
//       bert_tiny.json] [--phase both|pretrain|finetune] [--set key=value ...] [--save DIR]
//       [--load FILE] [--threads N] [--device cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "comm/base/cli_parse.h"
#include "comm/base/error.h"
#include "examples/train_bert_settings.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/save_folder.h"
#include "trainer/config/train_config.h"
#include "trainer/data/data_files.h"
#include "trainer/data/rng.h"
#include "trainer/data/spam.h"
#include "trainer/data/token_batches.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/dist/job.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/metrics/classification.h"
#include "trainer/metrics/progress.h"
#include "trainer/model/bert.h"
#include "trainer/train/step_loop.h"
#include "trainer/train/summary.h"
#ifdef KOLO_TRAIN_CUDA
#include "fusion/cuda_device.h"
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace kt = kolo::trainer;
using kt::Job;
using train_bert::check_kolo_keys;
using train_bert::check_resume_settings;
using train_bert::model_config;
using train_bert::phase_config;
using train_bert::phase_settings;
using train_bert::PhaseSettings;
using train_bert::seq_len_of;

namespace {

struct Args {
  std::string config = "examples/configs/bert_tiny.json";
  std::string phase = "both";
  std::vector<std::string> overrides;
  std::string data_dir, save_dir, load, resume;
  int64_t save_every = 0, keep = 0;
  int threads = 0;
  std::string device = "cpu";
};

// Checkpoints of one phase: where to write them and how often, and the step folder it resumes
// from (empty: a fresh start). global_offset numbers the steps of the whole run.
struct Checkpointing {
  std::string dir, resume;
  int64_t every = 0, keep = 0, global_offset = 0;
};

void load_weights(kt::Bert& model, const std::string& path, bool print) {
  const kt::LoadReport report = model.load(path, false);
  if (!print) return;
  std::printf("train_bert: loaded %zu tensors from %s", report.loaded.size(), path.c_str());
  if (!report.missing.empty())
    std::printf(", %zu missing (kept from the initialisation, e.g. %s)", report.missing.size(),
                report.missing.front().c_str());
  if (!report.unexpected.empty())
    std::printf(", %zu unexpected (ignored, e.g. %s)", report.unexpected.size(),
                report.unexpected.front().c_str());
  std::printf("\n");
}

// Training batches are this rank's slice of each global batch (the global order depends on the
// seed only); evaluation batchers see every example (rank 0 of 1) and are split by batch index.
kt::TokenBatcherOptions batcher_options(const kt::TrainConfig& config, size_t batch, bool shuffle,
                                        uint64_t seed, const Job* job = nullptr) {
  kt::TokenBatcherOptions o;
  o.sampler = {batch, shuffle, shuffle, seed, job ? job->comm->rank() : 0, job ? job->world() : 1};
  o.seq_len = static_cast<size_t>(seq_len_of(config));
  return o;
}

// Every rank prints the metrics (they are reduced over the ranks, so the lines are the same);
// rank 0 through its progress printer, which owns the terminal's progress bar.
void print_metrics(const Job& job, kt::ProgressPrinter& progress, const char* line) {
  if (job.lead()) {
    progress.message(line);
    return;
  }
  std::printf("%s\n", line);
  std::fflush(stdout);
}

void report_mlm(const Job& job, kt::Bert& model, const kt::TokenBatcher& test,
                kt::ProgressPrinter& progress) {
  model.set_training(false);
  double correct = 0, counted = 0, loss = 0;
  for (size_t b = static_cast<size_t>(job.rank()); b < test.batches_per_epoch();
       b += static_cast<size_t>(job.world())) {
    const kt::TokenBatch batch = test.batch(b);
    loss += double(model.forward(batch)) * model.mlm_count();
    correct += double(model.mlm_correct());
    counted += double(model.mlm_count());
  }
  model.set_training(true);
  // Each rank evaluated the batches b with b % world == rank.
  const std::vector<double> total = job.sum({loss, correct, counted});
  loss = total[0];
  correct = total[1];
  counted = total[2];
  char line[160];
  std::snprintf(line, sizeof line,
                "pretrain: test masked-LM loss %.4f, accuracy %.4f (%lld tokens)",
                counted ? loss / counted : 0.0, counted ? correct / counted : 0.0,
                static_cast<long long>(counted));
  print_metrics(job, progress, line);
}

void report_classification(const Job& job, kt::Bert& model, const kt::TokenBatcher& test,
                           kt::ProgressPrinter& progress) {
  model.set_training(false);
  kt::ConfusionMatrix local(2);
  for (size_t b = static_cast<size_t>(job.rank()); b < test.batches_per_epoch();
       b += static_cast<size_t>(job.world())) {
    const kt::TokenBatch batch = test.batch(b);
    model.forward(batch);
    const std::vector<int32_t> predicted = model.predictions();
    local.add(batch.labels.data(), predicted.data(), predicted.size());
  }
  model.set_training(true);
  std::vector<int64_t> counts = local.counts();
  job.comm->allreduce(counts.data(), counts.data(), counts.size(), kolo::DType::kInt64,
                      kolo::ReduceOp::kSum);
  const kt::ConfusionMatrix matrix = kt::ConfusionMatrix::from_counts(2, counts);
  char line[200];
  std::snprintf(line, sizeof line,
                "finetune: test accuracy %.4f, precision %.4f, recall %.4f, F1 %.4f (%lld mails, "
                "spam = positive)",
                matrix.accuracy(), matrix.precision(), matrix.recall(), matrix.f1(),
                static_cast<long long>(matrix.total()));
  print_metrics(job, progress, line);
}

// --device: the trainer's kernels and, on a GPU, the engine's device backend that averages the
// gradients there (null on the CPU).
struct DeviceChoice {
  kt::Backend* backend;
  std::shared_ptr<kolo::engine::DeviceBackend> engine;
};

// Before the rendezvous: a build without CUDA refuses --device cuda on every rank alike.
void check_device(const std::string& device) {
#ifdef KOLO_TRAIN_CUDA
  (void)device;  // cpu and cuda are both built
#else
  KOLO_CHECK_ARG(device == "cpu", "--device ", device,
                 ": this build of kolo has no CUDA backend (it needs nvcc and NCCL at build time: "
                 "KOLO_WITH_CUDA, KOLO_WITH_NCCL)");
#endif
}

DeviceChoice choose_device(const std::string& device, const Job& job) {
  if (device == "cpu") return {&kt::cpu_backend(), nullptr};
#ifdef KOLO_TRAIN_CUDA
  return {&kt::cuda_backend_for(job.comm->local_rank()), kolo::engine::cuda_device_backend()};
#else
  (void)job;
  check_device(device);
  return {&kt::cpu_backend(), nullptr};
#endif
}

// Trains `model` for the phase's epochs on `train` (this rank's slice of every global batch);
// evaluate() runs after every epoch (unless kolo.<phase>.evaluate is false), the phase's end
// saved before the last one. Ends with the phase's summary line on every rank.
template <typename Evaluate>
int64_t train_phase(const Job& job, const DeviceChoice& device, kt::Bert& model,
                    kt::TokenBatcher& train, const kt::TrainConfig& config,
                    const PhaseSettings& settings, const std::string& name,
                    const Checkpointing& checkpoints, Evaluate evaluate) {
  const int64_t epochs = settings.epochs;
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  const int64_t per_epoch = static_cast<int64_t>(train.batches_per_epoch()) / accumulation;
  KOLO_CHECK_ARG(per_epoch > 0 || epochs == 0, name, ": ", train.examples(),
                 " sequences do not fill one global batch of ", config.batch.train_batch_size,
                 " (train_batch_size) over ", job.world(), " ranks");
  // max_steps (0: no limit) cuts a phase short, for smoke tests and quick looks.
  const int64_t max_steps = settings.max_steps;
  const int64_t total =
      max_steps > 0 ? std::min(per_epoch * epochs, max_steps) : per_epoch * epochs;
  const uint64_t seed =
      kt::mix_seed(static_cast<uint64_t>(settings.seed), std::hash<std::string>{}(name));
  model.set_checkpoint_interval(config.activation_checkpointing.interval(model.config().layers));
  kt::DataParallel parallel(job.comm, model, config.zero, accumulation, device.engine);
  parallel.set_predivide(config.gradient_predivide());
  kt::TrainStep step(model, config, total, &parallel);
  kt::ProgressPrinter progress(kt::ProgressOptions{job.lead() ? stdout : nullptr});
  if (job.lead()) std::printf("%s: %s\n", name.c_str(), parallel.describe().c_str());
  const size_t state_bytes = step.model_state_bytes();
  const size_t formula = step.formula_bytes();
  if (job.lead())
    std::printf(
        "%s: %zu sequences, %lld steps of %lld sequences (%d ranks x %lld x %lld "
        "accumulation)\n",
        name.c_str(), train.examples(), static_cast<long long>(total),
        static_cast<long long>(config.batch.train_batch_size), job.world(),
        static_cast<long long>(config.batch.micro_batch_size),
        static_cast<long long>(accumulation));
  std::printf("%s: %s\n", name.c_str(),
              kt::format_model_state(job.rank(), state_bytes, formula).c_str());
  std::fflush(stdout);
  kt::StepLoop loop(step, total, config.steps_per_print, progress);
  int64_t first_epoch = 0, first_step = 0, saved = -1;
  if (!checkpoints.resume.empty()) {
    const auto begin = std::chrono::steady_clock::now();
    const kt::TrainPosition at = kt::load_checkpoint(checkpoints.resume, model, step, parallel);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    loop.set_done(at.step);
    first_epoch = at.epoch;
    first_step = at.step_in_epoch;
    saved = at.step;
    // The data position counts steps of the epoch (the settings that fix the order were
    // checked in run()): a checkpoint inside an epoch this run's data do not reach was made
    // from other data.
    KOLO_CHECK_ARG(at.step_in_epoch == 0 || at.step_in_epoch < per_epoch, "--resume ",
                   checkpoints.resume, ": the checkpoint is at step ", at.step_in_epoch,
                   " of epoch ", at.epoch + 1, ", but an epoch of ", train.examples(),
                   " sequences has ", per_epoch, " steps of train_batch_size ",
                   config.batch.train_batch_size,
                   " here: the training data differ from the checkpoint's run");
    if (job.lead())
      std::printf("%s: resumed from %s at step %lld (epoch %lld, step %lld of it) in %.2f s\n",
                  name.c_str(), checkpoints.resume.c_str(), static_cast<long long>(at.step),
                  static_cast<long long>(at.epoch + 1), static_cast<long long>(at.step_in_epoch),
                  took);
    if (job.lead() && at.step >= total)
      std::printf(
          "%s: nothing to train: the checkpoint is already at step %lld, and the phase ends at "
          "step %lld (kolo.%s.max_steps %lld, kolo.%s.epochs %lld of %lld steps)\n",
          name.c_str(), static_cast<long long>(at.step), static_cast<long long>(total),
          name.c_str(), static_cast<long long>(max_steps), name.c_str(),
          static_cast<long long>(epochs), static_cast<long long>(per_epoch));
  }
  // A checkpoint of the state after `steps_in_epoch` steps of `epoch`.
  auto save = [&](int64_t epoch, int64_t steps_in_epoch) {
    if (checkpoints.dir.empty() || saved == loop.done()) return;
    if (steps_in_epoch == per_epoch) {  // the next step starts the next epoch
      ++epoch;
      steps_in_epoch = 0;
    }
    const auto begin = std::chrono::steady_clock::now();
    const std::string folder = kt::save_checkpoint(
        checkpoints.dir, model, step, parallel,
        {name, loop.done(), checkpoints.global_offset + loop.done(), epoch, steps_in_epoch},
        config.raw, checkpoints.keep);
    saved = loop.done();
    char line[512];
    std::snprintf(line, sizeof line, "%s: checkpoint %s (%.1f MiB in %.2f s)", name.c_str(),
                  folder.c_str(), static_cast<double>(kt::folder_bytes(folder)) / (1 << 20),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    progress.message(line);
  };
  if (checkpoints.every > 0)
    loop.set_after_step([&](int64_t epoch, int64_t steps_in_epoch) {
      if (loop.done() % checkpoints.every == 0) save(epoch, steps_in_epoch);
    });
  double tokens = 0;
  double seconds = 0;  // training only: evaluation is left out of the throughput
  int64_t last_epoch = first_epoch, last_steps = first_step;
  for (int64_t epoch = first_epoch; epoch < epochs && loop.done() < total; ++epoch) {
    train.set_epoch(static_cast<uint64_t>(epoch));
    const auto epoch_start = std::chrono::steady_clock::now();
    const int64_t first = epoch == first_epoch ? first_step : 0;
    const int64_t steps = std::min(per_epoch, first + total - loop.done());
    last_epoch = epoch;
    last_steps = steps;
    loop.run_epoch(
        epoch, steps, accumulation,
        [&](size_t index, float loss_scale) {
          // A fresh dropout seed per micro-batch of the job (a recompute of the same batch would
          // reuse it); ranks hold different micro-batches, so the rank is part of it.
          const uint64_t global =
              index * static_cast<uint64_t>(job.world()) + static_cast<uint64_t>(job.rank());
          model.set_dropout_seed(kt::mix_seed(seed, static_cast<uint64_t>(epoch), global));
          const kt::TokenBatch batch = train.batch(index);
          const float loss = model.forward(batch);
          model.backward(loss_scale);
          tokens += static_cast<double>(batch.batch) * batch.seq;
          return kt::MicroResult{loss, static_cast<double>(batch.batch) * batch.seq};
        },
        first);
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    progress.message(name + ": epoch " + std::to_string(epoch + 1) + " done");
    // The phase's end is saved before its last evaluation, which cannot then lose it.
    if (loop.done() >= total || epoch + 1 >= epochs) save(epoch, steps);
    if (!settings.evaluate) continue;  // a large model's quick look
    // Stage 3: the whole model for evaluation (ranks evaluate different numbers of batches).
    parallel.gather_all_params();
    evaluate(progress);
    parallel.release_params();
  }
  save(last_epoch, last_steps);  // the end of the phase (saved already unless it trained nothing)
  // The next phase and the saved weights start from the whole model.
  parallel.gather_all_params();
  const double all_tokens = job.sum({tokens})[0];
  if (job.lead())
    std::printf(
        "%s: activation arena %.1f MiB (activation checkpointing: %s)\n", name.c_str(),
        static_cast<double>(model.activation_bytes()) / (1 << 20),
        model.checkpoint_interval() == 0
            ? "off"
            : ("every " + std::to_string(model.checkpoint_interval()) + " layer(s)").c_str());
  std::printf("%s\n",
              kt::format_summary({name, job.world(), config.zero.stage, model.dtype(), loop.done(),
                                  seconds > 0 ? all_tokens / seconds : 0, state_bytes, formula})
                  .c_str());
  std::fflush(stdout);
  return loop.done();
}

int run(Job job, const Args& args) {
  const auto started = std::chrono::steady_clock::now();
  // Every setting is checked before the rendezvous: a bad one stops every rank the same way.
  const kt::TrainConfig base =
      kt::load_train_config(args.config, args.overrides, job.world(), job.lead());
  check_kolo_keys(base, job.lead());
  kt::BertConfig bert = model_config(base);
  bert.num_labels = 2;
  const kt::TrainConfig pre = phase_config(base, "pretrain", args.overrides, job.lead());
  const kt::TrainConfig fine = phase_config(base, "finetune", args.overrides, job.lead());
  const PhaseSettings pre_settings = phase_settings(pre, "pretrain");
  const PhaseSettings fine_settings = phase_settings(fine, "finetune");
  kt::DataParallel::check(pre.zero);
  kt::DataParallel::check(fine.zero);
  check_device(args.device);
  const size_t seq = batcher_options(base, 1, false, 0).seq_len;
  KOLO_CHECK_ARG(seq <= static_cast<size_t>(bert.max_position), "kolo.seq_len ", seq,
                 " is longer than the model's max_position_embeddings ", bert.max_position,
                 " (kolo.model)");
  std::error_code no_folder;
  KOLO_CHECK_ARG(args.save_dir.empty() || !std::filesystem::exists(args.save_dir, no_folder) ||
                     std::filesystem::is_directory(args.save_dir, no_folder),
                 "--save ", args.save_dir, " exists and is not a folder");
  // A fresh run, or one resumed from another folder, would replace an earlier run's checkpoints
  // one save at a time (--keep deleting them), moving `latest` back and leaving a folder that
  // mixes two runs; every rank refuses it alike. Only a resume from the save folder itself (or
  // a step folder in it) continues the run that is there.
  if (!args.save_dir.empty() && !kt::continues_save_folder(args.resume, args.save_dir))
    if (const std::string found = kt::checkpoint_entry(args.save_dir); !found.empty()) {
      if (args.resume.empty())
        KOLO_THROW(kolo::ErrorCode::kInvalidArgument, "--save ", args.save_dir,
                   " already holds checkpoints (", found, ") that a fresh run would replace; ",
                   "pass --resume ", args.save_dir,
                   " to continue that run, or choose another --save folder");
      KOLO_THROW(kolo::ErrorCode::kInvalidArgument, "--save ", args.save_dir,
                 " already holds checkpoints (", found,
                 ") that a run resumed from another folder (--resume ", args.resume,
                 ") would replace; choose another --save folder, or --resume's own save folder ",
                 "to continue that run there");
    }
  const uint64_t seed = static_cast<uint64_t>(base.kolo.get_int("seed", 1, kt::Range::at_least(0)));
  job.connect();
  // What shapes the run must be the same everywhere (not the data folder or thread count,
  // which may differ per host).
  job.require_same_settings({{"config", base.raw},
                             {"--phase", args.phase},
                             {"--load", args.load},
                             {"--resume", args.resume},
                             {"--save-every", args.save_every},
                             {"--keep", args.keep},
                             {"--device", args.device}});
  // Before training, which a --save that cannot be written would lose at the first checkpoint:
  // rank 0 creates the folder, and every rank must see it and be able to write into it.
  if (!args.save_dir.empty()) kt::check_save_folder(*job.comm, args.save_dir);

  kt::set_num_threads(args.threads > 0 ? args.threads : job.default_threads());
  const std::filesystem::path data_dir =
      args.data_dir.empty() ? kt::default_data_dir() : std::filesystem::path(args.data_dir);
  kt::WordPieceTokenizer tokenizer(kt::Vocab::load(data_dir));
  const kt::SpamCorpus corpus = kt::load_spam_corpus(data_dir, tokenizer);
  const kt::Vocab& vocab = tokenizer.vocab();
  KOLO_CHECK_ARG(vocab.size() <= bert.vocab_size, "vocabulary ",
                 kt::Vocab::path_in(data_dir).string(), " holds ", vocab.size(),
                 " tokens, more than the model's vocab_size ", bert.vocab_size,
                 " (kolo.model): its ids would index past the word embeddings");
  // The data folder may differ per host; what it holds may not.
  uint64_t train_tokens = 0, token_id_sum = 0;
  for (const kt::Mail& mail : corpus.train) {
    train_tokens += mail.tokens.size();
    for (int32_t id : mail.tokens) token_id_sum += static_cast<uint64_t>(id);
  }
  job.require_same_data({{"vocabulary_tokens", vocab.size()},
                         {"train_mails", corpus.train.size()},
                         {"test_mails", corpus.test.size()},
                         {"train_tokens", train_tokens},
                         {"train_token_id_sum", token_id_sum}});
  // Before the model (whose activations are sized by the micro-batch) is allocated.
  for (const kt::TrainConfig* phase : {&pre, &fine})
    KOLO_CHECK_ARG(static_cast<size_t>(phase->batch.train_batch_size) <= corpus.train.size(),
                   "train_batch_size=", phase->batch.train_batch_size, " is larger than the ",
                   corpus.train.size(), " training mails: one global batch (over ", job.world(),
                   " ranks) must fit the training set");
  // Before the model is allocated: a run whose model state cannot fit this host is refused.
  const size_t params = kt::Bert::make_layout(bert).num_params();
  for (const kt::TrainConfig* phase : {&pre, &fine})
    kt::check_memory_estimate(
        kt::zero_formula_bytes(params, phase->storage_dtype(), *phase, job.world()),
        job.comm->local_size(), params, *phase);
  const DeviceChoice device = choose_device(args.device, job);
  kt::Bert model(*device.backend, bert, base.storage_dtype(),
                 static_cast<int>(pre.batch.micro_batch_size), static_cast<int>(seq), seed);
  if (job.lead())
    std::printf(
        "train_bert: BERT L%d/H%d/A%d, %zu parameters, %s on %s, %zu train / %zu test mails, "
        "%d rank(s)\n",
        bert.layers, bert.hidden, bert.heads, model.num_params(), kolo::dtype_name(model.dtype()),
        device.backend->name(), corpus.train.size(), corpus.test.size(), job.world());
  if (!args.load.empty()) load_weights(model, args.load, job.lead());
  // Every rank holds the same weights (DataParallel broadcasts rank 0's): rank 0 saves them.
  const bool save = !args.save_dir.empty() && job.lead();

  // --resume: the phase it names continues; an earlier phase is not run again.
  Checkpointing checkpoints{args.save_dir, "", args.save_every, args.keep, 0};
  std::string resume_phase;
  int64_t resume_offset = 0;
  std::string resume_folder;
  if (!args.resume.empty()) {
    resume_folder = kt::resolve_checkpoint(args.resume);
    const nlohmann::json index = kt::read_checkpoint_index(resume_folder);
    resume_phase = index.at("phase").get<std::string>();
    KOLO_CHECK_ARG(resume_phase == "pretrain" || resume_phase == "finetune", "--resume ",
                   resume_folder, ": phase '", resume_phase,
                   "' is not one of train_bert's (pretrain, finetune)");
    resume_offset = index.at("global_step").get<int64_t>() - index.at("step").get<int64_t>();
    KOLO_CHECK_ARG(args.phase == "both" || args.phase == resume_phase, "--resume ", resume_folder,
                   " continues phase ", resume_phase, ", not --phase ", args.phase);
    check_resume_settings(resume_folder, index, resume_phase == "pretrain" ? pre : fine,
                          resume_phase);
  }
  int64_t pretrain_steps = 0;
  const bool run_pretrain =
      (args.phase == "both" || args.phase == "pretrain") && resume_phase != "finetune";
  if (run_pretrain) {
    const size_t windows = static_cast<size_t>(pre_settings.max_windows);
    kt::TokenBatcher train(kt::mlm_examples(corpus.train, vocab, seq, windows), vocab,
                           kt::TokenTask::kMlm,
                           batcher_options(pre, pre.batch.micro_batch_size, true, seed, &job));
    kt::TokenBatcher test(kt::mlm_examples(corpus.test, vocab, seq, 1), vocab, kt::TokenTask::kMlm,
                          batcher_options(pre, 64, false, seed + 1));
    Checkpointing phase = checkpoints;
    if (resume_phase == "pretrain") phase.resume = resume_folder;
    pretrain_steps = train_phase(job, device, model, train, pre, pre_settings, "pretrain", phase,
                                 [&](kt::ProgressPrinter& p) { report_mlm(job, model, test, p); });
    if (save) model.save(args.save_dir + "/pretrained.safetensors");
  }
  if (args.phase == "both" || args.phase == "finetune") {
    kt::TokenBatcher train(
        kt::classification_examples(corpus.train, vocab, seq), vocab,
        kt::TokenTask::kClassification,
        batcher_options(fine, fine.batch.micro_batch_size, true, seed + 2, &job));
    kt::TokenBatcher test(kt::classification_examples(corpus.test, vocab, seq), vocab,
                          kt::TokenTask::kClassification, batcher_options(fine, 64, false, 0));
    Checkpointing phase = checkpoints;
    phase.global_offset = run_pretrain ? pretrain_steps : resume_offset;
    if (resume_phase == "finetune") phase.resume = resume_folder;
    train_phase(job, device, model, train, fine, fine_settings, "finetune", phase,
                [&](kt::ProgressPrinter& p) { report_classification(job, model, test, p); });
    if (save) model.save(args.save_dir + "/finetuned.safetensors");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (job.lead()) std::printf("train_bert: done in %.1f s\n", seconds);
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
  app.add_option("--save", args.save_dir,
                 "write checkpoints here (DIR/step-NNNNNN/, DIR/latest) at the end of each phase "
                 "and every --save-every steps, and the pretrained/finetuned weights");
  app.add_option("--save-every", args.save_every,
                 "checkpoint every K optimizer steps (0: only "
                 "at the end of each phase)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--keep", args.keep, "keep the newest K step folders (0: all)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--resume", args.resume,
                 "continue from a checkpoint: DIR (its latest) or a step folder, at any world "
                 "size and ZeRO stage");
  app.add_option("--load", args.load, "start from these weights (safetensors, Hugging Face names)");
  app.add_option("--threads", args.threads,
                 "kernel threads per rank (0, the default: the CPUs this host's ranks may use, "
                 "shared out among them, at most the rank's own, at least 1)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--device", args.device,
                 "cpu, or cuda (one GPU per rank, device local_rank; builds with CUDA and NCCL): "
                 "the model, its gradients' reduction (NCCL, every ZeRO stage) and the "
                 "optimizer step on the GPU")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  // "" (an unset shell variable) is refused naming the flag.
  for (const char* option : {"--config", "--data", "--save", "--resume", "--load"})
    app.get_option(option)->check(kolo::cli::non_empty_path());
  KOLO_PARSE_FLAGS(app, argc, argv, "train_bert");
  // Rank and size from the launcher (mpirun, kolorun, torchrun-style variables, Slurm); a
  // plain start is a job of one.
  return kt::run_program("train_bert", [&] { return run(Job::from_launcher(), args); });
}
