// `--tune` on the GPU (ctest label gpu; skips without one): tuning a small MatMul
// group stores an entry, the next compile (no --tune) uses it, and the bundle with the
// tuned kernel matches the CPU backend; on sm_90a both GEMM families, and auto mode's
// cuBLASLt candidate and routing.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "compiler/compiler.h"
#include "compiler/gemm_tuner.h"
#include "gmock/gmock.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// MatMul + bias + GELU over weights that are graph inputs (random in the test). In
// f32 the compile's casts to fp16 become prologues, which keep the group on the sm_80
// template; in f16 the sm90 family takes it on sm_90a.
std::string Graph(const std::string& dtype) {
  return absl::StrReplaceAll(R"(graph @tune_gpu {
  input %x : D[200,512]
  input %w : D[512,384]
  input %b : D[384]
  %mm : D[200,384] = MatMul(%x, %w) @matmul
  %add : D[200,384] = Add(%mm, %b) @bias
  %y : D[200,384] = Gelu(%add) @gelu
  output %y
})",
                             {{"D[", absl::StrCat(dtype, "[")}});
}

Tensor Random(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = uni(rng);
  return Tensor::FromFloat(dtype, shape, v);
}

// `--tune` for the local GPU's arch with `matmul_groups`, the database and kernel cache
// in `dir`, a budget that measures every candidate, the report into `report`.
CompileOptions TuneOptions(const GpuInfo& gpu, const std::string& matmul_groups, const fs::path& dir,
                           GemmTuneReport* report) {
  CompileOptions options;
  options.arch = gpu.arch;
  options.matmul_groups = *codegen::ParseMatMulGroups(matmul_groups);
  options.tuning_db_path = (dir / "tuning.tsv").string();
  options.kernel_cache_dir = (dir / "cache").string();
  options.tune = true;
  options.tune_budget_seconds = 120;
  options.tuning_report = report;
  return options;
}

// Writes `contents` to `path`, runs it on the GPU and on the CPU backend with `feeds`
// and returns max |gpu - cpu| / max |cpu| of output 0 (infinity on any failure, which
// is also reported).
double GpuVsCpuError(BundleContents contents, const std::string& path, const TensorMap& feeds) {
  if (absl::Status st = WriteBundle(std::move(contents), path); !st.ok()) {
    ADD_FAILURE() << st;
    return INFINITY;
  }
  auto bundle = Bundle::Load(path);
  if (!bundle.ok()) return ADD_FAILURE() << bundle.status(), INFINITY;
  auto host = CpuProgram::Create(**bundle);
  if (!host.ok()) return ADD_FAILURE() << host.status(), INFINITY;
  auto program = GpuProgram::Create(*host);
  if (!program.ok()) return ADD_FAILURE() << program.status(), INFINITY;
  auto gpu_exec = GpuExecutor::Create(*program);
  if (!gpu_exec.ok()) return ADD_FAILURE() << gpu_exec.status(), INFINITY;
  auto cpu_exec = CpuExecutor::Create(*host);
  if (!cpu_exec.ok()) return ADD_FAILURE() << cpu_exec.status(), INFINITY;
  auto got = (*gpu_exec)->Run(feeds);
  if (!got.ok()) return ADD_FAILURE() << got.status(), INFINITY;
  auto want = (*cpu_exec)->Run(feeds);
  if (!want.ok()) return ADD_FAILURE() << want.status(), INFINITY;
  const std::vector<float> g = (*got)[0].ToFloat(), w = (*want)[0].ToFloat();
  if (g.size() != w.size()) return ADD_FAILURE() << g.size() << " vs " << w.size() << " elements", INFINITY;
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i])) return ADD_FAILURE() << "element " << i << " is " << g[i], INFINITY;
    err = std::max(err, static_cast<double>(std::fabs(g[i] - w[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(w[i])));
  }
  return err / scale;
}

