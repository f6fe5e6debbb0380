// Kernels with run-time sizes (issue 34): on a dynamic graph cut from the legacy BERT
// and Whisper exports' forms (a bias Add over [batch, seq, 64], the attention Softmax
// over seq scores, LayerNorm, the head Transpose, pools over the outermost batch, an
// embedding Gather), the generated launches take kiln_dims, carry their grids as
// expressions and compile with NVRTC; ops without such a kernel are Unimplemented,
// never generated for the largest sizes.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/size_variants.h"
#include "common/status_macros.h"
#include "fusion/fuse_epilogue.h"
#include "fusion/fuse_norms.h"
#include "fusion/fuse_pointwise.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln::codegen {
namespace {

// `text` parsed, typed (shape arithmetic folded) and through fuse-norms and fuse-pointwise.
absl::StatusOr<std::unique_ptr<Graph>> Fused(const std::string& text) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, ParseGraph(text));
  KILN_RETURN_IF_ERROR(InferShapes(*g));
  KILN_RETURN_IF_ERROR(FuseNorms().Run(*g).status());
  KILN_RETURN_IF_ERROR(FusePointwise().Run(*g).status());
  KILN_RETURN_IF_ERROR(InferShapes(*g, {.fold_constants = false}));
  return g;
}

// `text` parsed, typed and through fuse-epilogue (MatMul groups).
absl::StatusOr<std::unique_ptr<Graph>> EpilogueFused(const std::string& text) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, ParseGraph(text));
  KILN_RETURN_IF_ERROR(InferShapes(*g));
  KILN_RETURN_IF_ERROR(FuseEpilogue().Run(*g).status());
  KILN_RETURN_IF_ERROR(InferShapes(*g, {.fold_constants = false}));
  return g;
}

constexpr char kGraph[] = R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %x : f16[4,64,64] dims "batch, seq, 64"
  input %ids : i64[4,64] dims "batch, seq"
  input %img : f16[4,8,5,5] dims "batch, 8, 5, 5"
  input %nhwc : f16[4,5,5,16] dims "batch, 5, 5, 16"
  input %stem : f16[4,5,5,3] dims "batch, 5, 5, 3"
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]
  input %bias : f16[64]
  input %scale : f16[64]
  input %table : f16[100,64]
  %a = Add(%x, %bias)
  %n = LayerNormalization(%a, %scale, %bias) {axis = -1, epsilon = 1e-5}
  %t = Transpose(%n) {perm = [0, 2, 1]}
  %s = MatMul(%n, %t)
  %p = Softmax(%s) {axis = -1}
  %g = GlobalAveragePool(%img)
  %gn = GlobalAveragePool(%nhwc) {channels_last = 1}
  %pd = Pad(%stem, %pads)
  %m = MaxPool(%img) {kernel_shape = [2, 2], strides = [2, 2]}
  %e = Gather(%table, %ids) {axis = 0}
  %l = LRN(%img) {size = 3}
  output %p
  output %g
  output %gn
  output %pd
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
      const int axis = node->GetInt("channels_last", 0).value_or(0) == 1 ? 1 : 0;  // NHWC: a block row per image
      EXPECT_GT(l.grid_per_block[axis], 0);
      EXPECT_FALSE(l.grid_extents[axis].IsConstant()) << "the grid follows the sizes";
      kernels.push_back({absl::StrCat("k", kernels.size()), l.source});
    }
  }
  // Add, LayerNorm, Transpose, Softmax, 2 x GlobalAveragePool, Pad (an image's channels), MaxPool, Gather
  ASSERT_EQ(kernels.size(), 9u);
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

