// ConstantOfShape: a tensor of the constant `shape` input filled with the
// one-element `value` attribute (default f32 0), in value's dtype.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<Tensor> FillValue(const Node& node) {
  if (!node.has_attr("value")) return Tensor(DType::kFloat32, {1});
  KILN_ASSIGN_OR_RETURN(Tensor value, node.GetTensor("value"));
  if (value.numel() != 1) {
    return node.Error(
        absl::StrCat("attribute 'value' must hold exactly one element, got ", value.TypeString()));
  }
  return value;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(Tensor value, FillValue(node));
  if (node.input(0)->rank() != 1) {
    return node.Error(absl::StrCat("input 'shape' must be 1-D, got ", node.input(0)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, 0, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return node.Error(absl::StrCat("shape ", ShapeToString(shape), " has a negative dim"));
  }
  node.output(0)->SetType(value.dtype(), shape);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const>, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(Tensor value, FillValue(node));
  FillElements(out[0].mutable_raw_data(), out[0].numel(), value.raw_data(), DTypeSize(value.dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(constant_of_shape) {
  registry.Register({.name = "ConstantOfShape", .infer = ops::Infer, .eval = ops::Eval});
}
