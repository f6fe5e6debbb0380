// Split: cuts the input along `axis` into the node's outputs; sizes from the
// optional constant `split` input, else `num_outputs` chunks of ceil(dim / n)
// (the last smaller), else equal parts over the number of outputs.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<int64_t>> SplitSizes(const Node& node, int64_t dim) {
  const int n = node.num_outputs();
  if (node.has_input(1)) {
    if (node.has_attr("num_outputs")) {
      return node.Error("give either the 'split' input or the 'num_outputs' attribute, not both");
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ConstantInts(node, 1, "split"));
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return node.Error(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] has a negative size"));
      sum += s;
    }
    if (static_cast<int>(sizes.size()) != n) {
      return node.Error(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] has ", sizes.size(),
                                     " sizes but the node has ", n, " outputs"));
    }
    if (sum != dim) {
      return node.Error(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] sums to ", sum,
                                     ", but the split axis has size ", dim));
    }
    return sizes;
  }
  std::vector<int64_t> sizes(n);
  if (node.has_attr("num_outputs")) {
    KILN_ASSIGN_OR_RETURN(int64_t num, node.GetInt("num_outputs"));
    if (num != n) {
      return node.Error(absl::StrCat("num_outputs is ", num, " but the node has ", n, " outputs"));
    }
    const int64_t chunk = (dim + n - 1) / n;
    for (int i = 0; i < n; ++i) sizes[i] = std::clamp<int64_t>(dim - i * chunk, 0, chunk);
    return sizes;
  }
  if (dim % n != 0) {
    return node.Error(absl::StrCat("cannot split an axis of size ", dim, " into ", n,
                                   " equal parts; give a 'split' input or 'num_outputs'"));
  }
  for (int i = 0; i < n; ++i) sizes[i] = dim / n;
  return sizes;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  const Shape& in = node.input(0)->shape();
  if (in.empty()) return node.Error("cannot split a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, in.size()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(node, in[axis]));
  for (int i = 0; i < node.num_outputs(); ++i) {
    Shape out = in;
    out[axis] = sizes[i];
    node.output(i)->SetType(node.input(0)->dtype(), out);
  }
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const Shape& in_shape = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  if (axis < 0) axis += rank;
  const size_t es = DTypeSize(in[0]->dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= in_shape[d];
    if (d > axis) inner *= in_shape[d];
  }
  // Output i is the [outer, chunk] block at column `offset` of the input seen
  // as [outer, in_row]; sizes come from the inferred output shapes.
  const int64_t in_row = in_shape[axis] * inner;
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  int64_t offset = 0;
  for (Tensor& t : out) {
    const int64_t chunk = t.shape()[axis] * inner;
    const Shape block = {outer, chunk};
    CopyElements(src + offset * es, StridedTables(block, {in_row, 1}), t.mutable_raw_data(),
                 StridedTables(block, {chunk, 1}), block, es);
    offset += chunk;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(split) {
  registry.Register({.name = "Split",
                     .min_inputs = 1,
                     .max_inputs = 2,
                     .max_outputs = OpDef::kVariadic,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
