// Tests for the generated per-node kernels: every case of codegen/ops/op_kernel_cases.h
// generates launches with valid args and launch shapes, and all of them compile
// with NVRTC for sm_90a and sm_80; unsupported ops are Unimplemented.
#include "codegen/op_kernels.h"
#include "graph/evaluate.h"
#include "graph/op_registry.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/op_kernel_cases.h"

namespace kiln::codegen {
namespace {

TEST(OpKernelsTest, StorageTypeNames) {
  EXPECT_STREQ(StorageTypeName(DType::kFloat16), "kiln_f16");
  EXPECT_STREQ(StorageTypeName(DType::kFloat32), "float");
  EXPECT_STREQ(StorageTypeName(DType::kInt64), "kiln_i64");
  EXPECT_STREQ(StorageTypeName(DType::kBool), "kiln_bool");
}

// Generates every case's launches and checks their shape; returns the kernels.
std::vector<ModuleKernel> GenerateAll() {
  std::vector<ModuleKernel> kernels;
  for (const test::Case& c : test::AllCases()) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<test::BuiltCase> b = test::Build(c);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) continue;
    const Node& node = *b->node;
    absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(node);
    EXPECT_TRUE(launches.ok()) << launches.status();
    if (!launches.ok()) continue;
    EXPECT_FALSE(launches->empty());
    std::vector<bool> written(node.num_outputs(), false);
    for (size_t k = 0; k < launches->size(); ++k) {
      const KernelLaunch& l = (*launches)[k];
      EXPECT_NE(l.source.find("KILN_KERNEL("), std::string::npos);
      for (int a : l.args) {
        EXPECT_GE(a, 0);
        EXPECT_LT(a, node.num_outputs() + node.num_inputs());
        if (a < node.num_outputs()) {
          written[a] = true;
        } else {
          EXPECT_TRUE(node.has_input(a - node.num_outputs())) << "arg " << a << " is an absent input";
        }
      }
      for (int d = 0; d < 3; ++d) {
        EXPECT_GT(l.grid[d], 0u);
        EXPECT_GT(l.block[d], 0u);
      }
      EXPECT_LE(l.block[0] * l.block[1] * l.block[2], 1024u);
      kernels.push_back({absl::StrCat("kiln_", c.name, "_", k), l.source});
    }
    for (int o = 0; o < node.num_outputs(); ++o) EXPECT_TRUE(written[o]) << "output " << o << " never written";
  }
  return kernels;
}

TEST(OpKernelsTest, AllCasesGenerateAndCompile) {
  const std::vector<ModuleKernel> kernels = GenerateAll();
  ASSERT_GT(kernels.size(), 100u);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, 24);
    ASSERT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
    for (const std::string& cubin : *cubins) EXPECT_FALSE(cubin.empty());
  }
}

// The GPU test compares every case with the CPU reference: the reference must take
// each case (so a GPU run is never spent on a case it would reject).
TEST(OpKernelsTest, AllCasesEvaluateOnTheCpuReference) {
  for (const test::Case& c : test::AllCases()) {
    absl::StatusOr<test::BuiltCase> b = test::Build(c);
    ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
    std::vector<const Tensor*> in;
    for (int i = 0; i < b->node->num_inputs(); ++i) in.push_back(b->node->has_input(i) ? &b->inputs[i] : nullptr);
    absl::StatusOr<std::vector<Tensor>> out = EvaluateNode(*b->node, in);
    EXPECT_TRUE(out.ok()) << c.name << ": " << out.status();
  }
}

// Every op kiln imports runs on the GPU: each registered op has a case in the
// GPU-vs-CPU table (codegen/ops/op_kernel_cases.h), except the ops no bundle step
// ever holds (folded at import since their outputs are fixed by shapes or
// constants) and those the vendor libraries run (codegen/library_kernels.h).
TEST(OpKernelsTest, EveryRegisteredOpHasAGpuCase) {
  const std::set<std::string> never_a_step = {"Constant", "ConstantOfShape", "Shape",   "Size",
                                              "Range",    "NonZero",         "Unique",  "NonMaxSuppression"};
  const std::set<std::string> library = {"MatMul", "Gemm", "FusedGroup"};
  std::set<std::string> covered;
  for (const test::Case& c : test::AllCases()) covered.insert(c.op);
  for (const OpDef* def : OpRegistry::Global().All()) {
    if (never_a_step.count(def->name) || library.count(def->name)) continue;
    EXPECT_TRUE(covered.count(def->name)) << def->name << " has no case in codegen/ops/op_kernel_cases.h: "
                                          << "add its GPU kernel and a case";
  }
}

