// Expand: broadcasts the input against the constant `shape` input (numpy rules in
// both directions: a 1 in `shape` keeps the input's dim).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return node.Error(absl::StrCat("shape ", ShapeToString(shape), " has a negative dim"));
  }
  KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(node, node.input(0)->shape(), shape));
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Shape& in_shape = in[0]->shape();
  const Shape& out_shape = out[0].shape();
  const std::vector<int64_t> s = Strides(in_shape);
  // Input strides aligned to the output's rank; 0 on broadcast axes.
  std::vector<int64_t> strides(out_shape.size(), 0);
  const size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d) strides[lead + d] = in_shape[d] == 1 ? 0 : s[d];
  CopyToDense(in[0]->raw_data(), StridedTables(out_shape, strides), out[0].mutable_raw_data(), out_shape,
              DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(expand) {
  registry.Register(
      {.name = "Expand", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
