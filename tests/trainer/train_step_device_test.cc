// Training with the model's buffers on a "device" (the CPU kernels behind a backend that calls
// itself one, device_like_cpu.h): TrainStep's phases on host copies of the gradients and
// parameters, and DataParallel's ZeRO stages through the engine's device path (a host stand-in
// for the device, tests/common/host_device.h). Both must give the host model's bits exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/host_device.h"
#include "tests/trainer/device_like_cpu.h"
#include "tests/unit/thread_ranks.h"
#include "trainer/config/train_config.h"
#include "trainer/data/rng.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/model/bert.h"
#include "trainer/train/train_step.h"

namespace kolo::trainer {
namespace {

using kolo::testing::borrowed;
using kolo::testing::Calls;
using kolo::testing::HostDevice;

constexpr int kBatch = 2, kSeq = 8, kSteps = 3;

BertConfig tiny() {
  BertConfig c = bert_preset("tiny");
  c.vocab_size = 300;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  return c;
}

// Random ids with about 15% of the positions labelled for the MLM loss; `rank` varies them.
TokenBatch batch_for(int step, int rank) {
  Rng rng(static_cast<uint64_t>(1000 + 17 * step + rank));
  TokenBatch b;
  b.batch = kBatch;
  b.seq = kSeq;
  const size_t n = size_t{kBatch} * kSeq;
  b.input_ids.resize(n);
  b.token_type_ids.assign(n, 0);
  b.attention_mask.assign(n, 1);
  b.mlm_labels.assign(n, kIgnoreIndex);
  for (size_t i = 0; i < n; ++i) {
    b.input_ids[i] = static_cast<int32_t>(rng.below(300));
    if (i % 7 == 0 || rng.uniform() < 0.15) b.mlm_labels[i] = b.input_ids[i];
  }
  return b;
}

TrainConfig config_for(const char* dtype, int world, int stage, int accumulation = 1) {
  nlohmann::json json = {
      {"train_batch_size", kBatch * world * accumulation},
      {"train_micro_batch_size_per_gpu", kBatch},
      {"gradient_accumulation_steps", accumulation},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-3}, {"weight_decay", 0.01}}}}},
      {"gradient_clipping", 1.0},
      {"zero_optimization", {{"stage", stage}}}};
  if (std::string(dtype) == "float16")
    json["fp16"] = {{"enabled", true}, {"initial_scale_power", 8}};
  if (std::string(dtype) == "bfloat16") json["bf16"] = {{"enabled", true}};
  return parse_train_config(json, world, false);
}

// kSteps steps on `backend`; returns the parameters' bytes after them and each step's norm.
struct Trained {
  std::vector<char> params;
  std::vector<double> norms;
};

struct Recipe {
  const char* dtype;
  int stage = 0;
  int accumulation = 1;
};

Trained train(Backend& backend, const Recipe& run, std::shared_ptr<Communicator> comm,
              std::shared_ptr<engine::DeviceBackend> device = nullptr) {
  const TrainConfig config = config_for(run.dtype, comm->size(), run.stage, run.accumulation);
  Bert model(backend, tiny(), config.storage_dtype(), kBatch, kSeq, /*seed=*/3);
  DataParallel parallel(comm, model, config.zero, run.accumulation, std::move(device));
  TrainStep step(model, config, kSteps, &parallel);
  Trained out;
  for (int s = 0; s < kSteps; ++s) {
    for (int m = 0; m < run.accumulation; ++m) {
      step.begin_micro(m + 1 == run.accumulation);
      model.set_dropout_seed(static_cast<uint64_t>(s * run.accumulation + m));
      model.forward(batch_for(s * run.accumulation + m, comm->rank()));
      model.backward(step.loss_scale());
    }
    const StepResult r = step.finish(run.accumulation);
    EXPECT_TRUE(r.applied) << run.dtype << " step " << s;
    out.norms.push_back(r.grad_norm);
  }
  parallel.gather_all_params();  // stage 3 keeps only this rank's range otherwise
  out.params.resize(model.param_bytes());
  backend.copy_to_host(out.params.data(), model.params(), out.params.size());
  parallel.release_params();
  return out;
}

TEST(TrainStepDevice, OneRankMatchesTheHostModelBitForBit) {
  cpu_backend();  // the kernels' one-time setup
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    kolo::testing::run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
      DeviceLikeCpu device;
      const Trained host = train(cpu_backend(), {dtype}, borrowed(c));
      const Trained dev = train(device, {dtype}, borrowed(c));
      EXPECT_EQ(dev.norms, host.norms) << dtype;
      EXPECT_EQ(dev.params, host.params) << dtype;
      EXPECT_GE(device.copies, 2 * kSteps) << dtype;  // gradients down, parameters up
      return 0;
    });
  }
}

