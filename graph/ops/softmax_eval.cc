// Softmax / LogSoftmax along an axis: inference and reference evaluation.
#include "graph/ops/softmax_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/ops/axes.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

void SoftmaxAlongAxis(const Tensor& in, int64_t axis, bool log, Tensor& out) {
  const Shape& shape = in.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t len = shape.empty() ? 1 : shape[axis];
  const FloatView xv(in);
  FloatSink sink(out);
  const float* x = xv.data();
  float* y = sink.data();
  // Rows of `len` elements `inner` apart, processed `inner` at a time so the loops
  // over the row's positions stay contiguous.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len * std::min(inner, kChunk), 1));
  ParallelFor(outer * chunks, grain, [&](int64_t b, int64_t e) {
    std::vector<float> mx, sum;
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / chunks;
      const int64_t i0 = (t % chunks) * kChunk;
      const int64_t n = std::min(kChunk, inner - i0);
      const float* xs = x + o * len * inner + i0;
      float* ys = y + o * len * inner + i0;
      mx.assign(n, -std::numeric_limits<float>::infinity());
      sum.assign(n, 0.f);
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        for (int64_t i = 0; i < n; ++i) mx[i] = std::max(mx[i], row[i]);
      }
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        float* dst = ys + l * inner;
        for (int64_t i = 0; i < n; ++i) {
          dst[i] = std::exp(row[i] - mx[i]);
          sum[i] += dst[i];
        }
      }
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        float* dst = ys + l * inner;
        if (log) {
          for (int64_t i = 0; i < n; ++i) dst[i] = row[i] - mx[i] - std::log(sum[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) dst[i] /= sum[i];
        }
      }
    }
  });
  sink.Commit();
}

absl::Status InferSoftmaxNode(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(NormalizeAxis(node, axis, node.input(0)->rank()).status());
  return InferSameAsInput(node);
}

absl::Status EvalSoftmaxNode(const Node& node, const Tensor& in, bool log, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, in.rank()));
  SoftmaxAlongAxis(in, axis, log, out);
  return absl::OkStatus();
}

}  // namespace kiln::ops
