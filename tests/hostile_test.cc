// Hostile input (ctest, default run): every file of $KILN_HOSTILE_DATA (inputs that
// once crashed or fooled kiln, with a README saying how) ends in a clear error and a
// non-zero exit from the kiln command, or, for the fuzzers' finds, in a status from
// the fuzz target's body, never in a crash; so does every crash the fuzzers found
// since (tests/fuzz/regressions/TARGET/). Skips the data-driven half without the
// variable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/read_file.h"
#include "tests/cli_test_util.h"
#include "tests/fuzz/fuzz_targets.h"

#ifndef KILN_BINARY
#error "KILN_BINARY must name the kiln executable"
#endif
#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::RunResult;
using ::testing::HasSubstr;

std::string Data() {
  const char* d = std::getenv("KILN_HOSTILE_DATA");
  return d == nullptr ? "" : d;
}

#define SKIP_WITHOUT_DATA()                                                                               \
  if (Data().empty()) GTEST_SKIP() << "skipped: KILN_HOSTILE_DATA is not set (e.g. ../shared/data/hostile)"

// Runs kiln and expects a clean failure: exit code 1 (not a signal, not 0) and an
// error on stderr that contains `want`.
void ExpectCleanError(const std::vector<std::string>& args, const std::string& want) {
  const std::string dir = ::kiln::testing::FreshTestDir("kiln_hostile_test");
  const RunResult r = ::kiln::testing::RunProgram(KILN_BINARY, args, dir);
  const std::string cmd = absl::StrJoin(args, " ");
  EXPECT_EQ(r.exit_code, 1) << cmd << "\n--- stdout ---\n" << r.out << "--- stderr ---\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("error:")) << cmd;
  EXPECT_THAT(r.err, HasSubstr(want)) << cmd;
}

std::string File(const std::string& name) { return (fs::path(Data()) / name).string(); }

TEST(HostileTest, OverflowingShapesAreRefusedAtImport) {
  SKIP_WITHOUT_DATA();
  const std::pair<const char*, const char*> cases[] = {
      {"cli_overflow_input_softmax.onnx", "more elements than a 64-bit count holds"},
      {"cli_overflow_input_reducesum.onnx", "more elements than a 64-bit count holds"},
      {"cli_overflow_input_transpose.onnx", "more elements than a 64-bit count holds"},
      {"cli_reshape_wrap_softmax_op17.onnx", "(Reshape): shape"},
      {"cli_reshape_wrap_reducesum_op17.onnx", "(Reshape): shape"},
      {"cli_tile_wrap_op18.onnx", "(Tile): repeats"},
      {"cli_huge_input_dim_2p40.onnx", "at most 2^38 bytes"},
      {"silent_overflow_input_dims.onnx", "more elements than a 64-bit count holds"},
      {"fuzz_tile_overflow.onnx", "(Tile): repeats"},
  };
  for (const auto& [file, want] : cases) {
    ExpectCleanError({"run", File(file), "--reference", "--input", "x=arange"}, want);
    ExpectCleanError({"compile", File(file), "-o", "/tmp/kiln_hostile_never.kiln"}, want);
  }
  EXPECT_FALSE(fs::exists("/tmp/kiln_hostile_never.kiln"));
}

TEST(HostileTest, TensorFilesClaimingMoreThanTheyHoldAreRefused) {
  SKIP_WITHOUT_DATA();
  const std::string model = File("silent_output_name_collision.onnx");  // input x: f32[4]
  ExpectCleanError({"run", model, "--reference", "--input", "x=" + File("huge_shape_2p40.npy")}, "needs more");
  ExpectCleanError({"run", model, "--reference", "--input", "x=" + File("huge_shape_2p33.npy")}, "needs more");
  ExpectCleanError({"run", model, "--reference", "--input", "x=" + File("pb_huge_dims.pb")}, "holds 0 values");
}

TEST(HostileTest, DirectoriesWhereFilesBelongAreRefused) {
  SKIP_WITHOUT_DATA();
  const std::string dir = ::kiln::testing::FreshTestDir("kiln_hostile_dirs");
  const std::string fake_model = dir + "/model.onnx", fake_npy = dir + "/x.npy", fake_bundle = dir + "/m.kiln";
  for (const std::string& d : {fake_model, fake_npy, fake_bundle}) fs::create_directories(d);
  ExpectCleanError({"inspect", fake_model}, "is a directory");
  ExpectCleanError({"compile", fake_model, "-o", dir + "/out.kiln"}, "is a directory");
  ExpectCleanError({"run", fake_model, "--reference"}, "is a directory");
  ExpectCleanError({"run", File("silent_output_name_collision.onnx"), "--reference", "--input", "x=" + fake_npy},
                   "is a directory");
  ExpectCleanError({"run", fake_bundle, "--device", "cpu"}, "not a regular file");
}

