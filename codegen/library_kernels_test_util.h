// Helpers of the vendor-library kernel tests (codegen/library_kernels_test.cc: the
// name decisions; library_kernels_gpu_test.cc: numerics on a GPU): one-node graphs and
// fused groups of MatMul/Gemm/Conv forms built from shapes and epilogue names.
#pragma once

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
#include "codegen/gpu_test_util.h"
#include "codegen/library_kernels.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/ops/op_test_util.h"

namespace kiln::codegen::library_test {

using op_test::Attrs;

// A graph of one node named "n" whose inputs are runtime values of `dtype` and the
// given shapes (nullopt: absent optional input); shapes inferred.
struct OneNode {
  Graph graph;
  Node* node = nullptr;
};

inline std::unique_ptr<OneNode> Build(const std::string& op, DType dtype,
                                      const std::vector<std::optional<Shape>>& shapes, const Attrs& attrs = {}) {
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

inline std::string Name(const std::string& op, DType dtype, const std::vector<std::optional<Shape>>& shapes,
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

inline GroupGraph BuildGroup(DType dtype, const std::vector<std::pair<std::string, Shape>>& inputs,
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

inline std::string GroupName(const GroupGraph& gg) {
  return gg.group ? LibraryKernelName(*gg.group) : "<build failed>";
}

// The batch dims of MatMul(x, w)'s output (the operands' leading dims broadcast).
inline Shape OutputBatch(const Shape& x, const Shape& w) {
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
inline GroupGraph MatMulGroup(DType dt, Shape x, Shape w, const std::vector<std::string>& epilogue,
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
      nodes.push_back(
          {"Add", e == "bias_first" ? std::vector<std::string>{"b", prev} : std::vector<std::string>{prev, "b"}, out});
    } else if (e == "residual" || e == "residual_first") {
      Shape r = OutputBatch(x, w);
      r.insert(r.end(), {x.size() == 1 ? 1 : x[x.size() - 2], n});
      inputs.push_back({"r", r});
      nodes.push_back(
          {"Add", e == "residual_first" ? std::vector<std::string>{"r", prev} : std::vector<std::string>{prev, "r"},
           out});
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
inline GroupGraph ConvGroup(DType dt, Shape x, Shape w, bool conv_bias, const Attrs& attrs,
                            const std::vector<std::string>& epilogue) {
  // Output shape: infer with a throwaway graph.
  auto probe =
      Build("Conv", dt,
            conv_bias ? std::vector<std::optional<Shape>>{x, w, Shape{w[0]}} : std::vector<std::optional<Shape>>{x, w},
            attrs);
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
      nodes.push_back(
          {"Add", e == "res" ? std::vector<std::string>{prev, "z"} : std::vector<std::string>{"z", prev}, out});
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

inline const Attrs kPad1 = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};

// MatMul operands with layout flags (graph/ops/mat_mul.cc): A [batch_a.., M, K] and
// B [batch_b.., K, N] stored as trans_a / trans_b say (A as [.., K, M], B as
// [.., N, K]); an empty batch is a matrix. The attributes set both flags.
struct FlaggedMatMul {
  std::vector<std::optional<Shape>> shapes;
  Attrs attrs;
};
inline FlaggedMatMul Flagged(Shape batch_a, Shape batch_b, int64_t m, int64_t k, int64_t n, int ta, int tb) {
  Shape a = std::move(batch_a), b = std::move(batch_b);
  a.insert(a.end(), {ta ? k : m, ta ? m : k});
  b.insert(b.end(), {tb ? n : k, tb ? k : n});
  return {{a, b}, {{"trans_a", ta}, {"trans_b", tb}}};
}

// MatMul(x, w) with layout flags + Add(b [n]) + Relu, one "matmul+epilogue" group.
inline GroupGraph FlaggedMatMulGroup(DType dt, const FlaggedMatMul& f, int64_t n, const std::string& act = "relu") {
  std::vector<NodeSpec> nodes = {{"MatMul", {"x", "w"}, "m", f.attrs}, {"Add", {"m", "b"}, "a"}};
  if (act == "relu") nodes.push_back({"Relu", {"a"}, "y"});
  if (act == "gelu") nodes.push_back({"Gelu", {"a"}, "y", {{"approximate", "tanh"}}});
  return BuildGroup(dt, {{"x", *f.shapes[0]}, {"w", *f.shapes[1]}, {"b", Shape{n}}}, nodes, "matmul+epilogue");
}

}  // namespace kiln::codegen::library_test
