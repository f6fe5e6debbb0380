// ArgMax / ArgMin: inference and reference evaluation, shared by the two op
// files. Internal to graph/ops.
#pragma once

#include "absl/status/status.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// ArgMax / ArgMin: attributes axis, keepdims, select_last_index; numeric input;
// int64 output.
absl::Status InferArgReduce(Node& node);
absl::Status EvalArgReduce(const Node& node, const Tensor& in, Tensor& out, bool is_max);

}  // namespace kiln::ops
