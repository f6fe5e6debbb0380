// The per-op expression of an element-wise node (codegen/ops/pointwise.cc), for
// generators that compose element-wise ops into other kernels (the GEMM epilogue of
// codegen/ops/gemm.cc). Internal to codegen.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ops/kernel_util.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// Operand k of the expression is node input `input`, loaded as `domain` into v<k>,
// broadcast from `view` against the output; `body` (statements) then `result` (an
// expression of domain `result_domain`) compute the node's output element.
struct ElementwiseExpr {
  struct Input {
    int input;
    Shape view;
    Domain domain;
  };
  std::vector<Input> inputs;
  std::string body;
  std::string result;
  Domain result_domain = Domain::kFloat;
};

// Unimplemented (NoKernel) for an op or form without a generated expression.
absl::StatusOr<ElementwiseExpr> ElementwiseSpec(const Node& node);

}  // namespace kiln::codegen::ops
