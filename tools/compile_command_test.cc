// `kiln compile` as a subprocess: the kernel cache (and --no-kernel-cache), the
// progress output when stderr is not a terminal, --dump-kernels, the usage text.

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/architectures.h"
#include "tests/cli_test_util.h"

#ifndef KILN_BINARY
#error "KILN_BINARY must name the kiln executable"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = ::kiln::testing::RunResult;
using ::kiln::testing::ReadFileOrEmpty;

class CompileCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) /
            absl::StrCat("kiln_compile_command_", ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    onnx_ = dir_ + "/mlp.onnx";
    auto model = models::MakeModel("mlp", {});
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(models::WriteModel(*model, onnx_).ok());
  }
  // `KILN_CACHE_DIR=cache kiln ARGS` (split at spaces) with stdout and stderr in
  // files (not terminals).
  Result Kiln(const std::string& args, const std::string& cache_dir) {
    return ::kiln::testing::RunProgram(KILN_BINARY, ::kiln::testing::Words(args), dir_,
                                       {absl::StrCat("KILN_CACHE_DIR=", cache_dir)});
  }
  std::string Compile(const std::string& extra = "") {
    return absl::StrCat("compile ", onnx_, " -o ", dir_, "/mlp.kiln --arch sm_80 ", extra);
  }
  std::string dir_;
  std::string onnx_;
};

TEST_F(CompileCommandTest, UsageListsTheNewFlags) {
  Result r = Kiln("compile --help", dir_ + "/cache");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--no-kernel-cache"));
  EXPECT_THAT(r.out, HasSubstr("--dump-kernels DIR"));
  EXPECT_THAT(r.out, HasSubstr("KILN_CACHE_DIR"));
}

TEST_F(CompileCommandTest, LayoutFlag) {
  Result help = Kiln("compile --help", dir_ + "/cache");
  EXPECT_THAT(help.out, HasSubstr("--layout auto|nchw|nhwc"));
  Result passes = Kiln("compile --dump-after help", dir_ + "/cache");
  EXPECT_THAT(passes.out, HasSubstr("to-channels-last"));
  Result bad = Kiln(Compile("--layout chwn"), dir_ + "/cache");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("unsupported --layout 'chwn': choose auto, nchw or nhwc"));
  // A small CNN: the dump after the pass shows channels-last convs; nchw has none.
  const std::string cnn = dir_ + "/cnn.onnx";
  auto model = models::MakeModel("tiny_cnn", {});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(models::WriteModel(*model, cnn).ok());
  const std::string base = absl::StrCat("compile ", cnn, " -o ", dir_, "/cnn.kiln --arch sm_80 --dump-after all ");
  Result nhwc = Kiln(base + "--layout nhwc", dir_ + "/cache");
  ASSERT_EQ(nhwc.exit_code, 0) << nhwc.err;
  EXPECT_THAT(nhwc.out, HasSubstr("// after to-channels-last"));
  EXPECT_THAT(nhwc.out, HasSubstr("channels_last = 1"));
  Result only = Kiln(absl::StrCat("compile ", cnn, " -o ", dir_, "/cnn2.kiln --arch sm_80 --dump-after to-channels-last"),
                     dir_ + "/cache");
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_THAT(only.out, HasSubstr("// after to-channels-last"));
  Result nchw = Kiln(base + "--layout nchw", dir_ + "/cache");
  ASSERT_EQ(nchw.exit_code, 0) << nchw.err;
  EXPECT_THAT(nchw.out + nchw.err, Not(HasSubstr("channels_last")));
}

TEST_F(CompileCommandTest, SecondCompileComesFromTheCacheAndLogsStayClean) {
  const std::string cache = dir_ + "/cache";
  Result cold = Kiln(Compile(), cache);
  ASSERT_EQ(cold.exit_code, 0) << cold.out << cold.err;
  // Not a terminal: one summary line on stderr, no bar, no carriage returns.
  EXPECT_THAT(cold.err, HasSubstr(" compiled by NVRTC, 0 from the kernel cache ("));
  EXPECT_THAT(cold.err, Not(HasSubstr("\r")));
  EXPECT_THAT(cold.err, Not(HasSubstr("[#")));
  EXPECT_EQ(std::count(cold.err.begin(), cold.err.end(), '\n'), 1) << cold.err;
  EXPECT_TRUE(fs::exists(cache + "/kernels-v1"));
  const std::string cold_bundle = ReadFileOrEmpty(dir_ + "/mlp.kiln");

  Result warm = Kiln(Compile(), cache);
  ASSERT_EQ(warm.exit_code, 0) << warm.out << warm.err;
  EXPECT_THAT(warm.err, HasSubstr(": 0 compiled by NVRTC, "));
  EXPECT_THAT(warm.err, Not(HasSubstr(", 0 from the kernel cache")));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/mlp.kiln"), cold_bundle) << "the same bundle, byte for byte";

  Result off = Kiln(Compile("--no-kernel-cache"), cache);
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  EXPECT_THAT(off.err, HasSubstr("kernel cache off"));
}

TEST_F(CompileCommandTest, UnwritableCacheWarnsAndCompiles) {
  std::ofstream(dir_ + "/file") << "x";
  Result r = Kiln(Compile(), dir_ + "/file");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("kiln: warning: kernel cache: cannot create"));
  EXPECT_TRUE(fs::exists(dir_ + "/mlp.kiln"));
}

TEST_F(CompileCommandTest, DumpKernels) {
  Result r = Kiln(Compile(absl::StrCat("--dump-kernels ", dir_, "/dump")), dir_ + "/cache");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("kernel dump: " + dir_ + "/dump/index.md"));
  const std::string index = ReadFileOrEmpty(dir_ + "/dump/index.md");
  EXPECT_THAT(index, HasSubstr("# kiln kernel dump"));
  EXPECT_THAT(index, HasSubstr(".cu |"));
  EXPECT_THAT(index, HasSubstr(".ptx |"));
  EXPECT_THAT(index, HasSubstr("launch.txt |"));
  EXPECT_THAT(index, HasSubstr("subgraph.txt |"));

  // A directory with someone else's files is refused.
  Result refused = Kiln(Compile(absl::StrCat("--dump-kernels ", dir_)), dir_ + "/cache");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("not empty"));
}

}  // namespace
}  // namespace kiln
