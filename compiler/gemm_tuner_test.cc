// The tuning database as the compiler uses it (no GPU needed): a compile takes a
// stored config for its GEMM and records where it came from; --tune without a GPU is
// a clear error.
#include "compiler/gemm_tuner.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "compiler/compiler.h"
#include "gmock/gmock.h"
#include "graph/specialize.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "runtime/cuda_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using codegen::ops::GemmConfig;

// MatMul + bias + Relu in `dtype`: one matmul+epilogue group on the generated GEMM.
// In f32 the compile's cast of the input to fp16 becomes an A prologue, which the sm90
// family leaves to the sm_80 template; in f16 the family takes the group on sm_90a.
std::string Graph(const std::string& dtype = "f32") {
  return absl::StrReplaceAll(R"(graph @tune {
  input %x : D[96,256]
  const %w : D[256,192] = splat(0.5)
  const %b : D[192] = splat(0.25)
  %mm : D[96,192] = MatMul(%x, %w) @matmul
  %add : D[96,192] = Add(%mm, %b) @bias
  %y : D[96,192] = Relu(%add) @relu
  output %y
})",
                             {{"D[", absl::StrCat(dtype, "[")}});
}

std::string TestDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("kiln_tuning_", name, "_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::StatusOr<BundleContents> Build(const CompileOptions& options, const std::string& dtype = "f32") {
  auto graph = ParseGraph(Graph(dtype));
  if (!graph.ok()) return graph.status();
  return BuildBundle(**graph, options, "tune.onnx", "bytes");
}

CompileOptions Options(const std::string& db) {
  CompileOptions options;
  options.arch = "sm_80";
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.kernel_cache = false;
  options.tuning_db_path = db;
  return options;
}

// The one GEMM launch of a bundle.
const bundle::Launch* GemmLaunch(const BundleContents& b) {
  for (const bundle::Step& s : b.manifest.steps()) {
    for (const bundle::Launch& l : s.launches()) {
      if (!l.config().empty()) return &l;
    }
  }
  return nullptr;
}

// The tuning key of the bundle's MatMul group, from its graph text.
absl::StatusOr<codegen::TuningKey> GroupKey(const BundleContents& b, const std::string& arch) {
  auto graph = ParseGraph(b.manifest.graph_text());
  if (!graph.ok()) return graph.status();
  for (const Node* n : (*graph)->nodes()) {
    if (!codegen::IsMatMulGroup(*n)) continue;
    auto p = codegen::ops::DescribeMatMulGroup(*n);
    if (!p.ok()) return p.status();
    return codegen::GemmTuningKey(arch, *p);
  }
  return absl::NotFoundError("no MatMul group");
}

