// Checkpoint save and load: the per-rank shards, the model file, the index, the atomic folder
// protocol and the range reads of a resume.
#include "trainer/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <vector>

#include "comm/base/error.h"
#include "trainer/checkpoint/collectively.h"
#include "trainer/checkpoint/index_check.h"
#include "trainer/dist/partition.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/file_bytes.h"
#include "trainer/io/json_text.h"
#include "trainer/io/safetensors.h"
#include "trainer/io/sha256.h"
#include "trainer/io/tensor_io.h"

// Like KOLO_CHECK_ARG with the error code given (kIo for files, kInvalidArgument for content).
#define CHECK_OR_THROW(cond, code, ...)         \
  do {                                          \
    if (!(cond)) KOLO_THROW(code, __VA_ARGS__); \
  } while (0)

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kolo-checkpoint";
constexpr int kFormatVersion = 1;

std::string shard_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank, world);
  return name;
}

std::string step_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

// Whether `name` has step_name()'s form: "step-" and digits only (a "step-notes.txt" does not).
bool is_step_name(const std::string& name) {
  return name.size() > 5 && name.rfind("step-", 0) == 0 &&
         std::all_of(name.begin() + 5, name.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

// The folders of `dir` named "step-" and digits, in order (none when `dir` cannot be read).
std::vector<std::string> step_folders(const fs::path& dir) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string n = entry.path().filename().string();
    if (is_step_name(n) && entry.is_directory(ec)) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// "<name>.<kind>[first:end]": elements [first, end) of the tensor.
std::string piece_name(const ParamInfo& p, const std::string& kind, size_t first, size_t end) {
  return p.name + "." + kind + "[" + std::to_string(first) + ":" + std::to_string(end) + "]";
}

// Every buffer a shard holds, by kind: the master weights and each optimizer state, all of
// them this rank's range of the flat buffer.
std::vector<RangeOut> buffers(TrainStep& step) {
  std::vector<RangeOut> out = {{"master", step.master()}};
  for (const OptimizerStateBuffer& s : step.optimizer().state())
    out.push_back({s.name, s.data->data()});
  return out;
}

// Writes `text` to `path` atomically.
void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](const Append& append) { append(text.data(), text.size()); });
}

// Runs `write`, naming `file` in what it throws: the work of one collectively() writes several
// files, and the other ranks learn which one failed from this message.
template <typename Write>
void writing(const std::string& file, Write&& write) {
  try {
    write();
  } catch (const Error& e) {
    KOLO_THROW(e.code(), "writing ", file, ": ", e.message());
  } catch (const std::exception& e) {
    KOLO_THROW(ErrorCode::kIo, "writing ", file, ": ", e.what());
  }
}

// The hidden names of a step folder while it is written (".step-000100.partial") and, for an
// earlier save of the same step that a new one replaces, until `latest` names the new one
// (".step-000100.replaced").
std::string partial_name(const std::string& step) {
  return "." + step + ".partial";
}
std::string replaced_name(const std::string& step) {
  return "." + step + ".replaced";
}

// The step folder a hidden name belongs to ("step-000100"), or "" when `name` is not one of
// `suffix`.
std::string hidden_step(const std::string& name, const std::string& suffix) {
  if (name.size() <= 1 + suffix.size() || name.rfind(".step-", 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  return name.substr(1, name.size() - 1 - suffix.size());
}

// What a save that died left in `dir` (rank 0, before the next save): a folder it was writing
// is removed; an earlier step folder it had set aside is put back where no folder took its
// name (the save died between the two renames of publish()), else removed.
void clean_leftovers(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  for (const std::string& n : names) {
    if (const std::string step = hidden_step(n, ".replaced"); !step.empty()) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(dir / step, ec)))
        fs::remove_all(dir / n);
      else
        fs::rename(dir / n, dir / step);
    } else if (!hidden_step(n, ".partial").empty()) {
      fs::remove_all(dir / n);
    }
  }
  sync_folder(dir.string());
}

