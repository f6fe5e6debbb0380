// Recognition of RoPE's rotate_half (Slice, Neg, Concat) as a strided view.
#include "graph/recognize_rope.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/slice.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// Whether `slice` takes x[..., start : start + h] of its input x (all other dims whole).
bool TakesHalf(const Node* slice, int64_t start, int64_t h) {
  if (!IsOp(slice, "Slice", slice == nullptr ? 0 : slice->num_inputs())) return false;
  const absl::StatusOr<std::vector<ops::AxisSlice>> plan = ops::ConstantSlicePlan(*slice);
  const Shape& xs = slice->input(0)->shape();
  if (!plan.ok() || plan->size() != xs.size()) return false;
  for (size_t d = 0; d + 1 < xs.size(); ++d) {
    if ((*plan)[d].start != 0 || (*plan)[d].step != 1 || (*plan)[d].count != xs[d]) return false;
  }
  const ops::AxisSlice& last = plan->back();
  return last.start == start && last.step == 1 && last.count == h;
}

struct Match {
  Value* x = nullptr;
  Value* cos = nullptr;
  Value* sin = nullptr;
  Node* add = nullptr;
  std::vector<Node*> nodes;
};

// A cos / sin table for x: x's dtype, last dim D, broadcasting into x.
bool IsTable(const Value* t, const Value* x) {
  if (t == nullptr || !t->has_type() || t->dtype() != x->dtype() || t->rank() < 1 || t->rank() > x->rank()) {
    return false;
  }
  const Shape& ts = t->shape();
  const Shape& xs = x->shape();
  if (ts.back() != xs.back()) return false;
  for (size_t i = 0; i < ts.size(); ++i) {
    const int64_t target = xs[xs.size() - ts.size() + i];
    if (ts[i] != 1 && ts[i] != target) return false;
  }
  return true;
}

std::optional<Match> MatchAt(const Graph& graph, Node* concat) {
  if (!IsOp(concat, "Concat", 2)) return std::nullopt;
  Node* neg = concat->input(0)->producer();
  Node* s1 = concat->input(1)->producer();
  if (!IsOp(neg, "Neg", 1) || s1 == nullptr) return std::nullopt;
  Node* s2 = neg->input(0)->producer();
  if (s2 == nullptr || s2->input(0) != s1->input(0)) return std::nullopt;
  Value* x = s1->input(0);
  if (!x->has_type() || !IsFloating(x->dtype()) || x->rank() < 1) return std::nullopt;
  const int64_t r = x->rank(), d = x->shape().back(), h = d / 2;
  const absl::StatusOr<int64_t> axis = concat->GetInt("axis");
  if (d % 2 != 0 || h == 0 || !axis.ok() || (*axis != -1 && *axis != r - 1)) return std::nullopt;
  if (!TakesHalf(s1, 0, h) || !TakesHalf(s2, h, h)) return std::nullopt;
  if (OnlyReader(graph, s1->output(0)) != concat || OnlyReader(graph, s2->output(0)) != neg ||
      OnlyReader(graph, neg->output(0)) != concat) {
    return std::nullopt;
  }
  Value* rot = concat->output(0);
  Node* m2 = OnlyReader(graph, rot);
  if (!IsOp(m2, "Mul", 2) || m2->input(0) == m2->input(1)) return std::nullopt;
  Node* add = OnlyReader(graph, m2->output(0));
  if (!IsOp(add, "Add", 2)) return std::nullopt;
  Value* p1 = OtherOperand(add, m2->output(0));
  Node* m1 = p1 == nullptr ? nullptr : p1->producer();
  if (!IsOp(m1, "Mul", 2) || OnlyReader(graph, p1) != add) return std::nullopt;
  Match m{x, OtherOperand(m1, x), OtherOperand(m2, rot), add, {s1, s2, neg, concat, m1, m2, add}};
  if (!IsTable(m.cos, x) || !IsTable(m.sin, x) || add->output(0)->shape() != x->shape()) return std::nullopt;
  return m;
}

// [..., D] as [..., 2, D/2].
Shape Halved(const Shape& s) {
  Shape out(s.begin(), s.end() - 1);
  out.push_back(2);
  out.push_back(s.back() / 2);
  return out;
}