// An empty directory `name`_<pid> under the test's temporary directory.
fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Tunes the graph's one MatMul group, checks the stored entry (of the sm90 family when
// `sm90`), that the next compile (no --tune) reuses it and that the bundle with the
// tuned kernel matches the CPU backend.
void TuneReuseAndCheck(const GpuInfo& gpu, DType dtype, bool sm90) {
  const fs::path dir = FreshDir(absl::StrCat("kiln_tuner_gpu_", DTypeName(dtype)));
  auto graph = ParseGraph(Graph(std::string(DTypeName(dtype))));
  ASSERT_TRUE(graph.ok()) << graph.status();

  GemmTuneReport report;
  CompileOptions options = TuneOptions(gpu, "generated", dir, &report);
  auto tuned = BuildBundle(**graph, options, "tune.onnx", "bytes");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  std::cout << GemmTuneTable(report);
  ASSERT_TRUE(report.tuned);
  ASSERT_EQ(report.rows.size(), 1u) << report.note;
  const GemmTuneRow& row = report.rows[0];
  EXPECT_EQ(row.key.m, 200);
  EXPECT_EQ(row.key.n, 384);
  EXPECT_EQ(row.key.k, "512");
  EXPECT_EQ(row.heuristic.sm90, sm90);
  EXPECT_EQ(row.best.sm90, sm90);
  EXPECT_GE(row.candidates, 8);
  EXPECT_EQ(row.timed, row.candidates) << row.note;  // the budget measures them all
  EXPECT_GT(row.heuristic_ms, 0);
  EXPECT_GT(row.best_ms, 0);
  EXPECT_LE(row.best_ms, row.heuristic_ms);
  EXPECT_LE(row.max_rel_error, 1e-2);
  EXPECT_TRUE(row.stored) << row.note;
  EXPECT_FALSE(report.budget_exhausted);

  // The database holds it; the tuned compile already used it.
  codegen::TuningDb db(options.tuning_db_path);
  ASSERT_TRUE(db.Load().ok());
  const codegen::TuningEntry* e = db.Find(row.key);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->config == row.best);
  EXPECT_EQ(e->device, gpu.name);
  const std::string expected = row.best.ToString() + " (tuning database)";
  EXPECT_EQ(absl::StartsWith(expected, "sm90 "), sm90) << expected;
  auto config_of = [](const BundleContents& b) {
    for (const auto& s : b.manifest.steps()) {
      for (const auto& l : s.launches()) {
        if (!l.config().empty()) return l.config();
      }
    }
    return std::string();
  };
  EXPECT_EQ(config_of(*tuned), expected);

  // A later compile without --tune reuses it, and the bundle is right.
  options.tune = false;
  auto again = BuildBundle(**graph, options, "tune.onnx", "bytes");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(config_of(*again), expected);
  const TensorMap feeds = {
      {"x", Random(dtype, {200, 512}, 1)}, {"w", Random(dtype, {512, 384}, 2)}, {"b", Random(dtype, {384}, 3)}};
  const double rel = GpuVsCpuError(*std::move(again), (dir / "tuned.kiln").string(), feeds);
  std::cout << "[ gpu ] tuned " << expected << ": rel. error " << rel << " vs the CPU backend\n";
  EXPECT_LE(rel, 3e-2);
}

TEST(GemmTunerGpuTest, TunedEntryIsStoredReusedAndCorrect) {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  ASSERT_FALSE(gpu->arch.empty()) << "no kiln arch for " << gpu->name;
  TuneReuseAndCheck(*gpu, DType::kFloat32, /*sm90=*/false);
}

