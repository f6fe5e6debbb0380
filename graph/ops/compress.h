// Compress's plan, shared by the CPU reference (graph/ops/compress.cc) and the GPU
// kernel (codegen/ops/indexing.cc). Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// The input seen as [outer, len, inner] (flattened: [1, numel, 1]); output element
// (o, j, i) is input element (o, kept[j], i).
struct CompressPlan {
  bool flatten = false;
  int64_t axis = 0;
  int64_t outer = 1, len = 1, inner = 1;
  std::vector<int64_t> kept;
  Shape out;
};

// Errors name the node; FailedPrecondition when the condition is not a constant.
absl::StatusOr<CompressPlan> PlanCompress(const Node& node);

}  // namespace kiln::ops
