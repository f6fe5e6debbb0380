// Tests of the GEMM tuning database (codegen/tuning_db.h) and of the GEMM problem
// description, candidates and config strings it is keyed by (codegen/ops/families.h).
// NVRTC only: no GPU needed.
#include "codegen/tuning_db.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "gmock/gmock.h"
#include "graph/fused_group.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ops::GemmConfig;

std::string TestPath(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("kiln_tuning_db_", ::getpid());
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p.string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A "matmul+epilogue" group MatMul(x, w [trans_b]) -> Add(bias) -> ACT of DTYPE; the
// node names carry `tag`, which must not change the problem.
struct Built {
  std::unique_ptr<Graph> graph;
  Node* group = nullptr;
};
Built MakeGroup(const std::string& dtype, int64_t m, int64_t n, int64_t k, const std::string& act, bool trans_b,
                const std::string& tag = "") {
  const std::string w = trans_b ? absl::StrCat("[", n, ",", k, "]") : absl::StrCat("[", k, ",", n, "]");
  std::string text = absl::StrCat("graph @g {\n  input %x : D[", m, ",", k, "]\n  input %w : D", w,
                                  "\n  input %b : D[", n, "]\n  %mm : D[", m, ",", n, "] = MatMul(%x, %w)",
                                  trans_b ? " {trans_b = 1}" : "", " @mm", tag, "\n  %add : D[", m, ",", n,
                                  "] = Add(%mm, %b) @bias", tag, "\n  %y : D[", m, ",", n, "] = ", act,
                                  "(%add) @act", tag, "\n  output %y\n}");
  text = absl::StrReplaceAll(text, {{"D[", absl::StrCat(dtype, "[")}});
  Built b;
  absl::StatusOr<std::unique_ptr<Graph>> g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  if (!g.ok()) return b;
  b.graph = *std::move(g);
  std::vector<Node*> members = b.graph->nodes();
  absl::StatusOr<Node*> group = FormFusedGroup(*b.graph, members, "matmul+epilogue", members[0]);
  EXPECT_TRUE(group.ok()) << group.status();
  if (group.ok()) b.group = *group;
  return b;
}

TuningKey KeyOf(const Built& b, const std::string& arch = "sm_80") {
  absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b.group);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? GemmTuningKey(arch, *p) : TuningKey{};
}

TuningEntry Entry(const TuningKey& key, const GemmConfig& config, double ms) {
  TuningEntry e;
  e.key = key;
  e.config = config;
  e.tuned_ms = ms;
  e.heuristic = GemmConfig{64, 64, 32, 2, 2, 4};
  e.heuristic_ms = 2 * ms;
  e.device = "Test GPU";
  return e;
}

// Compiles `kernels` for `arch` in one module and expects ptxas to report each
// without spills.
void ExpectCompilesWithoutSpills(const std::vector<ModuleKernel>& kernels, const std::string& arch) {
  auto module = InspectModule(kernels, arch);
  ASSERT_TRUE(module.ok()) << module.status();
  const std::vector<KernelResources> resources = ParsePtxasResources(module->log);
  EXPECT_EQ(resources.size(), kernels.size());
  for (const KernelResources& r : resources) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " (" << r.registers << " registers)";
    EXPECT_EQ(r.spill_load_bytes, 0) << r.function;
  }
}

TEST(GemmProblemTest, DescribesShapeLayoutAndSignature) {
  Built b = MakeGroup("f16", 128, 3072, 768, "Relu", false);
  ASSERT_NE(b.group, nullptr);
  absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b.group);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->m, 128);
  EXPECT_EQ(p->n, 3072);
  EXPECT_EQ(p->k, std::vector<int64_t>{768});
  EXPECT_EQ(p->batch, 1);
  EXPECT_EQ(p->dtype, DType::kFloat16);
  EXPECT_EQ(p->layout, "NN");
  EXPECT_TRUE(absl::StartsWith(p->signature, "matmul+epilogue[MatMul,Add,Relu]#")) << p->signature;
  EXPECT_EQ(p->signature.size(), std::string("matmul+epilogue[MatMul,Add,Relu]#").size() + 16);
  const TuningKey key = GemmTuningKey("sm_80", *p);
  EXPECT_EQ(key.k, "768");
  EXPECT_EQ(key.dtype, "f16");
  EXPECT_EQ(key.ShapeText(), "128x3072x768 f16 NN");
}

