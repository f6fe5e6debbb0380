// Recognition of the erf and tanh GELU decompositions.
#include "graph/recognize_gelu.h"

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr float kTolerance = 1e-4f;
constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph) {}

  // Matches the pattern ending at `root` (a Mul); on success `nodes()` lists every
  // node of the pattern, x() is the GELU input and tanh() says which form.
  bool Match(Node* root) {
    if (!IsOp(root, "Mul")) return false;
    for (int i = 0; i < 2; ++i) {
      Node* inner = InternalProducer(root->input(i), "Mul");
      if (inner == nullptr) continue;
      const std::array<Value*, 3> leaves = {root->input(1 - i), inner->input(0), inner->input(1)};
      // Try each leaf as the 0.5 and each other as the (1 + f(u)) factor.
      for (int h = 0; h < 3; ++h) {
        if (!ScalarNear(leaves[h], 0.5)) continue;
        for (int p = 0; p < 3; ++p) {
          if (p == h) continue;
          Value* x = leaves[3 - h - p];
          nodes_ = {root, inner};
          if (MatchOnePlus(leaves[p], x)) {
            x_ = x;
            const Value* y = root->output(0);
            return x->has_type() && y->has_type() && IsFloating(x->dtype()) && x->shape() == y->shape() &&
                   !x->is_constant();
          }
        }
      }
    }
    return false;
  }

  const std::vector<Node*>& nodes() const { return nodes_; }
  Value* x() const { return x_; }
  bool tanh() const { return tanh_; }

 private:
  static bool IsOp(const Node* node, absl::string_view op) {
    return node != nullptr && node->domain().empty() && node->op_type() == op && node->num_outputs() == 1 &&
           node->num_inputs() >= 1;
  }

  // The producer of `v` when it is `op` and `v` is used once and is no graph output.
  Node* InternalProducer(const Value* v, absl::string_view op) const {
    if (v == nullptr || v->uses().size() != 1 || graph_.IsGraphOutput(v)) return nullptr;
    Node* node = v->producer();
    return IsOp(node, op) ? node : nullptr;
  }

  static bool ScalarNear(const Value* v, double target) {
    if (v == nullptr || !v->is_constant() || v->numel() != 1 || !IsFloating(v->dtype())) return false;
    return std::abs(v->constant().ScalarFloat() - target) <= kTolerance;
  }

  // Binary `node` has operands {a, b} with a == `operand` and b a scalar near
  // `target`, in either order.
  static bool OperandAndScalar(const Node* node, const Value* operand, double target) {
    if (node->num_inputs() != 2) return false;
    return (node->input(0) == operand && ScalarNear(node->input(1), target)) ||
           (node->input(1) == operand && ScalarNear(node->input(0), target));
  }

  // The other operand of binary `node` when one operand is a scalar near `target`.
  Value* OtherThanScalar(const Node* node, double target) const {
    if (node->num_inputs() != 2) return nullptr;
    if (ScalarNear(node->input(1), target)) return node->input(0);
    if (ScalarNear(node->input(0), target)) return node->input(1);
    return nullptr;
  }

  // v = Add(Erf(x / sqrt2), 1) or Add(Tanh(...), 1).
  bool MatchOnePlus(Value* v, Value* x) {
    Node* add = InternalProducer(v, "Add");
    if (add == nullptr) return false;
    Value* f = OtherThanScalar(add, 1.0);
    if (f == nullptr) return false;
    nodes_.push_back(add);
    if (Node* erf = InternalProducer(f, "Erf")) {
      nodes_.push_back(erf);
      tanh_ = false;
      return MatchErfArgument(erf->input(0), x);
    }
    if (Node* t = InternalProducer(f, "Tanh")) {
      nodes_.push_back(t);
      tanh_ = true;
      return MatchTanhArgument(t->input(0), x);
    }
    return false;
  }

  bool MatchErfArgument(Value* u, Value* x) {
    if (Node* div = InternalProducer(u, "Div")) {
      nodes_.push_back(div);
      return div->num_inputs() == 2 && div->input(0) == x && ScalarNear(div->input(1), kSqrt2);
    }
    if (Node* mul = InternalProducer(u, "Mul")) {
      nodes_.push_back(mul);
      return OperandAndScalar(mul, x, 1.0 / kSqrt2);
    }
    return false;
  }

  // u = sqrt(2/pi) * (x + 0.044715 * x^3).
  bool MatchTanhArgument(Value* u, Value* x) {
    Node* scale = InternalProducer(u, "Mul");
    if (scale == nullptr) return false;
    nodes_.push_back(scale);
    Value* v = OtherThanScalar(scale, kSqrt2OverPi);
    Node* sum = InternalProducer(v, "Add");
    if (sum == nullptr || sum->num_inputs() != 2) return false;
    nodes_.push_back(sum);
    Value* term = sum->input(0) == x ? sum->input(1) : sum->input(1) == x ? sum->input(0) : nullptr;
    Node* coeff = InternalProducer(term, "Mul");
    if (coeff == nullptr) return false;
    nodes_.push_back(coeff);
    return MatchCube(OtherThanScalar(coeff, 0.044715), x);
  }

  // c = Pow(x, 3) or x * x * x in either grouping.
  bool MatchCube(Value* c, Value* x) {
    if (Node* pow = InternalProducer(c, "Pow")) {
      nodes_.push_back(pow);
      return pow->num_inputs() == 2 && pow->input(0) == x && ScalarNear(pow->input(1), 3.0);
    }
    Node* outer = InternalProducer(c, "Mul");
    if (outer == nullptr || outer->num_inputs() != 2) return false;
    nodes_.push_back(outer);
    for (int i = 0; i < 2; ++i) {
      if (outer->input(1 - i) != x) continue;
      Node* square = InternalProducer(outer->input(i), "Mul");
      if (square != nullptr && square->num_inputs() == 2 && square->input(0) == x && square->input(1) == x) {
        nodes_.push_back(square);
        return true;
      }
    }
    return false;
  }

  const Graph& graph_;
  std::vector<Node*> nodes_;
  Value* x_ = nullptr;
  bool tanh_ = false;
};

}  // namespace

absl::StatusOr<bool> RecognizeGelu::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_set<Node*> removed;
  for (Node* root : graph.nodes()) {
    if (removed.contains(root)) continue;
    Matcher m(graph);
    if (!m.Match(root)) continue;
    const std::string name = root->name();
    Value* y = root->output(0);
    Value* x = m.x();
    for (Node* node : m.nodes()) {
      removed.insert(node);
      graph.RemoveNode(node);
    }
    Node* gelu = graph.AddNode("Gelu", {x}, {y}, name);
    gelu->SetAttr("approximate", m.tanh() ? "tanh" : "none");
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
