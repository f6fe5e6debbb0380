// Mod: element-wise remainder with numpy broadcasting. fmod=0 (integers only):
// the result takes the divisor's sign (Python %); fmod=1: C fmod, the dividend's
// sign. An integer remainder by zero yields 0.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t fmod, node.GetInt("fmod", 0));
  if (fmod != 0 && fmod != 1) return node.Error(absl::StrCat("fmod must be 0 or 1, got ", fmod));
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  if (fmod == 0 && IsFloating(node.input(0)->dtype())) {
    return node.Error(absl::StrCat("fmod=0 is only defined for integer inputs, got ",
                                   DTypeName(node.input(0)->dtype()), "; set fmod=1"));
  }
  return InferBroadcast(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t fmod, node.GetInt("fmod", 0));
  if (fmod) {
    return EvalBinary(
        node, *in[0], *in[1], out[0], [](float a, float b) { return std::fmod(a, b); },
        [](int64_t a, int64_t b) -> int64_t { return b == 0 || b == -1 ? 0 : a % b; });
  }
  if (IsFloating(in[0]->dtype())) return node.Error("fmod=0 is only defined for integer inputs");
  return EvalBinary(node, *in[0], *in[1], out[0], nullptr, [](int64_t a, int64_t b) -> int64_t {
    if (b == 0 || b == -1) return 0;
    const int64_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(mod) {
  registry.Register({.name = "Mod", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