TEST(GemmProblemTest, KeysSeparateEpilogueLayoutAndDtypeButNotNames) {
  const TuningKey base = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false));
  const TuningKey renamed = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false, "_other"));
  const TuningKey gelu = KeyOf(MakeGroup("f16", 128, 768, 768, "Gelu", false));
  const TuningKey trans = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", true));
  const TuningKey bf16 = KeyOf(MakeGroup("bf16", 128, 768, 768, "Relu", false));
  EXPECT_EQ(base.ToString(), renamed.ToString());
  EXPECT_NE(base.signature, gelu.signature);
  EXPECT_EQ(trans.layout, "NT");
  EXPECT_NE(base.ToString(), trans.ToString());
  EXPECT_EQ(bf16.dtype, "bf16");
  EXPECT_NE(base.ToString(), bf16.ToString());
  EXPECT_NE(base.ToString(), KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false), "sm_90a").ToString());

  // In a database, each key finds its own entry and nothing else.
  TuningDb db(TestPath("keys.tsv"));
  db.Put(Entry(base, GemmConfig{32, 64, 32, 1, 2, 4}, 1));
  db.Put(Entry(gelu, GemmConfig{64, 32, 32, 2, 1, 4}, 2));
  db.Put(Entry(bf16, GemmConfig{128, 64, 32, 2, 2, 3}, 3));
  ASSERT_NE(db.Find(base), nullptr);
  EXPECT_EQ(db.Find(base)->tuned_ms, 1);
  EXPECT_EQ(db.Find(renamed)->tuned_ms, 1);
  EXPECT_EQ(db.Find(gelu)->tuned_ms, 2);
  EXPECT_EQ(db.Find(bf16)->tuned_ms, 3);
  EXPECT_EQ(db.Find(trans), nullptr);
}

TEST(GemmProblemTest, CandidatesVerifyAndStartWithTheHeuristic) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{128, 768, 768}, {4096, 4096, 1024}, {7, 33, 8}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", n, "x", k));
    Built b = MakeGroup("f16", m, n, k, "Relu", false);
    absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b.group);
    ASSERT_TRUE(p.ok()) << p.status();
    const std::vector<GemmConfig> c = ops::GemmCandidateConfigs(*p);
    ASSERT_FALSE(c.empty());
    EXPECT_TRUE(c[0] == ops::HeuristicGemmConfig(*p));
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_TRUE(ops::VerifyGemmConfig(c[i], p->variant).ok()) << ops::GemmConfigString(c[i]);
      for (size_t j = 0; j < i; ++j) EXPECT_FALSE(c[i] == c[j]) << ops::GemmConfigString(c[i]);
      if (i > 0) {
        EXPECT_LT(c[i].bm, 2 * ((m + 15) / 16 * 16)) << ops::GemmConfigString(c[i]);
        EXPECT_LT(c[i].bn, 2 * ((n + 15) / 16 * 16)) << ops::GemmConfigString(c[i]);
      }
    }
    int split = 0;
    for (const GemmConfig& x : c) split += x.split_k > 1;
    if (m >= 4096) {
      EXPECT_GE(c.size(), 12u);
      EXPECT_EQ(split, 0);  // 4096 tiles of 64x64: the GPU is full
    }
    if (m == 128) {
      // 24 tiles of 64x64 on 132 SMs but only 24 k tiles: the heuristic takes 32x32x64
      // tiles; the candidates try splits of at least 4 k tiles.
      EXPECT_EQ(ops::GemmConfigString(c[0]), "32x32x64 w2x2 s4");
      EXPECT_GE(split, 2);
    }
    EXPECT_LE(split, ops::kGemmMaxSplitCandidates + 1);
    EXPECT_LE(c.size(), 16u + ops::kGemmMaxSplitCandidates);
  }
}

// Every candidate of one problem generates and compiles (one module, sm_80).
TEST(GemmProblemTest, CandidatesCompile) {
  Built b = MakeGroup("f16", 1024, 1024, 200, "Relu", true);
  absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b.group);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<ModuleKernel> kernels;
  for (const GemmConfig& c : ops::GemmCandidateConfigs(*p)) {
    auto launches = ops::GenerateMatMulGroup(*b.group, &c);
    ASSERT_TRUE(launches.ok()) << ops::GemmConfigString(c) << ": " << launches.status();
    ASSERT_EQ(launches->size(), 1u);
    EXPECT_EQ((*launches)[0].block[0], static_cast<uint32_t>(c.warps_m * c.warps_n * 32));
    kernels.push_back({absl::StrCat("cand", kernels.size(), "_", c.bm, "x", c.bn, "x", c.bk, "_w", c.warps_m, "x", c.warps_n, "_s", c.stages, "_k", c.split_k), (*launches)[0].source});
  }
  EXPECT_GE(kernels.size(), 12u);
  // ptxas: no candidate spills (the verifier's register estimate keeps them in budget).
  ExpectCompilesWithoutSpills(kernels, "sm_80");
}

