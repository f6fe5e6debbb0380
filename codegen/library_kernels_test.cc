// Tests of the vendor-library kernels: the name decision (no GPU needed) and, on a
// machine with a CUDA GPU, numerics of cuBLASLt MatMul/Gemm and cuDNN Conv against
// the CPU reference evaluator on the same f32/f16/bf16 inputs.
#include "codegen/gpu_test_util.h"
#include "codegen/library_kernels.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/ops/op_test_util.h"

namespace kiln::codegen {
namespace {

using op_test::Attrs;

// A graph of one node named "n" whose inputs are runtime values of `dtype` and the
// given shapes (nullopt: absent optional input); shapes inferred.
struct OneNode {
  Graph graph;
  Node* node = nullptr;
};

std::unique_ptr<OneNode> Build(const std::string& op, DType dtype, const std::vector<std::optional<Shape>>& shapes,
                               const Attrs& attrs = {}) {
  auto one = std::make_unique<OneNode>();
  Graph& g = one->graph;
  std::vector<Value*> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) {
      inputs.push_back(nullptr);
      continue;
    }
    Value* v = g.AddValue("in" + std::to_string(i));
    v->SetType(dtype, *shapes[i]);
    g.AddInput(v);
    inputs.push_back(v);
  }
  Value* out = g.AddValue("out");
  one->node = g.AddNode(op, inputs, {out}, "n");
  for (const auto& [k, v] : attrs) one->node->SetAttr(k, v);
  g.AddOutput(out);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return nullptr;
  return one;
}

std::string Name(const std::string& op, DType dtype, const std::vector<std::optional<Shape>>& shapes,
                 const Attrs& attrs = {}) {
  auto one = Build(op, dtype, shapes, attrs);
  return one ? LibraryKernelName(*one->node) : "<build failed>";
}

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16;

// A graph whose nodes (all of them) form one FusedGroup with `pattern`; graph inputs
// are runtime values of `dtype`. A node input named "" is absent. The last node's
// output is the graph output, and so are the values in `extra_outputs`.
struct NodeSpec {
  std::string op;
  std::vector<std::string> inputs;
  std::string output;
  Attrs attrs = {};
};
struct GroupGraph {
  std::unique_ptr<Graph> graph;
  Node* group = nullptr;
};

GroupGraph BuildGroup(DType dtype, const std::vector<std::pair<std::string, Shape>>& inputs,
                      const std::vector<NodeSpec>& nodes, const std::string& pattern,
                      const std::vector<std::string>& extra_outputs = {}) {
  GroupGraph gg;
  gg.graph = std::make_unique<Graph>();
  Graph& g = *gg.graph;
  for (const auto& [name, shape] : inputs) {
    Value* v = g.AddValue(name);
    v->SetType(dtype, shape);
    g.AddInput(v);
  }
  std::vector<Node*> members;
  Node* anchor = nullptr;
  for (const NodeSpec& spec : nodes) {
    std::vector<Value*> ins;
    for (const std::string& name : spec.inputs) ins.push_back(name.empty() ? nullptr : g.FindValue(name));
    Node* n = g.AddNode(spec.op, ins, {g.AddValue(spec.output)}, "n_" + spec.output);
    for (const auto& [k, v] : spec.attrs) n->SetAttr(k, v);
    members.push_back(n);
    if (anchor == nullptr && (spec.op == "MatMul" || spec.op == "Conv")) anchor = n;
  }
  g.AddOutput(g.FindValue(nodes.back().output));
  for (const std::string& name : extra_outputs) g.AddOutput(g.FindValue(name));
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return gg;
  auto group = FormFusedGroup(g, members, pattern, anchor);
  EXPECT_TRUE(group.ok()) << group.status();
  if (group.ok()) gg.group = *group;
  return gg;
}

std::string GroupName(const GroupGraph& gg) { return gg.group ? LibraryKernelName(*gg.group) : "<build failed>"; }

// The batch dims of MatMul(x, w)'s output (the operands' leading dims broadcast).
Shape OutputBatch(const Shape& x, const Shape& w) {
  Shape bx = x.size() > 2 ? Shape(x.begin(), x.end() - 2) : Shape{};
  Shape bw = w.size() > 2 ? Shape(w.begin(), w.end() - 2) : Shape{};
  const size_t r = std::max(bx.size(), bw.size());
  bx.insert(bx.begin(), r - bx.size(), 1);
  bw.insert(bw.begin(), r - bw.size(), 1);
  Shape out(r);
  for (size_t d = 0; d < r; ++d) out[d] = std::max(bx[d], bw[d]);
  return out;
}

