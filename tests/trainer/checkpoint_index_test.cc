// A checkpoint's index.json checked where it enters (trainer/checkpoint/index_check.h): a
// valid two-shard index passes, and each damage a hand edit or a bad disk can do is refused
// naming the key (before: silently accepted, a read past a buffer in kolo_ckpt export, a path
// outside the step folder opened, or a raw nlohmann-json exception). Also the depth limit of
// JSON from outside (trainer/io/json_text.h), and the `latest` pointer a checkpoint folder
// names its step folder with (resolve_checkpoint).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/base/error.h"
#include "tests/unit/expect_error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/index_check.h"
#include "trainer/io/json_text.h"

namespace kolo::trainer {
namespace {

using nlohmann::json;
using testing::error_of;

// Two tensors (the second aligned to 16 elements) in 40 elements, two shards of 20.
json valid_index() {
  const std::string sum(64, 'a');
  return {{"format", "kolo-checkpoint"},
          {"format_version", 1},
          {"kolo_version", "0.1.0"},
          {"phase", "pretrain"},
          {"step", 6},
          {"global_step", 6},
          {"epoch", 0},
          {"step_in_epoch", 6},
          {"global_sample", 96},
          {"world_size", 2},
          {"stage", 2},
          {"dtype", "float16"},
          {"optimizer", "AdamW"},
          {"optimizer_step", 6},
          {"buffers", {"master", "exp_avg", "exp_avg_sq"}},
          {"loss_scaler",
           {{"scale", 65536.0}, {"clean_steps", 6}, {"hysteresis_left", 2}, {"skipped_steps", 0}}},
          {"total", 40},
          {"layout",
           {{{"name", "a"}, {"shape", {2, 5}}, {"offset", 0}, {"numel", 10}},
            {{"name", "b"}, {"shape", {24}}, {"offset", 16}, {"numel", 24}}}},
          {"files",
           {{"model.safetensors", {{"sha256", sum}, {"bytes", 200}}},
            {"rank-00000-of-00002.safetensors",
             {{"sha256", sum}, {"bytes", 300}, {"rank", 0}, {"begin", 0}, {"end", 20}}},
            {"rank-00001-of-00002.safetensors",
             {{"sha256", sum}, {"bytes", 300}, {"rank", 1}, {"begin", 20}, {"end", 40}}}}},
          {"config", {{"train_batch_size", 16}}}};
}

std::string refusal(const std::function<void(json&)>& damage) {
  json index = valid_index();
  damage(index);
  return error_of([&] { check_checkpoint_index(index, "ck/index.json"); },
                  ErrorCode::kInvalidArgument);
}

TEST(CheckpointIndex, AValidIndexPasses) {
  EXPECT_NO_THROW(check_checkpoint_index(valid_index(), "ck/index.json"));
}

TEST(CheckpointIndex, EachDamageIsRefusedNamingTheKey) {
  const std::string shard0 = "rank-00000-of-00002.safetensors";
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& i) { i.erase("files"); }, "ck/index.json: files: missing"},
      {[](json& i) { i["phase"] = 7; }, "phase: expected a string"},
      {[](json& i) { i["phase"] = ""; }, "phase: empty"},
      {[](json& i) { i["step"] = -5; }, "step: -5 is out of range"},
      {[](json& i) { i["global_step"] = 3; }, "global_step: 3 is out of range (>= 6)"},
      {[](json& i) { i["world_size"] = "2"; }, "world_size: expected an integer"},
      {[](json& i) { i["world_size"] = 0; }, "world_size: 0 is out of range"},
      {[](json& i) { i["stage"] = 7; }, "stage: 7 is out of range [0, 3]"},
      {[](json& i) { i["dtype"] = "int8"; }, "dtype: \"int8\""},
      {[](json& i) {
         i["buffers"] = {"master", 1};
       },
       "buffers[1]: 1 is not a name"},
      // Only the optimizers the trainer has, with the buffers each writes (trainer/optim).
      {[](json& i) { i["optimizer"] = "Lion"; },
       "optimizer: \"Lion\" is not accepted (one of AdamW, Adam, SGD)"},
      {[](json& i) {
         i["buffers"] = {"master", "bogus"};
       },
       "buffers[1]: \"bogus\" is not a buffer of AdamW"},
      {[](json& i) {
         i["buffers"] = {"master", "exp_avg"};
       },
       "buffers: [\"master\",\"exp_avg\"] is not what AdamW writes"},
      {[](json& i) {
         i["optimizer"] = "SGD";
         i["buffers"] = {"master", "exp_avg"};
       },
       "buffers[1]: \"exp_avg\" is not a buffer of SGD"},
      {[](json& i) { i["loss_scaler"]["scale"] = 0; }, "loss_scaler.scale: 0 is out of range"},
      {[](json& i) { i["loss_scaler"]["hysteresis_left"] = -3; },
       "loss_scaler.hysteresis_left: -3 is out of range"},
      // Found by a damage sweep: these loaded until the resume's own checks (or not at all).
      {[](json& i) { i["loss_scaler"]["scale"] = 1e300; },
       "loss_scaler.scale: 1e+300 is out of range"},
      {[](json& i) { i["loss_scaler"]["hysteresis_left"] = 0; },
       "loss_scaler.hysteresis_left: 0 is out of range"},
      {[](json& i) { i["loss_scaler"]["clean_steps"] = int64_t{1000000000000000}; },
       "loss_scaler.clean_steps: 1000000000000000 is out of range [0, 6]"},
      {[](json& i) { i["epoch"] = 1000000000; }, "epoch: 1000000000 is out of range [0, 6]"},
      {[](json& i) { i["step"] = int64_t{1} << 62; },
       ": step: 4611686018427387904 is out of range"},
      {[](json& i) { i.erase("config"); }, "config: missing"},
      // The stored config is parsed as a resume parses it (before, kolo_ckpt verify passed a
      // config that --resume refused).
      {[](json& i) { i["config"]["train_batch_size"] = "16"; },
       "ck/index.json: config: train_batch_size: expected an integer"},
      {[](json& i) {
         i["config"]["fp16"] = {{"hysteresis", 0}};
       },
       "ck/index.json: config: fp16.hysteresis: 0 is out of range"},
      {[](json& i) { i["total"] = -1; }, "total: -1 is out of range"},
      {[](json& i) { i["layout"][1]["offset"] = 35; }, "layout[1].offset: 35 (24 elements)"},
      {[](json& i) { i["layout"][1]["offset"] = 5; }, "layout[1].offset: 5 (24 elements) overlaps"},
      {[](json& i) { i["layout"][0]["numel"] = 11; }, "layout[0].numel: 11 is not the product"},
      {[](json& i) {
         i["layout"][0]["shape"] = {-2, -5};
       },
       "layout[0].shape: [-2,-5] is not"},
      {[](json& i) { i["layout"][0].erase("name"); }, "layout[0].name: missing"},
      {[](json& i) { i["layout"][1]["name"] = "a"; },
       "layout[1].name: 'a' is also the name of layout[0]"},
      {[](json& i) {
         i["layout"] = json::array();
         i["total"] = 0;
         i["files"]["rank-00000-of-00002.safetensors"]["end"] = 0;
         i["files"]["rank-00001-of-00002.safetensors"]["begin"] = 0;
         i["files"]["rank-00001-of-00002.safetensors"]["end"] = 0;
       },
       "layout: empty"},
      {[](json& i) { i["files"]["../../etc/passwd"] = i["files"]["model.safetensors"]; },
       "'../../etc/passwd' is not a file name inside the step folder"},
      {[](json& i) { i["files"].erase("model.safetensors"); }, "model.safetensors is not listed"},
      {[&](json& i) { i["files"][shard0]["sha256"] = 5; }, "sha256: expected a string"},
      {[&](json& i) { i["files"][shard0]["end"] = 41; }, ".end: 41 is out of range [0, 40]"},
      {[&](json& i) { i["files"][shard0]["end"] = 10; }, "leave a gap or overlap at 10"},
      {[&](json& i) { i["files"][shard0]["rank"] = 2; }, ".rank: 2 is out of range [0, 2)"},
      {[](json& i) { i["files"]["rank-00001-of-00002.safetensors"]["rank"] = 0; },
       "files.rank-00001-of-00002.safetensors.rank: 0 is also the rank of "
       "rank-00000-of-00002.safetensors"},
      {[&](json& i) { i["files"][shard0]["bytes"] = 10; },
       "10 bytes cannot hold elements [0, 20) in fp32"},
      {[&](json& i) { i["files"].erase(shard0); }, "leave a gap or overlap at 0"},
      {[](json& i) { i["files"].erase("rank-00001-of-00002.safetensors"); },
       "1 shards cover elements [0, 20); world_size 2 and total 40 need 2 covering [0, 40)"},
      {[](json& i) { i["total"] = 1000000; }, "need 2 covering [0, 1000000)"},
  };
  for (const auto& [damage, expected] : cases) {
    const std::string m = refusal(damage);
    EXPECT_NE(m.find(expected), std::string::npos) << m << "\n  expected: " << expected;
    EXPECT_EQ(m.rfind("kolo invalid argument error: ck/index.json: ", 0), 0u) << m;
  }
}