// The launch of case `name` of AllCases.
KernelLaunch CaseLaunch(const std::string& name) {
  for (const test::Case& c : test::AllCases()) {
    if (c.name != name) continue;
    auto b = test::Build(c);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return {};
    auto l = GenerateNodeKernels(*b->node);
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok() || l->size() != 1) return {};
    return (*l)[0];
  }
  ADD_FAILURE() << "no case " << name;
  return {};
}

// Element-wise kernels move 16 bytes per access where the shapes allow it, and one
// element where they do not; row kernels pick their thread grouping and width.
TEST(OpKernelsTest, VectorWidthFollowsShapes) {
  EXPECT_NE(CaseLaunch("AddVecBiasF16").source.find("(8 elements per vector)"), std::string::npos);
  EXPECT_NE(CaseLaunch("AddVecColumnF32").source.find("(4 elements per vector)"), std::string::npos);
  EXPECT_NE(CaseLaunch("MulHalfVecF16").source.find("(4 elements per vector)"), std::string::npos);
  EXPECT_NE(CaseLaunch("AddFlatTailF16").source.find("the tail after the last whole vector"), std::string::npos);
  EXPECT_NE(CaseLaunch("AddVecI64").source.find("(2 elements per vector)"), std::string::npos);
  EXPECT_EQ(CaseLaunch("AddBroadcastF32").source.find("elements per vector"), std::string::npos);  // [3,5,7]

  const KernelLaunch warp = CaseLaunch("LayerNormRow768F16");
  EXPECT_NE(warp.source.find("constexpr int kVec = 8;"), std::string::npos);
  EXPECT_NE(warp.source.find("constexpr int kThreads = 32;"), std::string::npos);
  EXPECT_NE(warp.source.find("constexpr bool kCache = true;"), std::string::npos);
  EXPECT_EQ(warp.block[0], 128u);
  EXPECT_EQ(warp.grid[0], 1u);  // 3 rows, 4 per block
  const KernelLaunch sub = CaseLaunch("SoftmaxRow7F16");
  EXPECT_NE(sub.source.find("constexpr int kVec = 1;"), std::string::npos);
  EXPECT_NE(sub.source.find("constexpr int kThreads = 8;"), std::string::npos);
  const KernelLaunch block = CaseLaunch("SoftmaxRow4096F16");
  EXPECT_NE(block.source.find("constexpr int kThreads = 128;"), std::string::npos);
  EXPECT_EQ(block.block[0], 128u);
  EXPECT_EQ(block.grid[0], 3u);
  EXPECT_NE(CaseLaunch("SoftmaxStreamF32").source.find("constexpr bool kCache = false;"), std::string::npos);
  EXPECT_NE(CaseLaunch("ReduceMeanRow1000F16").source.find("constexpr int kVec = 8;"), std::string::npos);
}

