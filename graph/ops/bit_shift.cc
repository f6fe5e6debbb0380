// BitShift: x << y or x >> y (direction LEFT or RIGHT) on unsigned integers (kiln
// stores uint8), broadcasting; shifts of the type's width or more give 0.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<bool> Left(const Node& node) {
  KILN_ASSIGN_OR_RETURN(std::string d, node.GetString("direction"));
  if (d != "LEFT" && d != "RIGHT") return node.Error(absl::StrCat("direction must be LEFT or RIGHT, got '", d, "'"));
  return d == "LEFT";
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(Left(node).status());
  if (node.input(0)->dtype() != DType::kUInt8) {
    return node.Error(absl::StrCat("inputs must be unsigned integers (kiln stores uint8), got ",
                                   DTypeName(node.input(0)->dtype())));
  }
  return InferBroadcast(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(bool left, Left(node));
  return EvalBinary(node, *in[0], *in[1], out[0], nullptr, [left](int64_t a, int64_t b) -> int64_t {
    if (b >= 8) return 0;
    return left ? (a << b) & 0xff : a >> b;
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(bit_shift) {
  registry.Register({.name = "BitShift", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval,
                     .is_elementwise = true});
}
