// Sharded training checkpoints: one folder per step (DIR/step-000100/) with
//   rank-RRRRR-of-NNNNN.safetensors  rank r's range of the flat buffers (ZeRO's partition for
//                                    N ranks, at every stage): fp32 master weights and the
//                                    optimizer's states, one tensor per Hugging Face name and
//                                    range ("<name>.exp_avg[first:end]", element indices);
//   model.safetensors                the 16-bit weights under their Hugging Face names (a model
//                                    others can load);
//   index.json                       layout, partitions, world size, stage, position, loss
//                                    scaler, config, kolo version, and the SHA-256 of each file.
// Writes are atomic: the folder is written under a temporary name, every file is fsynced, the
// index comes last, the folder is renamed, and DIR/latest is replaced after it. A folder of the
// same step saved before (by a run that went further) is swapped out in one rename and removed
// only once DIR/latest names the new one. A resume at any world size and stage reads, on each
// rank, only the byte ranges of its own new range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/dist/data_parallel.h"
#include "trainer/model/model.h"
#include "trainer/train/train_step.h"

namespace kolo::trainer {

// Where training stands when a checkpoint is written: what a resume continues from.
struct TrainPosition {
  std::string phase;          // the program's phase name ("pretrain", "finetune", "train")
  int64_t step = 0;           // optimizer steps done in the phase (applied and skipped)
  int64_t global_step = 0;    // steps of the whole run: the folder's number
  int64_t epoch = 0;          // epoch of the next step
  int64_t step_in_epoch = 0;  // steps of that epoch already done
};

// Collective over the data-parallel ranks. Writes DIR/step-<global_step>/ and then DIR/latest;
// `keep` > 0 removes older step folders beyond the newest `keep` once the new one is complete.
// First removes what a save that was killed left in DIR (and puts back a step folder it had
// set aside). Any rank's failure (a full disk, a permission) is the same error on every rank,
// naming the rank, the file it failed to write and why ("checkpoint DIR/step-000012 failed on
// rank 1: writing model.safetensors: ..."), and DIR/latest still names the previous checkpoint.
// Returns the folder written.
std::string save_checkpoint(const std::string& dir, Model& model, TrainStep& step,
                            DataParallel& parallel, const TrainPosition& position,
                            const nlohmann::json& config, int64_t keep = 0);

// The step folder `path` names: itself when it holds index.json, else the folder DIR/latest
// names (or, when a save killed while replacing that step left it aside, its aside copy
// DIR/.step-NNNNNN.replaced). Throws naming what is missing.
std::string resolve_checkpoint(const std::string& path);

// Collective: restores this rank's model, master weights, optimizer states, step count and
// loss scaler from `folder` (resolve_checkpoint's result), whatever world size and stage wrote
// it. Checks every file it reads against the index (size and SHA-256) and the layout against
// the model's (naming the first tensor that differs); a failure on any rank is an error on
// every rank with that rank's message. Returns the position to continue from.
TrainPosition load_checkpoint(const std::string& folder, Model& model, TrainStep& step,
                              DataParallel& parallel);

// The path of `file` in `folder` after its size and SHA-256 agree with the index (and for
// model.safetensors, each tensor's dtype with the index's dtype); throws naming the file and
// what failed.
std::string verified_file(const std::string& folder, const nlohmann::json& index,
                          const std::string& file);
// Elements [begin, end) of flat buffers ("master", "exp_avg", ...) into out[0, end - begin),
// read from whichever shards hold them (each verified once). Padding between tensors is left
// as it is. A value that is inf or NaN is refused naming the shard and the tensor.
struct RangeOut {
  std::string kind;
  float* out;
};
void read_checkpoint_range(const std::string& folder, const nlohmann::json& index,
                           const std::vector<RangeOut>& outs, size_t begin, size_t end);

// An entry of `dir` that belongs to checkpoints ("latest" first, else the first folder named
// "step-" and digits, by name), or "" when it holds none or does not exist: what a fresh run
// saving into `dir` would replace one save at a time.
std::string checkpoint_entry(const std::string& dir);
// Whether a run resumed from `resume` and saving into `save_dir` continues the run that saved
// there: `resume` is that folder itself or a step folder directly inside it (canonical paths
// compared, so "dir/", "./dir" and a symbolic link to it are the same folder).
bool continues_save_folder(const std::string& resume, const std::string& save_dir);

// The index of a step folder, parsed and checked for its format.
nlohmann::json read_checkpoint_index(const std::string& folder);
// Bytes of the regular files in a folder (a step folder's size).
size_t folder_bytes(const std::string& folder);

}  // namespace kolo::trainer