TEST(GemmTuningCompileTest, CompileReusesADatabaseEntryWithoutAGpu) {
  const std::string dir = TestDir("reuse");
  const std::string db_path = dir + "/tuning.tsv";
  GemmTuneReport report;
  CompileOptions options = Options(db_path);
  options.tuning_report = &report;
  auto heuristic = Build(options);
  ASSERT_TRUE(heuristic.ok()) << heuristic.status();
  ASSERT_NE(GemmLaunch(*heuristic), nullptr);
  // 6 tiles of 64x64 and a short K (8 k tiles): smaller tiles, no split.
  EXPECT_EQ(GemmLaunch(*heuristic)->config(), "32x32x64 w2x2 s4 (heuristic)");
  EXPECT_EQ(GemmLaunch(*heuristic)->grid(1), 1u);
  EXPECT_EQ(report.db_path, db_path);
  EXPECT_FALSE(report.tuned);
  EXPECT_TRUE(report.warnings.empty());
  EXPECT_FALSE(fs::exists(db_path));  // a compile without --tune writes nothing

  // Store another config for exactly this problem, as --tune would.
  auto key = GroupKey(*heuristic, "sm_80");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->ShapeText(), "96x192x256 f16 NN");
  {
    codegen::TuningDb db(db_path);
    codegen::TuningEntry e;
    e.key = *key;
    e.config = GemmConfig{32, 64, 32, 2, 2, 4};
    e.tuned_ms = 0.004;
    e.heuristic = GemmConfig{64, 64, 32, 2, 2, 4};
    e.heuristic_ms = 0.005;
    e.device = "Test GPU";
    db.Put(e);
    ASSERT_TRUE(db.Save().ok());
  }
  options.dump_kernels_dir = dir + "/dump";
  auto tuned = Build(options);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  const bundle::Launch* l = GemmLaunch(*tuned);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->config(), "32x64x32 w2x2 s4 (tuning database)");
  EXPECT_EQ(l->block(0), 128u);
  EXPECT_EQ(l->grid(0), 3u * 3u);  // ceil(96/32) x ceil(192/64) tiles
  EXPECT_EQ(l->grid(1), 1u);         // the entry's config is not split: no workspace
  EXPECT_EQ(l->semaphores(), 0u);
  EXPECT_EQ(l->scratch_bytes(), 0u);
  // The dump shows the kernel's #defines and where the config came from.
  fs::path launch_txt, cu;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/dump/steps")) {
    if (e.path().filename() == "launch.txt" && Slurp(e.path()).find("GEMM tile") != std::string::npos) {
      launch_txt = e.path();
      cu = e.path().parent_path() / (l->function() + ".cu");
    }
  }
  ASSERT_FALSE(launch_txt.empty());
  const std::string text = Slurp(launch_txt);
  EXPECT_THAT(text, HasSubstr("GEMM tile: BM=32 BN=64 BK=32 WARPS_M=2 WARPS_N=2 STAGES=4"));
  EXPECT_THAT(text, HasSubstr("GEMM config: 32x64x32 w2x2 s4 (tuning database)"));
  EXPECT_THAT(Slurp(cu), HasSubstr("#define BM 32\n#define BN 64\n"));

  // Another arch, or --no-tuning-db: the heuristic.
  options.dump_kernels_dir.clear();
  options.arch = "sm_86";
  auto other_arch = Build(options);
  ASSERT_TRUE(other_arch.ok()) << other_arch.status();
  EXPECT_EQ(GemmLaunch(*other_arch)->config(), "32x32x64 w2x2 s4 (heuristic)");
  options.arch = "sm_80";
  options.tuning_db = false;
  auto no_db = Build(options);
  ASSERT_TRUE(no_db.ok()) << no_db.status();
  EXPECT_EQ(GemmLaunch(*no_db)->config(), "32x32x64 w2x2 s4 (heuristic)");
}

// The step that runs the bundle's MatMul group, and its fusion report note.
const bundle::Step* GroupStep(const BundleContents& b) {
  for (const bundle::Step& s : b.manifest.steps()) {
    if (s.op_type() == "FusedGroup") return &s;
  }
  return nullptr;
}
std::string GroupNote(const BundleContents& b) {
  const bundle::Step* s = GroupStep(b);
  if (s == nullptr) return "<no group step>";
  for (const bundle::FusionGroup& g : b.manifest.fusion().groups()) {
    if (g.name() == s->node()) return g.note();
  }
  return "<no report group>";
}

