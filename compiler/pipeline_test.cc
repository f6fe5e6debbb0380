// Tests for the pass pipeline (compiler/pipeline.h): the list itself, the order in
// which passes run for a given set of options, the hooks every pass gets (dumps,
// verification, timing) and the fusion order that matters for attention.
#include "compiler/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "fusion/fusion_test_util.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::Summary;
using ::testing::HasSubstr;

// A conv stem, a Linear head and an odd-width MatMul: every stage has work.
constexpr char kNet[] = R"(
graph @main {
  input %x : f32[1,3,8,8]
  const %w : f32[8,3,3,3] = splat(0.1)
  const %b : f32[8] = splat(0.2)
  const %fw : f32[8,10] = splat(0.3)
  const %fb : f32[10] = splat(0.4)
  %c = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} @conv
  %r = Relu(%c) @relu
  %p = GlobalAveragePool(%r) @pool
  %f = Flatten(%p) @flatten
  %y = Gemm(%f, %fw, %fb) @fc
  output %y
}
)";

// The names the pipeline ran, in order, with one entry per run.
std::vector<std::string> RunAndRecord(Graph& graph, CompileOptions options, std::vector<PassTiming>* timings) {
  std::vector<std::string> ran;
  options.after_pass = [&ran](const std::string& pass, const Graph&) { ran.push_back(pass); };
  options.verify_passes = true;
  options.pass_timings = timings;
  const codegen::KernelOptions kernel_options = KernelOptionsFor(options);
  PassContext context(options, kernel_options);
  absl::Status st = RunPipeline(graph, context);
  EXPECT_TRUE(st.ok()) << st;
  return ran;
}

