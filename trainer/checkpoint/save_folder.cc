// The --save checks before training: a probe file created and removed in the folder, and rank
// 0's token read back by every rank at its own path.
#include "trainer/checkpoint/save_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "comm/base/error.h"
#include "trainer/checkpoint/collectively.h"

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;

// 16 hex digits, so that probe files of ranks (threads or processes) never share a name.
std::string random_token() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

// Creates `path` (it must not exist) holding `text`; throws naming `what`, the folder and errno.
void create_file(const fs::path& path, const std::string& text, const std::string& what,
                 const std::string& folder) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool written =
      fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (written) return;
  if (fd >= 0) ::unlink(path.c_str());
  KOLO_THROW(ErrorCode::kIo, what, ": cannot create a file in ", folder, ": ",
             std::strerror(error));
}

}  // namespace

void check_writable_folder(const std::string& folder, const std::string& what) {
  std::error_code ec;
  const fs::path given = fs::absolute(folder.empty() ? "." : folder, ec);
  fs::path at = given;
  while (!fs::exists(at, ec) && at.has_relative_path()) at = at.parent_path();
  const std::string shown = at == given ? folder
                                        : at.string() + " (the nearest existing folder of " +
                                              folder + ", which is not there yet)";
  const fs::path probe = at / (".kolo-write-check." + random_token());
  create_file(probe, "", what, shown);
  ::unlink(probe.c_str());
}

void check_save_folder(Communicator& comm, const std::string& dir) {
  const std::string what = "--save " + dir;
  // Rank 0's token and folder ("<token>\n<absolute folder>"), broadcast to the others.
  constexpr size_t kBlock = 8192;
  std::vector<char> block(kBlock, 0);
  // Rank 0 removes its token file once every rank has looked (or failed), and the folders it
  // made for a run that is refused (those still empty, deepest first).
  struct RemoveProbe {
    fs::path path;
    std::vector<fs::path> made;
    bool refused = true;
    ~RemoveProbe() {
      if (!path.empty()) ::unlink(path.c_str());
      std::error_code ignored;
      if (refused)
        for (const fs::path& folder : made) fs::remove(folder, ignored);
    }
  } rank0_probe;
  collectively(comm, "checking the save folder", [&] {
    if (comm.rank() != 0) return;
    std::error_code made, exists;
    for (fs::path folder = fs::absolute(dir, exists).lexically_normal();
         folder.has_relative_path() && !fs::exists(folder, exists); folder = folder.parent_path())
      rank0_probe.made.push_back(folder);
    fs::create_directories(dir, made);
    if (made)
      KOLO_THROW(ErrorCode::kIo, what, ": rank 0 cannot create the folder: ", made.message());
    const std::string token = random_token();
    const fs::path probe = fs::path(dir) / (".kolo-save-check." + token);
    create_file(probe, token, what, dir);
    rank0_probe.path = probe;
    const std::string text = token + "\n" + fs::absolute(dir).lexically_normal().string();
    text.copy(block.data(), kBlock - 1);
  });
  comm.broadcast(block.data(), kBlock, DType::kUInt8, 0);
  const std::string text(block.data());
  const std::string token = text.substr(0, text.find('\n'));
  const std::string rank0_dir = text.substr(text.find('\n') + 1);
  collectively(comm, "checking the save folder", [&] {
    if (comm.rank() == 0) return;
    const fs::path probe = fs::path(dir) / (".kolo-save-check." + token);
    char read_back[64] = {};
    const int fd = ::open(probe.c_str(), O_RDONLY | O_CLOEXEC);
    const int error = errno;
    if (fd >= 0) {
      (void)::read(fd, read_back, sizeof read_back - 1);
      ::close(fd);
    }
    if (fd < 0 || token != read_back)
      KOLO_THROW(ErrorCode::kInvalidArgument, what, " is not the folder rank 0 saves into (",
                 rank0_dir, "): rank 0's file ", probe.filename().string(), " is not there (",
                 fd < 0 ? std::strerror(error) : "other content",
                 "); every rank writes its shard into the step folder rank 0 creates, so --save "
                 "must name one folder that every rank sees (a shared file system)");
    check_writable_folder(dir, what);
  });
  rank0_probe.refused = false;
}

}  // namespace kolo::trainer
