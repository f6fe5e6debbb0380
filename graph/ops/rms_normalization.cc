// RMSNormalization (ONNX opset 23): y = x / sqrt(mean(x^2) + epsilon) * scale
// over dims [axis, rank), in fp32 (stash_type 1). Also what recognize-rms-norm
// makes of the exporters' decomposition (Llama's RMSNorm).
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_RETURN_IF_ERROR(RequireFloat(node, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(node.GetFloat("epsilon", 1e-5f).status());
  KILN_ASSIGN_OR_RETURN(int64_t stash_type, node.GetInt("stash_type", 1));
  if (stash_type != 1) {
    return node.Unsupported(absl::StrCat("stash_type ", stash_type, " is not supported (1 = float)"));
  }
  if (x->rank() < 1) return node.Error(absl::StrCat("input X must have rank >= 1, got ", x->TypeString()));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, x->rank()));
  const Shape normalized(x->shape().begin() + axis, x->shape().end());
  const Shape& scale = node.input(1)->shape();
  bool broadcasts = scale.size() <= normalized.size();
  for (size_t i = 0; broadcasts && i < scale.size(); ++i) {
    const int64_t t = normalized[normalized.size() - scale.size() + i];
    broadcasts = scale[i] == 1 || scale[i] == t;
  }
  if (!broadcasts) {
    return node.Error(absl::StrCat("scale ", ShapeToString(scale), " does not broadcast to the normalised shape ",
                                   ShapeToString(normalized), " (X ", ShapeToString(x->shape()), ", axis ", axis, ")"));
  }
  node.output(0)->SetType(x->dtype(), x->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, in[0]->rank()));
  KILN_ASSIGN_OR_RETURN(float epsilon, node.GetFloat("epsilon", 1e-5f));
  const Shape& xs = in[0]->shape();
  const Shape normalized(xs.begin() + axis, xs.end());
  const int64_t size = NumElements(normalized);
  const int64_t rows = size == 0 ? 0 : in[0]->numel() / size;
  std::vector<float> scale(size);
  {
    const FloatView src(*in[1]);
    const std::vector<int64_t> offsets = BroadcastOffsets(in[1]->shape(), normalized);
    for (int64_t i = 0; i < size; ++i) scale[i] = src.data()[offsets[i]];
  }
  const FloatView x(*in[0]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(size, 1)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      const float* src = x.data() + r * size;
      float* dst = y + r * size;
      float sq = 0.f;
      for (int64_t i = 0; i < size; ++i) sq += src[i] * src[i];
      const float inv = 1.f / std::sqrt(sq / static_cast<float>(size) + epsilon);
      for (int64_t i = 0; i < size; ++i) dst[i] = src[i] * inv * scale[i];
    }
  });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(rms_normalization) {
  registry.Register({.name = "RMSNormalization",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .min_outputs = 1,
                     .max_outputs = 1,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
