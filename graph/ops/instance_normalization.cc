// InstanceNormalization: per image and channel, y = (x - mean) / sqrt(var + epsilon) * scale + B.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(RequireFloat(node, i));
  KILN_RETURN_IF_ERROR(node.GetFloat("epsilon", 1e-5f).status());
  if (x->rank() < 3) {
    return node.Error(absl::StrCat("input must be [N, C, spatial...], got ", x->TypeString()));
  }
  const int64_t c = x->shape()[1];
  for (int i = 1; i < 3; ++i) {
    if (node.input(i)->shape() != Shape{c}) {
      return node.Error(absl::StrCat(i == 1 ? "scale" : "B", " must be [", c, "] (one value per channel of ",
                                     ShapeToString(x->shape()), "), got ", node.input(i)->TypeString()));
    }
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(float epsilon, node.GetFloat("epsilon", 1e-5f));
  const Shape& xs = in[0]->shape();
  const int64_t planes = xs[0] * xs[1], c = xs[1];
  const int64_t size = planes == 0 ? 0 : in[0]->numel() / planes;
  const FloatView x(*in[0]), scale(*in[1]), bias(*in[2]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(planes, std::max<int64_t>(1, 8192 / std::max<int64_t>(size, 1)), [&](int64_t s, int64_t e) {
    for (int64_t t = s; t < e; ++t) {
      const float* src = x.data() + t * size;
      float* dst = y + t * size;
      float sum = 0.f;
      for (int64_t i = 0; i < size; ++i) sum += src[i];
      const float mean = sum / static_cast<float>(size);
      float sq = 0.f;
      for (int64_t i = 0; i < size; ++i) sq += (src[i] - mean) * (src[i] - mean);
      const float inv = 1.f / std::sqrt(sq / static_cast<float>(size) + epsilon);
      const float a = scale.data()[t % c] * inv, b = bias.data()[t % c] - mean * a;
      for (int64_t i = 0; i < size; ++i) dst[i] = src[i] * a + b;
    }
  });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(instance_normalization) {
  registry.Register({.name = "InstanceNormalization",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
