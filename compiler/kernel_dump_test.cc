// Tests for --dump-kernels (compiler/kernel_dump.h) and the kernel cache and progress
// as the compiler drives them. NVRTC only: no GPU needed.
#include "compiler/kernel_dump.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "compiler/compiler.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// MatMul + bias + Relu (a fused group), a Reshape the planner aliases (a view) and
// a Softmax; one node name needs escaping.
constexpr char kGraph[] = R"(graph @dump {
  input %x : f32[4,8]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.25)
  const %shape : i64[2] = [8, 8]
  %mm : f32[4,16] = MatMul(%x, %w) @matmul_1
  %add : f32[4,16] = Add(%mm, %b) @"bias add/2"
  %r : f32[4,16] = Relu(%add) @relu_3
  %y : f32[8,8] = Reshape(%r, %shape) @reshape_4
  %z : f32[8,8] = Softmax(%y) {axis = -1} @softmax_5
  output %z
})";

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string TestDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kiln_kernel_dump_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

absl::StatusOr<BundleContents> Build(const CompileOptions& options) {
  auto graph = ParseGraph(kGraph);
  if (!graph.ok()) return graph.status();
  return BuildBundle(**graph, options, "dump.onnx", "bytes");
}

// The folder under DIR/steps whose name ends with `suffix`.
fs::path StepFolder(const std::string& dir, const std::string& suffix) {
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "steps")) {
    if (absl::EndsWith(e.path().filename().string(), suffix)) return e.path();
  }
  return {};
}

// Every "| file | bytes |" row of the index matches the file on disk; returns the count.
int CheckIndexedSizes(const std::string& dir) {
  const std::string index = Slurp(fs::path(dir) / "index.md");
  const size_t files = index.find("## Files");
  EXPECT_NE(files, std::string::npos);
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(index).substr(files), '\n')) {
    if (!absl::StartsWith(line, "| steps/")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, " | ");
    EXPECT_EQ(cells.size(), 2u) << line;
    if (cells.size() != 2) continue;
    const std::string path = cells[0].substr(2);
    const std::string bytes = cells[1].substr(0, cells[1].size() - 2);
    EXPECT_EQ(std::to_string(fs::file_size(fs::path(dir) / path)), bytes) << path;
    ++rows;
  }
  return rows;
}

TEST(KernelDumpTest, SafeFileNames) {
  EXPECT_EQ(SafeFileName("matmul_1"), "matmul_1");
  EXPECT_EQ(SafeFileName("bias add/2"), "bias_add_2");
  EXPECT_EQ(SafeFileName("../../etc/passwd"), "_.._etc_passwd");  // one component, not ".."
  EXPECT_EQ(SafeFileName("..."), "_");
  EXPECT_EQ(SafeFileName(""), "_");
  EXPECT_EQ(SafeFileName("a:b*c?\"d\""), "a_b_c_d_");
  EXPECT_EQ(SafeFileName(std::string(200, 'x')).size(), 64u);
}

// MatMul groups on kiln's generated GEMM for `arch`, dumped into `dir`, no kernel cache.
CompileOptions GeneratedDumpOptions(const std::string& arch, const std::string& dir) {
  CompileOptions options;
  options.arch = arch;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.kernel_cache = false;
  options.dump_kernels_dir = dir;
  return options;
}

