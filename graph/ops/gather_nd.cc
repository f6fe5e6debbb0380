// GatherND: slices of data addressed by the last dim of indices. With b = batch_dims
// and k = indices.shape[-1]: out[i..., :] = data[batch(i)..., indices[i...], :], the
// output of shape indices.shape[:-1] ++ data.shape[b+k:]. Negative indices count from
// the end of their axis; an index outside [-s, s-1] is an error.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t b, node.GetInt("batch_dims", 0));
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  if (node.input(1)->dtype() != DType::kInt64) {
    return node.Error(absl::StrCat("indices must be i64, got ", DTypeName(node.input(1)->dtype())));
  }
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  if (r < 1 || q < 1) return node.Error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) {
    return node.Error(absl::StrCat("batch_dims ", b, " must be in [0, min(rank(data), rank(indices)) - 1] = [0, ",
                                   std::min(r, q) - 1, "]"));
  }
  const int64_t k = idx.back();
  if (k < 1 || k > r - b) {
    return node.Error(absl::StrCat("the last dim of indices ", ShapeToString(idx), " must be in [1, ", r - b,
                                   "] for data ", ShapeToString(data), " and batch_dims ", b));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (idx[d] != data[d]) {
      return node.Error(absl::StrCat("batch dim ", d, " of indices ", ShapeToString(idx), " and data ",
                                     ShapeToString(data), " differ"));
    }
  }
  Shape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t b, node.GetInt("batch_dims", 0));
  const Shape& data = in[0]->shape();
  const Shape& idx = in[1]->shape();
  const int64_t k = idx.back();
  const std::vector<int64_t> strides = Strides(data);
  int64_t batches = 1, per_batch = 1, slice = 1;  // index tuples per batch, elements per slice
  for (int64_t d = 0; d < b; ++d) batches *= idx[d];
  for (size_t d = b; d + 1 < idx.size(); ++d) per_batch *= idx[d];
  for (size_t d = b + k; d < data.size(); ++d) slice *= data[d];
  const int64_t batch_stride = b == 0 ? 0 : strides[b - 1];
  const std::vector<int64_t> indices = in[1]->ToInt64();
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  for (int64_t n = 0; n < batches; ++n) {
    for (int64_t t = 0; t < per_batch; ++t) {
      const int64_t tuple = n * per_batch + t;
      int64_t offset = n * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dim = data[b + j];
        int64_t x = indices[tuple * k + j];
        if (x < -dim || x >= dim) {
          return node.Error(absl::StrCat("index ", x, " is out of range for axis ", b + j, " of size ", dim));
        }
        if (x < 0) x += dim;
        offset += x * strides[b + j];
      }
      std::memcpy(dst + tuple * slice * es, src + offset * es, slice * es);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(gather_nd) {
  registry.Register({.name = "GatherND", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
