// FusedGroup (domain kiln): a fused group of original nodes (graph/fused_group.h).
// Inference checks the body against the node's inputs and types the outputs from the
// body; the reference evaluation runs the body on the CPU reference.
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(node));
  if (body->inputs().size() != static_cast<size_t>(node.num_inputs()) ||
      body->outputs().size() != static_cast<size_t>(node.num_outputs())) {
    return node.Error(absl::StrCat("its body has ", body->inputs().size(), " inputs and ", body->outputs().size(),
                                   " outputs; the node has ", node.num_inputs(), " and ", node.num_outputs()));
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* outer = node.input(i);
    const Value* inner = body->inputs()[i];
    if (outer == nullptr || outer->dtype() != inner->dtype() || outer->shape() != inner->shape()) {
      return node.Error(absl::StrCat("input ", i, " is ", outer ? outer->TypeString() : "absent", " but its body expects ",
                                     inner->TypeString()));
    }
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Value* inner = body->outputs()[i];
    node.output(i)->SetType(inner->dtype(), inner->shape());
  }
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(node));
  TensorMap feeds;
  for (size_t i = 0; i < in.size(); ++i) feeds[body->inputs()[i]->name()] = *in[i];
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> results, EvaluateGraph(*body, feeds));
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(fused_group) {
  registry.Register({.name = "FusedGroup",
                     .min_inputs = 0,
                     .max_inputs = OpDef::kVariadic,
                     .min_outputs = 1,
                     .max_outputs = OpDef::kVariadic,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