// MatMul(x [m,k], w [k,n]) followed by `epilogue` ("bias", "bias1n", "relu", "gelu",
// "gelu_erf", ... applied in order; "bias" adds b [n], "bias1n" b [1,n], "bias_batch"
// a per-batch bias [batch.., 1, n]: fuse-siblings' stacked Q/K/V bias).
GroupGraph MatMulGroup(DType dt, Shape x, Shape w, const std::vector<std::string>& epilogue,
                       const std::string& pattern = "matmul+epilogue") {
  std::vector<std::pair<std::string, Shape>> inputs = {{"x", x}, {"w", w}};
  std::vector<NodeSpec> nodes = {{"MatMul", {"x", "w"}, "v0"}};
  const int64_t n = w.back();
  for (size_t i = 0; i < epilogue.size(); ++i) {
    const std::string prev = "v" + std::to_string(i), out = "v" + std::to_string(i + 1);
    const std::string& e = epilogue[i];
    if (e == "bias_batch") {
      Shape b = OutputBatch(x, w);
      b.insert(b.end(), {1, n});
      inputs.push_back({"b", b});
      nodes.push_back({"Add", {prev, "b"}, out});
    } else if (e == "bias" || e == "bias1n" || e == "bias_first") {
      inputs.push_back({"b", e == "bias1n" ? Shape{1, n} : Shape{n}});
      nodes.push_back({"Add", e == "bias_first" ? std::vector<std::string>{"b", prev} : std::vector<std::string>{prev, "b"}, out});
    } else if (e == "residual" || e == "residual_first") {
      Shape r = OutputBatch(x, w);
      r.insert(r.end(), {x.size() == 1 ? 1 : x[x.size() - 2], n});
      inputs.push_back({"r", r});
      nodes.push_back(
          {"Add", e == "residual_first" ? std::vector<std::string>{"r", prev} : std::vector<std::string>{prev, "r"}, out});
    } else if (e == "relu") {
      nodes.push_back({"Relu", {prev}, out});
    } else if (e == "gelu" || e == "gelu_erf") {
      nodes.push_back({"Gelu", {prev}, out, {{"approximate", e == "gelu" ? "tanh" : "none"}}});
    } else if (e == "sigmoid") {
      nodes.push_back({"Sigmoid", {prev}, out});
    } else {
      ADD_FAILURE() << e;
    }
  }
  return BuildGroup(dt, inputs, nodes, pattern);
}

// Conv(x, w[, cb]) then `epilogue`: "bias" (Add of b [1,C,1,1]), "bias3" (b [C,1,1]),
// "bias_nhwc" (b [1,1,1,C]) and "bias_c" (b [C]) for channels_last convs,
// "res" (Add of z, the output's shape), "res_first" (Add(z, conv)), "relu", "sigmoid".
GroupGraph ConvGroup(DType dt, Shape x, Shape w, bool conv_bias, const Attrs& attrs,
                     const std::vector<std::string>& epilogue) {
  // Output shape: infer with a throwaway graph.
  auto probe = Build("Conv", dt, conv_bias ? std::vector<std::optional<Shape>>{x, w, Shape{w[0]}}
                                           : std::vector<std::optional<Shape>>{x, w}, attrs);
  if (probe == nullptr) return {};
  const Shape y = probe->node->output(0)->shape();
  std::vector<std::pair<std::string, Shape>> inputs = {{"x", x}, {"w", w}};
  if (conv_bias) inputs.push_back({"cb", Shape{w[0]}});
  std::vector<NodeSpec> nodes = {
      {"Conv", conv_bias ? std::vector<std::string>{"x", "w", "cb"} : std::vector<std::string>{"x", "w"}, "v0", attrs}};
  for (size_t i = 0; i < epilogue.size(); ++i) {
    const std::string prev = "v" + std::to_string(i), out = "v" + std::to_string(i + 1);
    const std::string& e = epilogue[i];
    if (e == "bias_nhwc" || e == "bias_c") {  // channels_last Conv: b [1,1,1,C] or [C]
      inputs.push_back({"b", e == "bias_c" ? Shape{w[0]} : Shape{1, 1, 1, w[0]}});
      nodes.push_back({"Add", {prev, "b"}, out});
    } else if (e == "bias" || e == "bias3") {
      Shape b(y.size() - (e == "bias3" ? 1 : 0), 1);
      b[e == "bias3" ? 0 : 1] = w[0];
      inputs.push_back({"b", b});
      nodes.push_back({"Add", {prev, "b"}, out});
    } else if (e == "res" || e == "res_first") {
      inputs.push_back({"z", y});
      nodes.push_back({"Add", e == "res" ? std::vector<std::string>{prev, "z"} : std::vector<std::string>{"z", prev}, out});
    } else if (e == "relu") {
      nodes.push_back({"Relu", {prev}, out});
    } else if (e == "sigmoid") {
      nodes.push_back({"Sigmoid", {prev}, out});
    } else if (e == "spatial") {  // Add of [1,1,H,W]: not a per-channel bias
      Shape b = y;
      b[0] = b[1] = 1;
      inputs.push_back({"b", b});
      nodes.push_back({"Add", {prev, "b"}, out});
    } else {
      ADD_FAILURE() << e;
    }
  }
  return BuildGroup(dt, inputs, nodes, "conv+epilogue");
}

const Attrs kPad1 = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};

// ---------------------------------------------------------------------------
// Name decisions (run everywhere).

