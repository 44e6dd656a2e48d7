// Whole files from outside the process (configs, data sets, checkpoint indexes and pointers),
// read only when they are what they claim: a regular file (checked before the open, since a
// FIFO's open blocks for ever and a device such as /dev/zero never ends) of at most a size the
// caller names, so that a wrong path gives an error naming the file instead of a hang or an
// allocation that exhausts the host's memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kolo::trainer {

// The bytes of `path`, or kolo::Error naming "<what> <path>": kIo when it is missing or cannot
// be read, kInvalidArgument when it is not a regular file (a folder, FIFO, socket or device,
// through symlinks too) or holds more than `max_bytes`.
std::string read_file_bytes(const std::filesystem::path& path, const std::string& what,
                            uintmax_t max_bytes);

// Refuses (as above) what is not a regular file, before anything opens it.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// For a file about to be written by replacing it (write_file_atomically): refuses, naming
// "<what> <path>", a path that exists and is not a regular file (a device node, FIFO, socket or
// folder, through symlinks too), which a rename would otherwise replace. A missing path passes.
void require_replaceable_file(const std::filesystem::path& path, const std::string& what);

}  // namespace kolo::trainer
