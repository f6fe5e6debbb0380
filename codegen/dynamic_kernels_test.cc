// Kernels with run-time sizes (issue 34): on a dynamic graph cut from the legacy BERT
// and Whisper exports' forms (a bias Add over [batch, seq, 64], the attention Softmax
// over seq scores, LayerNorm, the head Transpose, pools over the outermost batch, an
// embedding Gather), the generated launches take kiln_dims, carry their grids as
// expressions and compile with NVRTC; ops without such a kernel are Unimplemented,
// never generated for the largest sizes.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln::codegen {
namespace {

constexpr char kGraph[] = R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %x : f16[4,64,64] dims "batch, seq, 64"
  input %ids : i64[4,64] dims "batch, seq"
  input %img : f16[4,8,5,5] dims "batch, 8, 5, 5"
  input %bias : f16[64]
  input %scale : f16[64]
  input %table : f16[100,64]
  %a = Add(%x, %bias)
  %n = LayerNormalization(%a, %scale, %bias) {axis = -1, epsilon = 1e-5}
  %t = Transpose(%n) {perm = [0, 2, 1]}
  %s = MatMul(%n, %t)
  %p = Softmax(%s) {axis = -1}
  %g = GlobalAveragePool(%img)
  %m = MaxPool(%img) {kernel_shape = [2, 2], strides = [2, 2]}
  %e = Gather(%table, %ids) {axis = 0}
  %l = LRN(%img) {size = 3}
  output %p
  output %g
  output %m
  output %e
  output %l
})";

TEST(DynamicKernelsTest, LaunchesTakeTheSizesAtRunTimeAndCompile) {
  auto g = ParseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(**g).ok());
  std::vector<ModuleKernel> kernels;
  for (const Node* node : (*g)->nodes()) {
    SCOPED_TRACE(node->name());
    if (node->op_type() == "MatMul") continue;  // cuBLASLt, planned per size
    absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*node);
    if (node->op_type() == "LRN") {  // no kernel with run-time sizes: never one for the largest
      ASSERT_FALSE(launches.ok());
      EXPECT_EQ(launches.status().code(), absl::StatusCode::kUnimplemented);
      EXPECT_NE(launches.status().message().find("only MaxPool and AveragePool"), std::string::npos)
          << launches.status();
      continue;
    }
    ASSERT_TRUE(launches.ok()) << launches.status();
    for (const KernelLaunch& l : *launches) {
      EXPECT_TRUE(l.dim_param);
      EXPECT_NE(l.source.find("const kiln_dims kiln_dims_"), std::string::npos);
      EXPECT_GT(l.grid_per_block[0], 0);
      EXPECT_FALSE(l.grid_extents[0].IsConstant()) << "the grid follows the sizes";
      kernels.push_back({absl::StrCat("k", kernels.size()), l.source});
    }
  }
  ASSERT_EQ(kernels.size(), 7u);  // Add, LayerNorm, Transpose, Softmax, GlobalAveragePool, MaxPool, Gather
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::string> cubin = CompileModule(kernels, arch);
    EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
  }
}

// The Softmax over seq scores reads its row length at run time; a LayerNorm row that
// varies has no such kernel.
TEST(DynamicKernelsTest, SoftmaxRowsVaryNormRowsDoNot) {
  auto g = ParseGraph(R"(graph @main {
  dim seq in [1, 64]
  input %s : f16[2,64,64] dims "2, seq, seq"
  input %scale : f16[64]
  %p = Softmax(%s) {axis = -1}
  %n = LayerNormalization(%s, %scale) {axis = -1}
  output %p
  output %n
})");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(**g).ok());
  const std::vector<Node*> nodes = (*g)->nodes();
  absl::StatusOr<std::vector<KernelLaunch>> softmax = GenerateNodeKernels(*nodes[0]);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_NE(softmax->front().source.find("#define kLen (a.len)"), std::string::npos);
  EXPECT_EQ(softmax->front().grid_extents[0].ToString((*g)->dim_symbols()), "2*seq");
  absl::StatusOr<std::vector<KernelLaunch>> norm = GenerateNodeKernels(*nodes[1]);
  ASSERT_FALSE(norm.ok());
  EXPECT_NE(norm.status().message().find("a row whose length varies"), std::string::npos) << norm.status();
}

}  // namespace
}  // namespace kiln::codegen