// Position of `name` in Pipeline().
int IndexOf(const std::string& name) {
  for (size_t i = 0; i < Pipeline().size(); ++i) {
    if (Pipeline()[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(PipelineTest, EveryPassIsListedOnceWithAReason) {
  std::set<std::string> names;
  for (const Pass& p : Pipeline()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name << " listed twice";
    EXPECT_FALSE(p.why.empty()) << p.name;
    EXPECT_TRUE(p.run != nullptr) << p.name;
  }
  // The orderings that the passes' reasons depend on.
  EXPECT_LT(IndexOf("eliminate-dead-code"), IndexOf("pad-matmul-width"));
  EXPECT_LT(IndexOf("to-channels-last"), IndexOf("pad-conv-channels"));
  EXPECT_LT(IndexOf("calibrate-fp16"), IndexOf("lower-precision"));
  EXPECT_LT(IndexOf("lower-precision"), IndexOf("fuse-siblings"));
  EXPECT_LT(IndexOf("fuse-gated-matmul"), IndexOf("fuse-siblings"));
  EXPECT_LT(IndexOf("fuse-attention"), IndexOf("fuse-epilogue"));
  EXPECT_LT(IndexOf("fuse-pointwise"), IndexOf("expand-groups-without-kernels"));
  EXPECT_TRUE(CheckPassName("fuse-epilogue").ok());
  absl::Status unknown = CheckPassName("fuse-everything");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("remove-identity, gather-to-reshape, sum-to-add"));
}

// fp16 on a graph with a 2-D conv: every stage runs, in the listed order, each pass
// verified and timed; canonicalisation repeats until a round changes nothing.
TEST(PipelineTest, RunsTheEnabledPassesInOrder) {
  std::unique_ptr<Graph> g = ParseTyped(kNet);
  CompileOptions options;
  options.precision = "fp16";
  std::vector<PassTiming> timings;
  const std::vector<std::string> ran = RunAndRecord(*g, options, &timings);
  int last = -1;
  int canonical_runs = 0;
  for (const std::string& name : ran) {
    const int at = IndexOf(name);
    ASSERT_GE(at, 0) << name;
    if (Pipeline()[at].stage == PassStage::kCanonicalize) {
      ++canonical_runs;
      continue;
    }
    EXPECT_GT(at, last) << name << " ran out of order";
    last = at;
  }
  const int round = IndexOf("eliminate-dead-code") + 1;
  EXPECT_GE(canonical_runs, 2 * round);  // a changing round, then a quiet one
  EXPECT_EQ(canonical_runs % round, 0);
  std::vector<std::string> later(ran.begin() + canonical_runs, ran.end());
  std::vector<std::string> expected = {"pad-matmul-width",
                                       "to-channels-last",
                                       "pad-conv-channels",
                                       "conv1x1-to-matmul",
                                       "pad-hidden-width",
                                       "collapse-view-chains",
                                       "lower-precision",
                                       "fuse-gated-matmul",
                                       "fuse-siblings",
                                       "fuse-rotary-matmul",
                                       "fuse-attention",
                                       "fuse-prologue",
                                       "fuse-epilogue",
                                       "fuse-mlp",
                                       "fuse-norms",
                                       "fuse-concat",
                                       "fuse-pad",
                                       "fuse-pointwise",
                                       "expand-groups-without-kernels"};
  // The tails pass runs only after an expansion.
  if (later.size() > expected.size()) expected.push_back("fuse-expanded-tails");
  EXPECT_EQ(later, expected);
  // One timing row per pass, in the order they first ran; the last row's node count
  // is the graph's.
  ASSERT_EQ(timings.size(), static_cast<size_t>(round) + later.size());
  EXPECT_EQ(timings.front().pass, "remove-identity");
  EXPECT_EQ(timings.front().runs, canonical_runs / round);
  EXPECT_EQ(timings.back().pass, expected.back());
  EXPECT_EQ(timings.back().nodes_after, g->num_nodes());
  const std::string table = PassTimingTable(timings);
  EXPECT_THAT(table, HasSubstr("fuse-epilogue"));
  EXPECT_THAT(table, HasSubstr("total"));
}

// fp32 without fusion on a graph without convs: canonicalisation, the MatMul padding
// and the view-chain collapse (which runs on every graph) only.
TEST(PipelineTest, ConditionsFollowTheOptionsAndTheGraph) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[4,16]
  const %w : f32[16,10] = splat(0.5)
  %y = MatMul(%x, %w) @fc
  output %y
}
)");
  CompileOptions options;
  options.precision = "fp32";
  options.fuse = false;
  const std::vector<std::string> ran = RunAndRecord(*g, options, nullptr);
  ASSERT_FALSE(ran.empty());
  for (const std::string& name : ran) {
    const int at = IndexOf(name);
    ASSERT_GE(at, 0) << name;
    EXPECT_TRUE(Pipeline()[at].stage == PassStage::kCanonicalize || name == "pad-matmul-width" ||
                name == "collapse-view-chains")
        << name;
  }
  EXPECT_EQ(ran.back(), "collapse-view-chains");
}

