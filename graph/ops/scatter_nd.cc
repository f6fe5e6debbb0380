// ScatterND: a copy of data with the slices addressed by the last dim of indices
// replaced by (or, with `reduction`, combined with) updates. With k =
// indices.shape[-1]: out[indices[i...], :] = updates[i..., :], updates of shape
// indices.shape[:-1] ++ data.shape[k:]. Updates apply in index order, so a repeated
// index keeps the last update (ONNX leaves that case undefined). Negative indices
// count from the end; an index outside [-s, s-1] is an error.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/scatter_util.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(GetScatterReduction(node).status());
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  const Shape& upd = node.input(2)->shape();
  if (node.input(1)->dtype() != DType::kInt64) {
    return node.Error(absl::StrCat("indices must be i64, got ", DTypeName(node.input(1)->dtype())));
  }
  if (node.input(2)->dtype() != node.input(0)->dtype()) {
    return node.Error(absl::StrCat("updates (", DTypeName(node.input(2)->dtype()), ") and data (",
                                   DTypeName(node.input(0)->dtype()), ") must share a dtype"));
  }
  if (data.empty() || idx.empty()) return node.Error("data and indices must have rank >= 1");
  const int64_t k = idx.back();
  if (k < 1 || k > static_cast<int64_t>(data.size())) {
    return node.Error(absl::StrCat("the last dim of indices ", ShapeToString(idx), " must be in [1, ", data.size(),
                                   "] for data ", ShapeToString(data)));
  }
  Shape want(idx.begin(), idx.end() - 1);
  want.insert(want.end(), data.begin() + k, data.end());
  if (upd != want) {
    return node.Error(absl::StrCat("updates ", ShapeToString(upd), " must have shape ", ShapeToString(want),
                                   " (indices ", ShapeToString(idx), ", data ", ShapeToString(data), ")"));
  }
  node.output(0)->SetType(node.input(0)->dtype(), data);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(ScatterReduction reduction, GetScatterReduction(node));
  const Shape& data = in[0]->shape();
  const int64_t k = in[1]->shape().back();
  const std::vector<int64_t> strides = Strides(data);
  int64_t slice = 1;
  for (size_t d = k; d < data.size(); ++d) slice *= data[d];
  const std::vector<int64_t> indices = in[1]->ToInt64();
  const int64_t tuples = k == 0 ? 0 : static_cast<int64_t>(indices.size()) / k;
  std::memcpy(out[0].mutable_raw_data(), in[0]->raw_data(), in[0]->nbytes());
  std::vector<std::pair<int64_t, int64_t>> writes;
  writes.reserve(tuples * slice);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t x = indices[t * k + j];
      if (x < -data[j] || x >= data[j]) {
        return node.Error(absl::StrCat("index ", x, " is out of range for axis ", j, " of size ", data[j]));
      }
      if (x < 0) x += data[j];
      offset += x * strides[j];
    }
    for (int64_t e = 0; e < slice; ++e) writes.push_back({offset + e, t * slice + e});
  }
  ApplyScatter(reduction, *in[2], writes, out[0]);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(scatter_nd) {
  registry.Register({.name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
