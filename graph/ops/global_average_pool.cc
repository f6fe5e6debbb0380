// GlobalAveragePool: mean over all spatial positions of each channel, [N, C, ...] -> [N, C, 1, ...].
#include <limits>

#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  if (x->rank() < 2) {
    return node.Error(absl::StrCat("input X must be [N, C, spatial...], got ", x->TypeString()));
  }
  Shape out = x->shape();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Shape& xs = in[0]->shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t size = planes == 0 ? 0 : in[0]->numel() / planes;
  const FloatView x(*in[0]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(size, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* p = x.data() + t * size;
      float part[8] = {};
      int64_t i = 0;
      for (; i + 8 <= size; i += 8) {
        for (int l = 0; l < 8; ++l) part[l] += p[i + l];
      }
      float sum = 0.f;
      for (; i < size; ++i) sum += p[i];
      for (float v : part) sum += v;
      y[t] = sum / static_cast<float>(size);
    }
  });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(global_average_pool) {
  registry.Register({.name = "GlobalAveragePool", .infer = ops::Infer, .eval = ops::Eval});
}
