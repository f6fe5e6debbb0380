// Tests for the atomic writer (common/write_file.h) and the cleanup of temporary files
// on signals (common/temp_files.h).
#include "common/write_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/read_file.h"
#include "common/temp_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string Dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path d = fs::path(::testing::TempDir()) / "kiln_write_file_test" / info->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

int FilesIn(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.exists() || e.is_symlink();
  return n;
}

TEST(WriteFileTest, WritesAndReplaces) {
  const std::string dir = Dir();
  const std::string path = dir + "/out.bin";
  ASSERT_TRUE(WriteFile(path, "first", "test").ok());
  ASSERT_TRUE(WriteFile(path, "second", "test").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_EQ(FilesIn(dir), 1);  // no temporary file left
}

// A symlink planted at the destination is replaced by the file; its target is untouched.
TEST(WriteFileTest, NeverWritesThroughASymlink) {
  const std::string dir = Dir();
  const std::string target = dir + "/precious.txt", link = dir + "/out.npy";
  ASSERT_TRUE(WriteFile(target, "precious", "test").ok());
  fs::create_symlink(target, link);
  ASSERT_TRUE(WriteFile(link, "output", "test").ok());
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(*ReadFile(link), "output");
  EXPECT_EQ(*ReadFile(target), "precious");
}

// A write that fails midway (here the file-size limit, as a full disk would) is an
// error, and leaves neither the destination nor a temporary file.
TEST(WriteFileTest, FailedWriteLeavesNothing) {
  const std::string dir = Dir();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1024, 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    const absl::Status s = WriteFile(dir + "/big.bin", std::string(1 << 16, 'x'), "test");
    _exit(s.code() == absl::StatusCode::kDataLoss && s.message().find("big.bin") != absl::string_view::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the failed write was not a DataLoss error naming the file";
  EXPECT_EQ(FilesIn(dir), 0);
}

TEST(WriteFileTest, DirectoryAndMissingFolderAreErrors) {
  const std::string dir = Dir();
  EXPECT_FALSE(WriteFile(dir + "/no/such/folder/x", "x", "test").ok());
  const absl::StatusOr<std::string> read = ReadFile(dir);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("is a directory"), absl::string_view::npos) << read.status();
  EXPECT_EQ(ReadFile(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

// A registered temporary file is removed when SIGTERM ends the process.
TEST(TempFilesTest, SignalRemovesRegisteredFiles) {
  const std::string dir = Dir();
  const std::string tmp = dir + "/out.kiln.tmp.123";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ofstream(tmp) << "half written";
    RegisterTempFile(tmp);
    raise(SIGTERM);
    _exit(3);  // not reached
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(tmp));
}

}  // namespace
}  // namespace kiln