// A channels-last pool over a large early map (32 channels, 112 x 112 pixels) cuts
// its channels into tiles of two 16-byte groups and shares each tile's pixels among
// the 8 CTAs of a cluster (with the global-memory fallback's workspace before sm_90);
// a final pool over a 7 x 7 map with many channels keeps one CTA per tile.
TEST(OpKernelsTest, ChannelsLastPoolSpreadsLargeMaps) {
  const KernelLaunch large = CaseLaunch("GlobalAveragePoolNhwcLargeF16");  // [2, 112, 112, 32]
  EXPECT_EQ(large.grid, (std::array<uint32_t, 3>{2, 2, 8}));
  EXPECT_EQ(large.block, (std::array<uint32_t, 3>{2, 256, 1}));
  EXPECT_NE(large.source.find("__cluster_dims__(1, 1, 8)"), std::string::npos);
  EXPECT_NE(large.source.find("constexpr int kPix = 7;"), std::string::npos);
  EXPECT_EQ(large.semaphores, 2u * (2 + 32));
  const KernelLaunch wide = CaseLaunch("GlobalAveragePoolNhwcWideF16");  // [3, 7, 7, 1280]
  EXPECT_EQ(wide.grid, (std::array<uint32_t, 3>{5, 3, 1}));
  EXPECT_EQ(wide.block, (std::array<uint32_t, 3>{32, 16, 1}));
  EXPECT_EQ(wide.source.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(wide.semaphores, 0u);
}

// An image's channels padded to 8 fp16 (the stem's pad group) and a 16-byte row of a
// plain Pad take a thread per row and one vector store; a 14-byte row (7 bf16) keeps
// a thread per element.
TEST(OpKernelsTest, PadsStoreWholeRows) {
  const KernelLaunch stem = CaseLaunch("CastTransposePadGroupF16");  // f16[2,5,7,8]
  EXPECT_NE(stem.source.find("(a thread per row of 8)"), std::string::npos) << stem.source;
  EXPECT_NE(stem.source.find("kiln_vec_st<8>"), std::string::npos);
  EXPECT_NE(CaseLaunch("PadRowsValueF32").source.find("(a thread per row of 4)"), std::string::npos);
  EXPECT_EQ(CaseLaunch("TransposePadValueGroupBF16").source.find("a thread per row"), std::string::npos);
}

// A pointwise group reads a Slice member's input from the slice's first element, with
// vectors when the kept width allows them (16 of 24: 4 x f32 out), one element per
// thread when not (21); a Transpose member becomes strided loads, no copy kernel.
TEST(OpKernelsTest, PointwiseGroupsReadThroughViews) {
  const KernelLaunch aligned = CaseLaunch("SliceCastGroup16");
  EXPECT_NE(aligned.source.find("in0 += 8;"), std::string::npos) << aligned.source;
  EXPECT_NE(aligned.source.find("(4 elements per vector)"), std::string::npos) << aligned.source;
  const KernelLaunch odd = CaseLaunch("SliceCastGroup21");
  EXPECT_NE(odd.source.find("in0 += 3;"), std::string::npos) << odd.source;
  EXPECT_EQ(odd.source.find("elements per vector"), std::string::npos) << odd.source;
  EXPECT_EQ(CaseLaunch("TransposeAddGroupBF16").args, (std::vector<int>{0, 1, 2}));
}

// Softmax and LayerNorm groups are one kernel each; the residual group stores the sum
// from the same pass.
TEST(OpKernelsTest, RowGroupsAreOneKernel) {
  const KernelLaunch ln = CaseLaunch("LayerNormGroup768f16");
  EXPECT_NE(ln.source.find("kiln_layernorm(a)"), std::string::npos);
  EXPECT_NE(ln.source.find("kiln_vec_st<V>(a.out1 + row * kLen + j, q0);"), std::string::npos) << ln.source;
  EXPECT_EQ(ln.args, (std::vector<int>{0, 1, 2, 3, 4, 5}));  // y, sum, x, r, scale, bias
  const KernelLaunch sm = CaseLaunch("SoftmaxGroup128f16");
  EXPECT_NE(sm.source.find("kiln_softmax(a)"), std::string::npos);
  EXPECT_NE(sm.source.find("1.250000000e-01f"), std::string::npos);  // the scale, inlined
  EXPECT_EQ(sm.args, (std::vector<int>{0, 1, 2}));
}

TEST(OpKernelsTest, SourcesBakeShapes) {
  test::Case c{"t", "Transpose", {test::X(test::Rand(DType::kFloat32, {2, 3, 4}, 7))},
               {{"perm", std::vector<int64_t>{2, 0, 1}}}};
  auto b = test::Build(c);
  ASSERT_TRUE(b.ok()) << b.status();
  auto l = GenerateNodeKernels(*b->node);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].args, (std::vector<int>{0, 1}));
  EXPECT_NE((*l)[0].source.find("< (int)24"), std::string::npos) << (*l)[0].source;
}

TEST(OpKernelsTest, UnsupportedOpsAreUnimplemented) {
  for (const char* op : {"MatMul"}) {
    test::Case c{"u", op, {test::X(test::Rand(DType::kFloat32, {3, 3}, 1))}};
    c.inputs.push_back(test::X(test::Rand(DType::kFloat32, {3, 3}, 2)));
    auto b = test::Build(c);
    ASSERT_TRUE(b.ok()) << b.status();
    auto l = GenerateNodeKernels(*b->node);
    ASSERT_FALSE(l.ok()) << op;
    EXPECT_EQ(l.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(l.status().message().find(absl::StrCat("no generated GPU kernel for ", op)), absl::string_view::npos)
        << l.status();
  }
  // A supported op in a form no generated kernel takes: an fp32 channels_last Conv
  // (the tensor-core template is f16/bf16, the direct kernel NCHW).
  test::Case c{"conv", "Conv",
               {test::X(test::Rand(DType::kFloat32, {1, 5, 5, 2}, 3)), test::X(test::Rand(DType::kFloat32, {4, 3, 3, 2}, 4))},
               {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"channels_last", int64_t{1}}}};
  auto b = test::Build(c);
  ASSERT_TRUE(b.ok()) << b.status();
  auto l = GenerateNodeKernels(*b->node);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnimplemented) << l.status();
}

}  // namespace
}  // namespace kiln::codegen
