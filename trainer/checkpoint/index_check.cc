// Checks of a checkpoint's index.json (index_check.h), on JsonSection's typed reads.
#include "trainer/checkpoint/index_check.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "comm/base/error.h"
#include "trainer/config/json_section.h"

namespace kolo::trainer {
namespace {

// Element counts and offsets: far beyond any model, far below where size_t arithmetic on them
// (offset + numel, numel * 4 bytes) could wrap.
constexpr double kMaxElements = 1e15;

// Required fields: JsonSection's reads name the key and the range; absence is an error here.
struct Fields {
  JsonSection s;
  void need(const char* key) const { KOLO_CHECK_ARG(s.has(key), s.key_path(key), ": missing"); }
  int64_t integer(const char* key, Range range) const {
    need(key);
    return s.get_int(key, 0, range);
  }
  double number(const char* key, Range range) const {
    need(key);
    return s.get_double(key, 0, range);
  }
  std::string text(const char* key, const std::vector<std::string>& allowed = {}) const {
    need(key);
    const std::string v = s.get_string(key, "", allowed);
    KOLO_CHECK_ARG(!v.empty(), s.key_path(key), ": empty");
    return v;
  }
  const nlohmann::json& array(const char* key) const {
    need(key);
    const nlohmann::json& v = s.json().at(key);
    KOLO_CHECK_ARG(v.is_array(), s.key_path(key), ": expected an array, got ", v.dump());
    return v;
  }
  Fields object(const char* key) const {
    need(key);
    return {s.section(key)};
  }
  Fields item(const nlohmann::json& v, const std::string& path) const {
    return {JsonSection(v, path)};
  }
};

// A name index.json may list: a file of the step folder itself.
void check_file_name(const std::string& name) {
  KOLO_CHECK_ARG(!name.empty() && name != "." && name != ".." &&
                     name.find('/') == std::string::npos && name.find('\0') == std::string::npos,
                 "files: '", name, "' is not a file name inside the step folder");
}

void check_layout(const Fields& root, size_t total) {
  const nlohmann::json& layout = root.array("layout");
  // A model has tensors: an empty layout would export an empty file and load nothing.
  KOLO_CHECK_ARG(!layout.empty(), "layout: empty; a checkpoint holds at least one tensor");
  std::map<std::string, size_t> names;  // each tensor once: a name is how it is exported
  size_t end = 0;  // of the previous tensor: offsets increase, tensors never overlap
  for (size_t i = 0; i < layout.size(); ++i) {
    const Fields t = root.item(layout[i], "layout[" + std::to_string(i) + "]");
    const auto [first, fresh] = names.emplace(t.text("name"), i);
    KOLO_CHECK_ARG(fresh, t.s.key_path("name"), ": '", first->first,
                   "' is also the name of layout[", first->second, "]");
    const nlohmann::json& shape = t.array("shape");
    double elements = 1;
    for (const nlohmann::json& d : shape) {
      KOLO_CHECK_ARG(d.is_number_integer() && d.get<int64_t>() >= 0, t.s.key_path("shape"), ": ",
                     shape.dump(), " is not a list of sizes >= 0");
      elements *= d.get<double>();
    }
    const auto numel = static_cast<size_t>(t.integer("numel", Range::closed(0, kMaxElements)));
    KOLO_CHECK_ARG(elements == static_cast<double>(numel), t.s.key_path("numel"), ": ", numel,
                   " is not the product of the shape ", shape.dump());
    const auto offset = static_cast<size_t>(t.integer("offset", Range::closed(0, kMaxElements)));
    KOLO_CHECK_ARG(offset >= end && offset + numel <= total, t.s.key_path("offset"), ": ", offset,
                   " (", numel, " elements) overlaps the tensor before it (which ends at ", end,
                   ") or passes total ", total);
    end = offset + numel;
  }
}

void check_files(const Fields& root, size_t total, int64_t world) {
  const Fields files = root.object("files");
  KOLO_CHECK_ARG(files.s.has("model.safetensors"), "files: model.safetensors is not listed");
  std::vector<std::pair<size_t, size_t>> ranges;
  std::map<int64_t, std::string> ranks;  // each rank's shard once
  for (const auto& [name, value] : files.s.json().items()) {
    check_file_name(name);
    const Fields f = root.item(value, "files." + name);
    KOLO_CHECK_ARG(f.text("sha256").size() == 64, f.s.key_path("sha256"),
                   ": not a SHA-256 in hex (64 characters)");
    const auto bytes = static_cast<double>(f.integer("bytes", Range::at_least(0)));
    if (!f.s.has("begin")) continue;
    const int64_t rank = f.integer("rank", Range::half_open(0, static_cast<double>(world)));
    const auto [other, fresh] = ranks.emplace(rank, name);
    KOLO_CHECK_ARG(fresh, f.s.key_path("rank"), ": ", rank, " is also the rank of ", other->second);
    const auto begin = static_cast<size_t>(f.integer("begin", Range::closed(0, double(total))));
    const auto end =
        static_cast<size_t>(f.integer("end", Range::closed(double(begin), double(total))));
    // A shard holds at least the fp32 master weights of its range.
    KOLO_CHECK_ARG(static_cast<double>(end - begin) * 4 <= bytes, f.s.key_path("bytes"), ": ",
                   bytes, " bytes cannot hold elements [", begin, ", ", end, ") in fp32");
    ranges.emplace_back(begin, end);
  }
  // The shards partition the flat buffer: every element in exactly one.
  std::sort(ranges.begin(), ranges.end());
  size_t at = 0;
  for (const auto& [begin, end] : ranges) {
    KOLO_CHECK_ARG(begin == at, "files: the shards' element ranges leave a gap or overlap at ", at);
    at = end;
  }
  KOLO_CHECK_ARG(at == total && static_cast<int64_t>(ranges.size()) == world,
                 "files: ", ranges.size(), " shards cover elements [0, ", at, "); world_size ",
                 world, " and total ", total, " need ", world, " covering [0, ", total, ")");
}

// The buffers a checkpoint of each optimizer holds: "master", then the optimizer's states
// (trainer/optim: Optimizer::name() and state(); SGD keeps none without momentum).
void check_optimizer(const Fields& root) {
  static const std::map<std::string, std::vector<std::vector<std::string>>> kBuffers = {
      {"AdamW", {{"master", "exp_avg", "exp_avg_sq"}}},
      {"Adam", {{"master", "exp_avg", "exp_avg_sq"}}},
      {"SGD", {{"master", "momentum_buffer"}, {"master"}}}};
  const std::string optimizer = root.text("optimizer", {"AdamW", "Adam", "SGD"});
  const std::vector<std::vector<std::string>>& accepted = kBuffers.at(optimizer);
  const nlohmann::json& buffers = root.array("buffers");
  std::vector<std::string> names;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string key = "buffers[" + std::to_string(i) + "]";
    KOLO_CHECK_ARG(buffers[i].is_string(), key, ": ", buffers[i].dump(), " is not a name");
    names.push_back(buffers[i].get<std::string>());
    KOLO_CHECK_ARG(std::count(accepted[0].begin(), accepted[0].end(), names.back()) == 1, key, ": ",
                   buffers[i].dump(), " is not a buffer of ", optimizer, " (",
                   nlohmann::json(accepted[0]).dump(), ")");
  }
  KOLO_CHECK_ARG(std::count(accepted.begin(), accepted.end(), names) == 1,
                 "buffers: ", buffers.dump(), " is not what ", optimizer, " writes (",
                 nlohmann::json(accepted).dump(), ")");
}

}  // namespace