TEST(LibraryKernelName, MatMulForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{33, 129}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{33, 7}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{33}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{33}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{33, 5}}), "cublaslt:MatMul");        // fold into M
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{1, 1, 33, 5}}), "cublaslt:MatMul");  // fold into M
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 5}}), "cublaslt:MatMul");  // strided batch
    EXPECT_EQ(Name("MatMul", dt, {Shape{3, 7, 33}, Shape{1, 3, 33, 5}}), "cublaslt:MatMul");     // leading 1 batch
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{2, 3, 33, 5}}), "cublaslt:MatMul");        // broadcast A
    EXPECT_EQ(Name("MatMul", dt, {Shape{1, 7, 33}, Shape{4, 33, 5}}), "cublaslt:MatMul");        // broadcast A
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{4, 33, 5}}), "cublaslt:MatMul");              // 1-D A, batched B
  }
  // Batch dims that broadcast against each other.
  EXPECT_EQ(Name("MatMul", kF16, {Shape{2, 1, 7, 33}, Shape{1, 3, 33, 5}}), "");
  EXPECT_EQ(Name("MatMul", kF16, {Shape{2, 3, 7, 33}, Shape{1, 3, 33, 5}}), "");
  EXPECT_EQ(Name("MatMul", kF16, {Shape{3, 7, 33}, Shape{2, 3, 33, 5}}), "");
  // Integer dtypes have no library kernel.
  EXPECT_EQ(Name("MatMul", DType::kInt32, {Shape{7, 33}, Shape{33, 5}}), "");
  EXPECT_EQ(Name("MatMul", DType::kInt64, {Shape{7, 33}, Shape{33, 5}}), "");
  // Zero-sized products.
  EXPECT_EQ(Name("MatMul", kF16, {Shape{0, 33}, Shape{33, 5}}), "");
}

TEST(LibraryKernelName, GemmForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}}), "cublaslt:Gemm");
    EXPECT_EQ(Name("Gemm", dt, {Shape{33, 7}, Shape{5, 33}}, {{"transA", 1}, {"transB", 1}}), "cublaslt:Gemm");
    for (const Shape& c : {Shape{5}, Shape{1, 5}, Shape{7, 5}, Shape{}, Shape{1}, Shape{1, 1}, Shape{7, 1}}) {
      EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}, c}, {{"beta", 0.5f}}), "cublaslt:Gemm")
          << ShapeToString(c);
      EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}, c}), "cublaslt:Gemm") << ShapeToString(c);
    }
  }
  EXPECT_EQ(Name("Gemm", DType::kInt32, {Shape{7, 33}, Shape{33, 5}}), "");
}

// MatMul operands with layout flags (graph/ops/mat_mul.cc): A [batch_a.., M, K] and
// B [batch_b.., K, N] stored as trans_a / trans_b say (A as [.., K, M], B as
// [.., N, K]); an empty batch is a matrix. The attributes set both flags.
struct FlaggedMatMul {
  std::vector<std::optional<Shape>> shapes;
  Attrs attrs;
};
FlaggedMatMul Flagged(Shape batch_a, Shape batch_b, int64_t m, int64_t k, int64_t n, int ta, int tb) {
  Shape a = std::move(batch_a), b = std::move(batch_b);
  a.insert(a.end(), {ta ? k : m, ta ? m : k});
  b.insert(b.end(), {tb ? n : k, tb ? k : n});
  return {{a, b}, {{"trans_a", ta}, {"trans_b", tb}}};
}

TEST(LibraryKernelName, MatMulLayoutFlags) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dt), " trans_a=", ta, " trans_b=", tb));
        for (const FlaggedMatMul& f : {
                 Flagged({}, {}, 7, 33, 129, ta, tb),          // 2-D
                 Flagged({2, 3}, {2, 3}, 7, 33, 5, ta, tb),    // strided batch
                 Flagged({2, 3}, {}, 7, 33, 5, ta, tb),        // shared B: folded into M, or B stride 0 when trans_a
                 Flagged({4}, {1}, 7, 33, 5, ta, tb),          // shared B with a unit batch
                 Flagged({}, {2, 3}, 7, 33, 5, ta, tb),        // broadcast A (stride 0)
                 Flagged({1}, {4}, 7, 33, 5, ta, tb),          // broadcast A with a unit batch
             }) {
          EXPECT_EQ(Name("MatMul", dt, f.shapes, f.attrs), "cublaslt:MatMul");
        }
      }
    }
    // A 1-D operand opposite a flagged matrix.
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{5, 33}}, {{"trans_b", 1}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33, 7}, Shape{33}}, {{"trans_a", 1}}), "cublaslt:MatMul");
  }
  // Batches that broadcast against each other stay unsupported with flags.
  const FlaggedMatMul f = Flagged({2, 1}, {1, 3}, 7, 33, 5, 1, 1);
  EXPECT_EQ(Name("MatMul", kF16, f.shapes, f.attrs), "");
}