// --precision tf32: tf32-math runs right after fuse-siblings (with --no-fuse, after
// the layout passes), so the merged Q/K/V product and every MatMul inside the groups
// formed later carry tf32 = 1 with their weight stored [N, K].
TEST(PipelineTest, Tf32MathMarksTheMergedAndGroupedMatMuls) {
  constexpr char kQkv[] = R"(
graph @main {
  input %x : f32[2,8,16]
  const %wq : f32[16,16] = splat(0.1)
  const %wk : f32[16,16] = splat(0.2)
  const %wv : f32[16,16] = splat(0.3)
  const %bq : f32[16] = splat(0.5)
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %v = MatMul(%x, %wv) @v
  %qb = Add(%q, %bq) @qb
  %s = Add(%qb, %k) @s
  %o = Add(%s, %v) @o
  output %o
}
)";
  CompileOptions options;
  options.precision = "tf32";
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "--no-fuse");
    std::unique_ptr<Graph> g = ParseTyped(kQkv);
    options.fuse = fuse;
    const std::vector<std::string> ran = RunAndRecord(*g, options, nullptr);
    const auto at = std::find(ran.begin(), ran.end(), "tf32-math");
    ASSERT_NE(at, ran.end());
    if (fuse) {
      ASSERT_NE(at, ran.begin());
      EXPECT_EQ(*(at - 1), "fuse-siblings");
    } else {
      EXPECT_EQ(at + 1, ran.end());
    }
    // Every MatMul, top level or inside a group, marked and reading B as [N, K].
    int matmuls = 0;
    std::vector<const Graph*> graphs = {g.get()};
    std::vector<std::shared_ptr<const Graph>> bodies;
    for (size_t i = 0; i < graphs.size(); ++i) {
      for (const Node* n : graphs[i]->nodes()) {
        if (IsFusedGroup(*n)) {
          absl::StatusOr<std::shared_ptr<const Graph>> body = FusedGroupBody(*n);
          ASSERT_TRUE(body.ok()) << body.status();
          bodies.push_back(*body);
          graphs.push_back(body->get());
        }
        if (n->op_type() != "MatMul") continue;
        ++matmuls;
        EXPECT_EQ(n->GetInt("tf32", 0).value_or(0), 1) << n->Describe();
        EXPECT_EQ(n->GetInt("trans_b", 0).value_or(0), 1) << n->Describe();
      }
    }
    EXPECT_EQ(matmuls, fuse ? 1 : 3);  // fused: one merged product, in a group
  }
}

// Compiles `text` (constants random by `seed`) in fp16 for sm_90a with auto,
// generated and library MatMul groups and for sm_80: `pass` runs exactly on the first
// two (the Hopper family with kiln's GEMMs); `check(graph, fires)` inspects each
// result, which matches the unfused graph.
template <typename Check>
void ForEachGemmTarget(const std::string& text, uint32_t seed, const std::string& pass, const Check& check) {
  struct Target {
    const char* arch;
    codegen::MatMulGroups groups;
    bool fires;
  };
  for (const Target& t :
       {Target{"sm_90a", codegen::MatMulGroups::kAuto, true}, Target{"sm_90a", codegen::MatMulGroups::kGenerated, true},
        Target{"sm_90a", codegen::MatMulGroups::kLibrary, false},
        Target{"sm_80", codegen::MatMulGroups::kAuto, false}}) {
    SCOPED_TRACE(absl::StrCat(t.arch, " ", static_cast<int>(t.groups)));
    std::unique_ptr<Graph> g = ParseTyped(text);
    RandomizeConstants(*g, seed);
    std::unique_ptr<Graph> original = g->Clone();
    CompileOptions options;
    options.precision = "fp16";
    options.arch = t.arch;
    options.matmul_groups = t.groups;
    const std::vector<std::string> ran = RunAndRecord(*g, options, nullptr);
    EXPECT_EQ(std::count(ran.begin(), ran.end(), pass), t.fires ? 1 : 0);
    check(*g, t.fires);
    ExpectSameResults(*original, *g, 2e-2f, 2e-2f);
  }
}

// A gated FFN (Llama's SwiGLU, as torch.export writes it) becomes one gated-matmul
// group on sm_90a, where the Hopper family pairs gate and up in its epilogue, and
// stays two merged siblings and a pointwise kernel elsewhere and with cuBLASLt only.
TEST(PipelineTest, GatedFfnOnTheHopperFamilyOnly) {
  constexpr char kFfn[] = R"(
graph @main {
  input %x : f32[2,8,16]
  const %wg : f32[16,24] = splat(0.1)
  const %wu : f32[16,24] = splat(0.2)
  %g = MatMul(%x, %wg) @gate
  %s = Sigmoid(%g) @sigmoid
  %silu = Mul(%g, %s) @silu
  %u = MatMul(%x, %wu) @up
  %y = Mul(%silu, %u) @join
  output %y
}
)";
  ForEachGemmTarget(kFfn, 5, "fuse-gated-matmul", [](const Graph& g, bool fires) {
    int gated = 0;
    for (const Node* n : g.nodes()) gated += IsFusedGroup(*n) && n->GetString("pattern", "").value_or("") == "gated-matmul";
    EXPECT_EQ(gated, fires ? 1 : 0) << Summary(g);
  });
}

