// The fusion passes on MatMuls with layout flags (trans_a / trans_b, graph/ops/
// mat_mul.cc): groups keep the flags in their body and compute what the unfused
// graph computes on the CPU reference; rewrites that rebuild MatMuls from row-major
// operands (fuse-siblings) leave flagged MatMuls alone.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fusion/fuse_epilogue.h"
#include "fusion/fuse_prologue.h"
#include "fusion/fuse_siblings.h"
#include "fusion/fusion_test_util.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::RunFusionPass;
using ::kiln::testing::Summary;

// "a", "b", "ab" or "": the flags of the one MatMul in `group`'s body.
std::string BodyFlags(const Node& group) {
  auto body = FusedGroupBody(group);
  EXPECT_TRUE(body.ok()) << body.status();
  if (!body.ok()) return "?";
  std::string flags = "?";
  for (const Node* n : (*body)->nodes()) {
    if (n->op_type() != "MatMul") continue;
    flags = absl::StrCat(*n->GetInt("trans_a", 0) ? "a" : "", *n->GetInt("trans_b", 0) ? "b" : "");
  }
  return flags;
}

TEST(LayoutFlagsTest, TransposedOperandsNamesTheFlags) {
  auto g = ::kiln::testing::ParseTyped(R"(
graph @main {
  input %a : f32[3,2]
  input %b : f32[4,3]
  input %c : f32[4,2]
  input %d : f32[3,4]
  %p = MatMul(%a, %b) {trans_a = 1, trans_b = 1}
  %q = MatMul(%a, %c) {trans_a = 0, trans_b = 1}
  %r = MatMul(%a, %d) {trans_a = 1}
  output %p
  output %q
  output %r
}
)");
  std::vector<std::string> got;
  for (const Node* n : g->nodes()) got.push_back(TransposedOperands(*n));
  EXPECT_EQ(got, (std::vector<std::string>{"A and B (trans_a, trans_b)", "B (trans_b)", "A (trans_a)"}));
  auto plain = ::kiln::testing::ParseTyped(R"(
graph @main {
  input %a : f32[2,3]
  input %b : f32[3,4]
  %p = MatMul(%a, %b)
  output %p
}
)");
  EXPECT_EQ(TransposedOperands(*plain->nodes()[0]), "");
}

TEST(LayoutFlagsTest, SiblingsWithFlagsAreNotMerged) {
  // %q reads the shared %x as stored, %k reads it transposed ([K, M] -> another
  // A), %v's weight carries trans_b ([N, K], not a column block): only q and o merge.
  FusionReport report;
  auto g = RunFusionPass<FuseSiblings>(R"(
graph @main {
  input %x : f32[6,6]
  const %wq : f32[6,4] = splat(0.5)
  const %wk : f32[6,4] = splat(0.5)
  const %wv : f32[4,6] = splat(0.5)
  const %wo : f32[6,2] = splat(0.5)
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) {trans_a = 1} @k
  %v = MatMul(%x, %wv) {trans_b = 1} @v
  %o = MatMul(%x, %wo) @o
  output %q
  output %k
  output %v
  output %o
}
)",
                                       &report, 11);
  EXPECT_EQ(Summary(*g), "MatMul @k\nMatMul @v\nMatMul @q/siblings\nSplit @q/split\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "o"}));
  ASSERT_EQ(report.rejections.size(), 2u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, (std::vector<std::string>{"q", "k"}));
  EXPECT_EQ(report.rejections[0].reason.rfind("shape: 'k' reads A (trans_a) transposed", 0), 0u)
      << report.rejections[0].reason;
  EXPECT_EQ(report.rejections[1].nodes, (std::vector<std::string>{"q", "v"}));
  EXPECT_EQ(report.rejections[1].reason.rfind("shape: 'v' reads B (trans_b) transposed", 0), 0u)
      << report.rejections[1].reason;
}

TEST(LayoutFlagsTest, SiblingsAllTransposedAreNotMergedEither) {
  // Same flag on every sibling: still refused (the merged MatMul and its weight are
  // built row-major); the graph is unchanged.
  bool changed = true;
  FusionReport report;
  auto g = RunFusionPass<FuseSiblings>(R"(
graph @main {
  input %x : f32[6,5]
  const %w1 : f32[6,4] = splat(0.5)
  const %w2 : f32[6,3] = splat(0.5)
  %p = MatMul(%x, %w1) {trans_a = 1} @p
  %q = MatMul(%x, %w2) {trans_a = 1} @q
  output %p
  output %q
}
)",
                                       &report, 12, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(Summary(*g), "MatMul @p\nMatMul @q\n");
}

TEST(LayoutFlagsTest, EpilogueOnFlaggedMatMul) {
  // Gemm(transA=1, transB=1) on computed operands after canonicalisation: a flagged
  // MatMul + bias + Gelu + residual. The group's body keeps the flags; fused ==
  // unfused.
  FusionReport report;
  auto g = RunFusionPass<FuseEpilogue>(R"(
graph @main {
  input %a : f32[2,7,5]
  input %b : f32[6,7]
  input %res : f32[2,5,6]
  const %bias : f32[6] = splat(0.1)
  %m = MatMul(%a, %b) {trans_a = 1, trans_b = 1} @mm
  %y = Add(%m, %bias) @bias
  %z = Gelu(%y) @gelu
  %o = Add(%z, %res) @residual
  output %o
}
)",
                                       &report, 13);
  const std::vector<const Node*> groups = Groups(*g);
  ASSERT_EQ(groups.size(), 1u) << Summary(*g);
  EXPECT_EQ(*groups[0]->GetString("pattern"), "matmul+epilogue");
  EXPECT_EQ(BodyFlags(*groups[0]), "ab");
}

TEST(LayoutFlagsTest, PrologueOnTransposedOperand) {
  // The prologue is element-wise on the operand as stored ([K, M] for trans_a), so a
  // broadcast side input keeps its stored-layout meaning; then the epilogue.
  FusionReport report;
  auto g = RunFusionPass<FusePrologue>(R"(
graph @main {
  input %x : f32[7,5]
  input %w : f32[7,3]
  const %shift : f32[5] = splat(0.2)
  %s = Add(%x, %shift) @shift
  %r = Relu(%s) @relu
  %m = MatMul(%r, %w) {trans_a = 1} @mm
  output %m
}
)",
                                       &report, 14);
  const std::vector<const Node*> groups = Groups(*g);
  ASSERT_EQ(groups.size(), 1u) << Summary(*g);
  EXPECT_EQ(*groups[0]->GetString("pattern"), "prologue+matmul");
  EXPECT_EQ(BodyFlags(*groups[0]), "a");
}

TEST(LayoutFlagsTest, DualMatMulWithFlags) {
  FusionReport report;
  auto g = RunFusionPass<FuseSiblings>(R"(
graph @main {
  input %a : f32[4,6]
  input %b : f32[5,6]
  input %c : f32[6,4]
  input %d : f32[6,5]
  %p = MatMul(%a, %b) {trans_b = 1} @p
  %q = MatMul(%c, %d) {trans_a = 1} @q
  %s = Add(%p, %q) @sum
  output %s
}
)",
                                       &report, 15);
  const std::vector<const Node*> groups = Groups(*g);
  ASSERT_EQ(groups.size(), 1u) << Summary(*g);
  EXPECT_EQ(*groups[0]->GetString("pattern"), "dual-matmul");
}

}  // namespace
}  // namespace kiln
