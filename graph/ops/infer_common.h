// Input checks and common inference rules of op files: constant integer inputs,
// dtype requirements, and the same-as-input / broadcast / float-unary inference.
// Internal to kiln.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/dtype.h"
#include "graph/graph.h"

namespace kiln::ops {

// The integer values of a constant input (shape/axes arguments). Fails with a
// message naming the node when the input is absent, and with FailedPrecondition
// when it is not a compile-time constant (the importer can then bind it).
absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what);

// Inference: output 0 has input 0's dtype and shape.
absl::Status InferSameAsInput(Node& node);
// Inference: output 0 has input 0's dtype and the broadcast shape of all inputs;
// all inputs must share a dtype. `out_dtype` overrides the output dtype (e.g. bool).
absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype = std::nullopt);
// Inference for float-only unary ops: input 0 must be f32/f16/bf16; output 0
// copies its dtype and shape.
absl::Status InferFloatUnary(Node& node);

// Fails unless input `i` has a floating dtype (f32, f16, bf16).
absl::Status RequireFloat(const Node& node, int i);
// Fails unless input `i` is numeric (any supported dtype except bool).
absl::Status RequireNumeric(const Node& node, int i);
// Fails unless input `i` has dtype bool.
absl::Status RequireBool(const Node& node, int i);

}  // namespace kiln::ops
