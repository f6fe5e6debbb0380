// Hardmax: 1 at the first maximum along `axis` (default -1), 0 elsewhere.
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(InferFloatUnary(node));
  return NormalizeAxis(node, axis, node.input(0)->rank()).status();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", -1));
  const Tensor& x = *in[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, x.rank()));
  const AxisSplit s = x.rank() == 0 ? AxisSplit{} : SplitAtAxis(x.shape(), axis);
  const FloatView xv(x);
  FloatSink sink(out[0]);
  const float* p = xv.data();
  float* y = sink.data();
  std::fill(y, y + out[0].numel(), 0.f);
  if (s.len > 0) {
    ParallelFor(s.outer * s.inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.len, 1)),
                [&](int64_t b, int64_t e) {
                  for (int64_t t = b; t < e; ++t) {
                    const int64_t base = (t / s.inner) * s.len * s.inner + t % s.inner;
                    int64_t best = 0;
                    for (int64_t l = 1; l < s.len; ++l) {
                      if (p[base + l * s.inner] > p[base + best * s.inner]) best = l;
                    }
                    y[base + best * s.inner] = 1.f;
                  }
                });
  }
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(hardmax) {
  registry.Register({.name = "Hardmax", .infer = ops::Infer, .eval = ops::Eval});
}