// Auto mode on sm_90a gives a group cuBLASLt can run whole (bias + Relu) to cuBLASLt
// where the database says --tune measured it at least 1% faster than the family, and
// the report says why; the family keeps it otherwise, and --matmul-groups generated
// ignores the cuBLASLt time. No GPU needed (NVRTC compiles for sm_90a).
TEST(GemmTuningCompileTest, AutoOnSm90aTakesCublasLtWhereTuningMeasuredItFaster) {
  const std::string dir = TestDir("library");
  const std::string db_path = dir + "/tuning.tsv";
  CompileOptions options = Options(db_path);
  options.arch = "sm_90a";
  options.matmul_groups = codegen::MatMulGroups::kAuto;
  auto family = Build(options, "f16");
  ASSERT_TRUE(family.ok()) << family.status();
  ASSERT_NE(GroupStep(*family), nullptr);
  EXPECT_TRUE(absl::StartsWith(GroupStep(*family)->kernel(), "nvrtc:")) << GroupStep(*family)->kernel();
  ASSERT_NE(GemmLaunch(*family), nullptr);
  EXPECT_EQ(GemmLaunch(*family)->family(), "gemm_sm90");
  EXPECT_EQ(GroupNote(*family), "");
  auto key = GroupKey(*family, "sm_90a");
  ASSERT_TRUE(key.ok()) << key.status();

  auto store = [&](double library_ms) {
    codegen::TuningDb db(db_path);
    ASSERT_TRUE(db.Load().ok());
    codegen::TuningEntry e;
    e.key = *key;
    e.config = codegen::ops::Sm90GemmConfig{64, 64, 2, 1, 12, true};
    e.tuned_ms = 0.0100;
    e.heuristic = e.config;
    e.heuristic_ms = 0.0100;
    e.device = "Test GPU";
    e.library_ms = library_ms;
    db.Put(e);
    ASSERT_TRUE(db.Save().ok());
  };
  store(0.0080);
  auto library = Build(options, "f16");
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(GroupStep(*library)->kernel(), "cublaslt:FusedMatMul");
  EXPECT_EQ(GemmLaunch(*library), nullptr);
  EXPECT_THAT(GroupNote(*library), HasSubstr("(--matmul-groups auto on sm_90a): kiln compile --tune measured "
                                             "cuBLASLt faster on Test GPU (0.0080 ms against the family's 0.0100 ms)"));
  EXPECT_EQ(GroupsTunedToLibrary(library->manifest), 1);
  EXPECT_EQ(GroupsTunedToLibrary(family->manifest), 0);
  // --matmul-groups generated: the family, with the entry's config.
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  auto generated = Build(options, "f16");
  ASSERT_TRUE(generated.ok()) << generated.status();
  ASSERT_NE(GemmLaunch(*generated), nullptr);
  EXPECT_EQ(GemmLaunch(*generated)->config(), "sm90 64x64 p2x1 s12 (tuning database)");
  // Within 1% (timing noise): the family keeps the group.
  options.matmul_groups = codegen::MatMulGroups::kAuto;
  store(0.0099);
  auto close = Build(options, "f16");
  ASSERT_TRUE(close.ok()) << close.status();
  EXPECT_TRUE(absl::StartsWith(GroupStep(*close)->kernel(), "nvrtc:")) << GroupStep(*close)->kernel();
  EXPECT_EQ(GroupNote(*close), "");
}

// A long-K GEMM with few output tiles (BERT-base's FFN down at 128 tokens): the
// heuristic splits K over 5 CTAs per tile and the launch records the workspace the
// executor must give it (codegen/op_kernels.h, "Workspace").
TEST(GemmTuningCompileTest, SplitKLaunchRecordsItsWorkspace) {
  auto graph = ParseGraph(R"(graph @ffn_down {
  input %x : f32[128,3072]
  const %w : f32[3072,768] = splat(0.01)
  const %b : f32[768] = splat(0.25)
  %mm : f32[128,768] = MatMul(%x, %w) @matmul
  %y : f32[128,768] = Add(%mm, %b) @bias
  output %y
})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  CompileOptions options = Options("");
  options.tuning_db = false;
  auto bundle = BuildBundle(**graph, options, "ffn.onnx", "bytes");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const bundle::Launch* l = GemmLaunch(*bundle);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->config(), "64x64x32 w2x2 s4 k5 (heuristic)");
  EXPECT_EQ(l->grid(0), 24u);  // 2 x 12 tiles
  EXPECT_EQ(l->grid(1), 5u);
  EXPECT_EQ(l->semaphores(), 24u);
  EXPECT_EQ(l->scratch_bytes(), 24u * 5 * 64 * 64 * 4);
  EXPECT_EQ(l->family(), "gemm_sm80");
}

TEST(GemmTuningCompileTest, CorruptDatabaseLinesAreWarnings) {
  const std::string dir = TestDir("corrupt");
  const std::string db_path = dir + "/tuning.tsv";
  std::ofstream(db_path) << "# kiln tuning database v1\nnot an entry\n";
  GemmTuneReport report;
  CompileOptions options = Options(db_path);
  options.tuning_report = &report;
  auto bundle = Build(options);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ(GemmLaunch(*bundle)->config(), "32x32x64 w2x2 s4 (heuristic)");
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_THAT(report.warnings[0], HasSubstr(absl::StrCat("tuning database ", db_path, " line 2:")));
  EXPECT_THAT(report.warnings[0], HasSubstr("skipped"));
}

