// Gemm -> MatMul [+ Mul] [+ Add]: transposes of constants and scales folded into
// constants, transposes of computed operands into the MatMul's layout flags.
#include "graph/gemm_to_matmul.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// A new constant holding `scale` * (transpose ? v^T : v) for a rank-2 constant `v`.
Value* FoldedMatrix(Graph& graph, const Value* v, bool transpose, float scale, absl::string_view suffix) {
  const int64_t rows = v->shape()[0], cols = v->shape()[1];
  const std::vector<float> in = v->constant().ToFloat();
  std::vector<float> out(in.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      out[transpose ? j * rows + i : i * cols + j] = in[i * cols + j] * scale;
    }
  }
  const Shape shape = transpose ? Shape{cols, rows} : Shape{rows, cols};
  return graph.AddConstant(absl::StrCat(v->name(), suffix), Tensor::FromFloat(v->dtype(), shape, out));
}

Value* ScalarConstant(Graph& graph, const std::string& name, DType dtype, float value) {
  return graph.AddConstant(name, Tensor::FromFloat(dtype, {}, {value}));
}

// op(v) for a Gemm operand: a folded constant, or v itself (read through the
// MatMul's layout flag when `transpose`, see Rewrite).
Value* Operand(Graph& graph, Value* v, bool transpose, float scale) {
  if (v->is_constant() && (transpose || scale != 1.f)) {
    return FoldedMatrix(graph, v, transpose, scale, transpose ? "/transposed" : "/scaled");
  }
  return v;
}

bool Qualifies(const Node& node) {
  if (node.op_type() != "Gemm" || !node.domain().empty() || node.num_outputs() != 1) return false;
  const Value* a = node.input(0);
  const Value* b = node.input(1);
  if (!a || !b || !a->has_type() || !b->has_type() || a->rank() != 2 || b->rank() != 2) return false;
  if (!IsFloating(a->dtype()) || !node.output(0)->has_type()) return false;
  return node.GetInt("transA", 0).ok() && node.GetInt("transB", 0).ok() && node.GetFloat("alpha", 1.f).ok() &&
         node.GetFloat("beta", 1.f).ok();
}

void Rewrite(Graph& graph, Node* gemm) {
  const std::string name = gemm->name();
  const bool trans_a = *gemm->GetInt("transA", 0) != 0;
  const bool trans_b = *gemm->GetInt("transB", 0) != 0;
  const float alpha = *gemm->GetFloat("alpha", 1.f);
  const float beta = *gemm->GetFloat("beta", 1.f);
  Value* a = gemm->input(0);
  Value* b = gemm->input(1);
  Value* c = gemm->has_input(2) && beta != 0.f ? gemm->input(2) : nullptr;
  Value* y = gemm->output(0);
  const DType dtype = y->dtype();
  const Shape shape = y->shape();
  graph.RemoveNode(gemm);

  const bool alpha_in_b = alpha != 1.f && b->is_constant();
  const bool alpha_mul = alpha != 1.f && !alpha_in_b;
  Value* a2 = Operand(graph, a, trans_a, 1.f);
  Value* b2 = Operand(graph, b, trans_b, alpha_in_b ? alpha : 1.f);

  Value* m = (alpha_mul || c) ? graph.AddValue(absl::StrCat(y->name(), "/matmul"), dtype, shape) : y;
  Node* matmul = graph.AddNode("MatMul", {a2, b2}, {m}, name);
  // A computed operand keeps its stored layout; the flag says it is transposed.
  if (trans_a && !a->is_constant()) matmul->SetAttr("trans_a", Attribute(int64_t{1}));
  if (trans_b && !b->is_constant()) matmul->SetAttr("trans_b", Attribute(int64_t{1}));
  if (alpha_mul) {
    Value* scaled = c ? graph.AddValue(absl::StrCat(y->name(), "/alpha"), dtype, shape) : y;
    graph.AddNode("Mul", {m, ScalarConstant(graph, absl::StrCat(name, "/alpha"), dtype, alpha)}, {scaled},
                  absl::StrCat(name, "/alpha"));
    m = scaled;
  }
  if (c) {
    Value* c2 = c;
    if (beta != 1.f) {
      if (c->is_constant()) {
        std::vector<float> cv = c->constant().ToFloat();
        for (float& v : cv) v *= beta;
        c2 = graph.AddConstant(absl::StrCat(c->name(), "/scaled"), Tensor::FromFloat(c->dtype(), c->shape(), cv));
      } else {
        c2 = graph.AddValue(absl::StrCat(c->name(), "/beta"), c->dtype(), c->shape());
        graph.AddNode("Mul", {c, ScalarConstant(graph, absl::StrCat(name, "/beta"), dtype, beta)}, {c2},
                      absl::StrCat(name, "/beta"));
      }
    }
    graph.AddNode("Add", {m, c2}, {y}, absl::StrCat(name, "/bias"));
  }
}

}  // namespace

absl::StatusOr<bool> GemmToMatMul::Run(Graph& graph) { return RewriteEachMatch(graph, Qualifies, Rewrite); }

}  // namespace kiln