// Fusion on a dynamic graph (issue 34): BERT's residual Add + LayerNorm and its bias
// Add + erf-Gelu, as the legacy export leaves them after the FFN MatMuls (cuBLASLt runs
// those), become a layernorm and a pointwise group, and the scores' Div by a scale and
// Add of the mask broadcast over the heads and rows a softmax group, whose kernels take
// the sizes at run time (the mask's row offsets computed from them). A mask that does
// not broadcast into the scores for every size has no such kernel: Unimplemented, so
// that the expansion gives the group back to the unfused kernels.
TEST(DynamicKernelsTest, FusedGroupsTakeTheSizesAtRunTime) {
  auto g = Fused(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %h : f16[4,64,64] dims "batch, seq, 64"
  input %res : f16[4,64,64] dims "batch, seq, 64"
  input %scores : f16[4,2,64,64] dims "batch, 2, seq, seq"
  input %mask : f16[4,1,1,64] dims "batch, 1, 1, seq"
  input %bias : f16[64]
  input %gamma : f16[64]
  const %half : f16[] = [0.5]
  const %sqrt2 : f16[] = [1.4142]
  const %one : f16[] = [1.0]
  const %scale : f16[] = [8.0]
  %b = Add(%h, %bias)
  %d = Div(%b, %sqrt2)
  %e = Erf(%d)
  %e1 = Add(%e, %one)
  %m = Mul(%b, %e1)
  %gelu = Mul(%m, %half)
  %r = Add(%gelu, %res)
  %n = LayerNormalization(%r, %gamma, %bias) {axis = -1, epsilon = 1e-12}
  %sc = Div(%scores, %scale)
  %masked = Add(%sc, %mask)
  %p = Softmax(%masked) {axis = -1}
  output %n
  output %p
})");
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::string, absl::StatusOr<std::vector<KernelLaunch>>> by_pattern;
  for (const Node* node : (*g)->nodes()) {
    if (!IsFusedGroup(*node)) continue;
    by_pattern.emplace(node->GetString("pattern").value_or(""), GenerateNodeKernels(*node));
  }
  ASSERT_EQ(by_pattern.size(), 3u) << PrintGraph(**g);
  std::vector<ModuleKernel> kernels;
  for (const char* pattern : {"pointwise", "layernorm", "softmax"}) {
    SCOPED_TRACE(pattern);
    ASSERT_TRUE(by_pattern.contains(pattern));
    const absl::StatusOr<std::vector<KernelLaunch>>& launches = by_pattern.at(pattern);
    ASSERT_TRUE(launches.ok()) << launches.status();
    ASSERT_EQ(launches->size(), 1u);
    const KernelLaunch& l = launches->front();
    EXPECT_TRUE(l.dim_param);
    EXPECT_NE(l.source.find("const kiln_dims kiln_dims_"), std::string::npos);
    EXPECT_EQ(l.grid_extents[0].IsConstant(), false) << "the grid follows the sizes";
    kernels.push_back({absl::StrCat("k", kernels.size()), l.source});
  }
  EXPECT_NE(by_pattern.at("softmax")->front().source.find("x0_ * a.s"), std::string::npos)
      << "the mask's row offset from the batch index";
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::string> cubin = CompileModule(kernels, arch);
    EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
  }
}

// What a row group with run-time sizes does not take: an input that is neither
// contiguous nor broadcast along the row (a [1, 64] addend of a LayerNorm over rows
// of [8, 64]); the group is Unimplemented, so the expansion runs it unfused.
TEST(DynamicKernelsTest, NormGroupRefusesAnInputStridedAlongTheRow) {
  auto g = Fused(R"(graph @main {
  dim batch in [1, 4]
  input %x : f16[4,8,64] dims "batch, 8, 64"
  input %y : f16[1,64]
  input %gamma : f16[8,64]
  %r = Add(%x, %y)
  %n = LayerNormalization(%r, %gamma) {axis = -2, epsilon = 1e-5}
  output %n
})");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->num_nodes(), 1) << PrintGraph(**g);
  absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*(*g)->nodes()[0]);
  ASSERT_FALSE(launches.ok());
  EXPECT_EQ(launches.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(launches.status().message().find("input 'y' is not read densely"), std::string::npos)
      << launches.status();
}

