// Compress: the slices of the input along `axis` (of the flattened input when axis is
// absent) whose condition element is true; a condition shorter than the axis keeps
// none past its end. The condition fixes the output shape, so it must be a constant;
// the input may be computed at run time (a gather of the kept positions).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/compress.h"
#include "graph/ops/constant_input.h"

namespace kiln::ops {

absl::StatusOr<CompressPlan> PlanCompress(const Node& node) {
  const Shape& in = node.input(0)->shape();
  if (node.input(1)->dtype() != DType::kBool || node.input(1)->rank() != 1) {
    return node.Error(absl::StrCat("condition must be a 1-D bool tensor, got ", node.input(1)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* cond, ShapeFixingConstant(node, 1, "condition"));
  CompressPlan p;
  p.flatten = !node.has_attr("axis");
  int64_t outer = 1, len = NumElements(in), inner = 1;
  if (!p.flatten) {
    KILN_ASSIGN_OR_RETURN(int64_t a, node.GetInt("axis"));
    KILN_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(node, a, in.size()));
    const AxisSplit s = SplitAtAxis(in, p.axis);
    outer = s.outer, len = s.len, inner = s.inner;
  }
  const std::vector<int64_t> c = cond->ToInt64();
  if (static_cast<int64_t>(c.size()) > len) {
    return node.Error(absl::StrCat("condition has ", c.size(), " elements, more than the ", len, " along the axis"));
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] != 0) p.kept.push_back(static_cast<int64_t>(i));
  }
  p.outer = outer, p.len = len, p.inner = inner;
  if (p.flatten) {
    p.out = {static_cast<int64_t>(p.kept.size())};
  } else {
    p.out = in;
    p.out[p.axis] = static_cast<int64_t>(p.kept.size());
  }
  return p;
}

namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(CompressPlan p, PlanCompress(node));
  node.output(0)->SetType(node.input(0)->dtype(), p.out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(CompressPlan p, PlanCompress(node));
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  const int64_t k = static_cast<int64_t>(p.kept.size());
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(dst + (o * k + j) * p.inner * es, src + (o * p.len + p.kept[j]) * p.inner * es, p.inner * es);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(compress) {
  registry.Register({.name = "Compress", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
