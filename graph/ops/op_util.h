// Shared helpers for op files: broadcasting, axes, common inference and
// element-wise evaluation. Internal to graph/ops.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Multidirectional (numpy) broadcast of two shapes; error names the node.
absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b);

// Normalises a possibly negative axis into [0, rank); error names the node.
absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank);

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// For each element of `out_shape` (row-major), the offset of the element of a
// tensor of `in_shape` broadcast to it. in_shape must broadcast to out_shape.
std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape);

// The integer values of a constant input (shape/axes arguments). Fails with a
// message naming the node when the input is absent or not a compile-time constant.
absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what);

// Inference: output 0 has input 0's dtype and shape.
absl::Status InferSameAsInput(Node& node);
// Inference: output 0 has input 0's dtype and the broadcast shape of all inputs;
// all inputs must share a dtype. `out_dtype` overrides the output dtype (e.g. bool).
absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype = std::nullopt);
// Fails unless input `i` has a floating dtype (f32, f16, bf16).
absl::Status RequireFloat(const Node& node, int i);

// Element-wise evaluation. Floating inputs are computed as float with `ff`;
// integer and bool inputs as int64 with `fi` (pass nullptr when the op is only
// defined on floating types). The result is stored in out's dtype.
absl::Status EvalUnary(const Node& node, const Tensor& in, Tensor& out,
                       const std::function<float(float)>& ff,
                       const std::function<int64_t(int64_t)>& fi = nullptr);
absl::Status EvalBinary(const Node& node, const Tensor& a, const Tensor& b, Tensor& out,
                        const std::function<float(float, float)>& ff,
                        const std::function<int64_t(int64_t, int64_t)>& fi = nullptr);

}  // namespace kiln::ops