TEST(LibraryKernelName, ConvForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}), "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}, Shape{4}}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
              "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{2, 4, 33}, Shape{6, 2, 5}, Shape{6}},
                   {{"group", 2}, {"pads", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2}}}),
              "cudnn:Conv");
  }
  // auto_pad: SAME with an even total pad is symmetric; odd total is not.
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "SAME_UPPER"}}), "cudnn:Conv");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "VALID"}}), "cudnn:Conv");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 8, 8}, Shape{4, 3, 2, 2}}, {{"auto_pad", "SAME_LOWER"}}), "");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"pads", std::vector<int64_t>{0, 1, 1, 1}}}),
            "");
  // 3-D convolution.
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 5, 5, 5}, Shape{4, 3, 3, 3, 3}}), "");
  // channels_last: X [N, H, W, C], W [M, KH, KW, C/group] (cuDNN NHWC / KRSC).
  const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 9, 9, 3}, Shape{4, 3, 3, 3}, Shape{4}}, nhwc), "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{2, 7, 5, 8}, Shape{8, 3, 3, 1}},
                   {{"channels_last", 1}, {"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
              "cudnn:Conv");
  }
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 8, 8, 3}, Shape{4, 2, 2, 3}},
                 {{"channels_last", 1}, {"pads", std::vector<int64_t>{0, 1, 1, 1}}}),
            "");  // asymmetric padding
  // Other ops.
  EXPECT_EQ(Name("Relu", kF16, {Shape{4, 4}}), "");
}

TEST(LibraryKernelName, FusedMatMulForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{7, 33}, w{33, 129};
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias1n"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias_first"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "gelu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"gelu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, w, {"bias", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias", "gelu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "relu"}, "prologue+matmul+epilogue")), "cublaslt:FusedMatMul");
    // Per-batch biases [batch.., 1, N] on strided batches (broadcast A, equal batches).
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 7, 33}, Shape{3, 33, 129}, {"bias_batch", "relu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 1, 7, 33}, Shape{3, 1, 33, 129}, {"bias_batch", "gelu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias_batch"})),
              "cublaslt:FusedMatMul");
  }
  // A batch folded into M has no per-batch bias.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{2, 3, 7, 33}, Shape{33, 129}, {"bias_batch"})), "");
  // A bias per batch and row ([S, M, N]) is a full addend, not a bias.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {3, 33, 129}}, {"c", {3, 7, 129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "c"}, "y"}}, "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // Exact (erf) GELU: cuBLASLt's GELU epilogue is the tanh approximation.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu_erf"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"gelu_erf"})), "");
  // Epilogue ops / orders without a cuBLASLt form.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "sigmoid"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"relu", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu", "relu"})), "");
  // Other patterns.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias"}, "siblings")), "");
  // A column [M, 1] addend is neither a bias nor a residual.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"c", {7, 1}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "c"}, "y"}}, "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // A full [M, N] addend is a residual (cuBLASLt's C), after the bias and before the
  // activation; one matrix only (no strided batch), and only one.
  for (DType dt : {kF32, kF16}) {
    const Shape w{33, 129};
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, w, {"residual"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, w, {"bias", "residual_first"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 7, 33}, w, {"bias", "residual", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 33}, w, {"bias1n", "residual"})), "cublaslt:FusedMatMul");
  }
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"residual", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "residual", "residual"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{2, 7, 33}, Shape{2, 33, 129}, {"bias", "residual"})), "");
  // An intermediate value read outside the group (the group has two outputs).
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"b", {129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "b"}, "a"}, {"Relu", {"a"}, "y"}},
                               "matmul+epilogue", {"a"});
    EXPECT_EQ(GroupName(gg), "");
  }
  // A Cast at the end is not an epilogue.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"b", {129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "b"}, "a"},
                                {"Cast", {"a"}, "y", {{"to", static_cast<int64_t>(1)}}}},
                               "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // Integer matmul.
  EXPECT_EQ(GroupName(MatMulGroup(DType::kInt32, Shape{7, 33}, Shape{33, 129}, {"relu"})), "");
}

// MatMul(x, w) with layout flags + Add(b [n]) + Relu, one "matmul+epilogue" group.
GroupGraph FlaggedMatMulGroup(DType dt, const FlaggedMatMul& f, int64_t n, const std::string& act = "relu") {
  std::vector<NodeSpec> nodes = {{"MatMul", {"x", "w"}, "m", f.attrs}, {"Add", {"m", "b"}, "a"}};
  if (act == "relu") nodes.push_back({"Relu", {"a"}, "y"});
  if (act == "gelu") nodes.push_back({"Gelu", {"a"}, "y", {{"approximate", "tanh"}}});
  return BuildGroup(dt, {{"x", *f.shapes[0]}, {"w", *f.shapes[1]}, {"b", Shape{n}}}, nodes, "matmul+epilogue");
}

TEST(LibraryKernelName, FusedMatMulLayoutFlags) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dt), " trans_a=", ta, " trans_b=", tb));
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({}, {}, 7, 33, 129, ta, tb), 129)), "cublaslt:FusedMatMul");
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({2, 3}, {}, 7, 33, 129, ta, tb), 129, "gelu")),
                  "cublaslt:FusedMatMul");
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb), 129)),
                  "cublaslt:FusedMatMul");
      }
    }
  }
}

