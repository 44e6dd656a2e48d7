// Training with the model's buffers on a "device" (the CPU kernels behind a backend that calls
// itself one, device_like_cpu.h): TrainStep's phases on host copies of the gradients and
// parameters, and DataParallel's stage 0 through the engine's device path (a host stand-in for
// the device, tests/common/host_device.h). Both must give the host model's bits exactly.
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

TrainConfig config_for(const char* dtype, int world, int stage) {
  nlohmann::json json = {
      {"train_batch_size", kBatch * world},
      {"train_micro_batch_size_per_gpu", kBatch},
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

Trained train(Backend& backend, const char* dtype, std::shared_ptr<Communicator> comm,
              std::shared_ptr<engine::DeviceBackend> device = nullptr) {
  const TrainConfig config = config_for(dtype, comm->size(), 0);
  Bert model(backend, tiny(), config.storage_dtype(), kBatch, kSeq, /*seed=*/3);
  DataParallel parallel(comm, model, config.zero, 1, std::move(device));
  TrainStep step(model, config, kSteps, &parallel);
  Trained out;
  for (int s = 0; s < kSteps; ++s) {
    step.begin_micro(true);
    model.set_dropout_seed(static_cast<uint64_t>(s));
    model.forward(batch_for(s, comm->rank()));
    model.backward(step.loss_scale());
    const StepResult r = step.finish(1);
    EXPECT_TRUE(r.applied) << dtype << " step " << s;
    out.norms.push_back(r.grad_norm);
  }
  out.params.resize(model.param_bytes());
  backend.copy_to_host(out.params.data(), model.params(), out.params.size());
  return out;
}

TEST(TrainStepDevice, OneRankMatchesTheHostModelBitForBit) {
  cpu_backend();  // the kernels' one-time setup
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    kolo::testing::run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
      DeviceLikeCpu device;
      const Trained host = train(cpu_backend(), dtype, borrowed(c));
      const Trained dev = train(device, dtype, borrowed(c));
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
        [&](Communicator& c) { return train(cpu_backend(), dtype, borrowed(c)); });
    std::vector<std::shared_ptr<Calls>> calls{std::make_shared<Calls>(), std::make_shared<Calls>()};
    std::vector<Trained> dev =
        kolo::testing::run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
          DeviceLikeCpu device;
          auto backend = std::make_shared<HostDevice>(calls[static_cast<size_t>(c.rank())]);
          return train(device, dtype, borrowed(c), backend);
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

TEST(TrainStepDevice, WhatTheDevicePathCannotRunIsRefusedByName) {
  cpu_backend();
  kolo::testing::run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    DeviceLikeCpu device;
    const TrainConfig stage1 = config_for("float16", 2, 1);
    Bert model(device, tiny(), stage1.storage_dtype(), kBatch, kSeq, 3);
    try {
      DataParallel parallel(borrowed(c), model, stage1.zero, 1,
                            std::make_shared<HostDevice>(std::make_shared<Calls>()));
      ADD_FAILURE() << "stage 1 on a device over two ranks was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("zero_optimization.stage: 1"), std::string::npos)
          << e.what();
    }
    const TrainConfig stage0 = config_for("float16", 2, 0);
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
