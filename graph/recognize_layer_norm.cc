// Recognition of the decomposed LayerNorm (ReduceMean, Sub, Pow, ..., Div).
#include "graph/recognize_layer_norm.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

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
  if (std::optional<float> eps = ScalarConstant(add->input(1))) {
    var = add->input(0);
    m.epsilon = *eps;
  } else if (std::optional<float> eps0 = ScalarConstant(add->input(0))) {
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
    const std::optional<float> exponent = ScalarConstant(square->input(1));
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
