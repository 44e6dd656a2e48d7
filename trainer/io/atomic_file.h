// Files written atomically: the content goes to a temporary file in the same folder, which is
// fsynced and renamed over the target, and then the folder is fsynced. On any failure the
// temporary is removed and the target is untouched. Weights, checkpoint shards, checkpoint
// indexes and `latest` are all written this way.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace kolo::trainer {

// fill(append) writes the content through append(data, bytes), in order.
using Append = std::function<void(const void* data, size_t bytes)>;
void write_file_atomically(const std::string& path, const std::function<void(const Append&)>& fill);

// fsync of a folder, so that a rename inside it is durable (best effort: some file systems
// refuse fsync on folders).
void sync_folder(const std::string& folder);

}  // namespace kolo::trainer
