// MaxPool: max over sliding windows of 1-D/2-D/3-D inputs (pads, auto_pad, dilations,
// ceil_mode); the optional Indices output is not supported.
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::StatusOr<WindowGeometry> Window(const Node& node) {
  const Shape& x = node.input(0)->shape();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.GetInts("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, node.GetInt("ceil_mode", 0));
  return ComputeWindow(node, Shape(x.begin() + 2, x.end()), kernel, /*use_dilations=*/true, ceil_mode != 0);
}

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  const DType dtype = x->dtype();
  if (!IsFloating(dtype) && dtype != DType::kInt8 && dtype != DType::kUInt8) {
    return node.Error(absl::StrCat("dtype ", DTypeName(dtype), " is not supported (f32, f16, bf16, i8, u8)"));
  }
  if (node.num_outputs() > 1) {
    return node.Unsupported(
        "the optional Indices output (output 1) is not supported; use MaxPool with one output");
  }
  if (x->rank() < 3 || x->rank() > 5) {
    return node.Error(
        absl::StrCat("input X must be [N, C, spatial...] with 1 to 3 spatial dims, got ", x->TypeString()));
  }
  KILN_RETURN_IF_ERROR(node.GetInt("storage_order", 0).status());
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node));
  Shape out = {x->shape()[0], x->shape()[1]};
  out.insert(out.end(), win.output.begin(), win.output.end());
  node.output(0)->SetType(dtype, out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node));
  EvalWindowPool(
      *in[0], out[0], win, -std::numeric_limits<float>::infinity(),
      [](float m, float v) { return (v > m || v != v) ? v : m; },  // NaN propagates
      [](float m, const TapRange&, const TapRange&, const TapRange&) { return m; });
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(max_pool) {
  registry.Register(
      {.name = "MaxPool", .min_outputs = 1, .max_outputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