// Stage 0 over two ranks: the gradients are averaged through the engine as device tensors
// (the stand-in device reduces them with the Communicator), with the host run's bits.
TEST(TrainStepDevice, TwoRanksAverageThroughTheEngineDevicePath) {
  cpu_backend();
  for (const char* dtype : {"float32", "float16"}) {
    std::vector<Trained> host = kolo::testing::run_thread_ranks(
        2, TransportKind::kShm,
        [&](Communicator& c) { return train(cpu_backend(), {dtype}, borrowed(c)); });
    std::vector<std::shared_ptr<Calls>> calls{std::make_shared<Calls>(), std::make_shared<Calls>()};
    std::vector<Trained> dev =
        kolo::testing::run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
          DeviceLikeCpu device;
          auto backend = std::make_shared<HostDevice>(calls[static_cast<size_t>(c.rank())]);
          return train(device, {dtype}, borrowed(c), backend);
        });
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(dev[r].norms, host[r].norms) << dtype << " rank " << r;
      EXPECT_EQ(dev[r].params, host[r].params) << dtype << " rank " << r;
      EXPECT_EQ(calls[r]->opened, std::vector<int>{0}) << dtype;
      EXPECT_GE(calls[r]->count("wait device 0 stream 7"), 1u) << dtype;
      EXPECT_GE(calls[r]->count("synchronize"), size_t{kSteps}) << dtype;
    }
  }
}

// ZeRO stages 1 to 3 over two ranks, with gradient accumulation at stages 2 and 3: the
// reduce-scatter, the parameter allgathers and the per-tensor averages go through the engine's
// device path; the accumulation block lives in the model's memory. The host run's bits.
TEST(TrainStepDevice, ZeroStagesThroughTheEngineDevicePath) {
  cpu_backend();
  for (const Recipe run : {Recipe{"float16", 1}, Recipe{"float32", 1}, Recipe{"float16", 2, 2},
                           Recipe{"bfloat16", 2}, Recipe{"float16", 3, 2}, Recipe{"float32", 3}}) {
    const std::string what = std::string(run.dtype) + " stage " + std::to_string(run.stage) + " x" +
                             std::to_string(run.accumulation);
    std::vector<Trained> host = kolo::testing::run_thread_ranks(
        2, TransportKind::kShm,
        [&](Communicator& c) { return train(cpu_backend(), run, borrowed(c)); });
    std::vector<std::shared_ptr<Calls>> calls{std::make_shared<Calls>(), std::make_shared<Calls>()};
    std::vector<Trained> dev =
        kolo::testing::run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
          DeviceLikeCpu device;
          auto backend = std::make_shared<HostDevice>(calls[static_cast<size_t>(c.rank())]);
          return train(device, run, borrowed(c), backend);
        });
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(dev[r].norms, host[r].norms) << what << " rank " << r;
      EXPECT_EQ(dev[r].params, host[r].params) << what << " rank " << r;
      // Stage 1: one reduce-scatter and one parameter allgather per step; stage 3 gathers
      // parameter groups, stage 2 the parameters after each step.
      if (run.stage == 1) {
        EXPECT_EQ(calls[r]->count("reduce_scatter"), size_t{kSteps}) << what;
        EXPECT_EQ(calls[r]->count("allgatherv"), size_t{kSteps}) << what;
      } else {
        EXPECT_GE(calls[r]->count("allreduce"), size_t{kSteps}) << what;
        EXPECT_GE(calls[r]->count("allgatherv"), size_t{kSteps}) << what;
      }
    }
  }
}

TEST(TrainStepDevice, AModelOnADeviceNeedsTheEnginesDeviceBackend) {
  cpu_backend();
  kolo::testing::run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    DeviceLikeCpu device;
    const TrainConfig stage0 = config_for("float16", 2, 0);
    Bert model(device, tiny(), stage0.storage_dtype(), kBatch, kSeq, 3);
    try {
      DataParallel parallel(borrowed(c), model, stage0.zero, 1);
      ADD_FAILURE() << "a device model over two ranks was accepted without a device backend";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("device backend"), std::string::npos) << e.what();
    }
    return 0;
  });
}

}  // namespace
}  // namespace kolo::trainer
