// read_file_bytes: stat, then open and read a regular file of bounded size.
#include "trainer/io/file_bytes.h"

#include <fstream>

#include "comm/base/error.h"

namespace kolo::trainer {

namespace fs = std::filesystem;

namespace {

const char* kind_of(const fs::file_status& status) {
  return fs::is_directory(status) ? "a folder"
         : fs::is_fifo(status)    ? "a FIFO"
         : fs::is_socket(status)  ? "a socket"
                                  : "a device";
}

}  // namespace

void require_regular_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symlinks
  // A symbolic link loop (ELOOP) is there but cannot be followed: not "missing".
  if (ec && ec != std::errc::no_such_file_or_directory)
    KOLO_THROW(ErrorCode::kIo, what, " ", path.string(), " cannot be resolved (", ec.message(),
               ")");
  if (!fs::exists(status)) KOLO_THROW(ErrorCode::kIo, what, " ", path.string(), " does not exist");
  KOLO_CHECK_ARG(fs::is_regular_file(status), what, " ", path.string(), " is not a regular file (",
                 kind_of(status), ")");
}

void require_replaceable_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symlinks
  if (!fs::exists(status)) return;  // nothing there yet, or a dangling symlink (replaced)
  KOLO_CHECK_ARG(fs::is_regular_file(status), what, " ", path.string(), " exists and is not a",
                 " regular file (", kind_of(status), "); refusing to replace it");
}

std::string read_file_bytes(const fs::path& path, const std::string& what, uintmax_t max_bytes) {
  require_regular_file(path, what);
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) KOLO_THROW(ErrorCode::kIo, what, " ", path.string(), ": ", ec.message());
  KOLO_CHECK_ARG(size <= max_bytes, what, " ", path.string(), " holds ", size,
                 " bytes, more than one can (at most ", max_bytes, ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) KOLO_THROW_ERRNO(what, " ", path.string(), ": cannot open");
  std::string bytes;
  bytes.reserve(static_cast<size_t>(size));
  // At most max_bytes + 1 even if the file grew since the stat.
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.append(buffer, static_cast<size_t>(in.gcount()));
    KOLO_CHECK_ARG(bytes.size() <= max_bytes, what, " ", path.string(), " grew past ", max_bytes,
                   " bytes while it was read");
  }
  if (in.bad()) KOLO_THROW_ERRNO(what, " ", path.string(), ": cannot read");
  return bytes;
}

}  // namespace kolo::trainer