TEST(GemmConfigStringTest, RoundTripsAndRejectsGarbage) {
  const GemmConfig c{128, 64, 32, 2, 4, 3};
  EXPECT_EQ(ops::GemmConfigString(c), "128x64x32 w2x4 s3");
  absl::StatusOr<GemmConfig> back = ops::ParseGemmConfig("128x64x32 w2x4 s3");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == c);
  for (const char* bad : {"", "128x64 w2x2 s3", "128x64x32 w2x2", "128x64x32 2x2 s3", "128x64x32 w2x2 s0",
                          "axbxc w1x1 s2", "128x64x32 w2x2 s3 extra", "-64x64x32 w2x2 s3", "64x64x32 w2x2 s4 k0",
                          "64x64x32 w2x2 s4 k-2", "64x64x32 w2x2 s4 k3 k3"}) {
    EXPECT_FALSE(ops::ParseGemmConfig(bad).ok()) << bad;
  }
  // Split-K: " kS" after the stages, only when S > 1 (so unsplit strings are as before).
  const GemmConfig split{64, 64, 32, 2, 2, 4, 5};
  EXPECT_EQ(ops::GemmConfigString(split), "64x64x32 w2x2 s4 k5");
  absl::StatusOr<GemmConfig> split_back = ops::ParseGemmConfig("64x64x32 w2x2 s4 k5");
  ASSERT_TRUE(split_back.ok()) << split_back.status();
  EXPECT_TRUE(*split_back == split);
  EXPECT_FALSE(*split_back == (GemmConfig{64, 64, 32, 2, 2, 4}));
  EXPECT_EQ(ops::ParseGemmConfig("64x64x32 w2x2 s4 k1")->split_k, 1);
  EXPECT_EQ(ops::GemmConfigString(*ops::ParseGemmConfig("64x64x32 w2x2 s4 k1")), "64x64x32 w2x2 s4");
}

TEST(TuningDbTest, RoundTrip) {
  const std::string path = TestPath("round_trip.tsv");
  const TuningKey a = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false));
  const TuningKey b = KeyOf(MakeGroup("bf16", 256, 512, 64, "Gelu", true));
  const TuningKey c = KeyOf(MakeGroup("f16", 1, 768, 3072, "Relu", false));
  {
    TuningDb db(path);
    ASSERT_TRUE(db.Load().ok());  // no file yet: empty
    EXPECT_EQ(db.size(), 0u);
    db.Put(Entry(a, GemmConfig{32, 64, 32, 1, 2, 4}, 0.0123));
    db.Put(Entry(b, GemmConfig{128, 128, 32, 2, 4, 3}, 1.5));
    db.Put(Entry(c, GemmConfig{64, 64, 32, 2, 2, 4, 11}, 0.02));  // split-K
    ASSERT_TRUE(db.Save().ok());
  }
  const std::string text = Slurp(path);
  EXPECT_TRUE(absl::StartsWith(text, "# kiln tuning database v1")) << text;
  EXPECT_THAT(text, HasSubstr("\t32x64x32 w1x2 s4\t0.0123\t64x64x32 w2x2 s4\t0.0246\tTest GPU\t0\n"));
  EXPECT_THAT(text, HasSubstr("\t64x64x32 w2x2 s4 k11\t0.02\t64x64x32 w2x2 s4\t0.04\tTest GPU\t0\n"));
  TuningDb db(path);
  ASSERT_TRUE(db.Load().ok());
  EXPECT_TRUE(db.warnings().empty());
  ASSERT_EQ(db.size(), 3u);
  ASSERT_NE(db.Find(c), nullptr);
  EXPECT_TRUE(db.Find(c)->config == (GemmConfig{64, 64, 32, 2, 2, 4, 11}));
  const TuningEntry* e = db.Find(a);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->config == (GemmConfig{32, 64, 32, 1, 2, 4}));
  EXPECT_TRUE(e->heuristic == (GemmConfig{64, 64, 32, 2, 2, 4}));
  EXPECT_DOUBLE_EQ(e->tuned_ms, 0.0123);
  EXPECT_DOUBLE_EQ(e->heuristic_ms, 0.0246);
  EXPECT_EQ(e->device, "Test GPU");
  EXPECT_EQ(e->key.ToString(), a.ToString());
  ASSERT_NE(db.Find(b), nullptr);
  EXPECT_TRUE(db.Find(b)->config == (GemmConfig{128, 128, 32, 2, 4, 3}));
  // Saving again without changes writes the same bytes.
  ASSERT_TRUE(db.Save().ok());
  EXPECT_EQ(Slurp(path), text);
}

