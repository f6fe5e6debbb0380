// LRN: local response normalisation across channels,
// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
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
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  if (node.input(0)->rank() < 2) {
    return node.Error(absl::StrCat("input must be [N, C, ...], got ", node.input(0)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t size, node.GetInt("size"));
  if (size < 1) return node.Error(absl::StrCat("size must be positive, got ", size));
  KILN_RETURN_IF_ERROR(node.GetFloat("alpha", 1e-4f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("beta", 0.75f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("bias", 1.f).status());
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t size, node.GetInt("size"));
  KILN_ASSIGN_OR_RETURN(float alpha, node.GetFloat("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, node.GetFloat("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, node.GetFloat("bias", 1.f));
  const Shape& xs = in[0]->shape();
  const int64_t batch = xs[0], c = xs[1];
  const int64_t plane = batch * c == 0 ? 0 : in[0]->numel() / (batch * c);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const float scale = alpha / static_cast<float>(size);
  const FloatView x(*in[0]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(batch * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(plane * size, 1)),
              [&](int64_t s, int64_t e) {
                std::vector<float> acc(plane);
                for (int64_t t = s; t < e; ++t) {
                  const int64_t n = t / c, ch = t % c;
                  std::fill(acc.begin(), acc.end(), 0.f);
                  for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
                    const float* src = x.data() + (n * c + k) * plane;
                    for (int64_t i = 0; i < plane; ++i) acc[i] += src[i] * src[i];
                  }
                  const float* src = x.data() + t * plane;
                  float* dst = y + t * plane;
                  for (int64_t i = 0; i < plane; ++i) dst[i] = src[i] / std::pow(bias + scale * acc[i], beta);
                }
              });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(lrn) { registry.Register({.name = "LRN", .infer = ops::Infer, .eval = ops::Eval}); }
