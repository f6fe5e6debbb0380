// LayerNormalization: normalise over dims [axis, rank) with scale and optional bias;
// optional outputs Mean and InvStdDev (shape of X with the normalised dims set to 1).
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

// Unidirectional broadcast of `s` to `target`.
bool BroadcastsTo(const Shape& s, const Shape& target) {
  if (s.size() > target.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t t = target[target.size() - s.size() + i];
    if (s[i] != 1 && s[i] != t) return false;
  }
  return true;
}

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(node.GetFloat("epsilon", 1e-5f).status());
  KILN_ASSIGN_OR_RETURN(int64_t stash_type, node.GetInt("stash_type", 1));
  if (x->rank() < 1) return node.Error(absl::StrCat("input X must have rank >= 1, got ", x->TypeString()));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, x->rank()));
  const Shape normalized(x->shape().begin() + axis, x->shape().end());
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(RequireFloat(node, i));
    if (!BroadcastsTo(node.input(i)->shape(), normalized)) {
      return node.Error(absl::StrCat(i == 1 ? "Scale " : "B ", ShapeToString(node.input(i)->shape()),
                                     " does not broadcast to the normalised shape ",
                                     ShapeToString(normalized), " (X ", ShapeToString(x->shape()), ", axis ",
                                     axis, ")"));
    }
  }
  DType stats_dtype;
  switch (stash_type) {
    case 1:
      stats_dtype = DType::kFloat32;
      break;
    case 10:
      stats_dtype = DType::kFloat16;
      break;
    case 16:
      stats_dtype = DType::kBFloat16;
      break;
    default:
      return node.Unsupported(absl::StrCat("stash_type ", stash_type,
                                           " is not supported (1 = float, 10 = float16, "
                                           "16 = bfloat16)"));
  }
  node.output(0)->SetType(x->dtype(), x->shape());
  Shape stats = x->shape();
  for (size_t i = axis; i < stats.size(); ++i) stats[i] = 1;
  for (int i = 1; i < node.num_outputs(); ++i) node.output(i)->SetType(stats_dtype, stats);
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
  // Scale and bias expanded to the normalised shape.
  auto expand = [&](const Tensor* t, float dflt) {
    std::vector<float> v(size, dflt);
    if (t == nullptr) return v;
    const FloatView src(*t);
    const std::vector<int64_t> offsets = BroadcastOffsets(t->shape(), normalized);
    for (int64_t i = 0; i < size; ++i) v[i] = src.data()[offsets[i]];
    return v;
  };
  const std::vector<float> scale = expand(in[1], 1.f);
  const std::vector<float> bias = expand(in.size() > 2 ? in[2] : nullptr, 0.f);
  const FloatView x(*in[0]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  std::vector<float> mean(rows), inv_std(rows);
  ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(size, 1)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      const float* src = x.data() + r * size;
      float* dst = y + r * size;
      float sum = 0.f;
      for (int64_t i = 0; i < size; ++i) sum += src[i];
      const float mu = sum / static_cast<float>(size);
      float sq = 0.f;
      for (int64_t i = 0; i < size; ++i) sq += (src[i] - mu) * (src[i] - mu);
      const float inv = 1.f / std::sqrt(sq / static_cast<float>(size) + epsilon);
      for (int64_t i = 0; i < size; ++i) dst[i] = (src[i] - mu) * inv * scale[i] + bias[i];
      mean[r] = mu;
      inv_std[r] = inv;
    }
  });
  sink.Commit();
  if (out.size() > 1) out[1] = Tensor::FromFloat(out[1].dtype(), out[1].shape(), mean);
  if (out.size() > 2) out[2] = Tensor::FromFloat(out[2].dtype(), out[2].shape(), inv_std);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(layer_normalization) {
  registry.Register({.name = "LayerNormalization",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .min_outputs = 1,
                     .max_outputs = 3,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
