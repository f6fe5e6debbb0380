// Test helpers for op files: tensor builders and a one-node graph runner that
// goes through shape inference and the reference evaluator like real graphs do.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"

namespace kiln::op_test {

inline Tensor F32(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kFloat32, shape, v); }
inline Tensor F16(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kFloat16, shape, v); }
inline Tensor BF16(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kBFloat16, shape, v); }
inline Tensor I64(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kInt64, shape, v); }
inline Tensor I32(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kInt32, shape, v); }
inline Tensor Bool(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kBool, shape, v); }
// 1-D tensors from a list.
inline Tensor Ints(std::vector<int64_t> v) { return I64({static_cast<int64_t>(v.size())}, v); }
inline Tensor Floats(std::vector<float> v) { return F32({static_cast<int64_t>(v.size())}, v); }

inline std::vector<float> Iota(int64_t n, float start = 0.f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Uniform values in [-1, 1) from a fixed seed.
inline std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// One input of a test node: fed at run time (X), a constant (C), or absent (None).
struct In {
  Tensor t;
  bool constant = false;
  bool absent = false;
};
inline In X(Tensor t) { return {std::move(t), false, false}; }
inline In C(Tensor t) { return {std::move(t), true, false}; }
inline In None() { return {Tensor(), false, true}; }

using Attrs = std::map<std::string, Attribute>;

// Builds a graph of one `op` node (named "n"), infers shapes without folding,
// and evaluates it on the CPU reference.
inline absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<In> ins, Attrs attrs = {},
                                                 int num_outputs = 1) {
  Graph g;
  std::vector<Value*> inputs;
  TensorMap feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (ins[i].absent) {
      inputs.push_back(nullptr);
    } else if (ins[i].constant) {
      inputs.push_back(g.AddConstant(name, ins[i].t));
    } else {
      Value* v = g.AddValue(name);
      v->SetType(ins[i].t.dtype(), ins[i].t.shape());
      g.AddInput(v);
      feeds[name] = ins[i].t;
      inputs.push_back(v);
    }
  }
  std::vector<Value*> outputs;
  for (int i = 0; i < num_outputs; ++i) outputs.push_back(g.AddValue("out" + std::to_string(i)));
  Node* node = g.AddNode(op, inputs, outputs, "n");
  for (auto& [k, v] : attrs) node->SetAttr(k, v);
  for (Value* v : outputs) g.AddOutput(v);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  if (!s.ok()) return s;
  return EvaluateGraph(g, feeds);
}

// Runs a one-output op and returns its result, failing the test on error.
inline Tensor Run1(const std::string& op, std::vector<In> ins, Attrs attrs = {}) {
  auto r = RunOp(op, std::move(ins), std::move(attrs));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return Tensor();
  return (*r)[0];
}

// Runs an op that must fail and returns the error message.
inline std::string ErrorOf(const std::string& op, std::vector<In> ins, Attrs attrs = {}, int num_outputs = 1) {
  auto r = RunOp(op, std::move(ins), std::move(attrs), num_outputs);
  EXPECT_FALSE(r.ok()) << op << " unexpectedly succeeded";
  return r.ok() ? "" : std::string(r.status().message());
}

// Expects `t` to have `shape` and values within a relative `tol` of `want`.
inline void ExpectNear(const Tensor& t, Shape shape, const std::vector<float>& want, float tol = 1e-4f) {
  ASSERT_EQ(t.shape(), shape) << t.TypeString();
  const std::vector<float> got = t.ToFloat();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.f, std::fabs(want[i]))) << "element " << i;
  }
}

}  // namespace kiln::op_test