// RoPE on Q and K as the exporters write it (Slice, Neg, Concat, Mul, Add after the
// head split) runs in the merged Q/K/V product's epilogue on sm_90a (one
// rotary-matmul group and the pieces' Slices), and stays a Split and rotation kernels
// elsewhere and with cuBLASLt only.
TEST(PipelineTest, RotaryQkvOnTheHopperFamilyOnly) {
  std::string rope;
  for (const char* p : {"q", "k"}) {
    rope += absl::StrReplaceAll(R"(
  %P_h = Reshape(%P, %P_shape) @P_view
  %P_t = Transpose(%P_h) {perm = [0, 2, 1, 3]} @P_transpose
  %P_s1 = Slice(%P_t, %lo_start, %lo_end, %last) @P_slice1
  %P_s2 = Slice(%P_t, %hi_start, %hi_end, %last) @P_slice2
  %P_n = Neg(%P_s2) @P_neg
  %P_rot = Concat(%P_n, %P_s1) {axis = -1} @P_concat
  %P_c = Mul(%P_t, %cos) @P_cos
  %P_r = Mul(%P_rot, %sin) @P_sin
  %P_y = Add(%P_c, %P_r) @P_rope
  %P_out = Reshape(%P_y, %P_flat) @P_flat
  output %P_out)",
                                {{"P", p}});
  }
  const std::string text = absl::StrCat(R"(
graph @main {
  input %x : f32[2,8,32]
  const %wq : f32[32,32] = splat(0.1)
  const %wk : f32[32,16] = splat(0.2)
  const %wv : f32[32,16] = splat(0.3)
  const %q_shape : i64[4] = [2, 8, 2, 16]
  const %k_shape : i64[4] = [2, 8, 1, 16]
  const %q_flat : i64[2] = [2, -1]
  const %k_flat : i64[2] = [2, -1]
  const %lo_start : i64[1] = [0]
  const %lo_end : i64[1] = [8]
  const %hi_start : i64[1] = [8]
  const %hi_end : i64[1] = [16]
  const %last : i64[1] = [-1]
  const %cos : f32[1,1,8,16] = splat(0.5)
  const %sin : f32[1,1,8,16] = splat(0.5)
  %q = MatMul(%x, %wq) @q_proj
  %k = MatMul(%x, %wk) @k_proj
  %v = MatMul(%x, %wv) @v_proj
  output %v)",
                                        rope, "\n}\n");
  ForEachGemmTarget(text, 6, "fuse-rotary-matmul", [](const Graph& g, bool fires) {
    int rotary = 0, splits = 0;
    for (const Node* n : g.nodes()) {
      rotary += IsFusedGroup(*n) && n->GetString("pattern", "").value_or("") == "rotary-matmul";
      splits += n->op_type() == "Split";
    }
    EXPECT_EQ(rotary, fires ? 1 : 0) << Summary(g);
    EXPECT_EQ(splits, fires ? 0 : 1) << Summary(g);
  });
}

// Attention comes before fuse-epilogue, so the scale and mask stay with the Softmax
// inside the attention group instead of becoming the scores MatMul's epilogue.
TEST(PipelineTest, AttentionIsFusedBeforeEpilogues) {
  std::unique_ptr<Graph> g = ParseTyped(::kiln::testing::kBertAttention);
  RandomizeConstants(*g, 3);
  std::unique_ptr<Graph> original = g->Clone();
  absl::StatusOr<FusionReport> fused = RunFusion(*g);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  EXPECT_EQ(Summary(*g), "FusedGroup attention [scores, div, add, softmax, context] anchor=scores\n");
  ASSERT_EQ(fused->groups.size(), 1u);
  EXPECT_EQ(fused->groups[0].pass, "fuse-attention");
}

}  // namespace
}  // namespace kiln
