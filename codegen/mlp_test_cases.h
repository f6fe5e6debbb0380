// Shared by codegen/mlp_test.cc and codegen/mlp_gpu_test.cc: "mlp" FusedGroups
// (fusion/fuse_mlp.h) as the squeeze-excitation gates of the zoo's CNNs form them,
// X [N, 1, 1, C] -> MatMul W1 [C, R] -> + b1 -> SiLU (Sigmoid, Mul) or Relu -> MatMul
// W2 [R, C] -> + b2 -> Sigmoid or HardSigmoid, with random inputs and weights.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

struct MlpCase {
  DType dtype = DType::kFloat16;
  int64_t n = 1, c = 16, r = 8;
  bool mobilenet = false;  // Relu and HardSigmoid (MobileNetV3), else SiLU and Sigmoid

  std::string Name() const {
    return absl::StrCat(DTypeName(dtype), "_n", n, "_c", c, "_r", r, mobilenet ? "_relu_hardsigmoid" : "_silu_sigmoid");
  }
};

// Odd and real widths (EfficientNet-B0's 96/4 and 1152/48, MobileNetV3-Small's
// 576/144), hidden layers of 1 to 512 column vectors (every thread of the CTA on W1's
// columns at 257), batch 1, 3 and 8, the three float dtypes.
inline std::vector<MlpCase> MlpCases() {
  std::vector<MlpCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    out.push_back({dt, 1, 16, 8, false});
    out.push_back({dt, 3, 96, 4, false});
    out.push_back({dt, 1, 1152, 48, false});
    out.push_back({dt, 8, 576, 144, true});
    out.push_back({dt, 5, 300, 37, true});
    out.push_back({dt, 2, 256, 100, false});
    out.push_back({dt, 3, 200, 512, true});
    out.push_back({dt, 1, 64, 255, false});
    out.push_back({dt, 2, 48, 257, true});
  }
  return out;
}

struct MlpBuilt {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;                 // the "mlp" group
  std::map<std::string, Tensor> feeds;  // graph inputs by name
};

inline absl::StatusOr<MlpBuilt> BuildMlp(const MlpCase& c, uint32_t seed) {
  MlpBuilt b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  std::mt19937 gen(seed);
  auto random = [&](const Shape& shape, float scale) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(NumElements(shape));
    for (float& x : v) x = dist(gen);
    return Tensor::FromFloat(c.dtype, shape, v);
  };
  Value* x = g.AddValue("x");
  x->SetType(c.dtype, {c.n, 1, 1, c.c});
  g.AddInput(x);
  b.feeds["x"] = random({c.n, 1, 1, c.c}, 1.f);
  Value* w1 = g.AddConstant("w1", random({c.c, c.r}, 2.f / std::sqrt(static_cast<float>(c.c))));
  Value* b1 = g.AddConstant("b1", random({c.r}, 0.5f));
  Value* w2 = g.AddConstant("w2", random({c.r, c.c}, 2.f / std::sqrt(static_cast<float>(c.r))));
  Value* b2 = g.AddConstant("b2", random({c.c}, 0.5f));
  std::vector<Node*> members;
  auto add = [&](const std::string& op, std::vector<Value*> in) {
    Value* out = g.AddValue(absl::StrCat(op, "_out", members.size()));
    members.push_back(g.AddNode(op, in, {out}, absl::StrCat(op, members.size())));
    return out;
  };
  Value* h = add("Add", {add("MatMul", {x, w1}), b1});
  if (c.mobilenet) {
    h = add("Relu", {h});
  } else {
    h = add("Mul", {h, add("Sigmoid", {h})});
  }
  Value* y = add("Add", {add("MatMul", {h, w2}), b2});
  y = add(c.mobilenet ? "HardSigmoid" : "Sigmoid", {y});
  if (c.mobilenet) members.back()->SetAttr("alpha", 1.f / 6.f);
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(g, options); !s.ok()) return s;
  absl::StatusOr<Node*> group = FormFusedGroup(g, members, "mlp", members[c.mobilenet ? 3 : 4]);
  if (!group.ok()) return group.status();
  b.node = *group;
  return b;
}

}  // namespace kiln::codegen::test
