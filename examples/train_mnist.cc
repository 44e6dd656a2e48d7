// train_mnist: trains the MLP on the MNIST digits of data/mnist (fp16 mixed precision by
// default) and reports test accuracy on the held-out split.
//   build/examples/train_mnist [--config examples/configs/mnist.json] [--set key=value ...]
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "comm/base/error.h"
#include "trainer/config/train_config.h"
#include "trainer/data/augment.h"
#include "trainer/data/data_files.h"
#include "trainer/data/mnist.h"
#include "trainer/data/sampler.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/metrics/classification.h"
#include "trainer/metrics/progress.h"
#include "trainer/model/mlp.h"
#include "trainer/train/step_loop.h"

namespace kt = kolo::trainer;

namespace {

struct Args {
  std::string config = "examples/configs/mnist.json";
  std::vector<std::string> overrides;
  std::string data_dir;
  std::string save;
  int threads = 0;
};

double evaluate(kt::Mlp& model, const kt::MnistSplit& split, size_t batch) {
  model.set_training(false);
  kt::EpochSampler sampler(split.count, {batch, false, false, 0, 0, 1});
  int64_t correct = 0;
  for (size_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    model.forward(kt::make_feature_batch(split, sampler.batch_indices(b)));
    correct += model.correct();
  }
  model.set_training(true);
  return static_cast<double>(correct) / static_cast<double>(split.count);
}

int run(const Args& args) {
  kt::TrainConfig config = kt::load_train_config(args.config, args.overrides);
  kt::print_config_warnings(config.kolo.warn_unknown({"model", "epochs", "seed", "max_shift"}));
  if (args.threads > 0) kt::set_num_threads(args.threads);
  const std::filesystem::path data_dir =
      args.data_dir.empty() ? kt::default_data_dir() : std::filesystem::path(args.data_dir);
  const kt::MnistData data = kt::load_mnist(data_dir);
  const int64_t epochs = config.kolo.get_int("epochs", 20, kt::Range::at_least(1));
  const uint64_t seed =
      static_cast<uint64_t>(config.kolo.get_int("seed", 1, kt::Range::at_least(0)));
  const auto mlp = kt::parse_mlp_config(config.kolo.get_string("model", "784-512-256-10"));
  const int max_shift =
      static_cast<int>(config.kolo.get_int("max_shift", 2, kt::Range::closed(0, 27)));
  const int micro = static_cast<int>(config.batch.micro_batch_size);
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);

  kt::Mlp model(kt::cpu_backend(), mlp, config.storage_dtype(), micro, seed);
  kt::EpochSampler sampler(data.train.count, {static_cast<size_t>(micro), true, true, seed, 0, 1});
  const int64_t steps_per_epoch = static_cast<int64_t>(sampler.batches_per_epoch()) / accumulation;
  const int64_t total = steps_per_epoch * epochs;
  kt::TrainStep step(model, config, total);
  std::printf("train_mnist: MLP %s, %zu parameters, %s, %zu train / %zu test images, %lld steps\n",
              config.kolo.get_string("model", "784-512-256-10").c_str(), model.num_params(),
              kolo::dtype_name(model.dtype()), data.train.count, data.test.count,
              static_cast<long long>(total));

  kt::ProgressPrinter progress(kt::ProgressOptions{stdout, -1, "samples/s", 30});
  kt::StepLoop loop(step, total, config.steps_per_print, progress);
  kt::Rng rng(seed ^ 0x6d6e697374ULL);  // augmentation shifts
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    sampler.set_epoch(static_cast<uint64_t>(epoch));
    loop.run_epoch(epoch, steps_per_epoch, accumulation, [&](size_t index, float loss_scale) {
      auto batch = kt::make_feature_batch(data.train, sampler.batch_indices(index));
      kt::random_shift_images(batch, max_shift, rng);
      const float loss = model.forward(batch);
      model.backward(loss_scale);
      return kt::MicroResult{loss, static_cast<double>(batch.batch)};
    });
    progress.message("epoch " + std::to_string(epoch + 1) + ": test accuracy " +
                     std::to_string(evaluate(model, data.test, 500)));
  }
  const double accuracy = evaluate(model, data.test, 500);
  std::printf(
      "train_mnist: test accuracy %.4f (%zu images), %lld steps applied, %lld skipped "
      "(fp16 overflow)\n",
      accuracy, data.test.count, static_cast<long long>(step.applied_steps()),
      static_cast<long long>(step.skipped_steps()));
  if (!args.save.empty()) {
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
  app.add_option("--threads", args.threads, "OpenBLAS threads (default: OpenBLAS's choice)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(args);
  } catch (const kolo::Error& e) {
    std::fprintf(stderr, "train_mnist: %s\n", e.what());
    return 1;
  }
}
