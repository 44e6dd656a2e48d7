// A checkpoint's index.json checked where it enters (read_checkpoint_index): every field the
// loader, kolo_ckpt and the programs read is present with its type and range, the layout has
// tensors with distinct names, it and the shards' element ranges lie inside the flat buffer,
// one shard per rank, each covering at least its range in bytes, the listed files are plain
// names inside the step folder, and the optimizer and its buffers are ones the trainer writes.
// An index written by hand or damaged is refused naming the file and the key instead of
// reading past a buffer, allocating what it claims, or opening a path outside the folder.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kolo::trainer {

// Throws kolo::Error(kInvalidArgument) "<path>: <key path>: <what is wrong>".
void check_checkpoint_index(const nlohmann::json& index, const std::string& path);

}  // namespace kolo::trainer
