// Gather: picks slices of `data` along `axis` at the positions in `indices`
// (negative indices count from the end).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::Status CheckIndices(const Node& node, const std::vector<int64_t>& indices, int64_t dim) {
  for (int64_t i : indices) {
    if (i < -dim || i >= dim) {
      return node.Error(absl::StrCat("index ", i, " is out of range for axis of size ", dim,
                                     " (valid: ", -dim, " to ", dim - 1, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  const Shape& data = node.input(0)->shape();
  const Value* indices = node.input(1);
  if (indices->dtype() != DType::kInt64 && indices->dtype() != DType::kInt32) {
    return node.Error(absl::StrCat("indices must be i32 or i64, got ", DTypeName(indices->dtype())));
  }
  if (data.empty()) return node.Error("data must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, data.size()));
  if (indices->is_constant()) {
    KILN_RETURN_IF_ERROR(CheckIndices(node, indices->constant().ToInt64(), data[axis]));
  }
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), indices->shape().begin(), indices->shape().end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const Shape& data = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(data.size());
  if (axis < 0) axis += rank;
  const int64_t dim = data[axis];
  std::vector<int64_t> indices = in[1]->ToInt64();
  KILN_RETURN_IF_ERROR(CheckIndices(node, indices, dim));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= data[d];
    if (d > axis) inner *= data[d];
  }
  // The output is [outer, num_indices, inner]; row j of the middle axis reads
  // input row indices[j].
  const int64_t n = static_cast<int64_t>(indices.size());
  const Shape space = {outer, n, inner};
  OffsetTables src_at = StridedTables(space, {dim * inner, 0, 1});
  for (int64_t j = 0; j < n; ++j) src_at[1][j] = (indices[j] < 0 ? indices[j] + dim : indices[j]) * inner;
  CopyToDense(in[0]->raw_data(), src_at, out[0].mutable_raw_data(), space, DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(gather) {
  registry.Register(
      {.name = "Gather", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
