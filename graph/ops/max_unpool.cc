// MaxUnpool: zeros of the unpooled shape (from kernel_shape, strides and pads) with
// each input value at the flat index (over the whole tensor, as MaxPool's Indices give
// it) its index names. A larger output_shape pads that result with zeros at the end
// of each dim, as ONNX's reference does.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/constant_input.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

// The unpooled shape kernel_shape, strides and pads give.
absl::StatusOr<Shape> DefaultShape(const Node& node) {
  const Shape& x = node.input(0)->shape();
  if (x.size() < 3) return node.Error(absl::StrCat("input must be [N, C, spatial...], got ", ShapeToString(x)));
  if (node.input(1)->dtype() != DType::kInt64 || node.input(1)->shape() != x) {
    return node.Error(absl::StrCat("indices must be i64 of the input's shape ", ShapeToString(x), ", got ",
                                   node.input(1)->TypeString()));
  }
  const size_t n = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.GetInts("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, node.GetInts("strides", std::vector<int64_t>(n, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.GetInts("pads", std::vector<int64_t>(2 * n, 0)));
  if (kernel.size() != n || strides.size() != n || pads.size() != 2 * n) {
    return node.Error(absl::StrCat("kernel_shape, strides and pads must give ", n, " spatial dims (", 2 * n,
                                   " pads)"));
  }
  Shape out = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) out.push_back((x[i + 2] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]);
  return out;
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_ASSIGN_OR_RETURN(Shape out, DefaultShape(node));
  if (node.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(const Tensor* shape, ShapeFixingConstant(node, 2, "output_shape"));
    const std::vector<int64_t> given = shape->ToInt64();
    bool ok = given.size() == out.size();
    for (size_t d = 0; ok && d < given.size(); ++d) ok = given[d] >= out[d] && (d >= 2 || given[d] == out[d]);
    if (!ok) {
      return node.Error(absl::StrCat("output_shape ", ShapeToString(given), " must keep N and C and be at least ",
                                     ShapeToString(out)));
    }
    out = given;
  }
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(Shape unpooled, DefaultShape(node));
  const std::vector<int64_t> idx = in[1]->ToInt64();
  const int64_t total = NumElements(unpooled);
  const Shape& os = out[0].shape();
  const std::vector<int64_t> out_strides = Strides(os);
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  std::memset(dst, 0, out[0].numel() * es);
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= total) {
      return node.Error(absl::StrCat("index ", idx[i], " is outside the unpooled ", ShapeToString(unpooled), "'s ",
                                     total, " elements"));
    }
    int64_t r = idx[i], at = 0;
    for (int d = static_cast<int>(unpooled.size()) - 1; d >= 0; --d) {
      at += (r % unpooled[d]) * out_strides[d];
      r /= unpooled[d];
    }
    std::memcpy(dst + at * es, src + i * es, es);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(max_unpool) {
  registry.Register({.name = "MaxUnpool", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