void check_checkpoint_index(const nlohmann::json& index, const std::string& path) {
  try {
    const Fields root{JsonSection(index, "")};
    root.text("kolo_version");
    root.text("phase");
    const int64_t step = root.integer("step", Range::closed(0, kMaxElements));
    root.integer("global_step", Range::at_least(static_cast<double>(step)));
    // An epoch holds at least one step: neither count can pass the phase's steps.
    root.integer("epoch", Range::closed(0, static_cast<double>(step)));
    root.integer("step_in_epoch", Range::closed(0, static_cast<double>(step)));
    root.integer("global_sample", Range::at_least(0));
    const int64_t world = root.integer("world_size", Range::closed(1, 1 << 20));
    root.integer("stage", Range::closed(0, 3));
    root.text("dtype", {"float32", "float16", "bfloat16"});
    root.integer("optimizer_step", Range::at_least(0));
    const Fields scaler = root.object("loss_scaler");
    // A float's range (1e300 would read back as inf); one scaler per phase, so its counts are
    // at most the phase's steps.
    scaler.number("scale", Range::closed(std::numeric_limits<float>::denorm_min(),
                                         std::numeric_limits<float>::max()));
    for (const char* key : {"clean_steps", "skipped_steps"})
      scaler.integer(key, Range::closed(0, static_cast<double>(step)));
    scaler.integer("hysteresis_left", Range::closed(1, kMaxElements));
    root.object("config");  // the run's config, which a resume compares with its own
    const auto total = static_cast<size_t>(root.integer("total", Range::closed(0, kMaxElements)));
    check_layout(root, total);
    check_files(root, total, world);
    check_optimizer(root);
  } catch (const Error& e) {
    KOLO_THROW(ErrorCode::kInvalidArgument, path, ": ", e.message());
  }
  checkpoint_config(index, path);  // after world_size and config were checked above
}

TrainConfig checkpoint_config(const nlohmann::json& index, const std::string& path) {
  try {
    return parse_train_config(index.at("config"),
                              static_cast<int>(index.at("world_size").get<int64_t>()), false);
  } catch (const Error& e) {
    KOLO_THROW(ErrorCode::kInvalidArgument, path, ": config: ", e.message());
  } catch (const std::exception& e) {
    KOLO_THROW(ErrorCode::kInvalidArgument, path, ": config: ", e.what());
  }
}

}  // namespace kolo::trainer
