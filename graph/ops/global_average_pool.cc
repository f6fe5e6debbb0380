// GlobalAveragePool: mean over all spatial positions of each channel, [N, C, ...] -> [N, C, 1, ...].
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  EvalPerPlane(*in[0], out[0], [](const float* p, int64_t size) {
    // Eight partial sums: vectorisable, and less rounding error on large planes.
    float part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= size; i += 8) {
      for (int l = 0; l < 8; ++l) part[l] += p[i + l];
    }
    float sum = 0.f;
    for (; i < size; ++i) sum += p[i];
    for (float v : part) sum += v;
    return sum / static_cast<float>(size);
  });
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(global_average_pool) {
  registry.Register({.name = "GlobalAveragePool", .infer = ops::InferGlobalPool, .eval = ops::Eval});
}
