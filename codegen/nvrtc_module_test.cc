// Tests for the NVRTC module builder (no GPU needed: NVRTC runs on the host).
#include "codegen/nvrtc_module.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "codegen/templates.h"

namespace kiln::codegen {
namespace {

const char* kScaleKernel = R"(
extern "C" __global__ void KILN_KERNEL(kiln_f16* y, const kiln_f16* x) {
  kiln_index i = blockIdx.x * (kiln_index)blockDim.x + threadIdx.x;
  if (i < 1000) {
    float v = KILN_LOAD_f16(x, i);
    KILN_STORE_f16(y, i, erff(v) + expf(v) + tanhf(v) + fmaxf(v, 0.f) + kiln_bf16_to_f32(kiln_f32_to_bf16(v)));
  }
})";

TEST(NvrtcModuleTest, PreludeIsEmbedded) {
  EXPECT_NE(TemplateSource("prelude.cuh").find("kiln_f16_to_f32"), absl::string_view::npos);
  EXPECT_TRUE(TemplateSource("no_such.cuh").empty());
}

TEST(NvrtcModuleTest, CompilesKernelsToCubinForEveryArch) {
  for (const char* arch : {"sm_90a", "sm_89", "sm_86", "sm_80"}) {
    auto cubin = CompileModule({{"k_a", kScaleKernel}, {"k_b", kScaleKernel}}, arch);
    ASSERT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
    ASSERT_GE(cubin->size(), 4u);
    EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF", 4)) << arch;  // cubins are ELF images
    EXPECT_NE(cubin->find("k_a"), std::string::npos);
    EXPECT_NE(cubin->find("k_b"), std::string::npos);
  }
}

TEST(NvrtcModuleTest, CompileErrorQuotesTheLog) {
  auto cubin = CompileModule({{"k_bad", "extern \"C\" __global__ void KILN_KERNEL(float* y) { y[0] = undefined_name; }"}},
                             "sm_90a");
  ASSERT_FALSE(cubin.ok());
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(cubin.status().message().find("undefined_name"), absl::string_view::npos) << cubin.status();
}

TEST(NvrtcModuleTest, RejectsUnknownArch) {
  auto cubin = CompileModule({{"k", kScaleKernel}}, "sm_75");
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NvrtcModuleTest, CompilesChunksInParallel) {
  std::vector<ModuleKernel> kernels;
  for (int i = 0; i < 5; ++i) kernels.push_back({"k" + std::to_string(i), kScaleKernel});
  auto cubins = CompileModules(kernels, "sm_80", 2);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  ASSERT_EQ(cubins->size(), 3u);
  EXPECT_NE((*cubins)[2].find("k4"), std::string::npos);
}

std::string CacheDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("kiln_nvrtc_cache_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::vector<ModuleKernel> ThreeKernels() {
  return {{"k0", kScaleKernel}, {"k1", kScaleKernel}, {"k2", kScaleKernel}};
}

// Counts the calls, checks their order.
class RecordingProgress : public CompileProgress {
 public:
  void Begin(int to_compile, int cached) override {
    log += "begin " + std::to_string(to_compile) + " " + std::to_string(cached) + ";";
  }
  void Advance(int done, int to_compile) override { ++advances; last_done = done; }
  void End(const ModuleCompileStats& stats, bool ok) override { log += ok ? "end ok;" : "end failed;"; }
  std::string log;
  int advances = 0;
  int last_done = 0;
};

TEST(NvrtcModuleTest, CacheMissThenHitGivesTheSameCubins) {
  KernelCache cache(CacheDir("hit"));
  CompileModulesOptions options;
  options.max_per_module = 2;
  options.cache = &cache;
  RecordingProgress progress;
  options.progress = &progress;
  ModuleCompileStats cold;
  auto first = CompileModules(ThreeKernels(), "sm_80", options, &cold);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(cold.modules, 2);
  EXPECT_EQ(cold.compiled, 2);
  EXPECT_EQ(cold.cache_hits, 0);
  EXPECT_TRUE(cold.warnings.empty());
  EXPECT_EQ(progress.log, "begin 2 0;end ok;");
  EXPECT_EQ(progress.advances, 2);
  EXPECT_EQ(progress.last_done, 2);

  progress = RecordingProgress();
  ModuleCompileStats warm;
  auto second = CompileModules(ThreeKernels(), "sm_80", options, &warm);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(warm.compiled, 0);
  EXPECT_EQ(warm.cache_hits, 2);
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(progress.log, "begin 0 2;end ok;");

  // Another arch misses (the key holds the arch and its options).
  ModuleCompileStats other;
  auto sm90 = CompileModules(ThreeKernels(), "sm_90a", options, &other);
  ASSERT_TRUE(sm90.ok()) << sm90.status();
  EXPECT_EQ(other.compiled, 2);
  EXPECT_EQ(other.cache_hits, 0);
  EXPECT_NE((*sm90)[0], (*first)[0]);
  // Another source misses too; the unchanged module still hits.
  std::vector<ModuleKernel> changed = ThreeKernels();
  changed[2].source += "\n// changed";
  ModuleCompileStats partial;
  ASSERT_TRUE(CompileModules(changed, "sm_80", options, &partial).ok());
  EXPECT_EQ(partial.compiled, 1);
  EXPECT_EQ(partial.cache_hits, 1);
}

TEST(NvrtcModuleTest, CorruptCacheEntryIsRecompiled) {
  KernelCache cache(CacheDir("corrupt"));
  CompileModulesOptions options;
  options.cache = &cache;
  auto first = CompileModules(ThreeKernels(), "sm_80", options);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string source = ModuleSource(ThreeKernels());
  const KernelCacheKey key{Sha256Hex(source), "sm_80", NvrtcVersion(), NvrtcOptions("sm_80")};
  const std::string path = cache.EntryPath(key);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // a write cut short
  ModuleCompileStats stats;
  auto second = CompileModules(ThreeKernels(), "sm_80", options, &stats);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(stats.cache_corrupt, 1);
  EXPECT_EQ(stats.compiled, 1);
  EXPECT_EQ(*second, *first);
  std::string cubin;
  EXPECT_EQ(cache.Load(key, &cubin), KernelCache::Lookup::kHit) << "the entry was replaced";
}

TEST(NvrtcModuleTest, UnwritableCacheIsAWarning) {
  const std::string dir = CacheDir("unwritable");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  KernelCache cache(dir + "/file");  // a file where the directory should be
  CompileModulesOptions options;
  options.cache = &cache;
  ModuleCompileStats stats;
  auto cubins = CompileModules(ThreeKernels(), "sm_80", options, &stats);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  EXPECT_EQ(cubins->size(), 1u);
  ASSERT_EQ(stats.warnings.size(), 1u);
  EXPECT_NE(stats.warnings[0].find(dir + "/file"), std::string::npos) << stats.warnings[0];
  EXPECT_NE(stats.warnings[0].find("--no-kernel-cache"), std::string::npos) << stats.warnings[0];
}

TEST(NvrtcModuleTest, FailureEndsTheProgress) {
  RecordingProgress progress;
  CompileModulesOptions options;
  options.progress = &progress;
  auto cubins = CompileModules({{"k_bad", "extern \"C\" __global__ void KILN_KERNEL() { undefined_name; }"}}, "sm_80",
                               options);
  EXPECT_FALSE(cubins.ok());
  EXPECT_EQ(progress.log, "begin 1 0;end failed;");
}

TEST(NvrtcModuleTest, InspectModuleKeepsPtxAndResourceReport) {
  auto m = InspectModule({{"k_a", kScaleKernel}}, "sm_90a");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->source, ModuleSource({{"k_a", kScaleKernel}}));
  EXPECT_NE(m->ptx.find(".entry k_a"), std::string::npos);
  EXPECT_NE(m->ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_EQ(m->cubin.substr(0, 4), std::string("\x7f" "ELF", 4));
  EXPECT_EQ(m->options.back(), "--ptxas-options=-v");
  std::vector<KernelResources> r = ParsePtxasResources(m->log);
  ASSERT_EQ(r.size(), 1u) << m->log;
  EXPECT_EQ(r[0].function, "k_a");
  EXPECT_GT(r[0].registers, 0);
  EXPECT_EQ(r[0].spill_store_bytes, 0);
  EXPECT_EQ(r[0].spill_load_bytes, 0);
}

TEST(NvrtcModuleTest, FindsTheKernelBody) {
  const std::string simple = "extern \"C\" __global__ void KILN_KERNEL(float* y) { y[0] = 1; }";
  EXPECT_EQ(KernelBodyStart(simple), simple.find('{') + 1);
  // Parentheses inside the parameters (macros, launch bounds before the name), a
  // comment naming the macro, a line break before the brace.
  const std::string templated =
      "// the entry: KILN_KERNEL(...) below\n"
      "extern \"C\" __global__ void __launch_bounds__(128, 1)\n"
      "    KILN_KERNEL(float* __restrict__ y PARAMS(a, (b)), const __grid_constant__ kiln_tensor_map m)\n"
      "{\n  y[0] = 1;\n}\n";
  EXPECT_EQ(KernelBodyStart(templated), templated.rfind('{') + 1);
  EXPECT_EQ(KernelBodyStart("__device__ void f() {}"), std::string::npos);  // no entry
  EXPECT_EQ(KernelBodyStart(simple + "\n" + simple), std::string::npos);   // two entries
  EXPECT_EQ(KernelBodyStart("extern \"C\" __global__ void KILN_KERNEL(float* y);"), std::string::npos);
}

TEST(NvrtcModuleTest, EveryKernelWaitsOnItsGridDependency) {
  const std::string source = ModuleSource({{"k_a", kScaleKernel}, {"k_b", kScaleKernel}});
  size_t count = 0;
  for (size_t at = source.find("{ KILN_GRID_DEPENDENCY_WAIT();"); at != std::string::npos;
       at = source.find("{ KILN_GRID_DEPENDENCY_WAIT();", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 2u) << source;
  // The wait is the PTX griddepcontrol instruction on sm_90a and compiles to nothing
  // before it.
  auto sm90 = InspectModule({{"k_a", kScaleKernel}}, "sm_90a");
  ASSERT_TRUE(sm90.ok()) << sm90.status();
  EXPECT_NE(sm90->ptx.find("griddepcontrol.wait"), std::string::npos);
  auto sm80 = InspectModule({{"k_a", kScaleKernel}}, "sm_80");
  ASSERT_TRUE(sm80.ok()) << sm80.status();
  EXPECT_EQ(sm80->ptx.find("griddepcontrol"), std::string::npos);
}

TEST(NvrtcModuleTest, ParsesPtxasReport) {
  const char* log = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_b' for 'sm_80'
ptxas info    : Function properties for k_b
ptxas         .     400 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 400 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 17.695 ms
ptxas info    : Compiling entry function 'k_a' for 'sm_80'
ptxas info    : Function properties for k_a
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem, 360 bytes cmem[0]
)";
  std::vector<KernelResources> r = ParsePtxasResources(log);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].function, "k_b");
  EXPECT_EQ(r[0].registers, 32);
  EXPECT_EQ(r[0].barriers, 0);
  EXPECT_EQ(r[0].stack_bytes, 400);
  EXPECT_EQ(r[0].spill_store_bytes, 8);
  EXPECT_EQ(r[0].spill_load_bytes, 12);
  EXPECT_EQ(r[0].shared_bytes, 0);
  EXPECT_EQ(r[0].constant_bytes, 360);
  EXPECT_EQ(r[1].function, "k_a");
  EXPECT_EQ(r[1].registers, 10);
  EXPECT_EQ(r[1].barriers, 1);
  EXPECT_EQ(r[1].shared_bytes, 256);
  EXPECT_TRUE(ParsePtxasResources("").empty());
}

}  // namespace
}  // namespace kiln::codegen
