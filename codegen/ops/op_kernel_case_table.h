// The builder of the generated per-node kernels' test cases (codegen/ops/
// op_kernel_cases.h): the case and input types, random inputs and CaseTable, whose
// methods add the cases of one family each. Header-only, for tests.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/fused_group.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

// How an input is given: fed at run time with random data, or a constant.
struct CaseInput {
  Tensor t;
  bool constant = false;
  bool absent = false;
};

struct Case {
  std::string name;
  std::string op;
  std::vector<CaseInput> inputs;
  std::map<std::string, Attribute> attrs;
  int num_outputs = 1;
};

// Random tensor: floats uniform in [lo, hi), integers in [-5, 5], bools 0/1.
inline Tensor Rand(DType dtype, Shape shape, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 gen(seed);
  const int64_t n = NumElements(shape);
  if (IsFloating(dtype)) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return Tensor::FromFloat(dtype, shape, v);
  }
  std::uniform_int_distribution<int64_t> dist(dtype == DType::kBool ? 0 : (dtype == DType::kUInt8 ? 0 : -5),
                                              dtype == DType::kBool ? 1 : 5);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = dist(gen);
  return Tensor::FromInt64(dtype, shape, v);
}

inline CaseInput X(Tensor t) { return {std::move(t), false, false}; }
inline CaseInput K(Tensor t) { return {std::move(t), true, false}; }
inline CaseInput Absent() { return {Tensor(), false, true}; }
inline Tensor Ints(std::vector<int64_t> v) {
  return Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

// A FusedGroup case: `body` in kiln's text format (graph/text_format.h; the case's
// node reads it into its graph attribute), its inputs fed in order, `members` the
// names of its nodes.
inline Case GroupCase(std::string name, std::string pattern, std::string body, std::vector<CaseInput> inputs,
                      std::vector<std::string> members, int outputs) {
  Case g{std::move(name),
         "FusedGroup",
         std::move(inputs),
         {{"body", std::move(body)},
          {"pattern", std::move(pattern)},
          {"anchor", std::string()},
          {"members", std::move(members)}}};
  g.num_outputs = outputs;
  return g;
}

// "[2,3,5]" for a shape.
inline std::string Dims(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&out, i ? "," : "", s[i]);
  return out + "]";
}

// AllCases' builder: the cases in order, each input's data drawn with the next seed
// (so a case's data depends on the cases before it), one method per family.
struct CaseTable {
  using D = DType;
  static constexpr D f32 = D::kFloat32, f16 = D::kFloat16, bf16 = D::kBFloat16, i64 = D::kInt64, i32 = D::kInt32;
  std::vector<Case> c;
  uint32_t seed = 1;

  CaseInput R(D d, Shape s, float lo = -2.f, float hi = 2.f) { return X(Rand(d, std::move(s), seed++, lo, hi)); }
  CaseInput RK(D d, Shape s, float lo = -2.f, float hi = 2.f) { return K(Rand(d, std::move(s), seed++, lo, hi)); }
  void add(std::string name, std::string op, std::vector<CaseInput> ins, std::map<std::string, Attribute> attrs = {},
           int outs = 1) {
    c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), outs});
  }
  CaseInput I64(Shape s, std::vector<int64_t> v) { return X(Tensor::FromInt64(i64, std::move(s), v)); }
  static inline const float kNanF = std::nanf(""), kNan = kNanF, kInf = INFINITY;

  void Pointwise();
  void MovementAndIndexing();
  void SpecialOps();
  void ElementwiseReductionsWindows();
  void VectorAndRowForms();
  void FusedGroups();
  void ViewGroups();
};

}  // namespace kiln::codegen::test
