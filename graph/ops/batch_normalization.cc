// BatchNormalization (inference): y = (x - mean) / sqrt(var + epsilon) * scale + B per channel.
#include <cmath>
#include <vector>

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
  KILN_ASSIGN_OR_RETURN(int64_t training_mode, node.GetInt("training_mode", 0));
  if (training_mode != 0) {
    return node.Unsupported("training_mode=1 is not supported: kiln runs inference only");
  }
  if (node.num_outputs() > 1) {
    return node.Unsupported(
        absl::StrCat("has ", node.num_outputs(),
                     " outputs, but running_mean/running_var are only produced in training "
                     "mode, which kiln does not support"));
  }
  KILN_RETURN_IF_ERROR(node.GetFloat("epsilon", 1e-5f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("momentum", 0.9f).status());
  for (int i = 0; i < 5; ++i) KILN_RETURN_IF_ERROR(RequireFloat(node, i));
  if (x->rank() < 2) {
    return node.Error(absl::StrCat("input X must be [N, C, ...], got ", x->TypeString()));
  }
  const int64_t c = x->shape()[1];
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    if (node.input(i)->shape() != Shape{c}) {
      return node.Error(absl::StrCat(kNames[i], " must be [", c, "] (one value per channel of X ",
                                     ShapeToString(x->shape()), "), got ", node.input(i)->TypeString()));
    }
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(float epsilon, node.GetFloat("epsilon", 1e-5f));
  const Shape& xs = in[0]->shape();
  const int64_t batch = xs[0], c = xs[1];
  const int64_t plane = batch * c == 0 ? 0 : in[0]->numel() / (batch * c);
  const FloatView x(*in[0]), scale(*in[1]), bias(*in[2]), mean(*in[3]), var(*in[4]);
  // y = x * a + b per channel.
  std::vector<float> a(c), b(c);
  for (int64_t i = 0; i < c; ++i) {
    a[i] = scale.data()[i] / std::sqrt(var.data()[i] + epsilon);
    b[i] = bias.data()[i] - mean.data()[i] * a[i];
  }
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(batch * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(plane, 1)),
              [&](int64_t s, int64_t e) {
                for (int64_t t = s; t < e; ++t) {
                  const float av = a[t % c], bv = b[t % c];
                  const float* src = x.data() + t * plane;
                  float* dst = y + t * plane;
                  for (int64_t i = 0; i < plane; ++i) dst[i] = src[i] * av + bv;
                }
              });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(batch_normalization) {
  registry.Register({.name = "BatchNormalization",
                     .min_inputs = 5,
                     .max_inputs = 5,
                     .min_outputs = 1,
                     .max_outputs = 3,
                     .infer = ops::Infer,
                     .eval = ops::Eval});
}