// cuBLASLt's time (the 14th field) round-trips; lines written before it (13 fields)
// read as not measured; auto mode takes cuBLASLt only when at least 1% faster.
TEST(TuningDbTest, LibraryTimeRoundTripsAndOlderLinesRead) {
  const std::string path = TestPath("library.tsv");
  const TuningKey a = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false));
  {
    TuningDb db(path);
    TuningEntry e = Entry(a, GemmConfig{32, 64, 32, 1, 2, 4}, 0.0123);
    e.library_ms = 0.0101;
    db.Put(e);
    ASSERT_TRUE(db.Save().ok());
  }
  const std::string text = Slurp(path);
  EXPECT_THAT(text, HasSubstr("\tTest GPU\t0.0101\n"));
  EXPECT_THAT(text, HasSubstr("\tdevice\tlibrary_ms\n"));  // the header names the field
  Write(path, absl::StrCat(text, "sm_80\tf16\t1\t2\t3\t1\tNN\tsig\t64x64x32 w2x2 s3\t1\t64x64x32 w2x2 s4\t2\tG\n",
                           "sm_80\tf16\t1\t2\t4\t1\tNN\tsig\t64x64x32 w2x2 s3\t1\t64x64x32 w2x2 s4\t2\tG\t-3\n"));
  TuningDb db(path);
  ASSERT_TRUE(db.Load().ok());
  ASSERT_EQ(db.size(), 2u);
  ASSERT_EQ(db.warnings().size(), 1u);
  EXPECT_THAT(db.warnings()[0], HasSubstr("line 5: library_ms must be a non-negative number"));
  const TuningEntry* e = db.Find(a);
  ASSERT_NE(e, nullptr);
  EXPECT_DOUBLE_EQ(e->library_ms, 0.0101);
  EXPECT_TRUE(LibraryMeasuredFaster(*e));
  for (const auto& [key, entry] : db.entries()) {
    if (entry.key.k == "3") EXPECT_EQ(entry.library_ms, 0);  // the 13-field line
  }
  TuningEntry f = *e;
  f.library_ms = 0.995 * f.tuned_ms;  // within the 1% noise guard
  EXPECT_FALSE(LibraryMeasuredFaster(f));
  f.library_ms = 0;  // not measured
  EXPECT_FALSE(LibraryMeasuredFaster(f));
}

TEST(TuningDbTest, CorruptLinesAreSkippedWithAWarning) {
  const std::string path = TestPath("corrupt.tsv");
  const TuningKey a = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false));
  {
    TuningDb db(path);
    db.Put(Entry(a, GemmConfig{32, 64, 32, 1, 2, 4}, 0.5));
    ASSERT_TRUE(db.Save().ok());
  }
  const std::string good = Slurp(path);
  Write(path, absl::StrCat(good, "garbage line\n",                                             // line 4
                           "sm_80\tf16\t1\t2\t3\t1\tNN\tsig\t64x64 w2 s3\t1\t64x64x32 w2x2 s4\t2\tG\n",  // 5: config
                           "sm_80\tf16\t1\t2\t3\t1\tNN\tsig\t64x64x32 w2x2 s3\t-1\t64x64x32 w2x2 s4\t2\tG\n",  // 6
                           "sm_80\tf16\t0\t2\t3\t1\tNN\tsig\t64x64x32 w2x2 s3\t1\t64x64x32 w2x2 s4\t2\tG\n",  // 7
                           "\n# a comment\n",
                           "sm_80\tf16\t1\t2\t3\t1\tNN\tsig\t64x64x32 w2x2 s3\t1\t64x64x32 w2x2 s4\t2\tG"));  // 10
  TuningDb db(path);
  ASSERT_TRUE(db.Load().ok());
  ASSERT_EQ(db.size(), 2u);  // the good entry and the last line (no newline at the end)
  EXPECT_NE(db.Find(a), nullptr);
  ASSERT_EQ(db.warnings().size(), 4u);
  EXPECT_THAT(db.warnings()[0], HasSubstr(absl::StrCat("tuning database ", path, " line 4: 1 tab-separated fields")));
  EXPECT_THAT(db.warnings()[1], HasSubstr("line 5: '64x64 w2 s3' is not a GEMM config"));
  EXPECT_THAT(db.warnings()[2], HasSubstr("line 6: times must be non-negative"));
  EXPECT_THAT(db.warnings()[3], HasSubstr("line 7: M, N and batch must be positive"));
  EXPECT_THAT(db.warnings()[3], HasSubstr("skipped"));
  // A save drops the unreadable lines and keeps the rest.
  db.Put(Entry(a, GemmConfig{64, 32, 32, 2, 1, 4}, 0.25));
  ASSERT_TRUE(db.Save().ok());
  TuningDb again(path);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_TRUE(again.warnings().empty());
  EXPECT_EQ(again.size(), 2u);
  EXPECT_TRUE(again.Find(a)->config == (GemmConfig{64, 32, 32, 2, 1, 4}));
}

