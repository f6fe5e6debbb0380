// Helpers shared by the fusion passes: re-forming an existing FusedGroup with more
// members, broadcasting and consumer queries, and filling the fusion report.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

// Replaces the FusedGroup node `group` and the outer nodes `extra` by ONE group
// holding the body's nodes plus `extra`, named like `group`, anchored at the same
// body node, with pattern `pattern`. The set {group} + extra must be convex in
// `graph` (checked first: FailedPrecondition and no change otherwise). Used by
// passes that extend a group formed by an earlier pass (e.g. FuseEpilogue growing a
// "prologue+matmul" group). Returns the new group node.
absl::StatusOr<Node*> ExtendFusedGroup(Graph& graph, Node* group, const std::vector<Node*>& extra,
                                       absl::string_view pattern);

// Whether a tensor of shape `operand` broadcasts (numpy rules) into `target` without
// growing it: rank(operand) <= rank(target) and every aligned dim is 1 or equal.
bool BroadcastsInto(const Shape& operand, const Shape& target);

// A Transpose, Expand or Slice with constant arguments: a strided view of its input
// that the pointwise and concat kernels read through (codegen::ops::ViewOf).
bool IsStridedView(const Node& n);

// The distinct nodes reading `value`, in use order.
std::vector<Node*> Consumers(const Value* value);

// Whether `value` is read by a node outside `members` or is a graph output.
bool HasOutsideUse(const Graph& graph, const Value* value, const std::vector<Node*>& members);

// A non-group node with one output whose op is element-wise (OpDef::is_elementwise).
bool IsElementwise(const Node* n);

// Why element-wise node `n` cannot be a pointwise member ("dtype: " for integer
// math, "shape: " for an untyped output or an input that does not broadcast into
// it); "" when it can.
std::string PointwiseProblem(const Node& n);

// Names of `nodes`, in the given order.
std::vector<std::string> NodeNames(const std::vector<Node*>& nodes);

// Appends a group entry for the FusedGroup node `group` (its pattern and members
// attributes) to `report` (nullptr: nothing).
void ReportGroup(FusionReport* report, absl::string_view pass, const Node& group);
void ReportRejection(FusionReport* report, absl::string_view pass, std::vector<std::string> nodes,
                     std::string reason);

// FormFusedGroup, then the report entry: the group on success, else a "not convex: "
// rejection naming `candidate` (default: NodeNames(members)). Returns whether the
// group was formed.
bool FormAndReportGroup(Graph& graph, FusionReport* report, absl::string_view pass,
                        const std::vector<Node*>& members, absl::string_view pattern, const Node* anchor,
                        const std::string& group_name = "", std::vector<std::string> candidate = {});

// Which operands MatMul `matmul` reads transposed through its layout flags
// (trans_a / trans_b, graph/ops/mat_mul.cc): "" for none, else "A (trans_a)",
// "B (trans_b)" or "A and B (trans_a, trans_b)"; a flag that is not 0 counts as set.
// Rewrites that rebuild a MatMul from its operands in row-major form (fuse-siblings'
// concatenated or stacked weights) refuse flagged MatMuls with this in the reason.
std::string TransposedOperands(const Node& matmul);

// Columns [first, first + n) of a 2-D tensor [K, N] as a new [K, n] tensor (a merged
// weight's blocks: fuse-siblings' split matmul, fuse-gated-matmul's gate_up halves).
Tensor ColumnBlock(const Tensor& w, int64_t first, int64_t n);

// "'name'" quoting used in report reasons.
std::string Quote(absl::string_view name);

// A default-domain MatMul of two present operands without layout flags.
bool IsPlainMatMul(const Node* n);

}  // namespace kiln
