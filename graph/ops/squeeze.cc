// Squeeze: removes the size-1 axes listed in the optional constant `axes` input
// (all size-1 axes when absent or empty).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const Shape& in = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(rank, false);
  std::vector<int64_t> axes;
  if (node.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(node, 1, "axes"));
  }
  if (!axes.empty()) {
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) {
        return node.Error(absl::StrCat("axis ", a, " in axes [", absl::StrJoin(axes, ","),
                                       "] is out of range for input of rank ", rank));
      }
      const int64_t d = a < 0 ? a + rank : a;
      if (drop[d]) return node.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat axis ", d));
      if (in[d] != 1) {
        return node.Error(absl::StrCat("cannot squeeze axis ", a, " of shape ", ShapeToString(in),
                                       ": its size is ", in[d], ", not 1"));
      }
      drop[d] = true;
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) drop[d] = in[d] == 1;
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!drop[d]) out.push_back(in[d]);
  }
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(squeeze) {
  registry.Register({.name = "Squeeze",
                     .min_inputs = 1,
                     .max_inputs = 2,
                     .infer = ops::Infer,
                     .eval = ops::EvalView,
                     .is_view = true});
}
