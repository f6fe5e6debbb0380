// The per-op expression of an element-wise node (codegen/ops/pointwise.cc), for
// generators that compose element-wise ops into other kernels (the GEMM epilogue of
// codegen/ops/gemm.cc). Internal to codegen.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
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

// Register code for the element-wise members of a FusedGroup's body, in body order:
// each member becomes one block computing `t<j>` from its operands, which are
// literals (single-element constants), earlier results (`computed`, which the caller
// may seed, e.g. with the GEMM accumulator) or loads of group inputs, recorded in
// `loads` and named `g<l>` (each (input, domain, view) loaded once). Every member
// other than `skip` must be element-wise over `shape`; NoKernel naming `group`
// otherwise. Shared by pointwise groups and the GEMM epilogue.
struct ElementwiseLoad {
  int input;  // group input index
  Domain domain;
  Shape view;
  // Read through a Transpose/Expand/Slice member (allow_views): element strides over
  // the composed shape and the first element; empty: `view` broadcast, dense.
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // The shape `view` broadcasts into when a member reads it at a batch regrouping of
  // the composed shape (regroup_batch); empty: the composed shape.
  Shape into;
  // dynamic_views: `strides` as expressions over the dim symbols.
  std::vector<DimExpr> dim_strides;
  // Read through row moves (ComposedElementwise::row_views): the caller's row map
  // index; -1: none.
  int row_map = -1;
};
struct ComposedElementwise {
  // Set by the caller: members that are strided views of a group input (ViewOf in
  // codegen/ops/families.h) are folded into the loads of their readers instead of
  // being refused. Only the pointwise group kernel reads loads with strides.
  bool allow_views = false;
  // Set by the caller with allow_views on a dynamic graph's group (issue 34): only a
  // Transpose of a group input is a view, its strides expressions over the dims
  // (ElementwiseLoad::dim_strides).
  bool dynamic_views = false;
  // Set by the caller: Reshapes of computed values that regroup only the dims before
  // the last two (same element order) pass the value through, and members may write
  // such a regrouping of the composed shape (the attention scores' Swin mask).
  bool regroup_batch = false;
  // Set by the caller: body values that are a group input's rows moved (a Reshape /
  // Transpose / Slice / Concat chain, graph/row_moves.h, whose nodes the caller leaves
  // out of the members): the input and the caller's index of the chain's row map.
  // A member reads such a value at its own shape, which must be the composed one.
  absl::flat_hash_map<const Value*, std::pair<int, int>> row_views;
  std::string code;
  std::vector<ElementwiseLoad> loads;
  absl::flat_hash_map<const Value*, std::pair<std::string, Domain>> computed;
};
absl::Status ComposeElementwise(const Node& group, const Graph& body, const Node* skip, const Shape& shape,
                                ComposedElementwise& out);
// The same over exactly `members` (nodes of `body`, in the order given): the GEMM
// composes a prologue chain per operand and the epilogue separately.
absl::Status ComposeElementwise(const Node& group, const Graph& body, const std::vector<const Node*>& members,
                                const Shape& shape, ComposedElementwise& out);

}  // namespace kiln::codegen::ops
