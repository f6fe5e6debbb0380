// Flatten: views the input as a matrix [prod(dims before axis), prod(dims from axis)].
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 1));
  const Shape& in = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axis < -rank || axis > rank) {
    return node.Error(
        absl::StrCat("axis ", axis, " is out of range [", -rank, ", ", rank, "] for input of rank ", rank));
  }
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= in[d];
  node.output(0)->SetType(node.input(0)->dtype(), {outer, inner});
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(flatten) {
  registry.Register({.name = "Flatten", .infer = ops::Infer, .eval = ops::EvalView, .is_view = true});
}