void Rewrite(Graph& graph, const Match& m) {
  const std::string name = m.add->name();
  const DType dt = m.x->dtype();
  const Shape xs5 = Halved(m.x->shape());
  Value* y = m.add->output(0);
  for (Node* n : m.nodes) graph.RemoveNode(n);
  auto value = [&](const std::string& suffix, const Shape& shape) {
    return graph.AddValue(absl::StrCat(name, "/", suffix), dt, shape);
  };
  auto reshape = [&](Value* v, const std::string& suffix) {
    const Shape s = Halved(v->shape());
    Value* out = value(suffix, s);
    graph.AddNode("Reshape", {v, IntsConstant(graph, absl::StrCat(name, "/", suffix, "_shape"), s)}, {out},
                  absl::StrCat(name, "/", suffix));
    return out;
  };
  Value* x5 = nullptr;
  // x the head split of [B, S, H, D] (a Transpose keeping the last axis last) that only
  // the rotation reads: split D before the Transpose instead, which fuse-pointwise then
  // reads through strides, so the Transpose kernel goes too.
  Node* t = m.x->producer();
  const std::vector<int64_t> perm = t != nullptr && IsOp(t, "Transpose", 1) ? PermOf(*t) : std::vector<int64_t>{};
  const int64_t r = m.x->rank();
  if (!perm.empty() && perm.back() == r - 1 && m.x->uses().empty() && !graph.IsGraphOutput(m.x)) {
    Value* x0 = reshape(t->input(0), "x");
    std::vector<int64_t> perm5(perm.begin(), perm.end() - 1);
    perm5.push_back(r - 1);
    perm5.push_back(r);
    x5 = value("x_heads", xs5);
    graph.AddNode("Transpose", {x0}, {x5}, t->name())->SetAttr("perm", perm5);
    graph.RemoveNode(t);
  } else {
    x5 = reshape(m.x, "x");
  }
  Value* c5 = reshape(m.cos, "cos");
  Value* s5 = reshape(m.sin, "sin");
  const int64_t half_axis = static_cast<int64_t>(xs5.size()) - 2;
  Value* swapped = value("swapped", xs5);
  graph.AddNode("Slice",
                {x5, IntsConstant(graph, absl::StrCat(name, "/swap_starts"), {1}),
                 IntsConstant(graph, absl::StrCat(name, "/swap_ends"), {std::numeric_limits<int64_t>::min()}),
                 IntsConstant(graph, absl::StrCat(name, "/swap_axes"), {half_axis}),
                 IntsConstant(graph, absl::StrCat(name, "/swap_steps"), {-1})},
                {swapped}, absl::StrCat(name, "/swap"));
  Value* sign = graph.AddConstant(absl::StrCat(name, "/sign"), Tensor::FromFloat(dt, {2, 1}, {-1.f, 1.f}));
  Value* rot = value("rotated", xs5);
  graph.AddNode("Mul", {swapped, sign}, {rot}, absl::StrCat(name, "/rotate_half"));
  Value* p1 = value("x_cos", xs5);
  graph.AddNode("Mul", {x5, c5}, {p1}, absl::StrCat(name, "/x_cos"));
  Value* p2 = value("rot_sin", xs5);
  graph.AddNode("Mul", {rot, s5}, {p2}, absl::StrCat(name, "/rot_sin"));
  Value* y5 = value("sum", xs5);
  graph.AddNode("Add", {p1, p2}, {y5}, name);
  graph.AddNode("Reshape", {y5, IntsConstant(graph, absl::StrCat(name, "/out_shape"), m.x->shape())}, {y},
                absl::StrCat(name, "/merge"));
}

}  // namespace

absl::StatusOr<bool> RecognizeRope::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_set<Node*> removed;
  for (Node* concat : graph.nodes()) {
    if (removed.contains(concat)) continue;
    const std::optional<Match> m = MatchAt(graph, concat);
    if (!m) continue;
    removed.insert(m->nodes.begin(), m->nodes.end());
    Rewrite(graph, *m);
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