TEST(HostileTest, BundlesWhoseManifestLiesAreRefused) {
  SKIP_WITHOUT_DATA();
  ExpectCleanError({"run", File("edit_mlp_in_shape_huge.kiln"), "--device", "cpu", "--input", "x=arange"},
                   "corrupt bundle: input 'x'");
  ExpectCleanError({"inspect", File("inspect_oob_block_mflip_cnn_019.kiln")}, "grid and block need three dims");
  ExpectCleanError({"run", File("edit_cnn_out_binding_weight.kiln"), "--device", "cpu", "--input", "x=random"},
                   "binds weight 'fc.bias'");
}

TEST(HostileTest, OutputsWhoseNamesCollideGetTheirOwnFiles) {
  SKIP_WITHOUT_DATA();
  const std::string dir = ::kiln::testing::FreshTestDir("kiln_hostile_outputs");
  const RunResult r = ::kiln::testing::RunProgram(
      KILN_BINARY, {"run", File("silent_output_name_collision.onnx"), "--reference", "--input", "x=arange",
                    "--output-dir", dir + "/out"},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Outputs 'a/b' (x) and 'a_b' (-x) in two files, each with its own values.
  const auto a = ReadFile(dir + "/out/a%2Fb.npy"), b = ReadFile(dir + "/out/a_b.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(*a, *b);
}

// The compile fuzz target's body takes every real export of the zoo (the seeds
// scripts/fuzz.sh gives it) through the pipeline and the generators without an error.
TEST(HostileTest, CompileTargetTakesTheZooModels) {
  const char* zoo = std::getenv("KILN_ZOO_DATA");
  if (zoo == nullptr || *zoo == '\0') GTEST_SKIP() << "skipped: KILN_ZOO_DATA is not set (e.g. ../shared/data/zoo)";
  int taken = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(zoo, ec)) {
    const fs::path model = e.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    const auto bytes = ReadFile(model.string());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const absl::Status s = fuzz::CompileOnnx(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
    EXPECT_TRUE(s.ok()) << model << ": " << s;
    ++taken;
  }
  EXPECT_GE(taken, 19) << "zoo models under " << zoo;
}

// Every input a fuzzer found (shared data and this repository's regressions) through
// its target's body: it must return, with an error message where it fails.
TEST(HostileTest, FuzzerFindsReplayWithoutCrashing) {
  struct Set {
    fs::path dir;
    std::function<absl::Status(const std::string&)> run;
  };
  auto onnx = [](bool skip) {
    return [skip](const std::string& b) {
      return fuzz::ImportOnnx(reinterpret_cast<const uint8_t*>(b.data()), b.size(), skip);
    };
  };
  const fs::path own = fs::path(KILN_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  std::vector<Set> sets = {
      {own / "onnx_import", onnx(false)},
      {own / "onnx_import_skipchecker", onnx(true)},
      {own / "compile",
       [](const std::string& b) { return fuzz::CompileOnnx(reinterpret_cast<const uint8_t*>(b.data()), b.size()); }},
      {own / "bundle",
       [](const std::string& b) { return fuzz::LoadBundle(reinterpret_cast<const uint8_t*>(b.data()), b.size()); }},
      {own / "tensor_file",
       [](const std::string& b) {
         return fuzz::ReadTensorFiles(reinterpret_cast<const uint8_t*>(b.data()), b.size());
       }},
  };
  if (!Data().empty()) {
    sets.push_back({fs::path(Data()) / "fuzz_default", onnx(false)});
    sets.push_back({fs::path(Data()) / "fuzz_skipchecker", onnx(true)});
  }
  int replayed = 0;
  for (const Set& set : sets) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(set.dir, ec)) {
      if (!e.is_regular_file() || e.path().filename() == "README.md") continue;
      const auto bytes = ReadFile(e.path().string());
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      const absl::Status s = set.run(*bytes);
      EXPECT_TRUE(s.ok() || !s.message().empty()) << e.path();
      ++replayed;
    }
  }
  std::cout << "replayed " << replayed << " fuzzer finds\n";
  if (!Data().empty()) EXPECT_GE(replayed, 12);
}

}  // namespace
}  // namespace kiln
