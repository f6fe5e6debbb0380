// ScatterElements (and Scatter, its name before opset 11): a copy of data where each
// element of updates lands at its own coordinates with the `axis` coordinate replaced
// by indices' element, replacing (or, with `reduction`, combining with) it. indices
// and updates share a shape of data's rank. Updates apply in row-major order, so a
// repeated target keeps the last update. Negative indices count from the end; an index
// outside [-s, s-1] is an error.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/scatter_util.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(GetScatterReduction(node).status());
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  const DType it = node.input(1)->dtype();
  if (it != DType::kInt64 && it != DType::kInt32) {
    return node.Error(absl::StrCat("indices must be i32 or i64, got ", DTypeName(it)));
  }
  if (node.input(2)->dtype() != node.input(0)->dtype()) {
    return node.Error(absl::StrCat("updates (", DTypeName(node.input(2)->dtype()), ") and data (",
                                   DTypeName(node.input(0)->dtype()), ") must share a dtype"));
  }
  if (data.empty()) return node.Error("data must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, data.size()));
  bool ok = idx.size() == data.size() && node.input(2)->shape() == idx;
  for (size_t d = 0; ok && d < data.size(); ++d) ok = static_cast<int64_t>(d) == axis || idx[d] <= data[d];
  if (!ok) {
    return node.Error(absl::StrCat("indices ", ShapeToString(idx), " and updates ",
                                   ShapeToString(node.input(2)->shape()), " must share a shape of data ",
                                   ShapeToString(data), "'s rank, no larger off the axis ", axis));
  }
  node.output(0)->SetType(node.input(0)->dtype(), data);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(ScatterReduction reduction, GetScatterReduction(node));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const Shape& data = in[0]->shape();
  const Shape& idx = in[1]->shape();
  const int rank = static_cast<int>(data.size());
  if (axis < 0) axis += rank;
  const std::vector<int64_t> indices = in[1]->ToInt64();
  const std::vector<int64_t> strides = Strides(data);
  const int64_t dim = data[axis];
  std::memcpy(out[0].mutable_raw_data(), in[0]->raw_data(), in[0]->nbytes());
  std::vector<std::pair<int64_t, int64_t>> writes;
  writes.reserve(indices.size());
  // Odometer over indices' coordinates; `base` is the output offset without the axis.
  std::vector<int64_t> coord(rank, 0);
  int64_t base = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    int64_t x = indices[i];
    if (x < -dim || x >= dim) {
      return node.Error(absl::StrCat("index ", x, " is out of range for axis ", axis, " of size ", dim));
    }
    if (x < 0) x += dim;
    writes.push_back({base + x * strides[axis], static_cast<int64_t>(i)});
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t s = d == axis ? 0 : strides[d];
      if (++coord[d] < idx[d]) {
        base += s;
        break;
      }
      base -= s * (idx[d] - 1);
      coord[d] = 0;
    }
  }
  ApplyScatter(reduction, *in[2], writes, out[0]);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(scatter_elements) {
  for (const char* name : {"ScatterElements", "Scatter"}) {
    registry.Register({.name = name, .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
  }
}