TEST(GemmTuningCompileTest, TuneWithoutAGpuIsAClearError) {
  if (HasGpu()) GTEST_SKIP() << "skipped: this machine has a GPU (the gpu-labelled test tunes there)";
  CompileOptions options = Options(TestDir("no_gpu") + "/tuning.tsv");
  options.tune = true;
  auto bundle = Build(options);
  ASSERT_FALSE(bundle.ok());
  EXPECT_EQ(bundle.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bundle.status().message(), HasSubstr("--tune needs a GPU; no CUDA GPU"));
  EXPECT_THAT(bundle.status().message(), HasSubstr("Compile without --tune"));
  EXPECT_FALSE(CheckTuningDevice("sm_80").ok());
}

// A dynamic graph's GEMM with run-time rows reads the database at the dims' opt sizes
// (the graph specialised there): the entry for that problem gives the tile of the
// window of rows that holds them, the other windows keep the heuristic's. No GPU
// needed (NVRTC compiles for sm_90a).
TEST(GemmTuningCompileTest, DynamicCompileTakesTheEntryOfTheOptSizes) {
  constexpr char kDynamic[] = R"(graph @tune_dynamic {
  dim tokens in [1, 512] opt 128
  input %x : f16[512,768] dims "tokens, 768"
  const %w : f16[768,768] = splat(0.01)
  const %b : f16[768] = splat(0.5)
  %mm = MatMul(%x, %w) @matmul
  %y = Add(%mm, %b) @bias
  output %y
})";
  const std::string db_path = TestDir("dynamic") + "/tuning.tsv";
  CompileOptions options = Options(db_path);
  options.arch = "sm_90a";
  options.matmul_groups = codegen::MatMulGroups::kAuto;
  auto graph = ParseGraph(kDynamic);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto launches = [](const BundleContents& b) {
    std::vector<std::string> configs;
    for (const bundle::Step& s : b.manifest.steps()) {
      for (const bundle::Launch& l : s.launches()) {
        if (!l.config().empty()) configs.push_back(l.config());
      }
    }
    return configs;
  };
  auto untuned = BuildBundle(**graph, options, "dynamic.onnx", "bytes");
  ASSERT_TRUE(untuned.ok()) << untuned.status();
  ASSERT_EQ(untuned->manifest.dim_symbols_size(), 1);
  EXPECT_EQ(untuned->manifest.dim_symbols(0).opt(), 128);
  ASSERT_GT(launches(*untuned).size(), 1u) << "size variants";
  for (const std::string& c : launches(*untuned)) EXPECT_THAT(c, Not(HasSubstr("tuning database"))) << c;

  // The group's problem at 128 tokens, as --tune stores it.
  auto bundled = ParseGraph(untuned->manifest.graph_text());
  ASSERT_TRUE(bundled.ok()) << bundled.status();
  auto at_opt = Specialize(**bundled, OptValues((*bundled)->dim_symbols()));
  ASSERT_TRUE(at_opt.ok()) << at_opt.status();
  std::optional<codegen::TuningKey> key;
  for (const Node* n : (*at_opt)->nodes()) {
    if (!codegen::IsMatMulGroup(*n)) continue;
    auto p = codegen::ops::DescribeMatMulGroup(*n);
    ASSERT_TRUE(p.ok()) << p.status();
    key = codegen::GemmTuningKey("sm_90a", *p);
  }
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->ShapeText(), "128x768x768 f16 NN");
  {
    codegen::TuningDb db(db_path);
    codegen::TuningEntry e;
    e.key = *key;
    e.config = *codegen::GemmTileConfig::Parse("sm90 128x64 c2x1 s6");
    e.tuned_ms = 0.004;
    e.heuristic = e.config;
    e.heuristic_ms = 0.005;
    e.device = "Test GPU";
    db.Put(e);
    ASSERT_TRUE(db.Save().ok());
  }
  auto tuned = BuildBundle(**graph, options, "dynamic.onnx", "bytes");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  const std::vector<std::string> got = launches(*tuned), want = launches(*untuned);
  int from_db = 0;
  for (const std::string& c : got) {
    if (!absl::StrContains(c, "(tuning database, at 128 rows)")) {
      EXPECT_NE(std::find(want.begin(), want.end(), c), want.end()) << c << ": not a heuristic variant";
      continue;
    }
    ++from_db;
    EXPECT_THAT(c, HasSubstr("sm90 128x64 c2x1 s6 (run-time rows, at most 128)"));
  }
  EXPECT_EQ(from_db, 1);
  // --no-tuning-db: the heuristic's variants.
  options.tuning_db = false;
  auto no_db = BuildBundle(**graph, options, "dynamic.onnx", "bytes");
  ASSERT_TRUE(no_db.ok()) << no_db.status();
  EXPECT_EQ(launches(*no_db), want);
}