TEST(TuningDbTest, SaveMergesEntriesOfOtherWriters) {
  const std::string path = TestPath("merge.tsv");
  const TuningKey a = KeyOf(MakeGroup("f16", 128, 768, 768, "Relu", false));
  const TuningKey b = KeyOf(MakeGroup("f16", 128, 3072, 768, "Gelu", false));
  TuningDb first(path), second(path);
  ASSERT_TRUE(first.Load().ok());
  ASSERT_TRUE(second.Load().ok());
  second.Put(Entry(b, GemmConfig{64, 128, 32, 2, 2, 3}, 2));
  second.Put(Entry(a, GemmConfig{64, 128, 32, 2, 2, 3}, 9));
  ASSERT_TRUE(second.Save().ok());
  first.Put(Entry(a, GemmConfig{32, 64, 32, 1, 2, 4}, 1));  // loaded before second saved
  ASSERT_TRUE(first.Save().ok());
  TuningDb db(path);
  ASSERT_TRUE(db.Load().ok());
  ASSERT_EQ(db.size(), 2u);
  EXPECT_EQ(db.Find(a)->tuned_ms, 1);  // the last writer's entry for its key
  EXPECT_EQ(db.Find(b)->tuned_ms, 2);  // the other writer's entry kept
  EXPECT_EQ(first.size(), 2u);         // Save also brought the other entries in
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
    files += absl::StartsWith(e.path().filename().string(), "merge.tsv.tmp") ? 1 : 0;
  }
  EXPECT_EQ(files, 0);
}

TEST(TuningDbTest, UnwritableDirectoryIsAnError) {
  const std::string blocker = TestPath("not_a_dir");
  Write(blocker, "x");
  TuningDb db(blocker + "/sub/tuning.tsv");
  ASSERT_TRUE(db.Load().ok());
  db.Put(Entry(KeyOf(MakeGroup("f16", 16, 16, 16, "Relu", false)), GemmConfig{}, 1));
  absl::Status st = db.Save();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("tuning database: cannot create"));
}

TEST(TuningDbTest, DefaultPath) {
  const char* saved[3] = {std::getenv("KILN_TUNING_DB"), std::getenv("KILN_CACHE_DIR"), std::getenv("HOME")};
  const std::string keep[3] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  setenv("KILN_TUNING_DB", "/t/db.tsv", 1);
  EXPECT_EQ(DefaultTuningDbPath(), "/t/db.tsv");
  EXPECT_EQ(DefaultTuningDbPath("/cache"), "/t/db.tsv");
  unsetenv("KILN_TUNING_DB");
  EXPECT_EQ(DefaultTuningDbPath("/cache"), "/cache/tuning.tsv");
  setenv("KILN_CACHE_DIR", "/k", 1);
  EXPECT_EQ(DefaultTuningDbPath(), "/k/tuning.tsv");
  const char* names[3] = {"KILN_TUNING_DB", "KILN_CACHE_DIR", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (saved[i] != nullptr) {
      setenv(names[i], keep[i].c_str(), 1);
    } else {
      unsetenv(names[i]);
    }
  }
}

// What kernel assignment does for a kGemm step: the selector's config, then its launches.
absl::StatusOr<std::vector<KernelLaunch>> GenerateWithDb(const Node& node, absl::string_view arch, const TuningDb* db,
                                                         GemmChoice* choice) {
  absl::StatusOr<GemmChoice> chosen = ChooseGemmConfig(node, arch, db);
  if (!chosen.ok()) return chosen.status();
  *choice = *chosen;
  return GenerateChosenGemm(node, *chosen);
}

