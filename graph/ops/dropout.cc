// Dropout (inference): the output is the input; the optional mask is all true.
// Training mode is not supported.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::Status RejectTraining(const Node& node, const Tensor* training_mode) {
  if (training_mode != nullptr && training_mode->numel() > 0 && training_mode->ScalarFloat() != 0.f) {
    return absl::UnimplementedError(absl::StrCat(
        node.Describe(),
        ": training_mode is true: kiln runs inference only (Dropout in training mode is random)"));
  }
  return absl::OkStatus();
}

absl::Status Infer(Node& node) {
  if (node.has_input(1) && !IsFloating(node.input(1)->dtype())) {
    return node.Error(
        absl::StrCat("ratio must be a floating-point scalar, got ", node.input(1)->TypeString()));
  }
  if (node.has_input(2)) {
    if (node.input(2)->dtype() != DType::kBool) {
      return node.Error(
          absl::StrCat("training_mode must be a bool scalar, got ", node.input(2)->TypeString()));
    }
    KILN_RETURN_IF_ERROR(RejectTraining(node, node.input(2)->constant_or_null()));
  }
  node.output(0)->SetType(node.input(0)->dtype(), node.input(0)->shape());
  if (node.num_outputs() > 1) node.output(1)->SetType(DType::kBool, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  if (in.size() > 2) KILN_RETURN_IF_ERROR(RejectTraining(node, in[2]));
  out[0] = *in[0];
  if (out.size() > 1) {
    const uint8_t one = 1;
    FillElements(out[1].mutable_raw_data(), out[1].numel(), &one, 1);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(dropout) {
  registry.Register({.name = "Dropout",
                     .min_inputs = 1,
                     .max_inputs = 3,
                     .max_outputs = 2,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
