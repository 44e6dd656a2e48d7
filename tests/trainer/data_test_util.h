// Shared by the data-pipeline tests: the data directory the build points at (KOLO_DATA_DIR).
// Tests that read data/ fail, with the loader's "run bash scripts/fetch_data.sh" message, when
// it is absent; they never skip.
#pragma once

#include <filesystem>

namespace kolo::trainer::testing {

inline std::filesystem::path data_dir() {
  return KOLO_DATA_DIR;
}

}  // namespace kolo::trainer::testing