// BERT's head split then the scale on Q (the legacy export's Transpose, Mul): one
// pointwise group that reads Q through the Transpose at strides over the dims.
TEST(DynamicKernelsTest, PointwiseGroupReadsThroughATranspose) {
  auto g = Fused(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %q : f16[4,64,2,32] dims "batch, seq, 2, 32"
  const %scale : f16[] = [0.42]
  %t = Transpose(%q) {perm = [0, 2, 1, 3]}
  %s = Mul(%t, %scale)
  output %s
})");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->num_nodes(), 1) << PrintGraph(**g);
  absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*(*g)->nodes()[0]);
  ASSERT_TRUE(launches.ok()) << launches.status();
  const KernelLaunch& l = launches->front();
  EXPECT_TRUE(l.dim_param);
  // The input is read at strides computed from the sizes.
  EXPECT_NE(l.source.find("kS1_"), std::string::npos) << l.source;
  absl::StatusOr<std::string> cubin = CompileModule({{"k0", l.source}}, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

// transformers' packed-sequence mask as the dynamo exporter writes it (GPT-2): the
// position ids shifted by one ([first - 1, ids...], a Concat whose last input grows
// with seq), cut along seq from its start, summed along seq, and gathered at (batch,
// position) pairs. Each takes its sizes at run time and compiles; a Slice counted from
// the end of seq, and a Concat whose varying input is not its last, have no such kernel.
TEST(DynamicKernelsTest, PackedSequenceMaskOps) {
  auto g = ParseGraph(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %first : i64[4,1] dims "batch, 1"
  input %ids : i64[4,64] dims "batch, seq"
  input %flags : i64[4,64] dims "batch, seq"
  input %at : i64[4,1,64,1,2] dims "batch, 1, seq, 1, 2"
  const %ax1 : i64[1] = [1]
  const %zero1 : i64[1] = [0]
  const %m1 : i64[1] = [-1]
  const %big : i64[1] = [9223372036854775807]
  const %one1 : i64[1] = [1]
  %cat = Concat(%first, %ids) {axis = -1}
  %head = Slice(%cat, %zero1, %m1, %m1, %one1)
  %cumsum = CumSum(%flags, %ax1)
  %g = GatherND(%flags, %at)
  %tail = Slice(%ids, %m1, %big, %m1, %one1)
  %cat2 = Concat(%ids, %first) {axis = -1}
  output %head
  output %cumsum
  output %g
  output %tail
  output %cat2
})");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(InferShapes(**g).ok());
  std::vector<ModuleKernel> kernels;
  for (const Node* node : (*g)->nodes()) {
    SCOPED_TRACE(node->name());
    absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*node);
    if (node->output(0)->name() == "tail" || node->output(0)->name() == "cat2") {
      ASSERT_FALSE(launches.ok());
      EXPECT_EQ(launches.status().code(), absl::StatusCode::kUnimplemented) << launches.status();
      continue;
    }
    ASSERT_TRUE(launches.ok()) << launches.status();
    for (const KernelLaunch& l : *launches) {
      EXPECT_TRUE(l.dim_param);
      EXPECT_FALSE(l.grid_extents[0].IsConstant()) << "the grid follows the sizes";
      kernels.push_back({absl::StrCat("k", kernels.size()), l.source});
    }
  }
  // Concat (two copies), Slice, CumSum, GatherND
  ASSERT_EQ(kernels.size(), 5u);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::string> cubin = CompileModule(kernels, arch);
    EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
  }
}

