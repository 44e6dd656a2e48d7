// train_mnist: trains the MLP on the MNIST digits of data/mnist (fp16 mixed precision by
// default), data-parallel over as many processes as the launcher starts (one is fine), and
// reports test accuracy on the held-out split and a summary line. Only rank 0 prints progress.
//   [mpirun -np N | kolorun -np N] build/examples/train_mnist [--config examples/configs/
//       mnist.json] [--set key=value ...] [--save FILE] [--threads N]
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "comm/base/cli_parse.h"
#include "comm/base/error.h"
#include "trainer/checkpoint/save_folder.h"
#include "trainer/config/train_config.h"
#include "trainer/data/augment.h"
#include "trainer/data/data_files.h"
#include "trainer/data/mnist.h"
#include "trainer/data/sampler.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/dist/job.h"
#include "trainer/io/atomic_file.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/metrics/classification.h"
#include "trainer/metrics/progress.h"
#include "trainer/model/mlp.h"
#include "trainer/train/step_loop.h"
#include "trainer/train/summary.h"

namespace kt = kolo::trainer;
using kt::Job;

namespace {

struct Args {
  std::string config = "examples/configs/mnist.json";
  std::vector<std::string> overrides;
  std::string data_dir;
  std::string save;
  int threads = 0;
};

// Rank r evaluates the batches b with b % world == r; the counts are summed over the ranks.
double evaluate(const Job& job, kt::Mlp& model, const kt::MnistSplit& split, size_t batch) {
  model.set_training(false);
  kt::EpochSampler sampler(split.count, {batch, false, false, 0, 0, 1});
  double correct = 0;
  for (size_t b = static_cast<size_t>(job.rank()); b < sampler.batches_per_epoch();
       b += static_cast<size_t>(job.world())) {
    model.forward(kt::make_feature_batch(split, sampler.batch_indices(b)));
    correct += static_cast<double>(model.correct());
  }
  model.set_training(true);
  return job.sum({correct})[0] / static_cast<double>(split.count);
}

int run(Job job, const Args& args) {
  kt::TrainConfig config =
      kt::load_train_config(args.config, args.overrides, job.world(), job.lead());
  const auto warnings = config.kolo.warn_unknown({"model", "epochs", "seed", "max_shift"});
  if (job.lead()) kt::print_config_warnings(warnings);
  kt::DataParallel::check(config.zero);
  // Every setting is checked before the rendezvous: a bad one stops every rank the same way.
  const int64_t epochs = config.kolo.get_int("epochs", 20, kt::Range::at_least(1));
  const uint64_t seed =
      static_cast<uint64_t>(config.kolo.get_int("seed", 1, kt::Range::at_least(0)));
  const std::string model_text = config.kolo.get_string("model", "784-512-256-10");
  const auto mlp = kt::parse_mlp_config(model_text);
  const int max_shift =
      static_cast<int>(config.kolo.get_int("max_shift", 2, kt::Range::closed(0, 27)));
  const int micro = static_cast<int>(config.batch.micro_batch_size);
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  // Before training, which a --save that cannot be written would otherwise lose at the end:
  // its type and folder, and a file created and removed in that folder (a permission, a
  // read-only file system). Rank 0 writes it (other hosts may not have its folder), and every
  // rank stops on its verdict.
  std::exception_ptr save_refused;
  try {
    if (job.lead() && !args.save.empty()) {
      kt::check_output_file(args.save, "--save");
      const std::string folder = std::filesystem::path(args.save).parent_path().string();
      kt::check_writable_folder(folder.empty() ? "." : folder, "--save " + args.save);
    }
  } catch (const kolo::Error&) {
    save_refused = std::current_exception();
  }
  job.connect();  // after every setting is checked: a bad one stops every rank the same way
  if (job.sum({save_refused ? 1.0 : 0.0})[0] > 0) {
    if (save_refused) std::rethrow_exception(save_refused);
    KOLO_THROW(kolo::ErrorCode::kInvalidArgument, "--save ", args.save,
               " was refused by rank 0, which writes it (its error says why)");
  }
  job.require_same_settings({{"config", config.raw}});
  kt::set_num_threads(args.threads > 0 ? args.threads : job.default_threads());
  const std::filesystem::path data_dir =
      args.data_dir.empty() ? kt::default_data_dir() : std::filesystem::path(args.data_dir);
  const kt::MnistData data = kt::load_mnist(data_dir);
  // The data folder may differ per host; what it holds may not.
  double pixel_sum = 0;
  for (float p : data.train.images) pixel_sum += p;
  job.require_same_data({{"mnist.train_images", data.train.count},
                         {"mnist.test_images", data.test.count},
                         {"mnist.train_pixel_sum", pixel_sum}});
  // This rank's slice of every global batch; the global order depends on the seed only.
  kt::EpochSampler sampler(data.train.count,
                           {static_cast<size_t>(micro), true, true, seed, job.rank(), job.world()});
  const int64_t steps_per_epoch = static_cast<int64_t>(sampler.batches_per_epoch()) / accumulation;
  // Before the model, whose activations are sized by the micro-batch: a batch of 5e8 failed
  // allocating them, naming no setting.
  KOLO_CHECK_ARG(steps_per_epoch > 0, data.train.count, " training images do not fill one global ",
                 "batch of ", config.batch.train_batch_size, " (train_batch_size) over ",
                 job.world(), " ranks");
  const int64_t total = steps_per_epoch * epochs;
  kt::Mlp model(kt::cpu_backend(), mlp, config.storage_dtype(), micro, seed);
  kt::DataParallel parallel(job.comm, model, config.zero, accumulation);
  parallel.set_predivide(config.gradient_predivide());
  kt::TrainStep step(model, config, total, &parallel);
  const size_t state_bytes = step.model_state_bytes();
  const size_t formula = step.formula_bytes();
  if (job.lead())
    std::printf(
        "train_mnist: MLP %s, %zu parameters, %s, %zu train / %zu test images, %lld "
        "steps, %d rank(s)\n",
        model_text.c_str(), model.num_params(), kolo::dtype_name(model.dtype()), data.train.count,
        data.test.count, static_cast<long long>(total), job.world());
  std::printf("train_mnist: %s\n",
              kt::format_model_state(job.rank(), state_bytes, formula).c_str());
  std::fflush(stdout);

  if (job.lead()) std::printf("train_mnist: %s\n", parallel.describe().c_str());
  kt::ProgressPrinter progress(
      kt::ProgressOptions{job.lead() ? stdout : nullptr, -1, "samples/s", 30});
  kt::StepLoop loop(step, total, config.steps_per_print, progress);
  double samples = 0;
  double seconds = 0;  // training only: evaluation is left out of the throughput
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    sampler.set_epoch(static_cast<uint64_t>(epoch));
    const auto epoch_start = std::chrono::steady_clock::now();
    loop.run_epoch(epoch, steps_per_epoch, accumulation, [&](size_t index, float loss_scale) {
      const std::span<const size_t> images = sampler.batch_indices(index);
      auto batch = kt::make_feature_batch(data.train, images);
      // Each image's shift follows the image, whatever the world size or accumulation.
      kt::random_shift_images(batch, max_shift, seed ^ 0x6d6e697374ULL,
                              static_cast<uint64_t>(epoch), images);
      const float loss = model.forward(batch);
      model.backward(loss_scale);
      samples += static_cast<double>(batch.batch);
      return kt::MicroResult{loss, static_cast<double>(batch.batch)};
    });
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    // Stage 3: the whole model for evaluation (ranks evaluate different numbers of batches).
    parallel.gather_all_params();
    const double accuracy = evaluate(job, model, data.test, 500);
    parallel.release_params();
    progress.message("epoch " + std::to_string(epoch + 1) + ": test accuracy " +
                     std::to_string(accuracy));
  }
  parallel.gather_all_params();  // the final evaluation and the saved weights
  const double accuracy = evaluate(job, model, data.test, 500);
  const double all_samples = job.sum({samples})[0];
  // Every rank prints it: the counts are summed over the ranks, so the lines are the same.
  std::printf(
      "train_mnist: test accuracy %.4f (%zu images), %lld steps applied, %lld skipped "
      "(fp16 overflow)\n",
      accuracy, data.test.count, static_cast<long long>(step.applied_steps()),
      static_cast<long long>(step.skipped_steps()));
  // tokens_per_s counts images for this model.
  std::printf("%s\n", kt::format_summary({"train", job.world(), config.zero.stage, model.dtype(),
                                          loop.done(), seconds > 0 ? all_samples / seconds : 0,
                                          state_bytes, formula})
                          .c_str());
  if (!args.save.empty() && job.lead()) {
    model.save(args.save, {{"model", "mlp"}, {"test_accuracy", std::to_string(accuracy)}});
    std::printf("train_mnist: weights saved to %s\n", args.save.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train the MNIST MLP with kolo's trainer (docs/trainer.md)"};
  Args args;
  app.add_option("--config", args.config, "DeepSpeed-style JSON config")->capture_default_str();
  app.add_option("--set", args.overrides, "override a config key: --set optimizer.params.lr=1e-3");
  app.add_option("--data", args.data_dir, "data directory (default $KOLO_DATA_DIR or data/)");
  app.add_option("--save", args.save, "write the trained weights (safetensors) here");
  for (const char* option : {"--config", "--data", "--save"})
    app.get_option(option)->check(kolo::cli::non_empty_path());
  app.add_option("--threads", args.threads,
                 "kernel threads per rank (0, the default: the CPUs this host's ranks may use, "
                 "shared out among them, at most the rank's own, at least 1)")
      ->check(CLI::Range(0, 1024));
  KOLO_PARSE_FLAGS(app, argc, argv, "train_mnist");
  // Rank and size from the launcher (mpirun, kolorun, torchrun-style variables, Slurm); a
  // plain start is a job of one.
  return kt::run_program("train_mnist", [&] { return run(Job::from_launcher(), args); });
}