TEST(KernelDumpTest, FusedGroupsGetSourcePtxConfigResourcesAndSubgraph) {
  const std::string dir = TestDir("fused") + "/out";
  auto bundle = Build(GeneratedDumpOptions("sm_80", dir));
  ASSERT_TRUE(bundle.ok()) << bundle.status();

  const std::string index = Slurp(fs::path(dir) / "index.md");
  EXPECT_THAT(index, HasSubstr("# kiln kernel dump"));
  EXPECT_THAT(index, HasSubstr("--gpu-architecture=sm_80"));
  EXPECT_THAT(index, HasSubstr("--ptxas-options=-v"));
  EXPECT_THAT(index, HasSubstr(FindCuobjdump().empty() ? "no SASS" : "SASS from"));
  EXPECT_THAT(index, HasSubstr("view: the output aliases"));  // the Reshape: listed, no folder

  // The MatMul group: one folder with everything.
  int groups = 0;
  for (const bundle::Step& step : bundle->manifest.steps()) {
    if (step.op_type() != "FusedGroup" || step.launches_size() == 0) continue;
    ++groups;
    const fs::path folder = StepFolder(dir, "_" + SafeFileName(step.node()));
    ASSERT_FALSE(folder.empty()) << step.node();
    EXPECT_EQ(folder.filename().string().substr(0, 5), absl::StrFormat("%04d_", step.index()));
    const std::string fn = step.launches(0).function();
    const std::string cu = Slurp(folder / (fn + ".cu"));
    EXPECT_THAT(cu, HasSubstr("kiln_f16_to_f32")) << "the prelude is in the source";
    EXPECT_THAT(cu, HasSubstr("#define KILN_KERNEL " + fn));
    EXPECT_THAT(Slurp(folder / (fn + ".ptx")), HasSubstr(".entry " + fn));
    EXPECT_EQ(Slurp(folder / (fn + ".cubin")).substr(0, 4), std::string("\x7f"
                                                                        "ELF",
                                                                        4));
    EXPECT_THAT(Slurp(folder / (fn + ".ptxas.txt")), HasSubstr("Used "));
    const std::string subgraph = Slurp(folder / "subgraph.txt");
    if (cu.find("#define BM ") == std::string::npos) continue;  // the Softmax group, if formed
    EXPECT_THAT(subgraph, HasSubstr("matmul_1, bias add/2, relu_3"));
    EXPECT_THAT(subgraph, HasSubstr("MatMul("));
    const std::string launch = Slurp(folder / "launch.txt");
    EXPECT_THAT(launch, HasSubstr("matmul_1, bias add/2, relu_3"));  // the ONNX nodes
    EXPECT_THAT(launch, HasSubstr("GEMM tile: BM="));
    EXPECT_THAT(launch, HasSubstr("GEMM problem: "));
    EXPECT_THAT(launch, HasSubstr("GEMM_K=8"));
    EXPECT_THAT(launch, HasSubstr(absl::StrCat("dynamic shared memory ", step.launches(0).shared_bytes(), " bytes")));
    EXPECT_THAT(launch, HasSubstr("registers per thread"));
    EXPECT_THAT(launch, HasSubstr("spill stores 0 bytes"));
    EXPECT_THAT(launch, HasSubstr("0: output 0 %"));
  }
  EXPECT_GE(groups, 1);
  EXPECT_GT(CheckIndexedSizes(dir), 5);
}

// On sm_90a the MatMul group runs the Hopper family, and its launch says which tile
// config the heuristic picked and for what epilogue (bias + ReLU: light work).
TEST(KernelDumpTest, Sm90GroupsNameTheirTileConfig) {
  const std::string dir = TestDir("sm90") + "/out";
  // fp16 in (an fp32 input's Cast would become a prologue loading fp32, which TMA
  // cannot feed: the sm_80 template).
  auto graph = ParseGraph(R"(graph @sm90 {
  input %x : f16[64,64]
  const %w : f16[64,128] = splat(0.5)
  const %b : f16[128] = splat(0.25)
  %mm : f16[64,128] = MatMul(%x, %w) @matmul_1
  %add : f16[64,128] = Add(%mm, %b) @"bias add/2"
  %r : f16[64,128] = Relu(%add) @relu_3
  output %r
})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto bundle = BuildBundle(**graph, GeneratedDumpOptions("sm_90a", dir), "dump.onnx", "bytes");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  int gemms = 0;
  for (const bundle::Step& step : bundle->manifest.steps()) {
    if (step.launches_size() == 0 || step.launches(0).family() != "gemm_sm90") continue;
    ++gemms;
    EXPECT_THAT(step.launches(0).config(), HasSubstr("(heuristic, epilogue work: light)"));
    const std::string launch = Slurp(StepFolder(dir, "_" + SafeFileName(step.node())) / "launch.txt");
    EXPECT_THAT(launch, HasSubstr("GEMM config: sm90 "));
    EXPECT_THAT(launch, HasSubstr("(heuristic, epilogue work: light)"));
    // The selector's decision, with the config generation took from it.
    EXPECT_THAT(launch, HasSubstr(absl::StrCat("kernel choice: gemm ", step.launches(0).config(), "\n")));
  }
  EXPECT_EQ(gemms, 1);
}

TEST(KernelDumpTest, UnfusedStepsGetAFolderPerOpAndLibraryCallsAreIndexed) {
  const std::string dir = TestDir("unfused");
  CompileOptions options;
  options.arch = "sm_90a";
  options.fuse = false;
  options.matmul_groups = codegen::MatMulGroups::kLibrary;
  options.kernel_cache = false;
  options.dump_kernels_dir = dir;
  auto bundle = Build(options);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const std::string index = Slurp(fs::path(dir) / "index.md");
  EXPECT_THAT(index, HasSubstr("| matmul_1 | MatMul | cuBLASLt matmul"));
  EXPECT_THAT(index, HasSubstr("fusion off (--no-fuse)"));
  const fs::path add = StepFolder(dir, "_bias_add_2");
  ASSERT_FALSE(add.empty());
  const std::string subgraph = Slurp(add / "subgraph.txt");
  EXPECT_THAT(subgraph, HasSubstr("Add(%mm, %b) @\"bias add/2\""));
  EXPECT_TRUE(ParseGraph(subgraph.substr(subgraph.find("graph "))).ok()) << subgraph;
  EXPECT_FALSE(StepFolder(dir, "_relu_3").empty());
  EXPECT_FALSE(StepFolder(dir, "_softmax_5").empty());
  EXPECT_TRUE(StepFolder(dir, "_matmul_1").empty()) << "library steps have no folder";
  EXPECT_GT(CheckIndexedSizes(dir), 5);
}

