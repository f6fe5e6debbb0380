#include "graph/row_moves.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// The distinct nodes reading `v`.
std::vector<Node*> Readers(const Value* v) {
  std::vector<Node*> nodes;
  for (const Use& u : v->uses()) {
    if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end()) nodes.push_back(u.node);
  }
  return nodes;
}

bool Typed(const Value* v) { return v != nullptr && v->has_type() && !v->is_dynamic() && v->rank() >= 1; }

Shape Rows(const Value* v) { return Shape(v->shape().begin(), v->shape().end() - 1); }

// The Slice's plan when it takes the whole last axis of its (typed) input.
std::optional<std::vector<ops::AxisSlice>> RowSlicePlan(const Node& n) {
  if (n.op_type() != "Slice" || n.num_outputs() != 1 || !Typed(n.input(0)) || !Typed(n.output(0))) {
    return std::nullopt;
  }
  absl::StatusOr<std::vector<ops::AxisSlice>> plan = ops::ConstantSlicePlan(n);
  if (!plan.ok() || plan->size() != n.input(0)->shape().size()) return std::nullopt;
  const ops::AxisSlice& last = plan->back();
  if (last.start != 0 || last.step != 1 || last.count != n.input(0)->shape().back()) return std::nullopt;
  return *plan;
}

// A one-node step: Reshape keeping the last dim, Transpose keeping the last axis, a
// row Slice.
bool IsRowNode(const Node& n) {
  if (IsFusedGroup(n) || n.num_outputs() != 1 || !Typed(n.input(0)) || !Typed(n.output(0))) return false;
  const Value* in = n.input(0);
  const Value* out = n.output(0);
  if (in->dtype() != out->dtype()) return false;
  if (n.op_type() == "Reshape") return in->shape().back() == out->shape().back();
  if (n.op_type() == "Transpose") {
    const std::vector<int64_t> perm = PermOf(n);
    return static_cast<int64_t>(perm.size()) == in->rank() && perm.back() == in->rank() - 1;
  }
  return RowSlicePlan(n).has_value();
}

// The Concat's axis when it joins along a dim other than the last.
std::optional<int64_t> RowConcatAxis(const Node& c) {
  if (c.op_type() != "Concat" || IsFusedGroup(c) || c.num_outputs() != 1 || !Typed(c.output(0))) return std::nullopt;
  absl::StatusOr<int64_t> axis = c.GetInt("axis");
  if (!axis.ok()) return std::nullopt;
  const int64_t rank = c.output(0)->rank();
  const int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank - 1) return std::nullopt;
  return a;
}

// Concat `c` as a step: every input a row Slice of one value, each Slice read by `c`
// alone and no graph output. The Slices (in input order, each once) then `c`.
std::optional<RowMoveStep> ConcatStep(const Graph& graph, Node* c) {
  if (!RowConcatAxis(*c).has_value()) return std::nullopt;
  RowMoveStep step;
  for (int i = 0; i < c->num_inputs(); ++i) {
    Value* piece = c->input(i);
    Node* s = piece == nullptr ? nullptr : piece->producer();
    if (s == nullptr || !RowSlicePlan(*s).has_value() || graph.IsGraphOutput(piece)) return std::nullopt;
    for (const Use& u : piece->uses()) {
      if (u.node != c) return std::nullopt;
    }
    if (step.in == nullptr) step.in = s->input(0);
    if (s->input(0) != step.in) return std::nullopt;
    if (std::find(step.nodes.begin(), step.nodes.end(), s) == step.nodes.end()) step.nodes.push_back(s);
  }
  if (step.in == nullptr || step.in->dtype() != c->output(0)->dtype()) return std::nullopt;
  step.nodes.push_back(c);
  step.out = c->output(0);
  return step;
}

// Whether `v` is read by the nodes of `step` alone (and is no graph output).
bool ReadOnlyBy(const Graph& graph, const Value* v, const std::vector<Node*>& nodes) {
  if (graph.IsGraphOutput(v)) return false;
  for (const Use& u : v->uses()) {
    if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end()) return false;
  }
  return true;
}

std::vector<int64_t> Decompose(int64_t row, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    c[d] = row % shape[d];
    row /= shape[d];
  }
  return c;
}

int64_t Linearize(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t row = 0;
  for (size_t d = 0; d < shape.size(); ++d) row = row * shape[d] + c[d];
  return row;
}

}  // namespace

std::vector<RowMoveStep> RowMovesFrom(const Graph& graph, Value* v) {
  std::vector<RowMoveStep> steps;
  while (v != nullptr && !graph.IsGraphOutput(v)) {
    const std::vector<Node*> readers = Readers(v);
    if (readers.empty()) break;
    if (readers.size() == 1 && readers[0]->input(0) == v && IsRowNode(*readers[0])) {
      steps.push_back({{readers[0]}, v, readers[0]->output(0)});
      v = readers[0]->output(0);
      continue;
    }
    // Slices of v that all feed one Concat (torch.roll).
    const Value* piece = readers[0]->num_outputs() == 1 ? readers[0]->output(0) : nullptr;
    const std::vector<Node*> next = piece == nullptr ? std::vector<Node*>() : Readers(piece);
    if (next.size() != 1) break;
    std::optional<RowMoveStep> step = ConcatStep(graph, next[0]);
    if (!step.has_value() || step->in != v) break;
    // Every reader of v is one of the step's Slices.
    if (!ReadOnlyBy(graph, v, step->nodes)) break;
    v = step->out;
    steps.push_back(std::move(*step));
  }
  return steps;
}

