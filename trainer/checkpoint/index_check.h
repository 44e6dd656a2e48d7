// A checkpoint's index.json checked where it enters (read_checkpoint_index): every field the
// loader, kolo_ckpt and the programs read is present with its type and range, the layout has
// tensors with distinct names, it and the shards' element ranges lie inside the flat buffer,
// one shard per rank, each covering at least its range in bytes, the listed files are plain
// names inside the step folder, the optimizer and its buffers are ones the trainer writes, and
// the stored config parses as a config of the trainer's (its program's kolo.* keys are the
// program's to read).
// An index written by hand or damaged is refused naming the file and the key instead of
// reading past a buffer, allocating what it claims, or opening a path outside the folder.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "trainer/config/train_config.h"

namespace kolo::trainer {

// Throws kolo::Error(kInvalidArgument) "<path>: <key path>: <what is wrong>".
void check_checkpoint_index(const nlohmann::json& index, const std::string& path);

// The run's config that the index at `path` stores ("config"), parsed as parse_train_config
// parses a config file, at the index's world size; throws kInvalidArgument "<path>: config:
// <key>: <what is wrong>". check_checkpoint_index() calls it, and a resume reads its settings
// from it.
TrainConfig checkpoint_config(const nlohmann::json& index, const std::string& path);

}  // namespace kolo::trainer