// Generation takes the database's config (no GPU involved), and falls back to the
// heuristic for a missing entry or one the verifier rejects.
TEST(TuningDbTest, GenerationUsesTheDatabaseConfig) {
  Built b = MakeGroup("f16", 128, 768, 768, "Relu", false);
  const TuningKey key = KeyOf(b);
  TuningDb db(TestPath("generate.tsv"));
  GemmChoice choice;
  auto heuristic = GenerateWithDb(*b.group, "sm_80", &db, &choice);
  ASSERT_TRUE(heuristic.ok()) << heuristic.status();
  EXPECT_FALSE(choice.from_db);
  EXPECT_EQ(choice.Describe(), "32x32x64 w2x2 s4 (heuristic)");  // 24 tiles of 64x64: smaller ones
  EXPECT_EQ((*heuristic)[0].config, choice.Describe());
  EXPECT_THAT((*heuristic)[0].source, HasSubstr("#define BM 32\n#define BN 32\n"));
  EXPECT_EQ((*heuristic)[0].grid[1], 1u);

  db.Put(Entry(key, GemmConfig{32, 64, 32, 1, 2, 4}, 1));
  auto tuned = GenerateWithDb(*b.group, "sm_80", &db, &choice);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_TRUE(choice.from_db);
  EXPECT_EQ(choice.key, key.ToString());
  EXPECT_EQ(choice.Describe(), "32x64x32 w1x2 s4 (tuning database)");
  EXPECT_EQ((*tuned)[0].config, choice.Describe());  // the bundle's launch config
  EXPECT_THAT((*tuned)[0].source,
              HasSubstr("#define BM 32\n#define BN 64\n#define BK 32\n#define WARPS_M 1\n#define WARPS_N 2\n"
                        "#define STAGES 4\n"));
  EXPECT_EQ((*tuned)[0].block[0], 64u);
  // Another arch's entry is not used.
  auto other_arch = GenerateWithDb(*b.group, "sm_90a", &db, &choice);
  ASSERT_TRUE(other_arch.ok());
  EXPECT_FALSE(choice.from_db);

  // A split-K entry: its grid and workspace.
  db.Put(Entry(key, GemmConfig{32, 64, 32, 1, 2, 4, 3}, 1));
  auto split = GenerateWithDb(*b.group, "sm_80", &db, &choice);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_TRUE(choice.from_db);
  EXPECT_EQ(choice.Describe(), "32x64x32 w1x2 s4 k3 (tuning database)");
  EXPECT_EQ((*split)[0].grid, (std::array<uint32_t, 3>{4 * 12, 3, 1}));
  EXPECT_EQ((*split)[0].semaphores, 48u);

  // Entries the verifier rejects (too much shared memory; 32 splits of K = 768, 24 k
  // tiles): the heuristic.
  for (const GemmConfig& bad : {GemmConfig{256, 256, 64, 2, 2, 8}, GemmConfig{64, 64, 32, 2, 2, 4, 32}}) {
    db.Put(Entry(key, bad, 1));
    auto rejected = GenerateWithDb(*b.group, "sm_80", &db, &choice);
    ASSERT_TRUE(rejected.ok()) << rejected.status();
    EXPECT_FALSE(choice.from_db);
    EXPECT_EQ((*rejected)[0].source, (*heuristic)[0].source);
  }
}

// On sm_90a the sm90 family runs the groups it takes: the database holds its configs
// ("sm90 ..."), generation takes them, and an sm_80 template's entry under the same key
// (tuned before the sm90 family was) or one the generator refuses leaves the heuristic.
TEST(TuningDbTest, Sm90GroupsTakeSm90Entries) {
  Built b = MakeGroup("f16", 128, 768, 768, "Relu", false);
  const TuningKey key = KeyOf(b, "sm_90a");
  TuningDb db(TestPath("sm90.tsv"));
  GemmChoice choice;
  ASSERT_TRUE(UsesSm90Gemm(*b.group, "sm_90a"));
  EXPECT_FALSE(UsesSm90Gemm(*b.group, "sm_80"));
  auto heuristic = GenerateWithDb(*b.group, "sm_90a", &db, &choice);
  ASSERT_TRUE(heuristic.ok()) << heuristic.status();
  EXPECT_FALSE(choice.from_db);
  EXPECT_TRUE(choice.config.sm90);
  EXPECT_EQ((*heuristic)[0].family, "gemm_sm90");
  EXPECT_THAT((*heuristic)[0].config, HasSubstr("(heuristic, epilogue work: light)"));

  absl::StatusOr<GemmTileConfig> tile = GemmTileConfig::Parse("sm90 64x128 c1x1 s8 k2");
  ASSERT_TRUE(tile.ok()) << tile.status();
  TuningEntry e = Entry(key, GemmConfig{}, 1);
  e.config = *tile;
  e.heuristic = choice.config;
  db.Put(e);
  auto tuned = GenerateWithDb(*b.group, "sm_90a", &db, &choice);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_TRUE(choice.from_db);
  EXPECT_EQ(choice.Describe(), "sm90 64x128 c1x1 s8 k2 (tuning database)");
  EXPECT_EQ((*tuned)[0].config, choice.Describe());
  EXPECT_THAT((*tuned)[0].source, HasSubstr("#define BM 64\n#define BN 128\n"));
  EXPECT_GT((*tuned)[0].semaphores, 0u);  // the split's workspace

  // The entry's line round-trips; the two configs must be of one family.
  const std::string text = TuningDb::Format(db.entries());
  const std::string line = text.substr(text.rfind("sm_90a\t"));
  absl::StatusOr<TuningEntry> back = TuningDb::ParseLine(line.substr(0, line.size() - 1));
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << line;
  EXPECT_TRUE(back->config == *tile);
  EXPECT_THAT(line, HasSubstr("\tsm90 64x128 c1x1 s8 k2\t"));
  const std::string mixed = absl::StrReplaceAll(line, {{"\tsm90 64x128 c1x1 s8 k2\t", "\t64x64x32 w2x2 s4\t"}});
  absl::StatusOr<TuningEntry> mixed_back = TuningDb::ParseLine(mixed.substr(0, mixed.size() - 1));
  ASSERT_FALSE(mixed_back.ok());
  EXPECT_THAT(mixed_back.status().message(), HasSubstr("different GEMM families"));
  EXPECT_THAT(GemmTileConfig::Parse("sm90 64x64x32 w2x2 s4").status().message(), HasSubstr("sm90 GEMM config"));
  EXPECT_THAT(GemmTileConfig::Parse("64x128 c1x1 s8").status().message(), HasSubstr("\"sm90 \""));

  // An sm_80 template's config under the sm_90a key, and a split the generator refuses
  // (K = 768 is 12 k tiles: 16 splits leave some without one): the heuristic.
  for (const GemmTileConfig& refused :
       {GemmTileConfig(GemmConfig{32, 64, 32, 1, 2, 4}), *GemmTileConfig::Parse("sm90 64x64 c1x1 s8 k16")}) {
    e.config = refused;
    db.Put(e);
    auto fallback = GenerateWithDb(*b.group, "sm_90a", &db, &choice);
    ASSERT_TRUE(fallback.ok()) << fallback.status();
    EXPECT_FALSE(choice.from_db) << refused.ToString();
    EXPECT_EQ((*fallback)[0].source, (*heuristic)[0].source);
    EXPECT_EQ((*fallback)[0].config, (*heuristic)[0].config);
  }
}

