// GlobalAveragePool: mean over all spatial positions of each channel, [N, C, ...] -> [N, C, 1, ...];
// with the kiln-internal attribute channels_last=1, [N, H, W, C] -> [N, 1, 1, C].
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/pooling.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(InferGlobalPool(node));
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (channels_last) {
    const Shape& x = node.input(0)->shape();
    node.output(0)->SetType(node.input(0)->dtype(), {x[0], 1, 1, x[3]});
  }
  return absl::OkStatus();
}

// Mean of each plane of an NCHW-ordered input.
void EvalMean(const Tensor& in, Tensor& out) {
  EvalPerPlane(in, out, [](const float* p, int64_t size) {
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
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (!channels_last) {
    EvalMean(*in[0], out[0]);
    return absl::OkStatus();
  }
  return EvalThroughNchw(in, 1, out[0], [](absl::Span<const Tensor* const> nchw, Tensor& y) {
    EvalMean(*nchw[0], y);
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(global_average_pool) {
  registry.Register({.name = "GlobalAveragePool", .infer = ops::Infer, .eval = ops::Eval});
}
