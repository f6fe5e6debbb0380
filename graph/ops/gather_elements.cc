// GatherElements: out[i] = data[i with its `axis` coordinate replaced by indices[i]].
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  const Shape& data = node.input(0)->shape();
  const Value* indices = node.input(1);
  if (indices->dtype() != DType::kInt64 && indices->dtype() != DType::kInt32) {
    return node.Error(absl::StrCat("indices must be i32 or i64, got ", DTypeName(indices->dtype())));
  }
  if (data.empty()) return node.Error("data must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, data.size()));
  const Shape& ishape = indices->shape();
  bool ok = ishape.size() == data.size();
  for (size_t d = 0; ok && d < data.size(); ++d) ok = static_cast<int64_t>(d) == axis || ishape[d] <= data[d];
  if (!ok) {
    return node.Error(absl::StrCat("indices ", ShapeToString(ishape), " must have the rank of data ",
                                   ShapeToString(data), " and no larger dims off the axis ", axis));
  }
  node.output(0)->SetType(node.input(0)->dtype(), ishape);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const Shape& data = in[0]->shape();
  const Shape& ishape = in[1]->shape();
  const int rank = static_cast<int>(data.size());
  if (axis < 0) axis += rank;
  const std::vector<int64_t> indices = in[1]->ToInt64();
  const std::vector<int64_t> strides = Strides(data);
  const int64_t dim = data[axis];
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  // Walk the index tensor with an odometer; `base` is the data offset of the
  // current coordinates with the axis coordinate left out.
  std::vector<int64_t> index(rank, 0);
  int64_t base = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    int64_t k = indices[i];
    if (k < -dim || k >= dim) {
      return node.Error(absl::StrCat("index ", k, " is out of range for axis ", axis, " of size ", dim));
    }
    if (k < 0) k += dim;
    std::memcpy(dst + i * es, src + (base + k * strides[axis]) * es, es);
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t s = d == axis ? 0 : strides[d];
      if (++index[d] < ishape[d]) {
        base += s;
        break;
      }
      base -= s * (ishape[d] - 1);
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(gather_elements) {
  registry.Register(
      {.name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