TEST(LibraryKernelName, FusedConvForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"bias", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"bias3", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"res", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"res_first", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"res"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, Shape{2, 4, 33}, Shape{6, 4, 5}, false, {{"pads", std::vector<int64_t>{2, 2}}},
                                  {"bias", "relu"})),
              "cudnn:FusedConv");
  }
  const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
  // channels_last groups: the per-channel bias is [1,1,1,C] or [C].
  {
    const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    const Shape xn{2, 9, 11, 3}, wn{5, 3, 3, 3};
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, false, nhwc, {"bias_nhwc", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, false, nhwc, {"bias_c", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, true, nhwc, {"res", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, true, nhwc, {"bias_nhwc", "relu"})), "");  // two biases
  }
  // Two biases (the Conv's and an Add's), a spatial addend, other epilogue ops.
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, true, kPad1, {"bias", "relu"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"spatial", "relu"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"sigmoid"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"relu", "res"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"res", "res"})), "");
  // A lone Conv (nothing to fuse) and asymmetric padding.
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, {{"pads", std::vector<int64_t>{0, 1, 1, 1}}}, {"relu"})), "");
  // A conv body under the matmul pattern.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", x}, {"w", w}}, {{"Conv", {"x", "w"}, "c"}, {"Relu", {"c"}, "y"}},
                               "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
}

TEST(CreateLibraryKernel, UnsupportedNamesTheNode) {
  auto one = Build("MatMul", kF16, {Shape{2, 1, 7, 33}, Shape{1, 3, 33, 5}});
  ASSERT_NE(one, nullptr);
  auto k = CreateLibraryKernel(*one->node, {});
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("node 'n' (MatMul)"), std::string::npos) << k.status();
  EXPECT_NE(k.status().message().find("f16[2,1,7,33]"), std::string::npos) << k.status();
}

