// A checkpoint's index.json checked where it enters (read_checkpoint_index): every field the
// loader, kolo_ckpt and the programs read is present with its type and range, the layout and
// the shards' element ranges lie inside the flat buffer, each shard covers at least its range
// in bytes, and the listed files are plain names inside the step folder. An index written by
// hand or damaged is refused naming the file and the key instead of reading past a buffer,
// allocating what it claims, or opening a path outside the folder.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kolo::trainer {

// Throws kolo::Error(kInvalidArgument) "<path>: <key path>: <what is wrong>".
void check_checkpoint_index(const nlohmann::json& index, const std::string& path);

}  // namespace kolo::trainer
