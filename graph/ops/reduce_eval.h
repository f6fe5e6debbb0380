// The Reduce* family (ReduceSum, ReduceMean, ReduceMax, ...): which axes a node
// reduces, its inference, and the reference evaluation. Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// The Reduce* family: element map, combine and finish.
enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum };

// Which axes of a rank-`rank` input a Reduce* node reduces: the optional constant
// axes input 1, with noop_with_empty_axes deciding what empty axes mean.
absl::StatusOr<std::vector<bool>> ReducedAxes(const Node& node, int64_t rank);
// Inference for Reduce*: keepdims, axes; dtype checks (integers reduce in int64,
// bool only where `allow_bool`).
absl::Status InferReduce(Node& node, bool allow_integer, bool allow_bool);
// Reference evaluation of a Reduce* node, linear time, parallel over outputs.
absl::Status EvalReduce(const Node& node, ReduceKind kind, const Tensor& in, Tensor& out);

}  // namespace kiln::ops
