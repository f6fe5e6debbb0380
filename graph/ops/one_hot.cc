// OneHot: for each index, a vector of `depth` values (values[0] = off,
// values[1] = on) inserted at `axis`; negative indices count from depth, and
// indices outside [-depth, depth) give all-off vectors.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::StatusOr<int64_t> Depth(const Node& node, const Tensor& t) {
  if (t.numel() != 1) return node.Error(absl::StrCat("depth must be a scalar, got ", t.TypeString()));
  const int64_t depth = t.ScalarInt64();
  if (depth <= 0) return node.Error(absl::StrCat("depth must be positive, got ", depth));
  return depth;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", -1));
  const Value* depth = node.input(1);
  if (!depth->is_constant()) {
    return absl::FailedPreconditionError(absl::StrCat(node.Describe(), ": input 'depth' ('", depth->name(),
                                                      "') must be a compile-time constant: it fixes the "
                                                      "output shape"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t d, Depth(node, depth->constant()));
  const Value* values = node.input(2);
  if (values->numel() != 2 || values->rank() != 1) {
    return node.Error(
        absl::StrCat("values must be a 1-D tensor [off, on] of 2 elements, got ", values->TypeString()));
  }
  const Shape& ind = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(ind.size()) + 1;
  if (axis_attr < -rank || axis_attr >= rank) {
    return node.Error(absl::StrCat("axis ", axis_attr, " is out of range for output rank ", rank));
  }
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  Shape out = ind;
  out.insert(out.begin() + axis, d);
  node.output(0)->SetType(values->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t depth, Depth(node, *in[1]));
  const Shape& ind = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(ind.size()) + 1;
  if (axis < 0) axis += rank;
  const std::vector<int64_t> indices = in[0]->ToInt64();
  int64_t inner = 1;
  for (int64_t d = axis; d < rank - 1; ++d) inner *= ind[d];
  const size_t es = DTypeSize(out[0].dtype());
  const auto* values = static_cast<const uint8_t*>(in[2]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  FillElements(dst, out[0].numel(), values, es);
  // The output is [outer, depth, inner]; index element (o, i) sets (o, idx, i).
  for (size_t e = 0; e < indices.size(); ++e) {
    int64_t idx = indices[e];
    if (idx < -depth || idx >= depth) continue;
    if (idx < 0) idx += depth;
    const int64_t o = static_cast<int64_t>(e) / inner, i = static_cast<int64_t>(e) % inner;
    std::memcpy(dst + ((o * depth + idx) * inner + i) * es, values + es, es);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(one_hot) {
  registry.Register(
      {.name = "OneHot", .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
