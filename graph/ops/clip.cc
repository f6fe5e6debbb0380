// Clip: element-wise min(max(x, min), max) with optional one-element `min` and
// `max` inputs (constant or computed); absent bounds do not clip.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  const DType dtype = node.input(0)->dtype();
  for (int i = 1; i <= 2; ++i) {
    if (!node.has_input(i)) continue;
    const Value* bound = node.input(i);
    const char* what = i == 1 ? "min" : "max";
    if (bound->dtype() != dtype) {
      return node.Error(absl::StrCat("input '", what, "' must have the input's dtype ", DTypeName(dtype),
                                     ", got ", DTypeName(bound->dtype())));
    }
    if (bound->numel() != 1) {
      return node.Error(absl::StrCat("input '", what, "' must be a scalar, got shape ",
                                     ShapeToString(bound->shape())));
    }
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor* lo_t = in.size() > 1 ? in[1] : nullptr;
  const Tensor* hi_t = in.size() > 2 ? in[2] : nullptr;
  if (IsFloating(in[0]->dtype())) {
    const float lo = lo_t ? lo_t->ScalarFloat() : -std::numeric_limits<float>::infinity();
    const float hi = hi_t ? hi_t->ScalarFloat() : std::numeric_limits<float>::infinity();
    return EvalUnary(node, *in[0], out[0], [lo, hi](float x) {
      const float y = x < lo ? lo : x;
      return y > hi ? hi : y;
    });
  }
  const int64_t lo = lo_t ? lo_t->ScalarInt64() : std::numeric_limits<int64_t>::min();
  const int64_t hi = hi_t ? hi_t->ScalarInt64() : std::numeric_limits<int64_t>::max();
  return EvalUnary(node, *in[0], out[0], nullptr, [lo, hi](int64_t x) {
    const int64_t y = x < lo ? lo : x;
    return y > hi ? hi : y;
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(clip) {
  registry.Register({.name = "Clip", .min_inputs = 1, .max_inputs = 3, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
