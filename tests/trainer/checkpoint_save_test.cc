// Checkpoint folders on disk (trainer/checkpoint/checkpoint.h) with a small MLP over thread
// ranks: saving a step that already exists replaces it without a moment in which the step
// folder is gone or incomplete, and leaves no hidden folder behind; what a save that died in
// that replacement leaves is loaded from and put back by the next save; and a damaged shard
// that only one rank reads is reported on every rank, naming the file (before: the other
// ranks only saw a lost peer); a failed save names the rank and the file on every rank; a
// shard's master weights or optimizer states that are not finite, and a model file in another
// dtype than the index's, are refused naming the file and tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/thread_ranks.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/train_config.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/io/sha256.h"
#include "trainer/io/tensor_io.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/model/mlp.h"
#include "trainer/train/train_step.h"

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;
using kolo::testing::borrowed;
using kolo::testing::error_of;
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
  EXPECT_EQ(messages[1], messages[0]);
}

// A save that fails on one rank names, on every rank alike, that rank and the file it failed
// to write (before, each rank named its own shard: rank 0 "writing rank-00000... failed on rank
// 1" for rank 1's model.safetensors). The ranks are given different folders, as a launch with a
// per-host --save could: rank 1's has no partial step folder, so its shard cannot be written;
// then it has one where model.safetensors is a folder, so its shard is written and the model
// file is not.
TEST(CheckpointSave, ASaveFailureNamesTheRankAndTheFileOnEveryRank) {
  TempDir dir;
  const fs::path mine = dir.path / "rank0", theirs = dir.path / "rank1";
  fs::create_directories(theirs);
  auto save_apart = [&] {
    return run_thread_ranks(2, TransportKind::kShm, [&](Communicator& c) {
      Trainer t(c);
      try {
        save_checkpoint((c.rank() == 0 ? mine : theirs).string(), t.model, t.step, t.parallel,
                        {"train", 1, 1, 0, 1}, kConfig);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    });
  };
  const std::string step = (theirs / "step-000001").string();
  auto messages = save_apart();
  EXPECT_NE(messages[0].find("checkpoint " + step +
                             " failed on rank 1: writing rank-00001-of-00002.safetensors: "),
            std::string::npos)
      << messages[0];
  EXPECT_EQ(messages[1], messages[0]);

  fs::create_directories(theirs / ".step-000001.partial" / "model.safetensors");
  messages = save_apart();
  EXPECT_NE(
      messages[0].find("checkpoint " + step + " failed on rank 1: writing model.safetensors: "),
      std::string::npos)
      << messages[0];
  EXPECT_EQ(messages[0].find("rank-00000"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_FALSE(fs::exists(mine / "latest"));
  EXPECT_FALSE(fs::exists(mine / ".step-000001.partial")) << "removed by rank 0";

  // `latest` that cannot be written (a full disk; here a folder in its place): the step folder is
  // complete, and the message says so (before: only "failed").
  fs::remove_all(theirs);
  fs::create_directories(mine / "latest");
  const std::string complete = (mine / "step-000001").string();
  messages = run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    return error_of(
        [&] {
          save_checkpoint(mine.string(), t.model, t.step, t.parallel, {"train", 1, 1, 0, 1},
                          kConfig);
        },
        ErrorCode::kInvalidArgument);
  });
  EXPECT_NE(messages[0].find("checkpoint " + complete + " failed on rank 0: writing latest (" +
                             "step-000001 itself is complete: --resume " + complete +
                             " continues from it): "),
            std::string::npos)
      << messages[0];
  EXPECT_TRUE(fs::exists(mine / "step-000001" / "index.json"));
}

// A fresh run into a folder that holds checkpoints would replace them: checkpoint_entry() says
// what is there ("latest" first), and "" for a folder without any or none at all.
TEST(CheckpointSave, CheckpointEntryNamesWhatAFreshRunWouldReplace) {
  TempDir dir;
  EXPECT_EQ(checkpoint_entry((dir.path / "absent").string()), "");
  fs::create_directories(dir.path / "other");
  EXPECT_EQ(checkpoint_entry(dir.path.string()), "");
  save_with(dir.path, 1.0f, 3);
  save_with(dir.path, 1.0f, 2);
  EXPECT_EQ(checkpoint_entry(dir.path.string()), "latest");
  fs::remove(dir.path / "latest");
  EXPECT_EQ(checkpoint_entry(dir.path.string()), "step-000002");
}

// Only a folder named "step-" and digits is a checkpoint (before, any name starting with
// "step-" was, and the refusal advised resuming from a folder of notes).
TEST(CheckpointSave, CheckpointEntryCountsOnlyStepFolders) {
  TempDir dir;
  std::ofstream(dir.path / "step-notes.txt") << "x";
  std::ofstream(dir.path / "step-000001") << "a file, not a folder";
  fs::create_directories(dir.path / "step-");
  fs::create_directories(dir.path / "step-00a001");
  fs::create_directories(dir.path / "step-000003.old");
  EXPECT_EQ(checkpoint_entry(dir.path.string()), "");
  fs::create_directories(dir.path / "step-1000000");
  EXPECT_EQ(checkpoint_entry(dir.path.string()), "step-1000000");
}

// A resume continues the run saved in --save only when it names that folder or a step folder
// directly in it, however the path is spelled.
TEST(CheckpointSave, ContinuesSaveFolderComparesCanonicalPaths) {
  TempDir dir;
  const fs::path save = dir.path / "run";
  fs::create_directories(save / "step-000003");
  fs::create_directories(dir.path / "other" / "step-000003");
  fs::create_directory_symlink(save, dir.path / "link");
  const std::string s = save.string();
  EXPECT_TRUE(continues_save_folder(s, s));
  EXPECT_TRUE(continues_save_folder(s + "/", s));
  EXPECT_TRUE(continues_save_folder((save / "step-000003").string(), s));
  EXPECT_TRUE(continues_save_folder((dir.path / "other" / ".." / "run").string(), s));
  EXPECT_TRUE(continues_save_folder((dir.path / "link" / "step-000003").string(), s));
  EXPECT_TRUE(continues_save_folder(s, (dir.path / "link").string()));
  EXPECT_FALSE(continues_save_folder("", s));
  EXPECT_FALSE(continues_save_folder((dir.path / "other").string(), s));
  EXPECT_FALSE(continues_save_folder((dir.path / "other" / "step-000003").string(), s));
  EXPECT_FALSE(continues_save_folder(dir.path.string(), s));
  EXPECT_FALSE(continues_save_folder(s, (save / "step-000003").string()));
}

// Saves step 1 on one rank with one value of `buffer` ("master" or an optimizer state) of the
// second tensor made NaN; returns the folder and the tensor's name.
std::pair<fs::path, std::string> save_with_nan(const fs::path& dir, const std::string& buffer) {
  std::string name;
  run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    name = t.model.layout().params()[1].name;
    t.fill_master(1.0f);
    float* data = t.step.master();
    for (const OptimizerStateBuffer& s : t.step.optimizer().state())
      if (s.name == buffer) data = s.data->data();
    data[t.model.layout().params()[1].offset + 2] = std::nanf("");
    save_checkpoint(dir.string(), t.model, t.step, t.parallel, {"train", 1, 1, 0, 1}, kConfig);
    return 0;
  });
  return {dir / "step-000001", name};
}

