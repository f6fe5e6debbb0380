// FusePointwise ("fuse-pointwise"): element-wise work that no matmul took becomes
// single kernels; Softmax takes its element-wise prologue. (LayerNorm and RMSNorm
// groups: fusion/fuse_norms.h, which runs first.)
//
// Patterns, in the order the pass applies them:
//  1. "softmax": Softmax S over the last axis, not yet fused, takes the mask Add
//     (operand broadcasting into the scores) and the scale (Mul by a one-element
//     operand, or Div by one) before it, in the order Softmax(Add(Scale(s), mask)),
//     Softmax(Add(s, mask)) or Softmax(Scale(s)); each taken intermediate must be
//     read by the next node only (the scores are the big tensor the fusion avoids
//     writing; "other consumers: " otherwise).
//  2. "pointwise": maximal convex DAGs of element-wise nodes (OpDef::is_elementwise,
//     one output, float or bool dtypes) whose outputs all have one shape, the
//     group's iteration space; inputs from outside only broadcast into it. Built
//     greedily in graph order: a node joins the groups of its producers of the same
//     shape (all of them when the union stays convex, else the largest one that
//     stays convex, else it starts a group). Intermediates read outside become extra
//     outputs. Groups of one node are not formed.
//  3. A pointwise group (or a single element-wise node) also takes the Transposes,
//     Expands and constant-argument Slices that feed it from outside, when the group
//     is their only reader and the set stays convex: the kernel reads the view's
//     input through its strides instead of a copy kernel writing it out first
//     (GPT-2's logits: Cast(Slice(padded MatMul)) in one pass; a Transpose at a
//     layout boundary next to a residual add), and the views feeding those views
//     (Llama's RoPE reads its input through the head split's Transpose, directly and
//     through a Slice of step -1). Views of values computed inside the group are not
//     taken.
// Math: unchanged (the group's body is its members).
//
// Reported: element-wise producers of another shape next to a group ("shape: " —
// broadcast inputs are read, not fused), merges refused for convexity ("not
// convex: "), integer element-wise nodes ("dtype: "), and the rule failures of 1.
//
// Preconditions: a typed graph. Runs last among the fusion passes: matmul
// epilogues/prologues claim their element-wise neighbours first (that fusion saves
// a whole round trip of the matmul output).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FusePointwise {
 public:
  explicit FusePointwise(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-pointwise"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  absl::StatusOr<bool> FuseSoftmaxes(Graph& graph);
  absl::StatusOr<bool> FuseElementwise(Graph& graph);

  FusionReport* report_;
};

}  // namespace kiln
