// Neg: element-wise -x (floating and signed integer types).
#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const DType t = node.input(0)->dtype();
  if (t == DType::kBool || t == DType::kUInt8) {
    return node.Error(absl::StrCat("input must be a floating or signed integer type, got ", DTypeName(t)));
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(
      node, *in[0], out[0], [](float x) { return -x; },
      [](int64_t x) { return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(x)); });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(neg) {
  registry.Register({.name = "Neg", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
