// Files written atomically: the content goes to a temporary file in the same folder, which is
// fsynced and renamed over the target, and then the folder is fsynced. On any failure the
// temporary is removed and the target is untouched. Weights, checkpoint shards, checkpoint
// indexes and `latest` are all written this way. A target that exists and is not a regular file
// (a device node, FIFO, socket or folder) is refused naming it: a rename would replace the node
// itself (a /dev/full replaced by a file), not write into it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace kolo::trainer {

// fill(append) writes the content through append(data, bytes), in order.
using Append = std::function<void(const void* data, size_t bytes)>;
void write_file_atomically(const std::string& path, const std::function<void(const Append&)>& fill);

// Before a long computation whose result write_file_atomically() will put at `path`: refuses,
// naming "<what> <path>", what that write would fail on at the end: an empty path, a target that
// exists and is not a regular file, a folder that does not exist or is not a folder.
void check_output_file(const std::string& path, const std::string& what);

// fsync of a folder, so that a rename inside it is durable (best effort: some file systems
// refuse fsync on folders).
void sync_folder(const std::string& folder);

}  // namespace kolo::trainer