// Puts the complete folder dir/.<step>.partial in place as dir/<step> and then points `latest`
// at it. An earlier save of the same step (a run resumed from before it) is never removed before
// the new one has taken its name: the two are swapped in one rename (RENAME_EXCHANGE) where the
// file system can, so dir/<step> is a complete folder at every instant; elsewhere the old one
// is renamed aside first, and a save that dies before the second rename leaves it there for
// clean_leftovers() and resolve_checkpoint(). The old one is removed once `latest` names the
// new one.
void publish(const fs::path& dir, const std::string& step) {
  const fs::path tmp = dir / partial_name(step), final_dir = dir / step,
                 aside = dir / replaced_name(step);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(final_dir, ec))) {
    fs::rename(tmp, final_dir);
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) ==
             0) {
    fs::rename(tmp, aside);  // the earlier save, now under the temporary name
  } else {
    CHECK_OR_THROW(errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP, ErrorCode::kIo,
                   "checkpoint: exchanging ", tmp.string(), " and ", final_dir.string(), ": ",
                   std::strerror(errno));
    fs::rename(final_dir, aside);
    fs::rename(tmp, final_dir);
  }
  sync_folder(dir.string());
  // The step folder is complete by now: the message says so, and how to resume from it.
  writing("latest (" + step + " itself is complete: --resume " + final_dir.string() +
              " continues from it)",
          [&] { write_text_atomic((dir / "latest").string(), step + "\n"); });
  fs::remove_all(aside);
}

// The config's global batch: train_batch_size, else micro batch x accumulation x world (a
// config may give either; the parser checked that they agree).
int64_t global_batch(const nlohmann::json& config, int world) {
  if (const int64_t given = config.value("train_batch_size", int64_t{0}); given > 0) return given;
  return config.value("train_micro_batch_size_per_gpu", int64_t{0}) *
         config.value("gradient_accumulation_steps", int64_t{1}) * world;
}

nlohmann::json layout_json(const ParamLayout& layout) {
  nlohmann::json out = nlohmann::json::array();
  for (const ParamInfo& p : layout.params())
    out.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
  return out;
}

// For a folder without `latest`: the step folders in it that hold an index (a save whose
// `latest` could not be written, a full disk, leaves its complete step folder so), and how to
// use one ("; step-000003 is there: pass DIR/step-000003, ..."); "" when there are none.
std::string complete_steps_hint(const std::string& path) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (const std::string& n : step_folders(path))
    if (fs::exists(fs::path(path) / n / "index.json", ec)) steps.push_back(n);
  if (steps.empty()) return "";
  const std::string newest = (fs::path(path) / steps.back()).string();
  std::string names;
  for (size_t i = steps.size() > 4 ? steps.size() - 4 : 0; i < steps.size(); ++i)
    names += (names.empty() ? "" : ", ") + steps[i];
  if (steps.size() > 4) names = std::to_string(steps.size() - 4) + " older, " + names;
  return "; " + names + (steps.size() == 1 ? " is" : " are") + " there: pass " + newest +
         (steps.size() == 1 ? "" : " (the newest) or another") + ", or write its name into " +
         (fs::path(path) / "latest").string();
}

}  // namespace

size_t folder_bytes(const std::string& folder) {
  size_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_regular_file()) bytes += entry.file_size();
  return bytes;
}

