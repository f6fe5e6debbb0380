// PadConvChannels: see pad_conv_channels.h.
#include "graph/pad_conv_channels.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/dtype.h"
#include "graph/op_registry.h"

namespace kiln {

absl::StatusOr<bool> PadConvChannels::Run(Graph& graph) {
  std::vector<Node*> convs;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Conv" && n->domain().empty() && n->GetInt("channels_last", 0).value_or(0) == 1 &&
        n->GetInt("group", 1).value_or(1) == 1 && n->num_inputs() >= 2) {
      convs.push_back(n);
    }
  }
  bool changed = false;
  for (Node* conv : convs) {
    Value* x = conv->input(0);
    Value* w = conv->input(1);
    if (x == nullptr || w == nullptr || !x->has_type() || x->rank() != 4 || !w->is_constant() || w->rank() != 4 ||
        w->uses().size() != 1 || !IsFloating(w->dtype())) {
      continue;
    }
    const int64_t c = x->shape()[3];
    if (c % 8 == 0 || w->shape()[3] != c) continue;
    const int64_t c8 = (c + 7) / 8 * 8;
    const std::string base = absl::StrCat(conv->name(), "/pad_channels");
    Value* pads = graph.AddConstant(absl::StrCat(base, "_pads"),
                                    Tensor::FromInt64(DType::kInt64, {8}, std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, c8 - c}));
    Value* x8 = graph.AddValue(base);
    Node* pad = graph.AddNode("Pad", {x, pads}, {x8}, base);
    KILN_RETURN_IF_ERROR(InferNode(*pad));
    Value* w8 = graph.AddConstant(absl::StrCat(w->name(), "/padded"), w->constant().PaddedInnermost(c8));
    conv->SetInput(0, x8);
    conv->SetInput(1, w8);
    KILN_RETURN_IF_ERROR(InferNode(*conv));
    changed = true;
  }
  if (changed) {
    graph.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  }
  return changed;
}

}  // namespace kiln