// The kernel selector decides a MatMul group's config once (ChooseGemmConfig) and
// kernel assignment generates exactly that: the database's entry once one is stored.
TEST(TuningDbTest, TheSelectorCarriesTheGemmConfig) {
  Built b = MakeGroup("f16", 128, 768, 768, "Relu", false);
  TuningDb db(TestPath("selector.tsv"));
  KernelOptions options;
  options.matmul_groups = MatMulGroups::kAuto;
  options.hopper = true;
  options.tuning_db = &db;
  KernelChoice heuristic = ChooseKernel(*b.group, options);
  ASSERT_EQ(heuristic.kind, KernelKind::kGemm);
  ASSERT_TRUE(heuristic.gemm.ok()) << heuristic.gemm.status();
  EXPECT_TRUE(heuristic.gemm->config.sm90);
  EXPECT_FALSE(heuristic.gemm->from_db);
  EXPECT_EQ(heuristic.Describe(), absl::StrCat("gemm ", heuristic.gemm->Describe()));

  TuningEntry e = Entry(KeyOf(b, "sm_90a"), GemmConfig{}, 1);
  e.config = *GemmTileConfig::Parse("sm90 64x128 c1x1 s8 k2");
  e.heuristic = heuristic.gemm->config;
  db.Put(e);
  KernelChoice tuned = ChooseKernel(*b.group, options);
  ASSERT_TRUE(tuned.gemm.ok()) << tuned.gemm.status();
  EXPECT_TRUE(tuned.gemm->from_db);
  EXPECT_EQ(tuned.gemm->Describe(), "sm90 64x128 c1x1 s8 k2 (tuning database)");
  auto launches = GenerateChosenGemm(*b.group, *tuned.gemm);
  ASSERT_TRUE(launches.ok()) << launches.status();
  EXPECT_EQ((*launches)[0].config, tuned.gemm->Describe());
  EXPECT_THAT((*launches)[0].source, HasSubstr("#define BM 64\n#define BN 128\n"));

  // Not a GEMM step: no config.
  options.matmul_groups = MatMulGroups::kLibrary;
  KernelChoice library = ChooseKernel(*b.group, options);
  EXPECT_NE(library.kind, KernelKind::kGemm);
  EXPECT_FALSE(library.gemm.ok());
}