TEST(CheckpointIndex, TheOptimizersTheTrainerWritesPass) {
  json index = valid_index();
  index["optimizer"] = "Adam";
  EXPECT_NO_THROW(check_checkpoint_index(index, "ck/index.json"));
  index["optimizer"] = "SGD";
  index["buffers"] = {"master", "momentum_buffer"};
  EXPECT_NO_THROW(check_checkpoint_index(index, "ck/index.json"));
  index["buffers"] = {"master"};  // SGD without momentum
  EXPECT_NO_THROW(check_checkpoint_index(index, "ck/index.json"));
}

// A checkpoint folder whose `latest` is damaged: the error shows what the file holds (control
// characters escaped) and tells a symbolic link loop from a missing file.
TEST(CheckpointLatest, ADamagedPointerIsNamedAsItIs) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kolo_latest_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "step-000002");
  std::ofstream(dir / "step-000002" / "index.json") << "{}";
  auto point = [&](const std::string& text) {
    fs::remove(dir / "latest");
    std::ofstream(dir / "latest", std::ios::binary) << text;
  };
  auto refusal = [&](const std::string& text) {
    point(text);
    return error_of([&] { resolve_checkpoint(dir.string()); }, ErrorCode::kInvalidArgument);
  };
  // A pointer saved with CRLF line ends: the "\r" was invisible in the message.
  EXPECT_NE(refusal("step-000002\r\n").find("names \"step-000002\\r\", which has no index.json"),
            std::string::npos);
  EXPECT_NE(refusal(" step-000002\n").find("names \" step-000002\","), std::string::npos);
  EXPECT_NE(refusal("../x\n").find("does not name a step folder (\"../x\")"), std::string::npos);
  point("step-000002\n");
  EXPECT_EQ(fs::path(resolve_checkpoint(dir.string())), dir / "step-000002");
  fs::remove(dir / "latest");
  fs::create_symlink("latest", dir / "latest");
  const std::string loop =
      error_of([&] { resolve_checkpoint(dir.string()); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(loop.find("latest is a symbolic link that cannot be resolved (Too many levels"),
            std::string::npos)
      << loop;
  fs::remove_all(dir);
}

// A folder without `latest` (a save that could not write it, a full disk) names the complete
// step folders in it and how to use one (before: only "holds neither index.json nor latest").
TEST(CheckpointLatest, AFolderWithoutLatestNamesItsCompleteStepFolders) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kolo_no_latest_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto refusal = [&] {
    return error_of([&] { resolve_checkpoint(dir.string()); }, ErrorCode::kInvalidArgument);
  };
  const std::string neither = "kolo invalid argument error: checkpoint: " + dir.string() +
                              " holds neither index.json (a step folder) nor latest (a checkpoint "
                              "folder)";
  EXPECT_EQ(refusal(), neither);
  fs::create_directories(dir / "step-000004");  // no index: not complete
  EXPECT_EQ(refusal(), neither);
  fs::create_directories(dir / "step-000003");
  std::ofstream(dir / "step-000003" / "index.json") << "{}";
  EXPECT_EQ(refusal(), neither + "; step-000003 is there: pass " + (dir / "step-000003").string() +
                           ", or write its name into " + (dir / "latest").string());
  fs::create_directories(dir / "step-000001");
  std::ofstream(dir / "step-000001" / "index.json") << "{}";
  EXPECT_NE(refusal().find("; step-000001, step-000003 are there: pass " +
                           (dir / "step-000003").string() + " (the newest) or another"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(JsonText, NestingIsLimitedBeforeTheDocumentIsBuilt) {
  std::string ok, deep;
  for (int i = 0; i < kMaxJsonDepth; ++i) ok += "[";
  ok += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(ok, "doc").is_array());
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";  // once overflowed the stack when copied
  EXPECT_NE(error_of([&] { parse_json(deep, "config file x.json"); }, ErrorCode::kInvalidArgument)
                .find("config file x.json: nested deeper than 64 levels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_json_or_discarded(deep, "y"); }, ErrorCode::kInvalidArgument)
                .find("y: nested deeper than 64 levels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_json("{\"a\": 1e400}", "z"); }, ErrorCode::kInvalidArgument)
                .find("z: not valid JSON"),
            std::string::npos);
  EXPECT_TRUE(parse_json_or_discarded("{\"a\":", "w").is_discarded());
}

TEST(JsonText, AKeyTwiceInOneObjectIsRefused) {
  // The parser alone keeps the last value: {"lr": 1, "lr": 2} would train at lr 2 silently.
  EXPECT_NE(error_of([&] { parse_json(R"({"optimizer": {"lr": 1, "b": [], "lr": 2}})", "cfg"); },
                     ErrorCode::kInvalidArgument)
                .find(R"(cfg: the key "lr" appears twice in one object)"),
            std::string::npos);
  // "\u006cr" is "lr" once decoded; the discarding parser refuses it too.
  EXPECT_NE(error_of([&] { parse_json_or_discarded(R"({"lr": 1, "\u006cr": 2})", "idx"); },
                     ErrorCode::kInvalidArgument)
                .find(R"(idx: the key "lr" appears twice)"),
            std::string::npos);
  // Equal keys in different objects, and in objects inside arrays, are not duplicates.
  const auto ok =
      parse_json(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}], "x": 5})", "ok");
  EXPECT_EQ(ok["c"][1]["x"], 4);
  EXPECT_EQ(ok["x"], 5);
}

}  // namespace
}  // namespace kolo::trainer