TEST(CreateLibraryKernel, MissingHandleIsAnError) {
  auto mm = Build("MatMul", kF16, {Shape{7, 33}, Shape{33, 5}});
  auto conv = Build("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}});
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(CreateLibraryKernel(*mm->node, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CreateLibraryKernel(*conv->node, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  GroupGraph fmm = MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu"});
  GroupGraph fconv = ConvGroup(kF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, false, kPad1, {"relu"});
  ASSERT_NE(fmm.group, nullptr);
  ASSERT_NE(fconv.group, nullptr);
  EXPECT_EQ(CreateLibraryKernel(*fmm.group, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CreateLibraryKernel(*fconv.group, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  // A refused group names the reason.
  GroupGraph erf = MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu_erf"});
  ASSERT_NE(erf.group, nullptr);
  auto k = CreateLibraryKernel(*erf.group, {});
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("tanh"), std::string::npos) << k.status();
}

// ---------------------------------------------------------------------------
// Numerics on the GPU.

struct RunOptions {
  size_t misalign = 0;      // bytes added to every input/output pointer
  bool cuda_graph = false;  // capture Launch into a CUDA graph and replay it twice
};

class LibraryKernelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    if (::kiln::codegen::test::DeviceArch(&why_not).empty()) GTEST_SKIP() << "skipped: " << why_not;
    ASSERT_EQ(cublasLtCreate(&handles_.cublaslt), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreate(&handles_.cudnn), CUDNN_STATUS_SUCCESS);
    KILN_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (handles_.cudnn) cudnnDestroy(handles_.cudnn);
    if (handles_.cublaslt) cublasLtDestroy(handles_.cublaslt);
  }

  static float Tolerance(DType dt) { return dt == kF32 ? 1e-4f : dt == kF16 ? 1e-2f : 5e-2f; }

  // Builds the node, runs it on the GPU and on the CPU reference with the same
  // random inputs, and compares (max error relative to max |reference|).
  void Check(const std::string& op, DType dt, const std::vector<std::optional<Shape>>& shapes,
             const Attrs& attrs = {}, RunOptions opts = {}) {
    auto one = Build(op, dt, shapes, attrs);
    ASSERT_NE(one, nullptr);
    CheckNode(*one->node, opts);
  }

  void CheckGroup(const GroupGraph& gg, const std::string& want_name, RunOptions opts = {}) {
    ASSERT_NE(gg.group, nullptr);
    ASSERT_EQ(LibraryKernelName(*gg.group), want_name);
    CheckNode(*gg.group, opts);
  }

  void CheckNode(const Node& node, RunOptions opts = {}) {
    const DType dt = node.output(0)->dtype();
    std::vector<std::optional<Shape>> shapes;
    for (const Value* v : node.inputs()) shapes.push_back(v ? std::optional<Shape>(v->shape()) : std::nullopt);
    SCOPED_TRACE(node.op_type() + " " + std::string(DTypeName(dt)) + " " + [&] {
      std::string s;
      for (const auto& sh : shapes) s += sh ? ShapeToString(*sh) : "(none)";
      return s;
    }());
    ASSERT_FALSE(LibraryKernelName(node).empty());
    std::vector<Tensor> inputs;
    std::vector<const Tensor*> ptrs;
    inputs.reserve(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!shapes[i]) {
        inputs.emplace_back();
        ptrs.push_back(nullptr);
        continue;
      }
      inputs.push_back(Tensor::FromFloat(dt, *shapes[i], op_test::Random(NumElements(*shapes[i]), 17 + 31 * i)));
      ptrs.push_back(&inputs.back());
    }
    auto ref = EvaluateNode(node, ptrs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const Tensor& want = (*ref)[0];

    auto kernel = CreateLibraryKernel(node, handles_);
    ASSERT_TRUE(kernel.ok()) << kernel.status();

    std::vector<void*> allocations;
    auto alloc = [&](size_t bytes) -> char* {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes + 256) != cudaSuccess) return nullptr;
      allocations.push_back(p);
      return static_cast<char*>(p);
    };
    LibraryLaunchArgs args;
    for (const Tensor* t : ptrs) {
      if (t == nullptr) {
        args.inputs.push_back(nullptr);
        continue;
      }
      char* p = alloc(t->nbytes());
      ASSERT_NE(p, nullptr);
      KILN_CUDA_OK(cudaMemcpy(p + opts.misalign, t->raw_data(), t->nbytes(), cudaMemcpyHostToDevice));
      args.inputs.push_back(p + opts.misalign);
    }
    Tensor got(dt, want.shape());
    char* out = alloc(got.nbytes());
    ASSERT_NE(out, nullptr);
    KILN_CUDA_OK(cudaMemset(out, 0xff, got.nbytes() + 256));  // NaN garbage: every element must be written
    args.outputs.push_back(out + opts.misalign);
    args.workspace_bytes = (*kernel)->workspace_bytes();
    if (args.workspace_bytes > 0) {
      args.workspace = alloc(args.workspace_bytes);
      ASSERT_NE(args.workspace, nullptr);
    }
    args.stream = stream_;
    if (!opts.cuda_graph) {
      absl::Status s = (*kernel)->Launch(args);
      ASSERT_TRUE(s.ok()) << s;
    } else {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      KILN_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      absl::Status s = (*kernel)->Launch(args);
      KILN_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
      ASSERT_TRUE(s.ok()) << s;
      KILN_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      KILN_CUDA_OK(cudaGraphLaunch(exec, stream_));
      KILN_CUDA_OK(cudaGraphLaunch(exec, stream_));
      KILN_CUDA_OK(cudaStreamSynchronize(stream_));
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    KILN_CUDA_OK(cudaStreamSynchronize(stream_));
    KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), out + opts.misalign, got.nbytes(), cudaMemcpyDeviceToHost));
    for (void* p : allocations) cudaFree(p);

    const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
    float max_ref = 0.f, max_err = 0.f;
    size_t worst = 0;
    for (size_t i = 0; i < w.size(); ++i) max_ref = std::max(max_ref, std::fabs(w[i]));
    for (size_t i = 0; i < w.size(); ++i) {
      const float err = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]);
      if (err > max_err) max_err = err, worst = i;
    }
    EXPECT_LE(max_err, Tolerance(dt) * std::max(max_ref, 1e-6f))
        << "worst element " << worst << ": got " << g[worst] << ", want " << w[worst] << " (max |ref| " << max_ref
        << ", " << w.size() << " elements)";
  }

  LibraryHandles handles_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(LibraryKernelGpuTest, MatMul2D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {7, 33, 129}, {129, 257, 7}, {33, 7, 1}, {257, 129, 33}, {1, 257, 129}, {64, 64, 64}}) {
      Check("MatMul", dt, {Shape{m, k}, Shape{k, n}});
    }
  }
}

TEST_F(LibraryKernelGpuTest, MatMulVectors) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("MatMul", dt, {Shape{33}, Shape{33, 7}});
    Check("MatMul", dt, {Shape{7, 33}, Shape{33}});
    Check("MatMul", dt, {Shape{129}, Shape{129}});
    Check("MatMul", dt, {Shape{33}, Shape{3, 33, 7}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulBatched) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}});      // strided batch
    Check("MatMul", dt, {Shape{3, 7, 33}, Shape{1, 3, 33, 129}});         // leading unit batch
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{33, 129}});            // folded into M
    Check("MatMul", dt, {Shape{4, 7, 33}, Shape{1, 33, 129}});            // folded into M
    Check("MatMul", dt, {Shape{7, 33}, Shape{3, 33, 129}});               // broadcast A (stride 0)
    Check("MatMul", dt, {Shape{1, 1, 7, 33}, Shape{2, 3, 33, 129}});      // broadcast A (stride 0)
  }
}

TEST_F(LibraryKernelGpuTest, MatMulMisalignedPointers) {
  // Pointers aligned only to the element size take the fallback algorithm.
  Check("MatMul", kF16, {Shape{7, 33}, Shape{33, 129}}, {}, {.misalign = 2});
  Check("MatMul", kBF16, {Shape{64, 64}, Shape{64, 64}}, {}, {.misalign = 2});
  Check("MatMul", kF32, {Shape{64, 64}, Shape{64, 64}}, {}, {.misalign = 4});
  Check("MatMul", kF16, {Shape{7, 33}, Shape{3, 33, 129}}, {}, {.misalign = 2});
}

