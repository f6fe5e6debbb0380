// Tests for CollapseViewChains: text graph in, expected text out, outputs unchanged.
#include "graph/collapse_view_chains.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

// Whisper's stem after conv1d-to-conv2d and to-channels-last (whisper_encoder.legacy
// in the zoo, 3 channels and 10 frames here; the convs stand in as Relu and Neg):
// between the convs the NHWC map goes to NCHW, to [N, C, L] and back, and after the
// second the encoder's Transpose to [N, L, C] is the NHWC map as it is stored.
TEST(CollapseViewChainsTest, WhisperStemReadsTheNhwcMapsInPlace) {
  const std::string out = RunPass<CollapseViewChains>(R"(
graph @main {
  input %c1 : f32[1,1,10,3]
  const %as_1d : i64[3] = [1, 3, 10]
  const %as_2d : i64[4] = [1, 3, 1, 10]
  const %as_1d_2 : i64[3] = [1, 3, 10]
  %nchw = Transpose(%c1) {perm = [0, 3, 1, 2]} @to_nchw
  %l = Reshape(%nchw, %as_1d) @/m/conv1/Conv/as_1d
  %m = Reshape(%l, %as_2d) @/m/conv2/Conv/as_2d
  %nhwc = Transpose(%m) {perm = [0, 2, 3, 1]} @to_nhwc
  %c2 = Neg(%nhwc) @/m/conv2/Conv
  %nchw2 = Transpose(%c2) {perm = [0, 3, 1, 2]} @to_nchw_2
  %l2 = Reshape(%nchw2, %as_1d_2) @/m/conv2/Conv/as_1d
  %t = Transpose(%l2) {perm = [0, 2, 1]} @/m/Transpose
  %y = Relu(%t)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %c1 : f32[1,1,10,3]
  const %/m/Transpose/collapsed_shape : i64[3] = [1, 10, 3]
  %c2 : f32[1,1,10,3] = Neg(%c1)
  %t : f32[1,10,3] = Reshape(%c2, %/m/Transpose/collapsed_shape)
  %y : f32[1,10,3] = Relu(%t)
  output %y
}
)");
}

// An image model's head: the pooled NHWC map [N, 1, 1, C] back to NCHW, flattened.
TEST(CollapseViewChainsTest, PooledMapFlattensWithoutATranspose) {
  const std::string out = RunPass<CollapseViewChains>(R"(
graph @main {
  input %pooled : f32[2,1,1,8]
  %nchw = Transpose(%pooled) {perm = [0, 3, 1, 2]}
  %flat = Flatten(%nchw) {axis = 1}
  output %flat
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %pooled : f32[2,1,1,8]
  const %Flatten_1/collapsed_shape : i64[2] = [2, 8]
  %flat : f32[2,8] = Reshape(%pooled, %Flatten_1/collapsed_shape)
  output %flat
}
)");
}

// ConvNeXt's downsampling as the pipeline leaves it before this pass (convnext.legacy
// in the zoo, batch 2; the patch GEMM stands in as Relu): LayerNorm2d's NHWC output
// goes back to NCHW, and the patchified 2x2 stride-2 conv gathers [N, OH, OW, C, 2, 2]
// patches from that copy. Both Transposes become one, from the NHWC map split into
// [N, OH, 2, OW, 2, C].
TEST(CollapseViewChainsTest, ConvNextDownsampleGathersPatchesInOneCopy) {
  const std::string out = RunPass<CollapseViewChains>(R"(
graph @main {
  input %ln : f16[2,32,32,8]
  const %grid : i64[6] = [2, 8, 16, 2, 16, 2]
  const %rows : i64[2] = [512, 32]
  %nchw = Transpose(%ln) {perm = [0, 3, 1, 2]} @/features/features.2/features.2.0/Transpose_1
  %g = Reshape(%nchw, %grid) @/features/features.2/features.2.1/Conv/patch_grid
  %p = Transpose(%g) {perm = [0, 2, 4, 1, 3, 5]} @/features/features.2/features.2.1/Conv/patches_nhwc
  %patches = Reshape(%p, %rows) @/features/features.2/features.2.1/Conv/patches
  %y = Relu(%patches)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %ln : f16[2,32,32,8]
  const %rows : i64[2] = [512, 32]
  const %/features/features.2/features.2.1/Conv/patches_nhwc/split_shape : i64[6] = [2, 16, 2, 16, 2, 8]
  %/features/features.2/features.2.1/Conv/patches_nhwc/split : f16[2,16,2,16,2,8] = Reshape(%ln, %/features/features.2/features.2.1/Conv/patches_nhwc/split_shape)
  %p : f16[2,16,16,8,2,2] = Transpose(%/features/features.2/features.2.1/Conv/patches_nhwc/split) {perm = [0, 1, 3, 5, 2, 4]}
  %patches : f16[512,32] = Reshape(%p, %rows)
  %y : f16[512,32] = Relu(%patches)
  output %y
}
)");
}

// Two Transposes that compose to a third permutation: one copy.
TEST(CollapseViewChainsTest, TwoTransposesBecomeOne) {
  const std::string out = RunPass<CollapseViewChains>(R"(
graph @main {
  input %x : f32[2,3,4]
  %a = Transpose(%x) {perm = [0, 2, 1]}
  %b = Transpose(%a) {perm = [2, 0, 1]}
  output %b
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3,4]
  const %Transpose_1/split_shape : i64[3] = [2, 3, 4]
  %Transpose_1/split : f32[2,3,4] = Reshape(%x, %Transpose_1/split_shape)
  %b : f32[3,2,4] = Transpose(%Transpose_1/split) {perm = [1, 0, 2]}
  output %b
}
)");
}

// Transposes that move data (an NCHW input going NHWC, one behind Reshapes),
// Reshape-only chains (views already), a lone Transpose: kept.
TEST(CollapseViewChainsTest, KeepsChainsThatReorder) {
  ExpectNoChange<CollapseViewChains>(R"(
graph @main {
  input %x : f32[1,3,2,5]
  const %s1 : i64[2] = [6, 5]
  const %s2 : i64[3] = [2, 3, 5]
  const %s3 : i64[2] = [10, 3]
  %a = Transpose(%x) {perm = [0, 2, 3, 1]}
  %b = Reshape(%a, %s3)
  %c = Reshape(%x, %s1)
  %d = Reshape(%c, %s2)
  %e = Transpose(%x) {perm = [0, 1, 3, 2]}
  output %b
  output %d
  output %e
}
)");
}

}  // namespace
}  // namespace kiln
