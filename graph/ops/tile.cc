// Tile: repeats the input `repeats[d]` times along each axis d (constant input).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ConstantInts(node, 1, "repeats"));
  const Shape& in = node.input(0)->shape();
  if (repeats.size() != in.size()) {
    return node.Error(absl::StrCat("repeats [", absl::StrJoin(repeats, ","), "] has ", repeats.size(),
                                   " entries for an input of rank ", in.size()));
  }
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) {
      return node.Error(absl::StrCat("repeats [", absl::StrJoin(repeats, ","), "] has a negative entry"));
    }
    if (!CheckedMul(in[d], repeats[d], &out[d])) {
      return node.Error(absl::StrCat("repeats [", absl::StrJoin(repeats, ","), "] of ", ShapeToString(in),
                                     " overflow a 64-bit dim"));
    }
  }
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  // The output seen as [r0, d0, r1, d1, ...] reads input element (j0, j1, ...)
  // whatever the repeat indices: stride 0 on the repeat axes.
  const Shape& in_shape = in[0]->shape();
  const Shape& out_shape = out[0].shape();
  const std::vector<int64_t> s = Strides(in_shape);
  Shape space;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    space.push_back(in_shape[d] == 0 ? 0 : out_shape[d] / in_shape[d]);
    strides.push_back(0);
    space.push_back(in_shape[d]);
    strides.push_back(s[d]);
  }
  CopyToDense(in[0]->raw_data(), StridedTables(space, strides), out[0].mutable_raw_data(), space,
              DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(tile) {
  registry.Register(
      {.name = "Tile", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
