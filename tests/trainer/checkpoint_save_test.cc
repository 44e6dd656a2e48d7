// Checkpoint folders on disk (trainer/checkpoint/checkpoint.h) with a small MLP over thread
// ranks: saving a step that already exists replaces it without a moment in which the step
// folder is gone or incomplete, and leaves no hidden folder behind; what a save that died in
// that replacement leaves is loaded from and put back by the next save; and a damaged shard
// that only one rank reads is reported on every rank, naming the file (before: the other
// ranks only saw a lost peer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/unit/thread_ranks.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/train_config.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/model/mlp.h"
#include "trainer/train/train_step.h"

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;
using kolo::testing::borrowed;
using kolo::testing::run_thread_ranks;

const nlohmann::json kConfig = {{"train_batch_size", 4}, {"zero_optimization", {{"stage", 1}}}};

// A fresh folder under the temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("kolo_ckpt_save_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// One rank's model, data parallelism and optimizer step.
struct Trainer {
  TrainConfig config;
  Mlp model;
  DataParallel parallel;
  TrainStep step;
  explicit Trainer(Communicator& comm)
      : config(parse_train_config(kConfig, comm.size(), false)),
        model(cpu_backend(), MlpConfig{{8, 16, 4}}, DType::kFloat32, 2),
        parallel(borrowed(comm), model, config.zero),
        step(model, config, 10, &parallel) {}
  size_t held() const { return step.range().end - step.range().begin; }
  void fill_master(float value) { std::fill(step.master(), step.master() + held(), value); }
  // This rank's master weights inside the tensors (a checkpoint leaves the padding alone).
  std::vector<float> master_of_tensors() {
    std::vector<float> out;
    const Partition& own = step.range();
    for (const ParamInfo& p : model.layout().params())
      for (size_t i = std::max(p.offset, own.begin); i < std::min(p.offset + p.numel, own.end); ++i)
        out.push_back(step.master()[i - own.begin]);
    return out;
  }
};

// Saves step `global_step` with every master weight `value` (one rank).
void save_with(const fs::path& dir, float value, int64_t global_step) {
  run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    t.fill_master(value);
    save_checkpoint(dir.string(), t.model, t.step, t.parallel,
                    {"train", global_step, global_step, 0, global_step}, kConfig);
    return 0;
  });
}

// The master weights a folder (a step folder, or a checkpoint folder through `latest`) loads
// into one rank.
std::vector<float> loaded_master(const fs::path& path) {
  return run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    load_checkpoint(resolve_checkpoint(path.string()), t.model, t.step, t.parallel);
    return t.master_of_tensors();
  })[0];
}

bool all_equal(const std::vector<float>& values, float expected) {
  return !values.empty() &&
         std::all_of(values.begin(), values.end(), [&](float v) { return v == expected; });
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

std::string latest(const fs::path& dir) {
  std::ifstream in(dir / "latest");
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(CheckpointSave, SavingAStepAgainReplacesItAndLeavesNothingHidden) {
  TempDir dir;
  save_with(dir.path, 1.0f, 3);
  save_with(dir.path, 2.0f, 3);  // a run resumed from before step 3, into the same folder
  EXPECT_EQ(entries(dir.path), (std::set<std::string>{"latest", "step-000003"}));
  EXPECT_EQ(latest(dir.path), "step-000003");
  EXPECT_TRUE(all_equal(loaded_master(dir.path), 2.0f)) << "the second save of step 3";
}

// The index's data position in samples from a config that gives the micro batch and the
// accumulation instead of train_batch_size (it was 0).
TEST(CheckpointSave, TheIndexCountsSamplesFromEitherBatchSetting) {
  TempDir dir;
  const nlohmann::json micro = {{"train_micro_batch_size_per_gpu", 2},
                                {"gradient_accumulation_steps", 3}};
  run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    save_checkpoint(dir.path.string(), t.model, t.step, t.parallel, {"train", 5, 5, 0, 5}, micro);
    return 0;
  });
  std::ifstream in(dir.path / "step-000005" / "index.json");
  EXPECT_EQ(nlohmann::json::parse(in).at("global_sample"), 30);
}

// A save that replaced step 3 where the file system cannot exchange two folders in one rename
// renames the old one aside first; dying before the new one took its name leaves step-000003
// missing while `latest` names it. The aside folder loads, and the next save puts it back.
TEST(CheckpointSave, AStepSetAsideByASaveThatDiedLoadsAndIsPutBack) {
  TempDir dir;
  save_with(dir.path, 1.0f, 3);
  fs::rename(dir.path / "step-000003", dir.path / ".step-000003.replaced");
  fs::create_directories(dir.path / ".step-000003.partial");  // the new save, left unfinished
  std::ofstream(dir.path / ".step-000003.partial" / "index.json") << "{";
  EXPECT_EQ(resolve_checkpoint(dir.path.string()), (dir.path / ".step-000003.replaced").string());
  EXPECT_TRUE(all_equal(loaded_master(dir.path), 1.0f));

  save_with(dir.path, 3.0f, 4);
  EXPECT_EQ(entries(dir.path), (std::set<std::string>{"latest", "step-000003", "step-000004"}));
  EXPECT_EQ(latest(dir.path), "step-000004");
  EXPECT_TRUE(all_equal(loaded_master(dir.path / "step-000003"), 1.0f)) << "put back";
  EXPECT_TRUE(all_equal(loaded_master(dir.path), 3.0f));
}

// After the exchange the earlier step-000004 sits under a hidden name until `latest` names the
// new one; a save that died there leaves it beside a complete step-000004, and the next save
// removes it (and any unfinished folder) without touching the step folders.
TEST(CheckpointSave, LeftoversBesideACompleteStepAreRemovedByTheNextSave) {
  TempDir dir;
  save_with(dir.path, 1.0f, 4);
  fs::copy(dir.path / "step-000004", dir.path / ".step-000004.replaced");
  fs::copy(dir.path / "step-000004", dir.path / ".step-000004.partial");
  fs::create_directories(dir.path / ".step-000002.partial");
  EXPECT_EQ(resolve_checkpoint(dir.path.string()), (dir.path / "step-000004").string());

  save_with(dir.path, 2.0f, 5);
  EXPECT_EQ(entries(dir.path), (std::set<std::string>{"latest", "step-000004", "step-000005"}));
  EXPECT_TRUE(all_equal(loaded_master(dir.path / "step-000004"), 1.0f));
  EXPECT_TRUE(all_equal(loaded_master(dir.path), 2.0f));
}

// Each rank reads its own shard (ZeRO stage 1); rank 1's is truncated. Rank 1 fails on the file,
// and rank 0, whose files are fine, fails with rank 1's message instead of waiting for a lost peer.
TEST(CheckpointSave, ADamagedShardIsNamedOnEveryRank) {
  TempDir dir;
  run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    save_checkpoint(dir.path.string(), t.model, t.step, t.parallel, {"train", 1, 1, 0, 1}, kConfig);
    return 0;
  });
  const fs::path shard = dir.path / "step-000001" / "rank-00001-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 8);
  const auto messages = run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    try {
      load_checkpoint(resolve_checkpoint(dir.path.string()), t.model, t.step, t.parallel);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo) << e.what();
      return std::string(e.what());
    }
    return std::string();
  });
  const std::string named = shard.string() + " has ";
  EXPECT_NE(messages[0].find("failed on rank 1: checkpoint file " + named), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("failed: checkpoint file " + named), std::string::npos) << messages[1];
}

}  // namespace
}  // namespace kolo::trainer
