// Concat: joins the inputs along `axis`; other dims must match.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis"));
  const Value* first = node.input(0);
  const int64_t rank = first->rank();
  if (rank == 0) return node.Error("cannot concatenate scalars (inputs must have rank >= 1)");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, rank));
  Shape out = first->shape();
  out[axis] = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) return node.Error(absl::StrCat("input ", i, " is missing"));
    if (v->dtype() != first->dtype()) {
      return node.Error(absl::StrCat("inputs must share a dtype: input 0 is ", DTypeName(first->dtype()),
                                     ", input ", i, " is ", DTypeName(v->dtype())));
    }
    bool compatible = v->rank() == rank;
    for (int64_t d = 0; compatible && d < rank; ++d) {
      compatible = d == axis || v->shape()[d] == first->shape()[d];
    }
    if (!compatible) {
      return node.Error(absl::StrCat("cannot concatenate ", ShapeToString(first->shape()), " (input 0) and ",
                                     ShapeToString(v->shape()), " (input ", i, ") along axis ", axis_attr,
                                     ": all other dims must match"));
    }
    out[axis] += v->shape()[axis];
  }
  node.output(0)->SetType(first->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis"));
  const Shape& out_shape = out[0].shape();
  const int64_t rank = static_cast<int64_t>(out_shape.size());
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  const size_t es = DTypeSize(out[0].dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= out_shape[d];
    if (d > axis) inner *= out_shape[d];
  }
  // Each input is an [outer, chunk] block written at column `offset` of the
  // [outer, out_row] output.
  const int64_t out_row = out_shape[axis] * inner;
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  int64_t offset = 0;
  for (const Tensor* t : in) {
    const int64_t chunk = t->shape()[axis] * inner;
    const Shape block = {outer, chunk};
    CopyElements(t->raw_data(), StridedTables(block, {chunk, 1}), dst + offset * es,
                 StridedTables(block, {out_row, 1}), block, es);
    offset += chunk;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(concat) {
  registry.Register({.name = "Concat",
                     .min_inputs = 1,
                     .max_inputs = OpDef::kVariadic,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