TEST_F(LibraryKernelGpuTest, GemmTransposes) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        const int64_t m = 7, k = 257, n = 33;
        Check("Gemm", dt, {ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}},
              {{"transA", ta}, {"transB", tb}, {"alpha", 0.75f}});
      }
    }
  }
}

TEST_F(LibraryKernelGpuTest, GemmBiasForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const int64_t m = 129, k = 33, n = 7;
    for (const Shape& c : {Shape{n}, Shape{1, n}, Shape{m, n}, Shape{}, Shape{1}, Shape{1, 1}, Shape{m, 1}}) {
      Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, c});                                              // beta 1
      Check("Gemm", dt, {Shape{k, m}, Shape{n, k}, c}, {{"transA", 1}, {"transB", 1}, {"beta", 0.5f}});  // scaled C
    }
    Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, Shape{n}}, {{"beta", 0.f}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulLayoutFlags) {
  // Every flag combination in every MatMul form, against the CPU reference (which
  // reads the operands in their flagged layout).
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat("trans_a=", ta, " trans_b=", tb));
        for (const FlaggedMatMul& f : {
                 Flagged({}, {}, 7, 257, 33, ta, tb),        // 2-D, odd sizes
                 Flagged({}, {}, 129, 64, 72, ta, tb),       // 2-D, aligned K
                 Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb),  // strided batch
                 Flagged({3}, {1, 3}, 7, 33, 129, ta, tb),     // strided batch, leading unit batch
                 Flagged({2, 3}, {}, 7, 33, 129, ta, tb),      // shared B: folded into M, B stride 0 when trans_a
                 Flagged({4}, {1}, 17, 33, 129, ta, tb),       // shared B with a unit batch
                 Flagged({}, {3}, 7, 33, 129, ta, tb),         // broadcast A (stride 0)
                 Flagged({1, 1}, {2, 3}, 7, 33, 129, ta, tb),  // broadcast A with unit batches
             }) {
          Check("MatMul", dt, f.shapes, f.attrs);
        }
      }
    }
    // A 1-D operand opposite a flagged matrix.
    Check("MatMul", dt, {Shape{33}, Shape{7, 33}}, {{"trans_b", 1}});
    Check("MatMul", dt, {Shape{33, 7}, Shape{33}}, {{"trans_a", 1}});
    Check("MatMul", dt, {Shape{33}, Shape{3, 7, 33}}, {{"trans_b", 1}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulLayoutFlagsMisalignedAndCaptured) {
  const FlaggedMatMul f2 = Flagged({}, {}, 7, 33, 129, 1, 1);
  const FlaggedMatMul fb = Flagged({2, 3}, {}, 7, 33, 129, 1, 0);  // B stride 0
  Check("MatMul", kF16, f2.shapes, f2.attrs, {.misalign = 2});
  Check("MatMul", kBF16, fb.shapes, fb.attrs, {.misalign = 2});
  Check("MatMul", kF16, fb.shapes, fb.attrs, {.cuda_graph = true});
}

TEST_F(LibraryKernelGpuTest, FusedMatMulLayoutFlags) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat("trans_a=", ta, " trans_b=", tb));
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({}, {}, 7, 257, 33, ta, tb), 33), name);
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({2, 3}, {}, 7, 33, 129, ta, tb), 129, "gelu"), name);
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb), 129), name);
      }
    }
  }
}

