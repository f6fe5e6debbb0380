// Einsum's plan, shared by the CPU reference (graph/ops/einsum.cc) and the GPU kernel
// (codegen/ops/einsum.cc). Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// Output element o is the sum over every index c of the `contracted` space of the
// product over operands k of operand k's element at
//   sum_d o_d * out_strides[k][d] + sum_e c_e * sum_strides[k][e]
// (element strides; 0 where the operand lacks the letter or broadcasts it, the sum of
// its dims' strides where a letter repeats within it: a diagonal).
struct EinsumPlan {
  Shape out;
  Shape contracted;
  std::vector<std::vector<int64_t>> out_strides;
  std::vector<std::vector<int64_t>> sum_strides;
};

// Parses `equation` (explicit "ab,bc->ac" or implicit "ab,bc" form, "..." for
// broadcast dims) against the inputs' shapes; errors name the node.
absl::StatusOr<EinsumPlan> PlanEinsum(const Node& node);

}  // namespace kiln::ops
