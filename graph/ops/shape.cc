// Shape: the input's dims as a 1-D i64 tensor, optionally only dims [start, end).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

// The dims [start, end) of the input value's shape, clamped as the spec says.
absl::StatusOr<std::vector<int64_t>> Dims(const Node& node) {
  const Shape& shape = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t start, node.GetInt("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, node.GetInt("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  if (end <= start) return std::vector<int64_t>();
  return std::vector<int64_t>(shape.begin() + start, shape.begin() + end);
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Dims(node));
  node.output(0)->SetType(DType::kInt64, {static_cast<int64_t>(dims.size())});
  return absl::OkStatus();
}

// Reads only node.input(0)'s type: constant folding passes a null input tensor
// when the input is not a constant.
absl::Status Eval(const Node& node, absl::Span<const Tensor* const>, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Dims(node));
  out[0] = Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(dims.size())}, dims);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(shape) { registry.Register({.name = "Shape", .infer = ops::Infer, .eval = ops::Eval}); }