TEST_F(LibraryKernelGpuTest, Conv2D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{1, 3, 13, 13}, Shape{5, 3, 5, 5}, Shape{5}},
          {{"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"strides", std::vector<int64_t>{2, 1}}});
    Check("Conv", dt, {Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, Shape{4}},
          {{"group", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"dilations", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 8, 7, 7}, Shape{8, 1, 3, 3}, Shape{8}},  // depthwise
          {{"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Check("Conv", dt, {Shape{2, 16, 7, 9}, Shape{33, 16, 1, 1}});  // pointwise, no bias
    Check("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}});
  }
}

// channels_last=1: NHWC activations, KRSC filters; the reference is the CPU NHWC Conv.
TEST_F(LibraryKernelGpuTest, Conv2DChannelsLast) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{1, 13, 13, 3}, Shape{5, 5, 5, 3}, Shape{5}},  // stem-like, C = 3
          {{"channels_last", 1}, {"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"strides", std::vector<int64_t>{2, 1}}});
    Check("Conv", dt, {Shape{2, 9, 11, 6}, Shape{4, 3, 3, 3}, Shape{4}},
          {{"channels_last", 1}, {"group", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
           {"dilations", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 7, 7, 8}, Shape{8, 3, 3, 1}, Shape{8}},  // depthwise
          {{"channels_last", 1}, {"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Check("Conv", dt, {Shape{2, 7, 9, 16}, Shape{32, 1, 1, 16}}, {{"channels_last", 1}});  // pointwise, no bias
    Check("Conv", dt, {Shape{3, 10, 6, 24}, Shape{40, 3, 3, 24}, Shape{40}},
          {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 9, 9, 3}, Shape{4, 3, 3, 3}},
          {{"channels_last", 1}, {"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}});
  }
  Check("Conv", kF16, {Shape{2, 9, 11, 8}, Shape{8, 3, 3, 8}, Shape{8}},
        {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, {.cuda_graph = true});
}

TEST_F(LibraryKernelGpuTest, FusedConvChannelsLast) {
  const std::string name = "cudnn:FusedConv";
  const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 9, 11, 8}, w{16, 3, 3, 8};
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"bias_nhwc", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"bias_c", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, true, nhwc, {"res", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"relu"}), name);
    CheckGroup(ConvGroup(dt, Shape{1, 7, 9, 16}, Shape{32, 1, 1, 16}, true, {{"channels_last", 1}}, {"res"}), name);
  }
}

TEST_F(LibraryKernelGpuTest, Conv1D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{2, 4, 33}, Shape{6, 4, 5}, Shape{6}},
          {{"pads", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2}}});
    Check("Conv", dt, {Shape{1, 4, 40}, Shape{6, 2, 3}},
          {{"group", 2}, {"dilations", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{3, 3}}});
  }
}

TEST_F(LibraryKernelGpuTest, CudaGraphCapture) {
  const RunOptions graph{.cuda_graph = true};
  Check("MatMul", kF16, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}}, {}, graph);
  Check("MatMul", kF16, {Shape{7, 33}, Shape{3, 33, 129}}, {}, graph);
  Check("Gemm", kF16, {Shape{129, 33}, Shape{33, 7}, Shape{7}}, {}, graph);
  Check("Gemm", kBF16, {Shape{129, 33}, Shape{33, 7}, Shape{129, 1}}, {{"beta", 0.5f}}, graph);
  Check("Conv", kF16, {Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, Shape{4}}, {{"group", 2}}, graph);
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu"}), "cublaslt:FusedMatMul", graph);
  CheckGroup(ConvGroup(kF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, false, kPad1, {"relu"}), "cudnn:FusedConv", graph);
  CheckGroup(ConvGroup(kBF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, true, kPad1, {"res", "relu"}), "cudnn:FusedConv",
             graph);
}

TEST_F(LibraryKernelGpuTest, FusedMatMul) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{7, 33, 129}, {129, 257, 7}, {1, 33, 5}, {64, 64, 64}}) {
      SCOPED_TRACE(absl::StrCat("m=", m, " k=", k, " n=", n));
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias1n", "relu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias_first", "gelu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"relu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"gelu"}), name);
    }
    // A residual as cuBLASLt's C, alone, after the bias, before the activation.
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{33, 129}, {"residual"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 9, 64}, Shape{64, 48}, {"bias", "residual_first"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 33}, Shape{33, 5}, {"bias1n", "residual", "relu"}), name);
    // Batches: folded into M, strided, broadcast A.
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{33, 129}, {"bias", "relu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias", "gelu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias", "relu"}), name);
  }
  // Misaligned pointers (fallback algorithm) with the bias epilogue.
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu"}), name, {.misalign = 2});
}

// The stacked Q/K/V projection of fuse-siblings: X [M, K] (or [1, M, K]) shared by S
// weight matrices [S, K, N] (a stride-0 batch) with a per-batch bias [S, 1, N]
// (BIAS_BATCH_STRIDE), as one cuBLASLt call.
TEST_F(LibraryKernelGpuTest, FusedMatMulPerBatchBias) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 24, 64}, Shape{3, 64, 64}, {"bias_batch", "relu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 1, 9, 40}, Shape{2, 1, 40, 24}, {"bias_batch", "gelu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias_batch"}), name);  // equal batches
  }
  // BERT-base's QKV shape, in a CUDA graph, and with misaligned pointers.
  CheckGroup(MatMulGroup(kF16, Shape{1, 128, 768}, Shape{3, 768, 768}, {"bias_batch"}), name);
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"}), name, {.cuda_graph = true});
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch", "relu"}), name, {.misalign = 2});
}

TEST_F(LibraryKernelGpuTest, FusedConv) {
  const std::string name = "cudnn:FusedConv";
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias", "relu"}), name);          // conv + bias + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias3", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"res", "relu"}), name);            // conv(B) + residual + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"res_first", "relu"}), name);     // conv + residual + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"relu"}), name);                  // conv + relu (zero bias)
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"relu"}), name);                   // conv(B) + relu
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"res"}), name);                    // identity activation
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias"}), name);                  // identity activation
    CheckGroup(ConvGroup(dt, Shape{1, 16, 7, 9}, Shape{33, 16, 1, 1}, false, {}, {"bias", "relu"}), name);
    CheckGroup(ConvGroup(dt, Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, true,
                         {{"group", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 1}}},
                         {"res", "relu"}),
               name);
    CheckGroup(ConvGroup(dt, Shape{2, 4, 33}, Shape{6, 4, 5}, false, {{"pads", std::vector<int64_t>{2, 2}}},
                         {"bias", "relu"}),
               name);  // 1-D
  }
}

}  // namespace
}  // namespace kiln::codegen