TEST(KernelDumpTest, RefusesAForeignDirectoryAndReplacesAnEarlierDump) {
  const std::string dir = TestDir("reuse");
  std::ofstream(dir + "/notes.txt") << "mine";
  CompileOptions options;
  options.arch = "sm_80";
  options.fuse = false;
  options.matmul_groups = codegen::MatMulGroups::kLibrary;
  options.kernel_cache = false;
  options.dump_kernels_dir = dir;
  auto refused = Build(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("not empty"));
  EXPECT_EQ(Slurp(dir + "/notes.txt"), "mine");

  fs::remove(dir + "/notes.txt");
  ASSERT_TRUE(Build(options).ok());
  fs::create_directories(dir + "/steps/9999_stale");
  ASSERT_TRUE(Build(options).ok()) << "an earlier dump is replaced";
  EXPECT_FALSE(fs::exists(dir + "/steps/9999_stale"));
}

TEST(KernelDumpTest, SassComesFromCuobjdumpInPath) {
  // A stand-in cuobjdump that prints its arguments.
  const std::string bin = TestDir("fake_bin");
  {
    std::ofstream script(bin + "/cuobjdump");
    script << "#!/bin/sh\necho \"fake sass for $1 $(basename \"$2\" | cut -c1-6)\"\n";
  }
  chmod((bin + "/cuobjdump").c_str(), 0755);
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "";
  setenv("PATH", (bin + ":" + saved).c_str(), 1);
  EXPECT_EQ(FindCuobjdump(), bin + "/cuobjdump");

  const std::string dir = TestDir("sass");
  CompileOptions options;
  options.arch = "sm_80";
  options.fuse = false;
  options.matmul_groups = codegen::MatMulGroups::kLibrary;
  options.kernel_cache = false;
  options.dump_kernels_dir = dir;
  auto bundle = Build(options);
  setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const fs::path relu = StepFolder(dir, "_relu_3");
  ASSERT_FALSE(relu.empty());
  bool found = false;
  for (const auto& e : fs::directory_iterator(relu)) {
    if (e.path().extension() == ".sass") {
      EXPECT_EQ(Slurp(e.path()), "fake sass for -sass .sass_\n");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_THAT(Slurp(fs::path(dir) / "index.md"), HasSubstr("SASS from " + bin + "/cuobjdump"));
}

// Records what the compiler reports.
class Recorder : public codegen::CompileProgress {
 public:
  void Begin(int to_compile, int cached) override { begins.push_back({to_compile, cached}); }
  void End(const codegen::ModuleCompileStats& s, bool ok) override { ends.push_back(s); }
  std::vector<std::pair<int, int>> begins;
  std::vector<codegen::ModuleCompileStats> ends;
};

TEST(KernelDumpTest, CompilerUsesTheKernelCacheUnlessToldNot) {
  const std::string dir = TestDir("cache");
  Recorder recorder;
  CompileOptions options;
  options.arch = "sm_80";
  options.fuse = false;
  options.matmul_groups = codegen::MatMulGroups::kLibrary;
  options.kernel_cache_dir = dir + "/cache";
  options.progress = &recorder;
  auto cold = Build(options);
  ASSERT_TRUE(cold.ok()) << cold.status();
  auto warm = Build(options);
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_EQ(recorder.begins.size(), 2u);
  EXPECT_GT(recorder.begins[0].first, 0);
  EXPECT_EQ(recorder.begins[0].second, 0);
  EXPECT_EQ(recorder.begins[1], std::make_pair(0, recorder.begins[0].first));
  ASSERT_EQ(cold->kernels.size(), warm->kernels.size());
  for (size_t i = 0; i < cold->kernels.size(); ++i) EXPECT_EQ(cold->kernels[i].bytes, warm->kernels[i].bytes);

  options.kernel_cache = false;
  ASSERT_TRUE(Build(options).ok());
  EXPECT_EQ(recorder.begins.back().second, 0);
  EXPECT_FALSE(recorder.ends.back().cache_enabled);

  // An unwritable directory: the compile succeeds with a warning.
  std::ofstream(dir + "/file") << "x";
  options.kernel_cache = true;
  options.kernel_cache_dir = dir + "/file/cache";
  ASSERT_TRUE(Build(options).ok());
  ASSERT_EQ(recorder.ends.back().warnings.size(), 1u);
  EXPECT_THAT(recorder.ends.back().warnings[0], HasSubstr("kernel cache"));
}

}  // namespace
}  // namespace kiln