// A transformer's FFN products with dynamic batch and seq (BERT-base's first FFN
// MatMul over [batch, seq, 768] + bias + GELU, as fuse-epilogue groups it): on sm_90a
// (except with --matmul-groups library) the Hopper family runs them with the rows batch *
// seq read at run time, one tile config per range of rows (each count of rows served
// once), and the source compiles. An
// epilogue operand that broadcasts over batch but not seq (a [seq, N] table) would
// be read at strides that vary: no such kernel (cuBLASLt runs the group).
TEST(DynamicKernelsTest, MatMulGroupsReadTheirRowsAtRunTime) {
  constexpr char kText[] = R"(graph @main {
  dim batch in [1, 32]
  dim seq in [1, 512]
  input %x : f16[32,512,768] dims "batch, seq, 768"
  input %table : f16[512,768] dims "seq, 768"
  const %w : f16[768,3072] = splat(0.01)
  const %w2 : f16[768,768] = splat(0.02)
  const %b : f16[3072] = splat(0.5)
  %y = MatMul(%x, %w)
  %yb = Add(%y, %b)
  %g = Gelu(%yb)
  %z = MatMul(%x, %w2)
  %zt = Add(%z, %table)
  output %g
  output %zt
})";
  auto g = EpilogueFused(kText);
  ASSERT_TRUE(g.ok()) << g.status();
  KernelOptions options;
  options.hopper = true;
  options.matmul_groups = MatMulGroups::kLibrary;
  // --matmul-groups library leaves them to cuBLASLt or to the expansion.
  for (const Node* n : (*g)->nodes()) {
    if (IsFusedGroup(*n)) EXPECT_FALSE(GenerateNodeKernels(*n, options).ok()) << n->name();
  }
  options.matmul_groups = MatMulGroups::kAuto;
  std::vector<const Node*> groups;
  for (const Node* n : (*g)->nodes()) {
    if (IsFusedGroup(*n)) groups.push_back(n);
  }
  ASSERT_EQ(groups.size(), 2u) << PrintGraph(**g);
  const Node* gelu = groups[0]->output(0)->name() == "g" ? groups[0] : groups[1];
  const Node* table = gelu == groups[0] ? groups[1] : groups[0];
  EXPECT_EQ(ChooseKernel(*gelu, options).kind, KernelKind::kGenerated);
  absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*gelu, options);
  ASSERT_TRUE(launches.ok()) << launches.status();
  ASSERT_GE(launches->size(), 2u) << "one tile config for every size";
  // Variants by the rows (batch * seq): each count of rows that some sizes make served
  // once, by the tile the heuristic picks for that count (without stream-K) at the top
  // of each window (8 rows each up to 32, then 64); a count no sizes make (a prime past
  // 512) at most once.
  std::set<int64_t> reached;
  for (int64_t batch = 1; batch <= 32; ++batch) {
    for (int64_t seq = 1; seq <= 512; ++seq) reached.insert(batch * seq);
  }
  for (int64_t rows = 1; rows <= 32 * 512; ++rows) {
    const KernelLaunch* serving = nullptr;
    int n = 0;
    for (const KernelLaunch& l : *launches) {
      EXPECT_EQ(l.size_select.ToString((*g)->dim_symbols()), "batch*seq");
      EXPECT_TRUE(l.size_boxes.empty());
      for (const auto& [lo, hi] : l.size_ranges) {
        if (lo <= rows && rows <= hi) serving = &l, ++n;
      }
    }
    if (!reached.contains(rows)) {
      EXPECT_LE(n, 1) << rows << " rows";
      continue;
    }
    ASSERT_EQ(n, 1) << rows << " rows";
    if (rows % 64 == 0 || (rows <= 32 && rows % 8 == 0)) {  // the tops of the windows picked at
      ops::Sm90GemmConfig want = ops::PickSm90GemmConfig(rows, 3072, 768, 1, 132, false, ops::EpilogueWork::kSpecial);
      want.stream_k = false;
      EXPECT_TRUE(absl::StartsWith(serving->config, "sm90 " + ops::Sm90GemmConfigString(want) + " "))
          << rows << ": " << serving->config;
    }
  }
  std::vector<ModuleKernel> kernels;
  for (const KernelLaunch& l : *launches) {
    EXPECT_TRUE(l.dim_param);
    EXPECT_EQ(l.family, "gemm_sm90");
    EXPECT_NE(l.source.find("#define GEMM_M_CODE ((int)(KILN_DIM(0)*KILN_DIM(1)))"), std::string::npos);
    kernels.push_back({absl::StrCat("k", kernels.size()), l.source});
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
  // The [seq, 768] addend: not on kiln's GEMM (the group is a batch of seq-row
  // products, batch varying).
  const absl::Status refused = ops::DynamicSm90Eligible(*table);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(refused.message().find("a batch that varies (run-time sizes)"), std::string::npos) << refused;
  absl::StatusOr<std::vector<KernelLaunch>> none = GenerateNodeKernels(*table, options);
  EXPECT_FALSE(none.ok());
}

