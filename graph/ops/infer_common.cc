// Input checks and common inference rules of op files.
#include "graph/ops/infer_common.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {

absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what) {
  if (!node.has_input(input)) return node.Error(absl::StrCat("missing input '", what, "'"));
  const Tensor* t = node.input(input)->constant_or_null();
  if (t == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(node.Describe(), ": input '", what, "' ('",
                                                      node.input(input)->name(),
                                                      "') must be a compile-time constant: kiln needs static shapes"));
  }
  if (IsFloating(t->dtype())) {
    return node.Error(absl::StrCat("input '", what, "' must be an integer tensor, got ", t->TypeString()));
  }
  return t->ToInt64();
}

absl::Status InferSameAsInput(Node& node) {
  node.output(0)->SetType(node.input(0)->dtype(), node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype) {
  Shape shape = node.input(0)->shape();
  const DType dtype = node.input(0)->dtype();
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) continue;
    if (node.input(i)->dtype() != dtype) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(dtype), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
    KILN_ASSIGN_OR_RETURN(shape, BroadcastShapes(node, shape, node.input(i)->shape()));
  }
  node.output(0)->SetType(out_dtype.value_or(dtype), shape);
  return absl::OkStatus();
}

absl::Status RequireFloat(const Node& node, int i) {
  if (!IsFloating(node.input(i)->dtype())) {
    return node.Error(absl::StrCat("input ", i, " must be f32, f16 or bf16, got ",
                                   DTypeName(node.input(i)->dtype())));
  }
  return absl::OkStatus();
}

absl::Status RequireNumeric(const Node& node, int i) {
  if (node.input(i)->dtype() == DType::kBool) {
    return node.Error(absl::StrCat("input ", i, " must be numeric, got bool"));
  }
  return absl::OkStatus();
}

absl::Status RequireBool(const Node& node, int i) {
  if (node.input(i)->dtype() != DType::kBool) {
    return node.Error(absl::StrCat("input ", i, " must be bool, got ", DTypeName(node.input(i)->dtype())));
  }
  return absl::OkStatus();
}

absl::Status InferFloatUnary(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  return InferSameAsInput(node);
}

}  // namespace kiln::ops
