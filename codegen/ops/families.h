// Per-node kernel generators by family, dispatched from codegen/op_kernels.cc.
// Each Generate* handles the ops its Is* accepts and returns Unimplemented for a
// form it cannot generate.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/op_kernels.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// Element-wise ops with multidirectional broadcasting (codegen/ops/pointwise.cc).
bool IsPointwiseOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwise(const Node& node);
// A FusedGroup whose members are all element-wise over the group's output shape
// (fusion's "pointwise" groups): one kernel for the whole group.
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwiseGroup(const Node& group);

// Data movement: views, Transpose, Concat, Split, Slice, Gather, Pad, Tile, Expand,
// Identity, Dropout (codegen/ops/movement.cc).
bool IsMovementOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateMovement(const Node& node);

// Reductions, Softmax/LogSoftmax, LayerNormalization, global pools, ArgMax/ArgMin
// (codegen/ops/reduce.cc).
bool IsReduceOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateReduce(const Node& node);

// Windowed ops: MaxPool, AveragePool, LRN (codegen/ops/pool.cc).
bool IsPoolOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePool(const Node& node);

}  // namespace kiln::codegen::ops