// Kernel options of a compile for sm_90a in auto mode.
KernelOptions HopperAuto() {
  KernelOptions options;
  options.hopper = true;
  options.matmul_groups = MatMulGroups::kAuto;
  return options;
}

// The graph of `text` after fuse-epilogue and its fused group (the last, where there
// are several).
struct EpilogueGroup {
  std::unique_ptr<Graph> graph;
  const Node* group = nullptr;
};
absl::StatusOr<EpilogueGroup> OneEpilogueGroup(const std::string& text) {
  EpilogueGroup out;
  KILN_ASSIGN_OR_RETURN(out.graph, EpilogueFused(text));
  for (const Node* n : out.graph->nodes()) out.group = IsFusedGroup(*n) ? n : out.group;
  if (out.group == nullptr) return absl::NotFoundError("fuse-epilogue formed no group");
  return out;
}

// A 1x1 conv over 56 x 56 pixels as a GEMM (conv1x1-to-matmul on a dynamic graph):
// the rows are 3136 * batch, so only those counts get a variant; each batch is served
// by one, and no variant's ranges hold rows that no batch makes.
TEST(DynamicKernelsTest, MatMulGroupsServeOnlyTheRowsTheSizesMake) {
  constexpr char kText[] = R"(graph @main {
  dim batch in [1, 64]
  input %x : f16[64,56,56,64] dims "batch, 56, 56, 64"
  const %w : f16[64,256] = splat(0.01)
  const %b : f16[256] = splat(0.5)
  %y = MatMul(%x, %w)
  %yb = Add(%y, %b)
  %r = Relu(%yb)
  output %r
})";
  absl::StatusOr<EpilogueGroup> g = OneEpilogueGroup(kText);
  ASSERT_TRUE(g.ok()) << g.status();
  KernelOptions options = HopperAuto();
  const Node* group = g->group;
  absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*group, options);
  ASSERT_TRUE(launches.ok()) << launches.status();
  std::map<int64_t, int> served;  // batch -> variants
  for (const KernelLaunch& l : *launches) {
    EXPECT_EQ(l.family, "gemm_sm90");
    ASSERT_FALSE(l.size_ranges.empty()) << "more than one variant";
    for (const auto& [lo, hi] : l.size_ranges) {
      EXPECT_EQ(lo % 3136, 0) << lo;
      EXPECT_EQ(hi % 3136, 0) << hi;
      for (int64_t batch = lo / 3136; batch <= hi / 3136; ++batch) ++served[batch];
    }
  }
  ASSERT_EQ(served.size(), 64u);
  for (const auto& [batch, n] : served) EXPECT_EQ(n, 1) << "batch " << batch;
}

