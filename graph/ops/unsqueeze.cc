// Unsqueeze: inserts size-1 axes at the positions of the constant `axes` input
// (positions in the output).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstantInts(node, 1, "axes"));
  const Shape& in = node.input(0)->shape();
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    if (a < -out_rank || a >= out_rank) {
      return node.Error(absl::StrCat("axis ", a, " in axes [", absl::StrJoin(axes, ","),
                                     "] is out of range for output rank ", out_rank));
    }
    const int64_t d = a < 0 ? a + out_rank : a;
    if (inserted[d]) return node.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat axis ", d));
    inserted[d] = true;
  }
  Shape out(out_rank);
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) out[d] = inserted[d] ? 1 : in[next++];
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(unsqueeze) {
  registry.Register({.name = "Unsqueeze",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .infer = ops::Infer,
                     .eval = ops::EvalView,
                     .is_view = true});
}
