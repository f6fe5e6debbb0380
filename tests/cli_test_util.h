// Running the `kiln` program from tests: a fresh folder per test, the program run
// as a subprocess (posix_spawn, no shell) with stdout and stderr captured through
// files, and its result. Shared by the CLI tests (tests/cli_test.cc,
// tests/bundle_cli_test.cc, tools/compile_command_test.cc).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace kiln::testing {

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally (signal) or could not start
  std::string out;
  std::string err;
};

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A fresh folder for the running test: TempDir()/group/<suite>.<test>.
inline std::string FreshTestDir(const std::string& group) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / group / absl::StrCat(info->test_suite_name(), ".", info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Runs `binary args...` with stdout and stderr captured through files in `dir`, the
// environment plus `env` ("NAME=value" entries, which override).
inline RunResult RunProgram(const std::string& binary, const std::vector<std::string>& args, const std::string& dir,
                            const std::vector<std::string>& env = {}) {
  RunResult result;
  const std::string out_path = (std::filesystem::path(dir) / "stdout.txt").string();
  const std::string err_path = (std::filesystem::path(dir) / "stderr.txt").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& x : env) overridden |= x.substr(0, x.find('=')) == name;
    if (!overridden) env_storage.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err = absl::StrCat("posix_spawn(", binary, ") failed: ", std::strerror(rc));
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  return result;
}

// The words of `line` (split at spaces; for argument lists without quoting).
inline std::vector<std::string> Words(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

}  // namespace kiln::testing