// A config tuned at the opt sizes (KernelOptions::tuned_dynamic_gemms) serves the
// window of rows that holds its rows and no other; the other windows keep the
// heuristic's picks, and a config the run-time-row kernel does not take (stream-K) is
// left for the heuristic's.
TEST(DynamicKernelsTest, TunedConfigServesTheWindowOfItsRows) {
  constexpr char kText[] = R"(graph @main {
  dim tokens in [1, 512] opt 128
  input %x : f16[512,768] dims "tokens, 768"
  const %w : f16[768,768] = splat(0.01)
  const %b : f16[768] = splat(0.5)
  %y = MatMul(%x, %w)
  %yb = Add(%y, %b)
  output %yb
})";
  absl::StatusOr<EpilogueGroup> g = OneEpilogueGroup(kText);
  ASSERT_TRUE(g.ok()) << g.status();
  KernelOptions options = HopperAuto();
  const Node* group = g->group;
  absl::StatusOr<std::vector<KernelLaunch>> plain = GenerateNodeKernels(*group, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto serving = [](const std::vector<KernelLaunch>& launches, int64_t rows) -> const KernelLaunch* {
    for (const KernelLaunch& l : launches) {
      for (const auto& [lo, hi] : l.size_ranges) {
        if (lo <= rows && rows <= hi) return &l;
      }
    }
    return nullptr;
  };
  // A config the heuristic picks nowhere in the range.
  const std::string tuned = "128x64 c2x1 s6";
  for (const KernelLaunch& l : *plain) ASSERT_FALSE(absl::StrContains(l.config, tuned + " ")) << l.config;
  options.tuned_dynamic_gemms[group->name()] = {128, tuned};
  absl::StatusOr<std::vector<KernelLaunch>> launches = GenerateNodeKernels(*group, options);
  ASSERT_TRUE(launches.ok()) << launches.status();
  for (int64_t rows : {65, 100, 128}) {
    const KernelLaunch* l = serving(*launches, rows);
    ASSERT_NE(l, nullptr) << rows;
    EXPECT_TRUE(absl::StrContains(l->config, "sm90 " + tuned + " (run-time rows")) << l->config;
    EXPECT_TRUE(absl::StrContains(l->config, "(tuning database, at 128 rows)")) << l->config;
  }
  for (int64_t rows : {1, 64, 129, 512}) {
    const KernelLaunch* got = serving(*launches, rows);
    const KernelLaunch* want = serving(*plain, rows);
    ASSERT_TRUE(got != nullptr && want != nullptr) << rows;
    EXPECT_EQ(got->config, want->config) << rows;
  }
  options.tuned_dynamic_gemms[group->name()] = {128, "128x128 c2x1 s4 sk"};
  absl::StatusOr<std::vector<KernelLaunch>> stream_k = GenerateNodeKernels(*group, options);
  ASSERT_TRUE(stream_k.ok()) << stream_k.status();
  ASSERT_EQ(stream_k->size(), plain->size());
  for (size_t i = 0; i < plain->size(); ++i) EXPECT_EQ((*stream_k)[i].config, (*plain)[i].config);
}

// Size variants' boxes: powers of two for the symbols the expressions depend on; each
// size in exactly one box.
TEST(DynamicKernelsTest, SizeBoxesCutAtPowersOfTwo) {
  const std::vector<DimSymbol> symbols = {{"batch", 1, 32}, {"seq", 1, 512}, {"other", 1, 7}};
  const DimExpr rows = *DimExpr::Mul(DimExpr::Symbol(0), DimExpr::Symbol(1));
  auto ranges = [&](const std::vector<ops::SizeBox>& boxes, size_t k) {
    std::set<std::array<int64_t, 2>> out;
    for (const ops::SizeBox& b : boxes) out.insert(b.ranges[k]);
    return out;
  };
  const std::vector<ops::SizeBox> plain = ops::PowerOfTwoBoxes(symbols, {rows});
  EXPECT_EQ(ranges(plain, 0), (std::set<std::array<int64_t, 2>>{{1, 1}, {2, 3}, {4, 7}, {8, 15}, {16, 31}, {32, 32}}));
  EXPECT_EQ(ranges(plain, 2), (std::set<std::array<int64_t, 2>>{{1, 7}})) << "rows do not depend on it";
  for (int64_t b : {1, 5, 12, 32}) {
    for (int64_t s : {1, 3, 100, 383, 384, 512}) {
      int holding = 0;
      for (const ops::SizeBox& box : plain) {
        holding += box.ranges[0][0] <= b && b <= box.ranges[0][1] && box.ranges[1][0] <= s && s <= box.ranges[1][1];
      }
      EXPECT_EQ(holding, 1) << b << " x " << s;
    }
  }
}

}  // namespace
}  // namespace kiln::codegen