// On sm_90a, `--tune` measures the sm90 family's configs for the groups it runs.
TEST(GemmTunerGpuTest, Sm90GroupsTuneSm90Configs) {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  if (gpu->arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 family needs an sm_90a GPU, not " << gpu->name;
  TuneReuseAndCheck(*gpu, DType::kFloat16, /*sm90=*/true);
}

// Auto mode on sm_90a also times cuBLASLt for a group it can run whole (bias + Relu
// here), stores that time, and routes the group by it; both routes run correctly.
TEST(GemmTunerGpuTest, AutoModeMeasuresCublasLtAndRoutesByIt) {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  if (gpu->arch != "sm_90a") GTEST_SKIP() << "skipped: auto mode's cuBLASLt routing is sm_90a's, not " << gpu->name;
  const fs::path dir = FreshDir("kiln_tuner_gpu_lib");
  auto graph = ParseGraph(absl::StrReplaceAll(Graph("f16"), {{"Gelu(", "Relu("}}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  GemmTuneReport report;
  CompileOptions options = TuneOptions(*gpu, "auto", dir, &report);
  auto tuned = BuildBundle(**graph, options, "tune.onnx", "bytes");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  std::cout << GemmTuneTable(report);
  ASSERT_EQ(report.rows.size(), 1u) << report.note;
  const GemmTuneRow& row = report.rows[0];
  EXPECT_TRUE(row.best.sm90);
  EXPECT_GT(row.library_ms, 0) << row.note;
  EXPECT_TRUE(row.stored) << row.note;
  codegen::TuningDb db(options.tuning_db_path);
  ASSERT_TRUE(db.Load().ok());
  const codegen::TuningEntry* e = db.Find(row.key);
  ASSERT_NE(e, nullptr);
  EXPECT_NEAR(e->library_ms, row.library_ms, 1e-5 * row.library_ms);  // stored to 6 digits
  EXPECT_EQ(row.library_faster, codegen::LibraryMeasuredFaster(*e));

  // Each route, forced through the stored times, compiles to it and runs right.
  const TensorMap feeds = {{"x", Random(DType::kFloat16, {200, 512}, 1)},
                           {"w", Random(DType::kFloat16, {512, 384}, 2)},
                           {"b", Random(DType::kFloat16, {384}, 3)}};
  options.tune = false;
  for (const bool library : {true, false}) {
    codegen::TuningEntry forced = *e;
    forced.library_ms = library ? 0.5 * forced.tuned_ms : 2 * forced.tuned_ms;
    codegen::TuningDb write(options.tuning_db_path);
    ASSERT_TRUE(write.Load().ok());
    write.Put(forced);
    ASSERT_TRUE(write.Save().ok());
    auto bundle = BuildBundle(**graph, options, "tune.onnx", "bytes");
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    std::string kernel;
    for (const auto& s : bundle->manifest.steps()) {
      if (s.op_type() == "FusedGroup") kernel = s.kernel();
    }
    if (library) {
      EXPECT_EQ(kernel, "cublaslt:FusedMatMul");
    } else {
      EXPECT_TRUE(absl::StartsWith(kernel, "nvrtc:")) << kernel;
    }
    const double rel = GpuVsCpuError(*std::move(bundle), (dir / "routed.kiln").string(), feeds);
    std::cout << "[ gpu ] " << kernel << ": rel. error " << rel << " vs the CPU backend\n";
    EXPECT_LE(rel, 3e-2);
  }
}

// A dynamic graph's GEMM with run-time rows: `--tune` measures it at the dims' opt
// sizes (100 tokens), without a cuBLASLt candidate, the entry's tile serves the window
// of rows that holds them, and the bundle matches the CPU backend there and at other
// sizes.
TEST(GemmTunerGpuTest, DynamicGroupsTuneAtTheOptSizes) {
  auto graph = ParseGraph(
      absl::StrReplaceAll(Graph("f16"), {{"Gelu(", "Relu("},
                                         {"graph @tune_gpu {", "graph @tune_gpu {\n  dim tokens in [1, 256] opt 100"},
                                         {"input %x : f16[200,512]", "input %x : f16[256,512] dims \"tokens, 512\""},
                                         {"f16[200,384]", "f16[256,384] dims \"tokens, 384\""}}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE((*graph)->is_dynamic());
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  if (gpu->arch != "sm_90a") GTEST_SKIP() << "skipped: run-time rows are the sm90 family's, not " << gpu->name;
  const fs::path dir = FreshDir("kiln_tuner_gpu_dynamic");
  GemmTuneReport report;
  CompileOptions options = TuneOptions(*gpu, "auto", dir, &report);
  auto tuned = BuildBundle(**graph, options, "tune.onnx", "bytes");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  std::cout << GemmTuneTable(report);
  ASSERT_EQ(report.rows.size(), 1u) << report.note;
  EXPECT_EQ(report.rows[0].key.m, 100);
  EXPECT_EQ(report.rows[0].key.n, 384);
  EXPECT_TRUE(report.rows[0].best.sm90);
  EXPECT_TRUE(report.rows[0].stored) << report.rows[0].note;
  // Auto mode: cuBLASLt could run this group whole, but a run-time-row GEMM stays on the
  // family at every size, so its call is not timed.
  EXPECT_EQ(report.rows[0].library_ms, 0);
  EXPECT_THAT(report.note, HasSubstr("GEMMs with run-time rows measured at tokens=100 (the dims' opt sizes)"));
  int from_db = 0;
  for (const auto& s : tuned->manifest.steps()) {
    for (const auto& l : s.launches()) {
      if (!absl::StrContains(l.config(), "(tuning database, at 100 rows)")) continue;
      ++from_db;
      EXPECT_TRUE(absl::StartsWith(l.config(), report.rows[0].best.ToString() + " (run-time rows")) << l.config();
    }
  }
  EXPECT_EQ(from_db, 1);
  for (int64_t tokens : {100, 1, 77, 256}) {
    const TensorMap feeds = {{"x", Random(DType::kFloat16, {tokens, 512}, 1)},
                             {"w", Random(DType::kFloat16, {512, 384}, 2)},
                             {"b", Random(DType::kFloat16, {384}, 3)}};
    const double rel = GpuVsCpuError(*tuned, (dir / absl::StrCat("dynamic", tokens, ".kiln")).string(), feeds);
    std::cout << "[ gpu ] " << tokens << " tokens: rel. error " << rel << " vs the CPU backend\n";
    EXPECT_LE(rel, 3e-2) << tokens;
  }
}

}  // namespace
}  // namespace kiln
