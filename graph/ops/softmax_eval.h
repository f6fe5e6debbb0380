// Softmax and LogSoftmax along one axis: the opset-13 node inference and
// evaluation, and the fp32 kernel they share. Internal to graph/ops.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Softmax, or LogSoftmax when `log`, of `in` along `axis` (in [0, rank)) into out.
void SoftmaxAlongAxis(const Tensor& in, int64_t axis, bool log, Tensor& out);

// Softmax/LogSoftmax (opset 13): float input, `axis` attribute (default -1) in range.
absl::Status InferSoftmaxNode(Node& node);
absl::Status EvalSoftmaxNode(const Node& node, const Tensor& in, bool log, Tensor& out);

}  // namespace kiln::ops