std::vector<RowMoveStep> RowMovesInto(const Graph& graph, Value* v) {
  std::vector<RowMoveStep> steps;
  Value* cur = v;
  while (cur != nullptr && cur->producer() != nullptr) {
    if (cur != v && !ReadOnlyBy(graph, cur, steps.back().nodes)) break;
    Node* p = cur->producer();
    std::optional<RowMoveStep> step;
    if (IsRowNode(*p)) {
      step = RowMoveStep{{p}, p->input(0), cur};
    } else {
      step = ConcatStep(graph, p);
    }
    if (!step.has_value()) break;
    cur = step->in;
    steps.push_back(std::move(*step));
  }
  // `cur`, the first step's input, may be read elsewhere: it is the chain's source.
  std::reverse(steps.begin(), steps.end());
  return steps;
}

bool MovesRows(const std::vector<RowMoveStep>& steps) {
  for (const RowMoveStep& s : steps) {
    if (s.nodes.size() != 1 || s.nodes[0]->op_type() != "Reshape") return true;
  }
  return false;
}

bool IsLoneTranspose(const std::vector<RowMoveStep>& steps) {
  return steps.size() == 1 && steps[0].nodes[0]->op_type() == "Transpose";
}

std::vector<Node*> RowMoveNodes(const std::vector<RowMoveStep>& steps) {
  std::vector<Node*> nodes;
  for (const RowMoveStep& s : steps) nodes.insert(nodes.end(), s.nodes.begin(), s.nodes.end());
  return nodes;
}

absl::StatusOr<RowMap> RowMap::Of(const std::vector<RowMoveStep>& steps) {
  RowMap map;
  if (steps.empty()) return absl::InvalidArgumentError("no row moves");
  map.rows_in_ = NumElements(Rows(steps.front().in));
  map.rows_out_ = NumElements(Rows(steps.back().out));
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const Node& last = *it->nodes.back();
    Stage stage;
    stage.out_rows = Rows(it->out);
    stage.in_rows = Rows(it->in);
    if (last.op_type() == "Reshape" && IsRowNode(last)) {
      if (NumElements(stage.out_rows) != NumElements(stage.in_rows)) {
        return absl::InvalidArgumentError(absl::StrCat(last.Describe(), " changes the row count"));
      }
      continue;  // the row index is unchanged
    }
    if (last.op_type() == "Transpose" && IsRowNode(last)) {
      const std::vector<int64_t> perm = PermOf(last);
      stage.perm.assign(perm.begin(), perm.end() - 1);
    } else if (last.op_type() == "Slice") {
      std::optional<std::vector<ops::AxisSlice>> plan = RowSlicePlan(last);
      if (!plan.has_value()) return absl::InvalidArgumentError(absl::StrCat(last.Describe(), " is not a row Slice"));
      plan->pop_back();
      stage.pieces.push_back({0, stage.out_rows.empty() ? 1 : stage.out_rows[0], std::move(*plan)});
    } else if (std::optional<int64_t> axis = RowConcatAxis(last); axis.has_value()) {
      stage.axis = static_cast<int>(*axis);
      int64_t begin = 0;
      for (int i = 0; i < last.num_inputs(); ++i) {
        std::optional<std::vector<ops::AxisSlice>> plan = RowSlicePlan(*last.input(i)->producer());
        if (!plan.has_value()) return absl::InvalidArgumentError(absl::StrCat(last.Describe(), " joins no row Slice"));
        plan->pop_back();
        const int64_t n = last.input(i)->shape()[*axis];
        stage.pieces.push_back({begin, begin + n, std::move(*plan)});
        begin += n;
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(last.Describe(), " does not move rows"));
    }
    if (stage.out_rows.empty()) continue;  // one row
    map.stages_.push_back(std::move(stage));
  }
  return map;
}

int64_t RowMap::SourceRow(int64_t row) const {
  for (const Stage& s : stages_) {
    const std::vector<int64_t> o = Decompose(row, s.out_rows);
    std::vector<int64_t> in(s.in_rows.size(), 0);
    if (!s.perm.empty()) {
      for (size_t i = 0; i < s.perm.size(); ++i) in[s.perm[i]] = o[i];
    } else {
      const Piece* p = &s.pieces.front();
      for (const Piece& q : s.pieces) {
        if (o[s.axis] >= q.begin && o[s.axis] < q.end) p = &q;
      }
      for (size_t d = 0; d < in.size(); ++d) {
        const int64_t c = static_cast<int>(d) == s.axis ? o[d] - p->begin : o[d];
        in[d] = p->slice[d].start + p->slice[d].step * c;
      }
    }
    row = Linearize(in, s.in_rows);
  }
  return row;
}

}  // namespace kiln