// Master weights and optimizer states a resume (or an export) continues from are refused when
// not finite, naming the shard and the tensor, as model.safetensors' weights are (before, a
// NaN in a shard was loaded, trained on and saved again).
TEST(CheckpointSave, ANonFiniteMasterOrStateIsRefusedNamingTheShardAndTensor) {
  TempDir dir;
  const auto [folder, name] = save_with_nan(dir.path, "exp_avg_sq");
  const std::string shard = (folder / "rank-00000-of-00001.safetensors").string();
  const std::string refused = error_of(
      [&] {
        run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
          Trainer t(c);
          load_checkpoint(folder.string(), t.model, t.step, t.parallel);
          return 0;
        });
      },
      ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.find(shard + ": tensor '" + name + ".exp_avg_sq[0:"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("' holds 1 of "), std::string::npos) << refused;
  EXPECT_NE(refused.find(" values that are inf or NaN as float32"), std::string::npos) << refused;

  // The master, read as an export reads it.
  TempDir other;
  const fs::path masters = save_with_nan(other.path, "master").first;
  const nlohmann::json index = read_checkpoint_index(masters.string());
  std::vector<float> out(index.at("total").get<size_t>());
  const std::string exported = error_of(
      [&] {
        read_checkpoint_range(masters.string(), index, {{"master", out.data()}}, 0, out.size());
      },
      ErrorCode::kInvalidArgument);
  EXPECT_NE(exported.find((masters / "rank-00000-of-00001.safetensors").string() + ": tensor '" +
                          name + ".master[0:"),
            std::string::npos)
      << exported;
}

// A model.safetensors whose tensors are not in the index's dtype (re-hashed into the index) is
// refused naming the file, the tensor and both dtypes (before, its bytes loaded converted from
// the other dtype without a word).
TEST(CheckpointSave, AModelFileInAnotherDtypeThanTheIndexIsRefused) {
  TempDir dir;
  save_with(dir.path, 1.0f, 1);
  const fs::path folder = dir.path / "step-000001";
  const std::string model = (folder / "model.safetensors").string();
  nlohmann::json index;
  run_thread_ranks(1, TransportKind::kShm, [&](Communicator& c) {
    Trainer t(c);
    std::vector<float> zeros(t.model.layout().total(), 0.0f);
    save_layout_as(model, t.model.layout(), zeros.data(), DType::kFloat32, DType::kFloat16);
    return 0;
  });
  std::ifstream in(folder / "index.json");
  index = nlohmann::json::parse(in);
  index["files"]["model.safetensors"]["sha256"] = sha256_file(model);
  index["files"]["model.safetensors"]["bytes"] = fs::file_size(model);
  std::ofstream(folder / "index.json") << index.dump(1);
  const std::string refused =
      error_of([&] { verified_file(folder.string(), index, "model.safetensors"); },
               ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.find("checkpoint file " + model + ": tensor '"), std::string::npos) << refused;
  EXPECT_NE(refused.find("' is float16, the index's dtype is float32"), std::string::npos)
      << refused;
}

}  // namespace
}  // namespace kolo::trainer
