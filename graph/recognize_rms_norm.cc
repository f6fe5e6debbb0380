// Recognition of the decomposed RMSNorm (Pow, ReduceMean, Add, Sqrt, ..., Mul).
#include "graph/recognize_rms_norm.h"

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
  Value* x = nullptr;  // the tensor RMSNormalization reads (before a Cast to f32)
  float epsilon = 0.f;
  Value* weight = nullptr;
  Node* root = nullptr;
  std::vector<Node*> nodes;
};

// Cast(x, to = f32) of a floating-point x: x, else nullptr.
Value* CastSource(const Node* cast) {
  if (!IsOp(cast, "Cast", 1)) return nullptr;
  const absl::StatusOr<int64_t> to = cast->GetInt("to");
  Value* x = cast->input(0);
  if (!to.ok() || *to != 1 || !x->has_type() || !IsFloating(x->dtype())) return nullptr;
  return x;
}

// y = x32 * (1 / s), in the spellings of the header, from the Sqrt `sqrt`.
Node* Scaling(const Graph& graph, Node* sqrt, const Value* x32, std::vector<Node*>& nodes) {
  const Value* s = sqrt->output(0);
  if (s->uses().size() != 1 || graph.IsGraphOutput(s)) return nullptr;
  Node* next = s->uses()[0].node;
  if (IsOp(next, "Div", 2) && next->input(0) == x32 && next->input(1) == s) return next;
  Node* inverse = nullptr;
  if (IsOp(next, "Reciprocal", 1)) {
    inverse = next;
  } else if (IsOp(next, "Div", 2) && next->input(1) == s && ScalarConstant(next->input(0)) == 1.f) {
    inverse = next;
  }
  if (inverse == nullptr) return nullptr;
  nodes.push_back(inverse);
  const Value* r = inverse->output(0);
  Node* mul = InternalConsumer(graph, r, "Mul");
  if (mul == nullptr) return nullptr;
  const bool takes_x = (mul->input(0) == x32 && mul->input(1) == r) || (mul->input(1) == x32 && mul->input(0) == r);
  return takes_x ? mul : nullptr;
}

// Matches starting at the ReduceMean of an RMSNorm.
std::optional<Match> MatchAt(const Graph& graph, Node* mean) {
  if (!IsLastAxisMean(mean)) return std::nullopt;
  Match m;
  Value* sq = mean->input(0);
  Node* square = sq->producer();
  if (square == nullptr || sq->uses().size() != 1 || graph.IsGraphOutput(sq)) return std::nullopt;
  Value* x32 = square->input(0);
  if (IsOp(square, "Pow", 2)) {
    if (ScalarConstant(square->input(1)) != 2.f) return std::nullopt;
  } else if (!IsOp(square, "Mul", 2) || square->input(1) != x32) {
    return std::nullopt;
  }
  if (!x32->has_type() || !IsFloating(x32->dtype()) || x32->rank() < 1 || x32->is_constant()) return std::nullopt;
  Node* add = InternalConsumer(graph, mean->output(0), "Add");
  if (add == nullptr) return std::nullopt;
  const int ms = add->input(0) == mean->output(0) ? 0 : 1;
  const std::optional<float> eps = ScalarConstant(add->input(1 - ms));
  Node* sqrt = eps ? InternalConsumer(graph, add->output(0), "Sqrt", 1) : nullptr;
  if (sqrt == nullptr) return std::nullopt;
  m.epsilon = *eps;
  m.nodes = {square, mean, add, sqrt};
  Node* scaled = Scaling(graph, sqrt, x32, m.nodes);
  if (scaled == nullptr) return std::nullopt;
  m.nodes.push_back(scaled);
  m.root = scaled;
  Value* y = scaled->output(0);
  // x32 from a Cast to f32: the Cast joins (read by the square and the scaling
  // only), and a Cast of y back to x's dtype may follow.
  m.x = x32;
  Node* cast = x32->producer();
  if (Value* x = CastSource(cast); x != nullptr && !graph.IsGraphOutput(x32)) {
    bool internal = true;
    for (const Use& u : x32->uses()) internal &= u.node == square || u.node == scaled;
    if (internal) {
      m.x = x;
      m.nodes.insert(m.nodes.begin(), cast);
      if (Node* back = InternalConsumer(graph, y, "Cast", 1)) {
        const absl::StatusOr<int64_t> to = back->GetInt("to");
        if (to.ok() && back->output(0)->has_type() && back->output(0)->dtype() == x->dtype()) {
          m.nodes.push_back(back);
          m.root = back;
          y = back->output(0);
        }
      }
    }
  }
  const int64_t h = m.x->shape().back();
  if (Node* mul = InternalConsumer(graph, y, "Mul")) {
    if (Value* w = VectorOperand(mul, y, h, m.x->rank())) {
      m.weight = w;
      m.nodes.push_back(mul);
      m.root = mul;
    }
  }
  const Value* out = m.root->output(0);
  if (!out->has_type() || out->shape() != m.x->shape() || out->dtype() != m.x->dtype()) return std::nullopt;
  return m;
}

}  // namespace

absl::StatusOr<bool> RecognizeRmsNorm::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_set<Node*> removed;
  for (Node* mean : graph.nodes()) {
    if (removed.contains(mean)) continue;
    const std::optional<Match> m = MatchAt(graph, mean);
    if (!m) continue;
    const std::string name = m->root->name();
    Value* y = m->root->output(0);
    const DType dtype = m->x->dtype();
    const int64_t h = m->x->shape().back();
    Value* w = AsVector(graph, m->weight, dtype, h, 1.f, absl::StrCat(name, "/scale"));
    for (Node* node : m->nodes) {
      removed.insert(node);
      graph.RemoveNode(node);
    }
    Node* rms = graph.AddNode("RMSNormalization", {m->x, w}, {y}, name);
    rms->SetAttr("axis", int64_t{-1});
    rms->SetAttr("epsilon", m->epsilon);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