std::string save_checkpoint(const std::string& dir, Model& model, TrainStep& step,
                            DataParallel& parallel, const TrainPosition& position,
                            const nlohmann::json& config, int64_t keep) {
  Communicator& comm = parallel.communicator();
  const int rank = comm.rank(), world = comm.size();
  const std::string name = step_name(position.global_step);
  const std::string final_dir = (fs::path(dir) / name).string();
  const std::string tmp_dir = (fs::path(dir) / partial_name(name)).string();
  collectively(comm, "checkpoint " + final_dir + ": creating the folder", [&] {
    if (rank != 0) return;
    fs::create_directories(dir);
    clean_leftovers(dir);  // of a save that died
    fs::create_directories(tmp_dir);
  });
  // A save that fails (a full disk) leaves no partial folder behind: rank 0 made it, and every
  // rank fails together (collectively), so rank 0 removes it on the way out.
  struct RemoveOnFailure {
    std::string path;
    bool owner;
    ~RemoveOnFailure() {
      std::error_code ignored;
      if (owner && std::uncaught_exceptions() > 0) fs::remove_all(path, ignored);
    }
  } cleanup{tmp_dir, rank == 0};

  // This rank's shard: its partition for `world` ranks, whatever the stage.
  const ParamLayout& layout = model.layout();
  const Partition mine = partition_of(layout, world, rank);
  const Partition& held = step.range();
  CHECK_OR_THROW(held.begin <= mine.begin && mine.end <= held.end, ErrorCode::kInternal,
                 "checkpoint: rank ", rank, " holds [", held.begin, ", ", held.end,
                 ") but must write [", mine.begin, ", ", mine.end, ")");
  step.state_to_host();  // a model on a device: its master weights and states come up
  const std::vector<RangeOut> kinds = buffers(step);
  std::vector<TensorRef> pieces;
  std::vector<std::string> names;
  names.reserve(layout.params().size() * kinds.size());
  for (const RangeOut& buffer : kinds) {
    for (const ParamInfo& p : layout.params()) {
      const size_t lo = std::max(p.offset, mine.begin), hi = std::min(p.offset + p.numel, mine.end);
      if (lo >= hi) continue;
      names.push_back(piece_name(p, buffer.kind, lo - p.offset, hi - p.offset));
      pieces.push_back({names.back(),
                        DType::kFloat32,
                        {static_cast<int64_t>(hi - lo)},
                        buffer.out + (lo - held.begin)});
    }
  }
  // Every rank its shard; the last rank also the 16-bit model, at the same time (stage 3
  // gathers the whole model for the moment).
  const std::string shard = shard_name(rank, world);
  const std::string model_path = (fs::path(tmp_dir) / "model.safetensors").string();
  parallel.gather_all_params();
  std::string digest(128, '0');
  collectively(comm, "checkpoint " + final_dir, [&] {
    const std::string path = (fs::path(tmp_dir) / shard).string();
    std::string sum;
    writing(shard, [&] {
      write_safetensors(path, pieces, {{"format", kFormat}, {"rank", std::to_string(rank)}}, &sum);
    });
    digest.replace(0, 64, sum);
    if (rank != world - 1) return;
    writing("model.safetensors", [&] { model.save(model_path, {{"format", "pt"}}, &sum); });
    digest.replace(64, 64, sum);
  });
  parallel.release_params();
  std::vector<char> digests(static_cast<size_t>(world) * 128);
  comm.allgather(digest.data(), digests.data(), 128, DType::kUInt8);

  // The index, the rename and `latest`, on rank 0.
  collectively(comm, "checkpoint " + final_dir, [&] {
    if (rank != 0) return;
    nlohmann::json files = nlohmann::json::object();
    files["model.safetensors"] = {
        {"sha256", std::string(digests.data() + size_t(world - 1) * 128 + 64, 64)},
        {"bytes", fs::file_size(model_path)}};
    for (int r = 0; r < world; ++r) {
      const Partition p = partition_of(layout, world, r);
      const std::string file = shard_name(r, world);
      files[file] = {{"sha256", std::string(digests.data() + size_t(r) * 128, 64)},
                     {"bytes", fs::file_size(fs::path(tmp_dir) / file)},
                     {"rank", r},
                     {"begin", p.begin},
                     {"end", p.end}};
    }
    const DynamicLossScaler& scaler = step.scaler();
    nlohmann::json state_names = nlohmann::json::array();
    for (const RangeOut& b : kinds) state_names.push_back(b.kind);
    const nlohmann::json index = {
        {"format", kFormat},
        {"format_version", kFormatVersion},
        {"kolo_version", KOLO_VERSION_STRING},
        {"phase", position.phase},
        {"step", position.step},
        {"global_step", position.global_step},
        {"epoch", position.epoch},
        {"step_in_epoch", position.step_in_epoch},
        // The data position in samples: every step (skipped ones too) consumed a global batch.
        {"global_sample", position.step * global_batch(config, world)},
        {"world_size", world},
        {"stage", parallel.stage()},
        {"dtype", dtype_name(model.dtype())},
        {"optimizer", step.optimizer().name()},
        {"optimizer_step", step.optimizer().step_count()},
        {"buffers", state_names},
        {"loss_scaler",
         {{"scale", scaler.scale()},
          {"clean_steps", scaler.clean_steps_since_overflow_or_growth()},
          {"hysteresis_left", scaler.hysteresis_left()},
          {"skipped_steps", scaler.skipped_steps()}}},
        {"total", layout.total()},
        {"layout", layout_json(layout)},
        {"files", files},
        {"config", config}};
    writing("index.json",
            [&] { write_text_atomic((fs::path(tmp_dir) / "index.json").string(), index.dump(1)); });
    publish(dir, name);
    if (keep <= 0) return;
    // The newest `keep` up to this one. Steps after it are an earlier run's that went further
    // (this run resumed from before them): not this run's to count or delete.
    std::vector<std::string> steps = step_folders(dir);
    steps.erase(std::upper_bound(steps.begin(), steps.end(), name), steps.end());
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
      fs::remove_all(fs::path(dir) / steps[i]);
  });
  return final_dir;
}