// Untuned, a narrow output over many rows (a projection conv's 16 columns over 100352
// pixels) goes to cuBLASLt in auto mode on sm_90a, with the reason; not 48 columns,
// nor 16 over 8192 rows; a database entry that measured the family faster keeps it on
// the family.
TEST(TuningDbTest, NarrowOutputsGoToTheLibraryUntuned) {
  TuningDb db(TestPath("narrow.tsv"));
  KernelOptions options;
  options.matmul_groups = MatMulGroups::kAuto;
  options.hopper = true;
  options.tuning_db = &db;
  Built narrow = MakeGroup("f16", 100352, 16, 32, "Relu", false);
  KernelChoice library = ChooseKernel(*narrow.group, options);
  EXPECT_EQ(library.kind, KernelKind::kLibrary) << library.Describe();
  EXPECT_THAT(library.reason, HasSubstr("a narrow output (16 columns over 100352 rows)"));
  // --tune chooses the groups it measures without the rule, so it measures this one.
  KernelOptions tuning = options;
  tuning.tuning_db = nullptr;
  tuning.untuned_library_rules = false;
  EXPECT_EQ(ChooseKernel(*narrow.group, tuning).kind, KernelKind::kGemm);
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{100352, 48}, {8192, 16}}) {
    Built wide = MakeGroup("f16", m, n, 32, "Relu", false);
    EXPECT_EQ(ChooseKernel(*wide.group, options).kind, KernelKind::kGemm) << m << "x" << n;
  }
  TuningEntry e = Entry(KeyOf(narrow, "sm_90a"), GemmConfig{}, 0.01);
  e.config = *GemmTileConfig::Parse("sm90 128x64 c2x1 s4");
  e.library_ms = 0.02;  // measured slower than the family
  db.Put(e);
  EXPECT_EQ(ChooseKernel(*narrow.group, options).kind, KernelKind::kGemm);
  // Other modes keep their own rule.
  options.matmul_groups = MatMulGroups::kGenerated;
  EXPECT_EQ(ChooseKernel(*narrow.group, options).kind, KernelKind::kGemm);
}

// `--tune`'s sm90 pool: the heuristic's config first, each config once and each one
// the generator takes; split-K forms where the tiles leave SMs idle, swap-AB forms for
// few rows and the swapped tile that fills one wave (1024x1664: 13 x 10 tiles of
// 128x112, which the heuristic's margin leaves out), neither for a square that fills
// the GPU; and they compile for sm_90a without spills.
TEST(GemmProblemTest, Sm90CandidatesCoverTheFamilysForms) {
  struct Case {
    int64_t m, n, k;
    bool splits, swaps;
  };
  for (const Case& c : {Case{128, 768, 3072, true, false}, Case{8, 3072, 3072, true, true},
                        Case{1024, 1664, 3712, true, true}, Case{4096, 4096, 4096, false, false}}) {
    Built b = MakeGroup("f16", c.m, c.n, c.k, "Relu", false);
    const std::vector<ops::Sm90GemmConfig> cands = ops::Sm90CandidateConfigs(*b.group);
    absl::StatusOr<ops::Sm90GemmConfig> heuristic = ops::HeuristicSm90GemmConfig(*b.group);
    ASSERT_TRUE(heuristic.ok()) << heuristic.status();
    ASSERT_GE(cands.size(), 4u) << c.m << "x" << c.n << "x" << c.k;
    EXPECT_EQ(ops::Sm90GemmConfigString(cands[0]), ops::Sm90GemmConfigString(*heuristic));
    std::set<std::string> seen;
    bool split = false, swap = false;
    for (const ops::Sm90GemmConfig& cfg : cands) {
      EXPECT_TRUE(seen.insert(ops::Sm90GemmConfigString(cfg)).second) << ops::Sm90GemmConfigString(cfg);
      EXPECT_TRUE(ops::GenerateMatMulGroupSm90(*b.group, &cfg).ok()) << ops::Sm90GemmConfigString(cfg);
      split |= cfg.split_k > 1;
      swap |= cfg.swap_ab;
    }
    EXPECT_EQ(split, c.splits) << c.m << "x" << c.n << "x" << c.k;
    EXPECT_EQ(swap, c.swaps) << c.m << "x" << c.n << "x" << c.k;
  }
  // The few-rows problem's pool through ptxas (the largest: every form but dual).
  Built b = MakeGroup("f16", 8, 3072, 3072, "Relu", false);
  std::vector<ModuleKernel> kernels;
  for (const ops::Sm90GemmConfig& cfg : ops::Sm90CandidateConfigs(*b.group)) {
    auto launches = ops::GenerateMatMulGroupSm90(*b.group, &cfg);
    ASSERT_TRUE(launches.ok()) << launches.status();
    kernels.push_back({absl::StrCat("cand", kernels.size()), (*launches)[0].source});
  }
  ExpectCompilesWithoutSpills(kernels, "sm_90a");
}

}  // namespace
}  // namespace kiln::codegen
