// 1-D Conv -> Reshape, 2-D Conv over a height-1 map, Reshape.
#include "graph/conv1d_to_conv2d.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

bool Qualifies(const Node& node) {
  if (node.op_type() != "Conv" || !node.domain().empty() || node.num_outputs() != 1 || node.num_inputs() < 2) {
    return false;
  }
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  const Value* y = node.output(0);
  if (x == nullptr || w == nullptr || !x->has_type() || !w->has_type() || !y->has_type()) return false;
  if (x->rank() != 3 || w->rank() != 3 || y->rank() != 3 || !w->is_constant() || !IsFloating(x->dtype())) {
    return false;
  }
  for (const char* name : {"kernel_shape", "strides", "dilations"}) {
    absl::StatusOr<std::vector<int64_t>> v = node.GetInts(name, {1});
    if (!v.ok() || v->size() != 1) return false;
  }
  absl::StatusOr<std::vector<int64_t>> pads = node.GetInts("pads", {0, 0});
  return pads.ok() && pads->size() == 2;
}

// The 2-D form of a 1-D Conv attribute: `lead` (the new axis) before each value.
std::vector<int64_t> With2dAxis(const std::vector<int64_t>& v, int64_t lead) {
  if (v.size() == 1) return {lead, v[0]};
  return {lead, v[0], lead, v[1]};  // pads: [begin, end] -> [0, begin, 0, end]
}

void Rewrite(Graph& graph, Node* conv) {
  const std::string name = conv->name();
  Value* x = conv->input(0);
  const Value* w = conv->input(1);
  Value* b = conv->has_input(2) ? conv->input(2) : nullptr;
  Value* y = conv->output(0);
  const Shape& xs = x->shape();
  const Shape& ws = w->shape();
  const Shape ys = y->shape();
  std::map<std::string, Attribute> attributes = conv->attributes();
  for (auto& [attr, value] : attributes) {
    if (attr == "kernel_shape" || attr == "strides" || attr == "dilations") value = With2dAxis(value.ints(), 1);
    if (attr == "pads") value = With2dAxis(value.ints(), 0);
  }
  graph.RemoveNode(conv);

  Value* x2 = graph.AddValue(absl::StrCat(x->name(), "/as_2d"), x->dtype(), {xs[0], xs[1], 1, xs[2]});
  graph.AddNode("Reshape", {x, IntsConstant(graph, absl::StrCat(name, "/as_2d_shape"), x2->shape())}, {x2},
                absl::StrCat(name, "/as_2d"));
  Value* w2 = graph.AddConstant(absl::StrCat(w->name(), "/as_2d"), w->constant().Reshaped({ws[0], ws[1], 1, ws[2]}));
  Value* y2 = graph.AddValue(absl::StrCat(y->name(), "/as_2d"), y->dtype(), {ys[0], ys[1], 1, ys[2]});
  std::vector<Value*> inputs = {x2, w2};
  if (b != nullptr) inputs.push_back(b);
  Node* conv2d = graph.AddNode("Conv", inputs, {y2}, name);
  for (auto& [attr, value] : attributes) conv2d->SetAttr(attr, std::move(value));
  graph.AddNode("Reshape", {y2, IntsConstant(graph, absl::StrCat(name, "/as_1d_shape"), ys)}, {y},
                absl::StrCat(name, "/as_1d"));
}

}  // namespace

absl::StatusOr<bool> Conv1dToConv2d::Run(Graph& graph) { return RewriteEachMatch(graph, Qualifies, Rewrite); }

}  // namespace kiln
