// Tests for FuseMlp: the squeeze-excitation gate as the zoo's exports write it joins
// into one "mlp" group (fused == unfused on the CPU reference), and the cases where
// it must not.
#include "fusion/fuse_mlp.h"

#include <gtest/gtest.h>

#include "common/status_macros.h"
#include "fusion/fuse_epilogue.h"
#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::Summary;

// FuseEpilogue (which forms the two matmul+epilogue groups), then FuseMlp.
class EpilogueThenMlp {
 public:
  explicit EpilogueThenMlp(FusionReport* report) : report_(report) {}
  absl::StatusOr<bool> Run(Graph& graph) {
    KILN_ASSIGN_OR_RETURN(bool a, FuseEpilogue(report_).Run(graph));
    KILN_ASSIGN_OR_RETURN(bool b, FuseMlp(report_).Run(graph));
    return a || b;
  }

 private:
  FusionReport* report_;
};

std::unique_ptr<Graph> Fuse(const std::string& text, FusionReport* report) {
  return ::kiln::testing::RunFusionPass<EpilogueThenMlp>(text, report, 5);
}

// EfficientNet-B0's squeeze-excitation as the legacy export reads after
// to-channels-last, conv1x1-to-matmul and pad-hidden-width (zoo efficientnet.legacy,
// features.2.0, batch 2): pool, fc1 + bias + SiLU, fc2 + bias + Sigmoid, the
// excitation Mul.
constexpr char kEfficientNetGate[] = R"(
graph @main {
  input %x : f32[2,6,6,48]
  const %w1 : f32[48,8] = splat(0.1)
  const %b1 : f32[8] = splat(0.1)
  const %w2 : f32[8,48] = splat(0.2)
  const %b2 : f32[48] = splat(0.1)
  %p = GlobalAveragePool(%x) {channels_last = 1} @pool
  %f1 = MatMul(%p, %w1) @fc1
  %f1b = Add(%f1, %b1) @fc1_bias
  %s1 = Sigmoid(%f1b) @silu_sigmoid
  %a = Mul(%f1b, %s1) @silu_mul
  %f2 = MatMul(%a, %w2) @fc2
  %f2b = Add(%f2, %b2) @fc2_bias
  %g = Sigmoid(%f2b) @gate
  %y = Mul(%g, %x) @excite
  output %y
}
)";

TEST(FuseMlpTest, SqueezeExcitationGateIsOneGroup) {
  FusionReport report;
  auto g = Fuse(kEfficientNetGate, &report);
  EXPECT_EQ(Summary(*g),
            "GlobalAveragePool @pool\n"
            "FusedGroup mlp [fc1, fc1_bias, silu_sigmoid, silu_mul, fc2, fc2_bias, gate] anchor=fc2\n"
            "Mul @excite\n");
  const std::vector<FusionReport::Group> groups = FinalGroups(report.groups);
  ASSERT_EQ(groups.size(), 1u) << report.ToString();
  EXPECT_EQ(groups[0].pattern, "mlp");
  EXPECT_EQ(groups[0].pass, "fuse-epilogue+fuse-mlp");
  EXPECT_EQ(groups[0].members.size(), 7u);
}

// Batch 16: 16 rows, more than the one-kernel MLP takes; the two GEMM groups stay.
TEST(FuseMlpTest, TooManyRowsStayTwoGemms) {
  std::string text = kEfficientNetGate;
  text.replace(text.find("f32[2,6,6,48]"), 13, "f32[16,6,6,48]");
  FusionReport report;
  auto g = Fuse(text, &report);
  EXPECT_EQ(Groups(*g).size(), 2u);
  bool rejected = false;
  for (const auto& r : report.rejections) rejected |= r.pass == "fuse-mlp" && absl::StartsWith(r.reason, "shape: ");
  EXPECT_TRUE(rejected) << report.ToString();
}

// A transformer FFN over 8 tokens ([1, 8, 32]: not a pooled map) stays two GEMMs
// however small.
TEST(FuseMlpTest, ShortSequenceFfnMustNotFire) {
  FusionReport report;
  auto g = Fuse(R"(
graph @main {
  input %x : f32[1,8,32]
  const %w1 : f32[32,64] = splat(0.1)
  const %w2 : f32[64,32] = splat(0.2)
  const %b2 : f32[32] = splat(0.1)
  %f1 = MatMul(%x, %w1) @fc1
  %a = Gelu(%f1) @gelu
  %f2 = MatMul(%a, %w2) @fc2
  %y = Add(%f2, %b2) @fc2_bias
  output %y
}
)",
                &report);
  for (const Node* n : Groups(*g)) EXPECT_NE(*n->GetString("pattern"), "mlp");
  EXPECT_EQ(Groups(*g).size(), 2u);
}

// fc1's result also read outside (a second consumer): no group, no rejection.
TEST(FuseMlpTest, HiddenLayerReadElsewhereMustNotFire) {
  FusionReport report;
  auto g = Fuse(R"(
graph @main {
  input %p : f32[1,1,1,16]
  const %w1 : f32[16,4] = splat(0.1)
  const %w2 : f32[4,16] = splat(0.2)
  %f1 = MatMul(%p, %w1) @fc1
  %a = Relu(%f1) @relu
  %f2 = MatMul(%a, %w2) @fc2
  %g = Sigmoid(%f2) @gate
  output %g
  output %a
}
)",
                &report);
  for (const Node* n : Groups(*g)) EXPECT_NE(*n->GetString("pattern"), "mlp");
  EXPECT_EQ(Groups(*g).size(), 2u);
}

}  // namespace
}  // namespace kiln
