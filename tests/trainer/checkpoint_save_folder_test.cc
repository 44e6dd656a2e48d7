// The --save checks before training (trainer/checkpoint/save_folder.h) over thread ranks: a
// folder that cannot be written is refused naming it and the OS's reason (a read-only tmpfs,
// mounted where the test may: as root), ranks whose --save names different folders are refused
// on every rank naming the rank and both paths, and a good folder is created and left with no
// probe file in it. Before, both failed only at the first save, after the training.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/thread_ranks.h"
#include "trainer/checkpoint/save_folder.h"

namespace kolo::trainer {
namespace {

namespace fs = std::filesystem;
using kolo::testing::error_of;
using kolo::testing::run_thread_ranks;

// A fresh folder under the temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("kolo_save_folder_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Each rank's error from check_save_folder with rank r's --save dirs[r] ("" where none).
std::vector<std::string> errors_with(const std::vector<fs::path>& dirs) {
  return run_thread_ranks(static_cast<int>(dirs.size()), TransportKind::kShm, [&](Communicator& c) {
    try {
      check_save_folder(c, dirs[static_cast<size_t>(c.rank())].string());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  });
}

TEST(SaveFolder, AFolderEveryRankSeesIsCreatedAndLeftEmpty) {
  TempDir dir;
  const fs::path save = dir.path / "a" / "b";
  EXPECT_EQ(errors_with({save, save, save}), std::vector<std::string>(3));
  ASSERT_TRUE(fs::is_directory(save));
  EXPECT_TRUE(fs::is_empty(save)) << fs::directory_iterator(save)->path();
  // Another spelling of the same folder is the same folder.
  EXPECT_EQ(errors_with({save, dir.path / "a" / "." / "b" / ""}), std::vector<std::string>(2));
  check_writable_folder((save / "not" / "yet").string(), "--save x");
  EXPECT_TRUE(fs::is_empty(save));
}

TEST(SaveFolder, RanksWithDifferentFoldersAreRefusedOnEveryRank) {
  TempDir dir;
  const fs::path a = dir.path / "a", b = dir.path / "b";
  fs::create_directories(b);  // there and writable, but not rank 0's
  const std::vector<std::string> errors = errors_with({a, b});
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("checking the save folder failed on rank 1: --save " + b.string() +
                     " is not the folder rank 0 saves into (" + a.string() + "): rank 0's file"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("must name one folder that every rank sees (a shared file system)"),
              std::string::npos)
        << e;
  }
  EXPECT_EQ(errors[0], errors[1]);
  // Rank 0's probe file is removed after a failure too, and so is the folder it made for the
  // refused run (it was left behind, empty).
  EXPECT_FALSE(fs::exists(a));
  fs::create_directories(a);  // a folder that was there stays
  EXPECT_EQ(errors_with({a, b}).size(), 2u);
  EXPECT_TRUE(fs::is_empty(a));
  const fs::path nested = dir.path / "new1" / "new2" / "ckpt";  // all three made, all removed
  EXPECT_EQ(errors_with({nested, b}).size(), 2u);
  EXPECT_FALSE(fs::exists(dir.path / "new1"));
}

TEST(SaveFolder, AReadOnlyFolderIsRefusedNamingItAndTheReason) {
  TempDir dir;
  const fs::path ro = dir.path / "ro";
  fs::create_directories(ro);
  if (::mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0)
    GTEST_SKIP() << "mounting a read-only tmpfs needs root: " << std::strerror(errno);
  struct Unmount {
    fs::path path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{ro};
  // train_mnist's check of its weights file's folder, and a folder not there yet.
  EXPECT_NE(
      error_of([&] { check_writable_folder(ro.string(), "--save m.st"); }, ErrorCode::kIo)
          .find("--save m.st: cannot create a file in " + ro.string() + ": Read-only file system"),
      std::string::npos);
  EXPECT_NE(
      error_of([&] { check_writable_folder((ro / "new").string(), "--save x"); }, ErrorCode::kIo)
          .find("cannot create a file in " + ro.string() + " (the nearest existing folder of " +
                (ro / "new").string() + ", which is not there yet): Read-only file system"),
      std::string::npos);
  // train_bert's checkpoint folder, an existing one and one to create.
  for (const fs::path& save : {ro, ro / "new"}) {
    const std::vector<std::string> errors = errors_with({save, save});
    for (const std::string& e : errors)
      EXPECT_NE(e.find("checking the save folder failed on rank 0: --save " + save.string()),
                std::string::npos)
          << e;
    EXPECT_NE(errors[0].find("Read-only file system"), std::string::npos) << errors[0];
    EXPECT_EQ(errors[0], errors[1]);
  }
}

}  // namespace
}  // namespace kolo::trainer
