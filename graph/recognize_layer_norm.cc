// Recognition of the decomposed LayerNorm (ReduceMean, Sub, Pow, ..., Div).
#include "graph/recognize_layer_norm.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/reduce_eval.h"

namespace kiln {
namespace {

bool IsOp(const Node* node, absl::string_view op, int num_inputs) {
  return node != nullptr && node->domain().empty() && node->op_type() == op && node->num_outputs() == 1 &&
         node->num_inputs() == num_inputs && node->has_input(0) && node->has_input(num_inputs - 1);
}

// The producer of `v` when it is `op` and `v` is used once and is no graph output.
Node* InternalProducer(const Graph& graph, const Value* v, absl::string_view op, int num_inputs) {
  if (v == nullptr || v->uses().size() != 1 || graph.IsGraphOutput(v)) return nullptr;
  Node* node = v->producer();
  return IsOp(node, op, num_inputs) ? node : nullptr;
}

// The single consumer of `v` when it is `op` and `v` is internal to the pattern.
Node* InternalConsumer(const Graph& graph, const Value* v, absl::string_view op) {
  if (v->uses().size() != 1 || graph.IsGraphOutput(v)) return nullptr;
  Node* node = v->uses()[0].node;
  return IsOp(node, op, 2) ? node : nullptr;
}

std::optional<float> Scalar(const Value* v) {
  if (v == nullptr || !v->is_constant() || v->numel() != 1 || !IsFloating(v->dtype())) return std::nullopt;
  return v->constant().ScalarFloat();
}

// ReduceMean(x) over exactly the last axis with keepdims = 1.
bool IsLastAxisMean(const Node* node) {
  if (node == nullptr || node->op_type() != "ReduceMean" || !node->domain().empty()) return false;
  if (node->num_outputs() != 1 || !node->has_input(0)) return false;
  const Value* x = node->input(0);
  if (!x->has_type() || x->rank() < 1) return false;
  const absl::StatusOr<int64_t> keepdims = node->GetInt("keepdims", 1);
  if (!keepdims.ok() || *keepdims != 1) return false;
  if (node->has_input(1) && !node->input(1)->is_constant()) return false;
  if (!node->has_input(1) && !node->has_attr("axes")) return false;  // all axes
  const absl::StatusOr<std::vector<bool>> mask = ops::ReducedAxes(*node, x->rank());
  if (!mask.ok()) return false;
  for (int i = 0; i < x->rank(); ++i) {
    if ((*mask)[i] != (i == x->rank() - 1)) return false;
  }
  return true;
}

// A constant with `h` elements shaped [h] or [1, ..., 1, h], of rank <= `rank`.
bool IsLastAxisVector(const Value* v, int64_t h, int rank) {
  if (v == nullptr || !v->is_constant() || !IsFloating(v->dtype())) return false;
  if (v->rank() < 1 || v->rank() > rank || v->shape().back() != h || v->numel() != h) return false;
  return true;
}

// The other operand of binary `node` when one is a last-axis vector constant.
Value* VectorOperand(const Node* node, const Value* operand, int64_t h, int rank) {
  if (node->input(0) == operand && IsLastAxisVector(node->input(1), h, rank)) return node->input(1);
  if (node->input(1) == operand && IsLastAxisVector(node->input(0), h, rank)) return node->input(0);
  return nullptr;
}

struct Match {
  Value* x = nullptr;
  float epsilon = 0.f;
  Value* gamma = nullptr;
  Value* beta = nullptr;
  Node* root = nullptr;
  std::vector<Node*> nodes;
};

// Matches starting at the Div of a LayerNorm.
std::optional<Match> MatchAt(const Graph& graph, Node* div) {
  if (!IsOp(div, "Div", 2)) return std::nullopt;
  Match m;
  Value* d = div->input(0);
  Node* sub = d->producer();
  if (!IsOp(sub, "Sub", 2) || graph.IsGraphOutput(d)) return std::nullopt;
  Value* x = sub->input(0);
  if (!x->has_type() || !IsFloating(x->dtype()) || x->rank() < 1 || x->is_constant()) return std::nullopt;
  Value* mean_value = sub->input(1);
  if (mean_value->uses().size() != 1 || graph.IsGraphOutput(mean_value)) return std::nullopt;
  Node* mean = mean_value->producer();
  if (!IsLastAxisMean(mean) || mean->input(0) != x) return std::nullopt;
  // div's denominator: Sqrt(Add(var, eps)).
  Node* sqrt = InternalProducer(graph, div->input(1), "Sqrt", 1);
  if (sqrt == nullptr) return std::nullopt;
  Node* add = InternalProducer(graph, sqrt->input(0), "Add", 2);
  if (add == nullptr) return std::nullopt;
  Value* var = nullptr;
  if (std::optional<float> eps = Scalar(add->input(1))) {
    var = add->input(0);
    m.epsilon = *eps;
  } else if (std::optional<float> eps0 = Scalar(add->input(0))) {
    var = add->input(1);
    m.epsilon = *eps0;
  } else {
    return std::nullopt;
  }
  if (var == nullptr || var->uses().size() != 1 || graph.IsGraphOutput(var)) return std::nullopt;
  Node* var_mean = var->producer();
  if (!IsLastAxisMean(var_mean)) return std::nullopt;
  Value* sq = var_mean->input(0);
  Node* square = sq->producer();
  if (sq->uses().size() != 1 || graph.IsGraphOutput(sq) || square == nullptr) return std::nullopt;
  if (IsOp(square, "Pow", 2)) {
    const std::optional<float> exponent = Scalar(square->input(1));
    if (square->input(0) != d || !exponent || *exponent != 2.f) return std::nullopt;
  } else if (IsOp(square, "Mul", 2)) {
    if (square->input(0) != d || square->input(1) != d) return std::nullopt;
  } else {
    return std::nullopt;
  }
  // d is read only by the square and the Div (numerator).
  for (const Use& use : d->uses()) {
    if (use.node != square && !(use.node == div && use.index == 0)) return std::nullopt;
  }
  m.x = x;
  m.nodes = {mean, sub, square, var_mean, add, sqrt, div};
  m.root = div;
  const int64_t h = x->shape().back();
  Value* y = div->output(0);
  if (Node* mul = InternalConsumer(graph, y, "Mul")) {
    if (Value* gamma = VectorOperand(mul, y, h, x->rank())) {
      m.gamma = gamma;
      m.nodes.push_back(mul);
      m.root = mul;
      y = mul->output(0);
    }
  }
  if (Node* bias = InternalConsumer(graph, y, "Add")) {
    if (Value* beta = VectorOperand(bias, y, h, x->rank())) {
      m.beta = beta;
      m.nodes.push_back(bias);
      m.root = bias;
    }
  }
  if (m.root->output(0)->shape() != x->shape()) return std::nullopt;
  return m;
}

// `v` as a [h] constant of `dtype` (reused when it already is one), or `fill`
// everywhere when `v` is null.
Value* AsVector(Graph& graph, Value* v, DType dtype, int64_t h, float fill, const std::string& name) {
  if (v != nullptr && v->dtype() == dtype && v->shape() == Shape{h}) return v;
  std::vector<float> data = v != nullptr ? v->constant().ToFloat() : std::vector<float>(h, fill);
  return graph.AddConstant(v != nullptr ? absl::StrCat(v->name(), "/vector") : name,
                           Tensor::FromFloat(dtype, {h}, data));
}

}  // namespace

absl::StatusOr<bool> RecognizeLayerNorm::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_set<Node*> removed;
  for (Node* div : graph.nodes()) {
    if (removed.contains(div)) continue;
    const std::optional<Match> m = MatchAt(graph, div);
    if (!m) continue;
    const std::string name = m->root->name();
    Value* y = m->root->output(0);
    const DType dtype = m->x->dtype();
    const int64_t h = m->x->shape().back();
    Value* gamma = AsVector(graph, m->gamma, dtype, h, 1.f, absl::StrCat(name, "/scale"));
    Value* beta = AsVector(graph, m->beta, dtype, h, 0.f, absl::StrCat(name, "/bias"));
    for (Node* node : m->nodes) {
      removed.insert(node);
      graph.RemoveNode(node);
    }
    Node* ln = graph.AddNode("LayerNormalization", {m->x, gamma, beta}, {y}, name);
    ln->SetAttr("axis", int64_t{-1});
    ln->SetAttr("epsilon", m->epsilon);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