std::string checkpoint_entry(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(fs::path(dir) / "latest", ec))) return "latest";
  const std::vector<std::string> steps = step_folders(dir);
  return steps.empty() ? "" : steps.front();
}

bool continues_save_folder(const std::string& resume, const std::string& save_dir) {
  if (resume.empty() || save_dir.empty()) return false;
  std::error_code ec_resume, ec_save;
  const fs::path from = fs::weakly_canonical(fs::absolute(resume), ec_resume);
  const fs::path into = fs::weakly_canonical(fs::absolute(save_dir), ec_save);
  if (ec_resume || ec_save) return false;
  return from == into || from.parent_path() == into;
}

nlohmann::json read_checkpoint_index(const std::string& folder) {
  const std::string path = (fs::path(folder) / "index.json").string();
  constexpr uintmax_t kMaxIndexBytes = 64 << 20;  // a model of a million tensors needs less
  nlohmann::json index =
      parse_json_or_discarded(read_file_bytes(path, "checkpoint index", kMaxIndexBytes), path);
  CHECK_OR_THROW(!index.is_discarded() && index.is_object() && index.value("format", "") == kFormat,
                 ErrorCode::kInvalidArgument, path, ": not a kolo checkpoint index");
  const nlohmann::json version = index.value("format_version", nlohmann::json(0));
  CHECK_OR_THROW(version == kFormatVersion, ErrorCode::kInvalidArgument, path, ": format version ",
                 version.dump(), ", this kolo reads ", kFormatVersion);
  check_checkpoint_index(index, path);
  return index;
}

std::string resolve_checkpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / "index.json")) return path;
  const fs::path latest = fs::path(path) / "latest";
  std::error_code ec;
  CHECK_OR_THROW(fs::exists(fs::symlink_status(latest, ec)), ErrorCode::kInvalidArgument,
                 "checkpoint: ", path,
                 " holds neither index.json (a step folder) nor latest (a checkpoint folder)",
                 complete_steps_hint(path));
  // A symbolic link loop is there but cannot be followed: not "missing".
  (void)fs::status(latest, ec);
  CHECK_OR_THROW(!ec || ec == std::errc::no_such_file_or_directory, ErrorCode::kInvalidArgument,
                 "checkpoint: ", latest.string(), " is a symbolic link that cannot be resolved (",
                 ec.message(), ")");
  // One step folder's name and a newline.
  const std::string text = read_file_bytes(latest, "checkpoint pointer", 4096);
  const std::string name = text.substr(0, text.find('\n'));
  // Quoted with escapes, so that a "\r" or a space the name carries shows.
  auto shown = [](const std::string& n) {
    return nlohmann::json(n.size() > 64 ? n.substr(0, 64) + "..." : n)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  // A step folder's own name ("step-000100"), never a path elsewhere.
  CHECK_OR_THROW(
      name.size() <= 255 && name.find('/') == std::string::npos && name != "." && name != "..",
      ErrorCode::kInvalidArgument, "checkpoint: ", latest.string(),
      " does not name a step folder (", shown(name), ")");
  const fs::path folder = fs::path(path) / name;
  // A save that replaced this step and died between its two renames (publish()) left the
  // complete earlier folder aside; the next save puts it back.
  const fs::path aside = fs::path(path) / replaced_name(name);
  if (!name.empty() && !fs::exists(folder / "index.json", ec) &&
      fs::exists(aside / "index.json", ec))
    return aside.string();
  CHECK_OR_THROW(!name.empty() && fs::exists(folder / "index.json", ec),
                 ErrorCode::kInvalidArgument, "checkpoint: ", latest.string(), " names ",
                 shown(name), ", which has no index.json");
  return folder.string();
}

