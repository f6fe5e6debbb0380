// Conv1x1ToMatMul: see conv1x1_to_matmul.h.
#include "graph/conv1x1_to_matmul.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/window.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

bool AllAre(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
}

bool Qualifies(const Node& node) {
  if (node.op_type() != "Conv" || !node.domain().empty() || node.num_outputs() != 1 || node.num_inputs() < 2) {
    return false;
  }
  if (node.GetInt("channels_last", 0).value_or(0) != 1) return false;
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  const Value* y = node.output(0);
  if (x == nullptr || w == nullptr || !x->has_type() || !w->has_type() || !y->has_type()) return false;
  if (x->rank() != 4 || w->rank() != 4 || !w->is_constant() || !IsFloating(x->dtype())) return false;
  if (w->dtype() != x->dtype() || w->shape()[1] != 1 || w->shape()[2] != 1 || w->shape()[3] != x->shape()[3]) {
    return false;
  }
  if (node.has_input(2)) {
    const Value* b = node.input(2);
    if (b == nullptr || !b->has_type() || b->rank() != 1 || b->dtype() != x->dtype()) return false;
  }
  if (node.GetInt("group", 1).value_or(0) != 1) return false;
  // The window as the CPU reference and the conv kernels resolve it (auto_pad
  // included): stride 1, no dilation, no padding.
  absl::StatusOr<ops::WindowGeometry> win =
      ops::ComputeWindow(node, {x->shape()[1], x->shape()[2]}, {1, 1}, /*use_dilations=*/true, /*ceil_mode=*/false);
  return win.ok() && AllAre(win->strides, 1) && AllAre(win->dilations, 1) && AllAre(win->pads_begin, 0) &&
         AllAre(win->pads_end, 0);
}

void Rewrite(Graph& graph, Node* conv) {
  const std::string name = conv->name();
  Value* x = conv->input(0);
  const Value* w = conv->input(1);
  Value* b = conv->has_input(2) ? conv->input(2) : nullptr;
  Value* y = conv->output(0);
  const int64_t oc = w->shape()[0], c = w->shape()[3];
  // Wm[ci][o] = Wt[o][0][0][ci].
  const std::vector<float> wv = w->constant().ToFloat();
  std::vector<float> wm(wv.size());
  for (int64_t o = 0; o < oc; ++o) {
    for (int64_t ci = 0; ci < c; ++ci) wm[ci * oc + o] = wv[o * c + ci];
  }
  Value* weight = graph.AddConstant(absl::StrCat(w->name(), "/matmul"), Tensor::FromFloat(w->dtype(), {c, oc}, wm));
  const Shape shape = y->shape();
  graph.RemoveNode(conv);
  if (b == nullptr) {
    graph.AddNode("MatMul", {x, weight}, {y}, absl::StrCat(name, "/matmul"));
    return;
  }
  Value* m = graph.AddValue(absl::StrCat(y->name(), "/matmul"), x->dtype(), shape);
  graph.AddNode("MatMul", {x, weight}, {m}, absl::StrCat(name, "/matmul"));
  graph.AddNode("Add", {m, b}, {y}, absl::StrCat(name, "/bias"));
}

}  // namespace

absl::StatusOr<bool> Conv1x1ToMatMul::Run(Graph& graph) { return RewriteEachMatch(graph, Qualifies, Rewrite); }

}  // namespace kiln
