// Tests for RecognizeLayerNorm: text graph in, expected text out, outputs unchanged.
#include "graph/recognize_layer_norm.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

// The decomposed LayerNorm over the last axis of %x : f32[2,3,8], as torch.onnx
// exports it below opset 17 and models/model_builder.cc LayerNorm emits it;
// `mean_axes` / `var_axes` are the ReduceMean axes spellings (attribute or input).
std::string Decomposed(absl::string_view mean_axes, absl::string_view var_axes, absl::string_view extra = "") {
  return absl::StrCat(R"(
graph @main {
  input %x : f32[2,3,8]
  const %gamma : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  const %beta : f32[8] = [0.0, 0.1, 0.2, 0.3, -0.1, -0.2, -0.3, 0.5]
  const %two : f32[] = [2.0]
  const %eps : f32[] = [1e-05]
  const %axes : i64[1] = [-1]
  const %axes2 : i64[1] = [2]
)",
                      extra, R"(
  %mean = ReduceMean()",
                      mean_axes, R"( @ln/ReduceMean
  %d = Sub(%x, %mean) @ln/Sub
  %sq = Pow(%d, %two) @ln/Pow
  %var = ReduceMean()",
                      var_axes, R"( @ln/ReduceMean_1
  %ve = Add(%var, %eps) @ln/Add
  %std = Sqrt(%ve) @ln/Sqrt
  %n = Div(%d, %std) @ln/Div
  %s = Mul(%n, %gamma) @ln/Mul
  %y = Add(%s, %beta) @ln/Add_1
  output %y
}
)");
}

constexpr char kFused[] = R"(graph @main {
  input %x : f32[2,3,8]
  const %gamma : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  const %beta : f32[8] = [0.0, 0.1, 0.2, 0.3, -0.1, -0.2, -0.3, 0.5]
  %y : f32[2,3,8] = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 1e-05}
  output %y
}
)";

TEST(RecognizeLayerNormTest, AxesAttributeAsKilnModelsEmitIt) {
  std::unique_ptr<Graph> g = MustParse(Decomposed("%x) {axes = [-1]}", "%sq) {axes = [-1]}"));
  std::unique_ptr<Graph> before = g->Clone();
  auto changed = RecognizeLayerNorm().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(Print(*g), kFused);
  ASSERT_EQ(g->num_nodes(), 1);
  EXPECT_EQ(g->nodes()[0]->name(), "ln/Add_1");
  ExpectSameOutputs(*before, *g);
}

TEST(RecognizeLayerNormTest, AxesInputAsTheImporterPresentsIt) {
  // The importer moves `axes` (an attribute below opset 18) into input 1.
  EXPECT_EQ(RunPass<RecognizeLayerNorm>(Decomposed("%x, %axes)", "%sq, %axes2) {keepdims = 1}")), kFused);
}

TEST(RecognizeLayerNormTest, MulSquareAndNoAffineGetUnitScaleAndZeroBias) {
  const std::string out = RunPass<RecognizeLayerNorm>(R"(
graph @main {
  input %x : f32[4,16]
  const %eps : f32[1] = [1e-12]
  const %axes : i64[1] = [1]
  %mean = ReduceMean(%x, %axes)
  %d = Sub(%x, %mean)
  %sq = Mul(%d, %d)
  %var = ReduceMean(%sq) {axes = [-1]}
  %ve = Add(%eps, %var)
  %std = Sqrt(%ve)
  %y = Div(%d, %std) @norm
  %r = Relu(%y)
  output %r
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[4,16]
  const %norm/scale : f32[16] = splat(1.0)
  const %norm/bias : f32[16] = splat(0.0)
  %y : f32[4,16] = LayerNormalization(%x, %norm/scale, %norm/bias) {axis = -1, epsilon = 1e-12}
  %r : f32[4,16] = Relu(%y)
  output %r
}
)");
}