std::string verified_file(const std::string& folder, const nlohmann::json& index,
                          const std::string& file) {
  const std::string path = (fs::path(folder) / file).string();
  CHECK_OR_THROW(index.at("files").contains(file), ErrorCode::kInvalidArgument, folder,
                 "/index.json does not list ", file);
  const nlohmann::json& entry = index.at("files").at(file);
  require_regular_file(path, "checkpoint file");
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  CHECK_OR_THROW(!ec, ErrorCode::kIo, "checkpoint file ", path, ": ", ec.message());
  CHECK_OR_THROW(bytes == entry.at("bytes").get<uint64_t>(), ErrorCode::kIo, "checkpoint file ",
                 path, " has ", bytes, " bytes, the index says ", entry.at("bytes").get<uint64_t>(),
                 " (truncated or replaced)");
  const std::string sum = sha256_file(path);
  std::string listed = entry.at("sha256").get<std::string>();  // hex digits in either case
  std::transform(listed.begin(), listed.end(), listed.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK_OR_THROW(sum == listed, ErrorCode::kIo, "checkpoint file ", path,
                 " fails its SHA-256 check (", sum, ", the index says ",
                 entry.at("sha256").get<std::string>(), ")");
  // The model file is stored in the index's dtype; one in another would load converted from
  // it (a re-hashed bf16 file read as the run's fp16 would not even be noticed as a change).
  if (file == "model.safetensors") {
    const std::string dtype = index.at("dtype").get<std::string>();
    const SafetensorsFile header = SafetensorsFile::header_only(path);
    for (const SafetensorsFile::Entry& e : header.tensors())
      CHECK_OR_THROW(dtype_name(e.dtype) == dtype, ErrorCode::kInvalidArgument, "checkpoint file ",
                     path, ": tensor '", e.name, "' is ", dtype_name(e.dtype),
                     ", the index's dtype is ", dtype);
  }
  return path;
}

void read_checkpoint_range(const std::string& folder, const nlohmann::json& index,
                           const std::vector<RangeOut>& outs, size_t lo_all, size_t hi_all) {
  std::vector<ParamInfo> layout;
  for (const nlohmann::json& t : index.at("layout")) {
    ParamInfo p;
    p.name = t.at("name").get<std::string>();
    p.offset = t.at("offset").get<size_t>();
    p.numel = t.at("numel").get<size_t>();
    layout.push_back(std::move(p));
  }
  for (const auto& [file, entry] : index.at("files").items()) {
    if (!entry.contains("begin")) continue;
    const size_t fb = entry.at("begin").get<size_t>(), fe = entry.at("end").get<size_t>();
    const size_t lo = std::max(fb, lo_all), hi = std::min(fe, hi_all);
    if (lo >= hi) continue;
    const std::string path = verified_file(folder, index, file);
    const SafetensorsFile header = SafetensorsFile::header_only(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    CHECK_OR_THROW(fd >= 0, ErrorCode::kIo, "checkpoint: cannot open ", path);
    std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
      ::close(*f);
      delete f;
    });
    for (const auto& [kind, out] : outs)
      for (const ParamInfo& p : layout) {
        const size_t a = std::max(p.offset, lo), b = std::min(p.offset + p.numel, hi);
        if (a >= b) continue;
        // The piece of this tensor the file holds starts at max(offset, fb).
        const size_t first = std::max(p.offset, fb) - p.offset;
        const size_t end = std::min(p.offset + p.numel, fe) - p.offset;
        const SafetensorsFile::Entry& e = header.find(piece_name(p, kind, first, end));
        CHECK_OR_THROW(e.dtype == DType::kFloat32 && e.numel() == end - first,
                       ErrorCode::kInvalidArgument, path, ": ", e.name,
                       " has the wrong dtype or size");
        const size_t bytes = (b - a) * sizeof(float);
        const off_t at = static_cast<off_t>(e.offset + (a - p.offset - first) * sizeof(float));
        char* dst = reinterpret_cast<char*>(out + (a - lo_all));
        for (size_t done = 0; done < bytes;) {
          const ssize_t got = ::pread(fd, dst + done, bytes - done, at + static_cast<off_t>(done));
          CHECK_OR_THROW(got > 0, ErrorCode::kIo, "checkpoint: reading ", e.name, " from ", path,
                         " failed");
          done += static_cast<size_t>(got);
        }
        // What training continues from (or an export writes): refused like a weights file's
        // values that are not finite, naming the shard and the piece.
        check_finite(path, e.name, dst, DType::kFloat32, b - a);
      }
  }
}

