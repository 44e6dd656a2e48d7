// read_file_bytes on what a wrong path can be (found by a sweep: a FIFO in place of a data file,
// vocab.json, index.json, latest or a --load file blocked in open() for ever; /dev/zero behind
// a data file or `latest` was read until the host ran out of memory).
#include "trainer/io/file_bytes.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "comm/base/error.h"

namespace {

namespace fs = std::filesystem;
using kolo::trainer::read_file_bytes;

struct Folder {
  fs::path path = fs::temp_directory_path() / ("kolo_file_bytes_" + std::to_string(::getpid()));
  Folder() { fs::create_directories(path); }
  ~Folder() { fs::remove_all(path); }
};

std::string refusal(const fs::path& path, uintmax_t max_bytes = 1 << 20) {
  try {
    read_file_bytes(path, "test file", max_bytes);
  } catch (const kolo::Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(FileBytes, ReadsARegularFileThroughASymlink) {
  Folder dir;
  std::ofstream(dir.path / "a.json") << "{\"x\": 1}";
  fs::create_symlink(dir.path / "a.json", dir.path / "link");
  EXPECT_EQ(read_file_bytes(dir.path / "link", "test file", 100), "{\"x\": 1}");
  EXPECT_EQ(read_file_bytes(dir.path / "a.json", "test file", 8), "{\"x\": 1}");  // exactly max
}

TEST(FileBytes, RefusesWhatIsNotARegularFileBeforeOpeningIt) {
  Folder dir;
  ASSERT_EQ(::mkfifo((dir.path / "fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir.path / "zero");
  fs::create_directories(dir.path / "folder");
  for (const auto& [name, kind] :
       {std::pair{"fifo", "a FIFO"}, {"zero", "a device"}, {"folder", "a folder"}}) {
    const std::string message = refusal(dir.path / name);
    EXPECT_NE(message.find(std::string(name) + " is not a regular file (" + kind + ")"),
              std::string::npos)
        << message;
  }
  EXPECT_NE(refusal(dir.path / "absent").find("absent does not exist"), std::string::npos);
}

TEST(FileBytes, RefusesAFileLargerThanItsKindCanBe) {
  Folder dir;
  std::ofstream(dir.path / "big") << std::string(1000, 'x');
  const std::string message = refusal(dir.path / "big", 999);
  EXPECT_NE(message.find("test file " + (dir.path / "big").string() + " holds 1000 bytes"),
            std::string::npos)
      << message;
}

}  // namespace
