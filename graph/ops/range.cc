// Range: start, start + delta, ... up to (excluding) limit; the three scalar
// inputs must be constants since they fix the output length.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

// Number of elements for the given scalars (same dtype).
absl::StatusOr<int64_t> Count(const Node& node, const Tensor& start, const Tensor& limit,
                              const Tensor& delta) {
  if (IsFloating(start.dtype())) {
    const float s = start.ScalarFloat(), l = limit.ScalarFloat(), d = delta.ScalarFloat();
    if (d == 0.f || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
      return node.Error(absl::StrCat("cannot build a range from ", s, " to ", l, " by ", d));
    }
    return std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - s) / d)));
  }
  const int64_t s = start.ScalarInt64(), l = limit.ScalarInt64(), d = delta.ScalarInt64();
  if (d == 0) return node.Error(absl::StrCat("delta is 0 (range from ", s, " to ", l, ")"));
  if (d > 0) return l > s ? (l - s + d - 1) / d : 0;
  return s > l ? (s - l - d - 1) / -d : 0;
}

absl::Status Infer(Node& node) {
  const DType dtype = node.input(0)->dtype();
  if (dtype == DType::kBool) return node.Error("inputs must be numeric, got bool");
  const char* names[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    const Value* v = node.input(i);
    if (v->dtype() != dtype) {
      return node.Error(absl::StrCat("start, limit and delta must share a dtype; ", names[i], " is ",
                                     DTypeName(v->dtype()), ", start is ", DTypeName(dtype)));
    }
    if (v->numel() != 1) {
      return node.Error(absl::StrCat(names[i], " must be a scalar, got ", v->TypeString()));
    }
    if (!v->is_constant()) {
      return absl::FailedPreconditionError(absl::StrCat(node.Describe(), ": input '", names[i], "' ('",
                                                        v->name(),
                                                        "') must be a compile-time constant: it fixes the "
                                                        "output shape"));
    }
  }
  KILN_ASSIGN_OR_RETURN(int64_t n, Count(node, node.input(0)->constant(), node.input(1)->constant(),
                                         node.input(2)->constant()));
  node.output(0)->SetType(dtype, {n});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t n, Count(node, *in[0], *in[1], *in[2]));
  if (n != out[0].numel()) return node.Error("range length differs from the inferred one");
  const DType dtype = out[0].dtype();
  if (IsFloating(dtype)) {
    const double s = in[0]->ScalarFloat(), d = in[2]->ScalarFloat();
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(s + static_cast<double>(i) * d);
    out[0] = Tensor::FromFloat(dtype, {n}, v);
  } else {
    const int64_t s = in[0]->ScalarInt64(), d = in[2]->ScalarInt64();
    std::vector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = s + i * d;
    out[0] = Tensor::FromInt64(dtype, {n}, v);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(range) {
  registry.Register(
      {.name = "Range", .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
