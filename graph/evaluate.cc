// CPU reference evaluation of nodes and graphs.
#include "graph/evaluate.h"

#include <new>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln {

absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node,
                                                 absl::Span<const Tensor* const> inputs) {
  const OpDef* def = OpRegistry::Global().Find(node.op_type());
  if (def == nullptr || def->eval == nullptr) return node.Error("no CPU reference evaluator for this op");
  std::vector<Tensor> outputs;
  outputs.reserve(node.num_outputs());
  try {
    for (const Value* out : node.outputs()) {
      if (!out->has_type()) return node.Error(absl::StrCat("output '", out->name(), "' has no inferred type"));
      outputs.emplace_back(out->dtype(), out->shape());
    }
    KILN_RETURN_IF_ERROR(def->eval(node, inputs, absl::MakeSpan(outputs)));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(node.Describe(), ": out of host memory evaluating it"));
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Value* v = node.output(i);
    if (outputs[i].dtype() != v->dtype() || outputs[i].shape() != v->shape()) {
      return absl::InternalError(absl::StrCat(node.Describe(), ": evaluator produced ",
                                              outputs[i].TypeString(), " for output '", v->name(),
                                              "' of inferred type ", v->TypeString()));
    }
  }
  return outputs;
}

absl::StatusOr<std::vector<Tensor>> EvaluateGraph(const Graph& graph, const TensorMap& feeds,
                                                  const NodeObserver& observe) {
  absl::flat_hash_map<const Value*, Tensor> live;
  absl::flat_hash_map<const Value*, int> remaining_uses;
  for (const Value* in : graph.inputs()) {
    auto it = feeds.find(in->name());
    if (it == feeds.end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", in->name(), "' (expected ",
                                                     in->TypeString(), ")"));
    }
    if (it->second.dtype() != in->dtype() || it->second.shape() != in->shape()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in->name(), "' is ", it->second.TypeString(),
                                                     ", expected ", in->TypeString()));
    }
    live[in] = it->second;
  }
  for (const auto& [name, tensor] : feeds) {
    const Value* v = graph.FindValue(name);
    if (v == nullptr || !graph.IsGraphInput(v)) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not an input of the graph"));
    }
  }
  for (const Node* node : graph.nodes()) {
    for (const Value* in : node->inputs()) {
      if (in) ++remaining_uses[in];
    }
  }
  for (const Value* out : graph.outputs()) ++remaining_uses[out];  // keep outputs alive

  auto fetch = [&](const Value* v) -> const Tensor* {
    if (v->is_constant()) return &v->constant();
    auto it = live.find(v);
    return it == live.end() ? nullptr : &it->second;
  };

  for (const Node* node : graph.nodes()) {
    std::vector<const Tensor*> inputs;
    for (const Value* in : node->inputs()) {
      if (in == nullptr) {
        inputs.push_back(nullptr);
        continue;
      }
      const Tensor* t = fetch(in);
      if (t == nullptr) {
        return absl::InternalError(absl::StrCat(node->Describe(), ": input '", in->name(),
                                                "' has no value (graph not in topological order?)"));
      }
      inputs.push_back(t);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, EvaluateNode(*node, inputs));
    if (observe) observe(*node, outputs);
    for (const Value* in : node->inputs()) {
      if (in && !in->is_constant() && --remaining_uses[in] == 0) live.erase(in);
    }
    for (int i = 0; i < node->num_outputs(); ++i) live[node->output(i)] = std::move(outputs[i]);
  }
  std::vector<Tensor> results;
  for (const Value* out : graph.outputs()) {
    const Tensor* t = fetch(out);
    if (t == nullptr) {
      return absl::InternalError(absl::StrCat("graph output '", out->name(), "' was not computed"));
    }
    results.push_back(*t);
  }
  return results;
}

}  // namespace kiln
