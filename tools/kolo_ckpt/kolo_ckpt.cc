// kolo_ckpt: a kolo training checkpoint in plain words, its integrity, and a consolidated
// Hugging Face-named safetensors for inference.
//   kolo_ckpt info   DIR|STEP_FOLDER          what the index says
//   kolo_ckpt verify DIR|STEP_FOLDER          sizes and SHA-256 of every file and the model
//                                             file's dtype (exit 1 naming the first that
//                                             fails); like every command, after the index
//                                             and its stored config are checked
//   kolo_ckpt export DIR|STEP_FOLDER OUT.safetensors [--dtype float32|float16|bfloat16]
//                                             the fp32 master weights of every shard, whole,
//                                             under their Hugging Face names (converted to
//                                             --dtype, round to nearest even); OUT outside
//                                             DIR and the save folder holding it; OUT that
//                                             exists must be a regular file
// DIR is a checkpoint folder (its `latest` is used) or a step folder. A command line that does
// not parse exits 2; a checkpoint or an OUT refused after that, 1.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/base/cli_parse.h"
#include "comm/base/convert.h"
#include "comm/base/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/io/safetensors.h"

namespace kt = kolo::trainer;
namespace fs = std::filesystem;

namespace {

using kolo::cli::kExitUsage;

// Whether `inner` is `outer` or lies below it (both canonical).
bool is_within(const fs::path& inner, const fs::path& outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// The save folder (the one holding `latest` and the step-* folders) that step folder `folder`
// lies in, or "" when its parent is not one (a step folder copied on its own elsewhere).
fs::path enclosing_save_folder(const std::string& folder) {
  const fs::path step = fs::weakly_canonical(fs::absolute(folder));
  const fs::path parent = step.parent_path();
  std::error_code ec;
  if (fs::exists(fs::symlink_status(parent / "latest", ec))) return parent;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    const bool step_like = name.rfind("step-", 0) == 0 || name.rfind(".step-", 0) == 0;
    if (step_like && entry.path() != step) return parent;
  }
  return {};
}

// An export written into the checkpoint would replace one of its files (index.json, a shard,
// another step's files, `latest`) or leave a stray one there: OUT's folder must lie outside the
// folder named on the command line, the step folder it resolved to and the save folder that
// holds that step folder.
void check_outside(const std::string& out, const std::string& path, const std::string& folder) {
  const fs::path parent = fs::weakly_canonical(fs::absolute(out).parent_path());
  std::vector<fs::path> guarded = {fs::weakly_canonical(fs::absolute(path)),
                                   fs::weakly_canonical(fs::absolute(folder))};
  if (fs::path save = enclosing_save_folder(folder); !save.empty()) guarded.push_back(save);
  for (const fs::path& ck : guarded)
    KOLO_CHECK_ARG(!is_within(parent, ck), "export: ", out, " is inside the checkpoint ",
                   ck.string(), " (its folder resolves to ", parent.string(),
                   "); write the export elsewhere");
}

int info(const std::string& folder) {
  const nlohmann::json index = kt::read_checkpoint_index(folder);
  const nlohmann::json& s = index.at("loss_scaler");
  size_t params = 0;
  for (const auto& t : index.at("layout")) params += t.at("numel").get<size_t>();
  std::printf("checkpoint %s\n", folder.c_str());
  std::printf("  written by kolo %s, format %d\n",
              index.at("kolo_version").get<std::string>().c_str(),
              index.at("format_version").get<int>());
  std::printf(
      "  phase %s, step %lld of the phase (step %lld of the run), epoch %lld after %lld "
      "of its steps\n",
      index.at("phase").get<std::string>().c_str(), index.at("step").get<long long>(),
      index.at("global_step").get<long long>(), index.at("epoch").get<long long>() + 1,
      index.at("step_in_epoch").get<long long>());
  std::printf("  world size %d, ZeRO stage %d, %s weights, %zu tensors, %zu parameters\n",
              index.at("world_size").get<int>(), index.at("stage").get<int>(),
              index.at("dtype").get<std::string>().c_str(), index.at("layout").size(), params);
  std::printf("  optimizer %s after %lld updates, buffers %s\n",
              index.at("optimizer").get<std::string>().c_str(),
              index.at("optimizer_step").get<long long>(), index.at("buffers").dump().c_str());
  std::printf(
      "  loss scale %g, %lld clean steps since the last change, hysteresis left %lld, "
      "%lld steps skipped\n",
      s.at("scale").get<double>(), s.at("clean_steps").get<long long>(),
      s.at("hysteresis_left").get<long long>(), s.at("skipped_steps").get<long long>());
  for (const auto& [file, entry] : index.at("files").items()) {
    std::printf("  %-36s %12llu bytes  sha256 %s", file.c_str(),
                entry.at("bytes").get<unsigned long long>(),
                entry.at("sha256").get<std::string>().c_str());
    if (entry.contains("begin"))
      std::printf("  elements [%zu, %zu)", entry.at("begin").get<size_t>(),
                  entry.at("end").get<size_t>());
    std::printf("\n");
  }
  return 0;
}

int verify(const std::string& folder) {
  const nlohmann::json index = kt::read_checkpoint_index(folder);
  for (const auto& [file, entry] : index.at("files").items()) {
    kt::verified_file(folder, index, file);
    std::printf("  %-36s ok\n", file.c_str());
  }
  std::printf("kolo_ckpt: %s verified (%zu files)\n", folder.c_str(), index.at("files").size());
  return 0;
}

int export_weights(const std::string& path, const std::string& folder, const std::string& out,
                   const std::string& dtype) {
  check_outside(out, path, folder);
  const nlohmann::json index = kt::read_checkpoint_index(folder);
  const size_t total = index.at("total").get<size_t>();
  std::vector<float> master(total, 0.0f);
  kt::read_checkpoint_range(folder, index, {{"master", master.data()}}, 0, total);
  const kolo::DType to = kolo::parse_dtype(dtype, "--dtype");  // checked by kExportDtype
  std::vector<char> data(total * kolo::dtype_size(to));
  kolo::convert(data.data(), to, master.data(), kolo::DType::kFloat32, total);
  std::vector<kt::TensorRef> tensors;
  for (const auto& t : index.at("layout"))
    tensors.push_back({t.at("name").get<std::string>(), to,
                       t.at("shape").get<std::vector<int64_t>>(),
                       data.data() + t.at("offset").get<size_t>() * kolo::dtype_size(to)});
  kt::write_safetensors(out, tensors, {{"format", "pt"}});
  std::printf("kolo_ckpt: wrote %s (%zu tensors, %s)\n", out.c_str(), tensors.size(),
              dtype.c_str());
  return 0;
}

// --dtype of an export: the three a model is stored in (or parse_dtype's aliases of them);
// anything else is a usage error.
const CLI::Validator kExportDtype(
    [](std::string& text) -> std::string {
      try {
        const kolo::DType d = kolo::parse_dtype(text, "--dtype");
        if (d == kolo::DType::kFloat32 || d == kolo::DType::kFloat16 || d == kolo::DType::kBFloat16)
          return "";
      } catch (const kolo::Error&) {
      }
      return "'" + text +
             "' is not accepted; accepted float32, float16, bfloat16 (or fp32, fp16, bf16)";
    },
    "float32|float16|bfloat16");

// CLI11's message with the program's name, exit 2 as kolorun's usage errors. When the first
// word is not a subcommand CLI11 only says that one is required: the word is named instead.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::string message = e.what(), names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->check_name(argv[1]));
  }
  if (argc == 1)
    message = "a subcommand is required: " + names;
  else if (!known)
    message = std::string(argv[1][0] == '-' ? "unknown option '" : "unknown subcommand '") +
              argv[1] + "'; the first word is a subcommand: " + names;
  std::fprintf(stderr, "kolo_ckpt: %s (see kolo_ckpt --help)\n", message.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kolo training checkpoints: info, verify, export"};
  app.require_subcommand(1);
  std::string path, out, dtype = "float32";
  CLI::App* info_cmd = app.add_subcommand("info", "print a checkpoint's index in plain words");
  info_cmd->add_option("checkpoint", path, "checkpoint folder (its latest) or step folder")
      ->required()
      ->check(kolo::cli::non_empty_path());
  CLI::App* verify_cmd = app.add_subcommand("verify", "check every file's size and SHA-256");
  verify_cmd->add_option("checkpoint", path, "checkpoint folder or step folder")
      ->required()
      ->check(kolo::cli::non_empty_path());
  CLI::App* export_cmd =
      app.add_subcommand("export", "write the whole model as Hugging Face-named safetensors");
  export_cmd->add_option("checkpoint", path, "checkpoint folder or step folder")
      ->required()
      ->check(kolo::cli::non_empty_path());
  export_cmd->add_option("out", out, "the safetensors file to write")
      ->required()
      ->check(kolo::cli::non_empty_path());
  export_cmd->add_option("--dtype", dtype, "float32, float16 or bfloat16")
      ->capture_default_str()
      ->check(kExportDtype);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return usage_error(app, e, argc, argv);
  }
  try {
    const std::string folder = kt::resolve_checkpoint(path);
    if (info_cmd->parsed()) return info(folder);
    if (verify_cmd->parsed()) return verify(folder);
    return export_weights(path, folder, out, dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo_ckpt: %s\n", e.what());
    return 1;
  }
}
