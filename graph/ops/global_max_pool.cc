// GlobalMaxPool: max over all spatial positions of each channel, [N, C, ...] -> [N, C, 1, ...].
#include <limits>

#include "graph/op_registry.h"
#include "graph/ops/pooling.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  EvalPerPlane(*in[0], out[0], [](const float* p, int64_t size) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < size; ++i) {
      if (p[i] > m || p[i] != p[i]) m = p[i];  // NaN propagates
    }
    return m;
  });
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(global_max_pool) {
  registry.Register({.name = "GlobalMaxPool", .infer = ops::InferGlobalPool, .eval = ops::Eval});
}
