// write_file_atomically: temporary file, fsync, rename, folder fsync.
#include "trainer/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "comm/base/error.h"
#include "trainer/io/file_bytes.h"

namespace kolo::trainer {
namespace {

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) KOLO_THROW_ERRNO("write ", path);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// Folder of `path`.
std::string parent_dir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_output_file(const std::string& path, const std::string& what) {
  KOLO_CHECK_ARG(!path.empty(), what, ": the path is empty");
  require_replaceable_file(path, what);
  const std::string folder = parent_dir(path);
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(folder, ec);
  KOLO_CHECK_ARG(std::filesystem::is_directory(status), what, " ", path, ": its folder ", folder,
                 std::filesystem::exists(status) ? " is not a folder" : " does not exist");
}

void sync_folder(const std::string& folder) {
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const Append&)>& fill) {
  // Checked before the write (no time lost on a long one) and again just before the rename.
  require_replaceable_file(path, "output");
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) KOLO_THROW_ERRNO("open ", tmp, " for writing");
  try {
    fill([&](const void* data, size_t bytes) { write_all(fd, data, bytes, tmp); });
    if (::fsync(fd) != 0) KOLO_THROW_ERRNO("fsync ", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) KOLO_THROW_ERRNO("close ", tmp);
  try {
    require_replaceable_file(path, "output");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    KOLO_THROW_ERRNO("rename ", tmp, " to ", path);
  }
  sync_folder(parent_dir(path));
}

}  // namespace kolo::trainer