TEST(RecognizeLayerNormTest, GammaWithLeadingOnesIsReshaped) {
  const std::string out = RunPass<RecognizeLayerNorm>(R"(
graph @main {
  input %x : f32[2,4]
  const %gamma : f32[1,4] = [1.0, 2.0, 3.0, 4.0]
  const %eps : f32[] = [0.001]
  %mean = ReduceMean(%x) {axes = [-1]}
  %d = Sub(%x, %mean)
  %sq = Mul(%d, %d)
  %var = ReduceMean(%sq) {axes = [-1]}
  %ve = Add(%var, %eps)
  %std = Sqrt(%ve)
  %n = Div(%d, %std)
  %y = Mul(%gamma, %n) @scale
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,4]
  const %gamma/vector : f32[4] = [1.0, 2.0, 3.0, 4.0]
  const %scale/bias : f32[4] = splat(0.0)
  %y : f32[2,4] = LayerNormalization(%x, %gamma/vector, %scale/bias) {axis = -1, epsilon = 0.001}
  output %y
}
)");
}

TEST(RecognizeLayerNormTest, DoesNotFireOnOtherAxes) {
  const std::string middle = Decomposed("%x) {axes = [1]}", "%sq) {axes = [1]}");
  ExpectNoChange<RecognizeLayerNorm>(middle);
  const std::string two_axes = Decomposed("%x) {axes = [1, 2]}", "%sq) {axes = [1, 2]}");
  ExpectNoChange<RecognizeLayerNorm>(two_axes);
  const std::string no_keepdims_in = R"(
graph @main {
  input %x : f32[2,4]
  const %eps : f32[] = [0.001]
  const %shape : i64[2] = [2, 1]
  %m = ReduceMean(%x) {axes = [-1], keepdims = 0}
  %mean = Reshape(%m, %shape)
  %d = Sub(%x, %mean)
  %sq = Mul(%d, %d)
  %var = ReduceMean(%sq) {axes = [-1]}
  %ve = Add(%var, %eps)
  %std = Sqrt(%ve)
  %y = Div(%d, %std)
  output %y
}
)";
  ExpectNoChange<RecognizeLayerNorm>(no_keepdims_in);
}

TEST(RecognizeLayerNormTest, DoesNotFireWhenAnIntermediateIsReadElsewhere) {
  // The mean is also an output; the centred value feeds another op.
  const std::string mean_out = absl::StrReplaceAll(Decomposed("%x) {axes = [-1]}", "%sq) {axes = [-1]}"),
                                                   {{"  output %y\n", "  output %y\n  output %mean\n"}});
  ExpectNoChange<RecognizeLayerNorm>(mean_out);
  const std::string d_used = absl::StrReplaceAll(Decomposed("%x) {axes = [-1]}", "%sq) {axes = [-1]}"),
                                                 {{"  output %y\n", "  %z = Add(%y, %d)\n  output %z\n"}});
  ExpectNoChange<RecognizeLayerNorm>(d_used);
  const std::string var_used = absl::StrReplaceAll(Decomposed("%x) {axes = [-1]}", "%sq) {axes = [-1]}"),
                                                   {{"  output %y\n", "  %z = Add(%y, %var)\n  output %z\n"}});
  ExpectNoChange<RecognizeLayerNorm>(var_used);
}

TEST(RecognizeLayerNormTest, StopsBeforeAffineOpsThatReadIntermediatesElsewhere) {
  // The normalised value is also a graph output: the Div's result must stay
  // available: only the core up to the Div is replaced; the Mul and Add stay.
  const std::string in = absl::StrReplaceAll(Decomposed("%x) {axes = [-1]}", "%sq) {axes = [-1]}"),
                                             {{"  output %y\n", "  output %y\n  output %n\n"}});
  const std::string out = RunPass<RecognizeLayerNorm>(in);
  EXPECT_NE(out.find("%n : f32[2,3,8] = LayerNormalization(%x, %ln/Div/scale, %ln/Div/bias)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("%s : f32[2,3,8] = Mul(%n, %gamma)"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