namespace {

// The checkpoint's layout, tensor by tensor, against the model's (the first that differs is
// named), and its optimizer buffers against this run's.
void check_fits(const nlohmann::json& index, const std::string& index_path, Model& model,
                const std::vector<RangeOut>& kinds, TrainStep& step) {
  const ParamLayout& layout = model.layout();
  const nlohmann::json& saved = index.at("layout");
  for (size_t i = 0; i < std::max(saved.size(), layout.params().size()); ++i) {
    CHECK_OR_THROW(
        i < saved.size() && i < layout.params().size(), ErrorCode::kInvalidArgument, index_path,
        ": the checkpoint has ", saved.size(), " tensors, the model ", layout.params().size(),
        " (first unmatched: ",
        i < saved.size() ? saved[i].at("name").get<std::string>() : layout.params()[i].name, ")");
    const ParamInfo& p = layout.params()[i];
    const bool same = saved[i].at("name") == p.name &&
                      saved[i].at("shape") == nlohmann::json(p.shape) &&
                      saved[i].at("offset").get<size_t>() == p.offset;
    CHECK_OR_THROW(same, ErrorCode::kInvalidArgument, index_path, ": tensor ", i, " is ",
                   saved[i].at("name").get<std::string>(), " ", saved[i].at("shape").dump(),
                   " in the checkpoint and ", p.name, " ", nlohmann::json(p.shape).dump(),
                   " in the model");
  }
  nlohmann::json names = nlohmann::json::array();
  for (const RangeOut& b : kinds) names.push_back(b.kind);
  CHECK_OR_THROW(index.at("buffers") == names, ErrorCode::kInvalidArgument, index_path,
                 ": optimizer ", index.at("optimizer").get<std::string>(), " with buffers ",
                 index.at("buffers").dump(), "; this run's optimizer ", step.optimizer().name(),
                 " keeps ", names.dump());
}

}  // namespace

TrainPosition load_checkpoint(const std::string& folder, Model& model, TrainStep& step,
                              DataParallel& parallel) {
  const std::vector<RangeOut> kinds = buffers(step);
  const Partition& held = step.range();
  nlohmann::json index;
  // The 16-bit weights whole on every rank for the moment (stage 3 releases them again), then
  // this rank's range of every buffer from whichever shards hold it. Ranks read different
  // files: a damaged one is reported on every rank, naming it (collectively).
  parallel.gather_all_params();
  collectively(parallel.communicator(), "loading checkpoint " + folder, [&] {
    index = read_checkpoint_index(folder);
    check_fits(index, (fs::path(folder) / "index.json").string(), model, kinds, step);
    model.load(verified_file(folder, index, "model.safetensors"), true);
    read_checkpoint_range(folder, index, kinds, held.begin, held.end);
  });
  parallel.release_params();
  step.state_from_host();  // a model on a device: they go back down
  step.optimizer().set_step_count(index.at("optimizer_step").get<int64_t>());
  const nlohmann::json& s = index.at("loss_scaler");
  // The config's precision settings win where it fixes them (DynamicLossScaler::resume).
  step.mutable_scaler().resume(s.at("scale").get<float>(), s.at("clean_steps").get<int64_t>(),
                               s.at("hysteresis_left").get<int64_t>(),
                               s.at("skipped_steps").get<int64_t>(),
                               index.at("dtype").get<std::string>() == dtype_name(model.dtype()));
  TrainPosition position;
  position.phase = index.at("phase").get<std::string>();
  position.step = index.at("step").get<int64_t>();
  position.global_step = index.at("global_step").get<int64_t>();
  position.epoch = index.at("epoch").get<int64_t>();
  position.step_in_epoch = index.at("step_in_epoch").get<int64_t>();
  return position;
}

}  // namespace kolo::trainer