TEST(GemmTuningCompileTest, TuneOptionsAreValidated) {
  CompileOptions options = Options("");
  options.tune = true;
  options.tuning_db = false;
  absl::Status st = ValidateCompileOptions(options);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("drop --no-tuning-db"));
  options.tuning_db = true;
  options.tune_budget_seconds = 0;
  st = ValidateCompileOptions(options);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("--tune-budget must be a positive number"));
}

TEST(GemmTuningCompileTest, TableSaysWhatWasMeasured) {
  GemmTuneReport r;
  r.tuned = true;
  r.device = "Test GPU";
  r.db_path = "/db/tuning.tsv";
  r.budget_seconds = 60;
  r.seconds = 3.25;
  GemmTuneRow row;
  row.key.m = 128;
  row.key.n = 768;
  row.key.k = "768";
  row.key.dtype = "f16";
  row.key.layout = "NN";
  row.key.signature = "matmul+epilogue[MatMul,Add,Add]#0123456789abcdef";
  row.groups = {"group_a", "group_b"};
  row.heuristic = GemmConfig{64, 64, 32, 2, 2, 4};
  row.best = GemmConfig{32, 64, 32, 2, 2, 4};
  row.heuristic_ms = 0.010;
  row.best_ms = 0.008;
  row.candidates = 12;
  row.timed = 12;
  row.stored = true;
  r.rows.push_back(row);
  const std::string table = GemmTuneTable(r);
  EXPECT_THAT(table, HasSubstr("GEMM tuning on Test GPU (database /db/tuning.tsv)"));
  EXPECT_THAT(table, HasSubstr("128x768x768 f16 NN"));
  EXPECT_THAT(table, HasSubstr("64x64x32 w2x2 s4"));
  EXPECT_THAT(table, HasSubstr("0.0100"));
  EXPECT_THAT(table, HasSubstr("32x64x32 w2x2 s4"));
  EXPECT_THAT(table, HasSubstr("1.25x"));
  EXPECT_THAT(table, HasSubstr("group_a, group_b"));
  EXPECT_THAT(table, HasSubstr("12/12 configs measured, stored"));
  EXPECT_THAT(table, HasSubstr("3.2 s of a 60 s budget\n"));
  EXPECT_THAT(table, Not(HasSubstr("cuBLASLt faster")));
  // cuBLASLt measured and faster: its time, and that auto mode takes it.
  r.rows[0].library_ms = 0.0061;
  r.rows[0].library_faster = true;
  EXPECT_THAT(GemmTuneTable(r), HasSubstr("0.0061"));
  EXPECT_THAT(GemmTuneTable(r), HasSubstr("cuBLASLt faster (--matmul-groups auto runs the group on it)"));
  r.budget_exhausted = true;
  EXPECT_THAT(GemmTuneTable(r), HasSubstr("rerun with a larger --tune-budget"));
  EXPECT_EQ(GemmTuneTable(GemmTuneReport{}), "");  // no --tune: no table
}

}  // namespace
}  // namespace kiln
