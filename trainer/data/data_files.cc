// Data-set file access shared by the MNIST, vocabulary and mail-corpus loaders.
#include "trainer/data/data_files.h"

#include <cstdlib>

#include "comm/base/error.h"
#include "trainer/io/file_bytes.h"

namespace kolo::trainer {

std::filesystem::path default_data_dir() {
  const char* env = std::getenv("KOLO_DATA_DIR");
  return (env != nullptr && *env != '\0') ? std::filesystem::path(env)
                                          : std::filesystem::path("data");
}

void require_data_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return;
  KOLO_THROW(ErrorCode::kIo, what, " not found at ", path.string(),
             ": run `bash scripts/fetch_data.sh` (it downloads the data sets into data/;"
             " set KOLO_DATA_DIR or pass --data DIR if they live elsewhere)");
}

std::string read_data_file(const std::filesystem::path& path, const std::string& what) {
  require_data_file(path, what);
  // The data sets' files are a few MiB each (a mail of 200 MB still loads); this bounds what a
  // wrong file can make the loader allocate.
  constexpr uintmax_t kMaxDataFileBytes = uintmax_t{1} << 30;
  return read_file_bytes(path, what + " file", kMaxDataFileBytes);
}

}  // namespace kolo::trainer
