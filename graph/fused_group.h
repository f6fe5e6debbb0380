// The fused group: one graph node (op "FusedGroup", domain "kiln") standing for a
// set of original nodes that codegen turns into one kernel.
//
// Representation. The group's body is a small typed kiln graph, the node's "body"
// attribute (AttrKind::kGraph, immutable and shared by copies of the node; the text
// format prints it as its text in a string literal and reads it back):
// body input i is the group node's input i (activations and weights read from
// outside), body output i is the group node's output i (values read outside the
// group, or graph outputs). Single-element constants of the members are copied into
// the body (generated code bakes them in as literals); larger constants stay
// outside as group inputs (they remain bundle weights). Other attributes:
//   pattern  string   what the group is: "matmul+epilogue", "conv+epilogue",
//                     "prologue+matmul", "siblings", "dual-matmul", "pointwise",
//                     "layernorm", "softmax", ... (the fusion report prints it)
//   anchor   string   the body node that anchors the kernel (MatMul/Gemm/Conv), or
//                     "" for a group without one
//   members  strings  the names of the original nodes, in order (their ONNX names)
//
// The CPU reference evaluates a group by evaluating its body (graph/ops/
// fused_group.cc), so fused and unfused graphs are compared without a GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

inline constexpr char kFusedGroupOp[] = "FusedGroup";
inline constexpr char kKilnDomain[] = "kiln";
// Constants a group's members read that are copied into its body instead of
// becoming group inputs: scalars, and the small integer arguments (a Slice's starts,
// an Expand's shape) that shape inference needs to see as constants.
inline constexpr int64_t kMaxInlinedConstantElements = 1;
inline constexpr int64_t kMaxInlinedIntegerArgumentElements = 8;
bool InlinedIntoGroupBody(const Value& constant);

bool IsFusedGroup(const Node& node);

// A group's "members" attribute (its original node names, in order); empty when
// `node` is not a group or has none.
std::vector<std::string> FusedGroupMembers(const Node& node);

// Replaces `members` (nodes of `graph`, any order) by one FusedGroup node named
// `name` (unique; "" picks one). `anchor` is a member or nullptr. Fails
// (FailedPrecondition) without changing the graph when the members are not convex
// (some path leaves the set and comes back, so no single kernel can run them), when a
// member is itself a group, or when the set is empty. The group takes the members'
// place in the node order. Returns the new node.
absl::StatusOr<Node*> FormFusedGroup(Graph& graph, const std::vector<Node*>& members, absl::string_view pattern,
                                     const Node* anchor, const std::string& name = "");

// Replaces a FusedGroup node by the nodes of its body (the inverse of
// FormFusedGroup): used where no fused kernel exists for a group yet. Member nodes
// keep their names; inlined constants become graph constants again.
absl::Status InlineFusedGroup(Graph& graph, Node* group);
// The same, returning the inlined nodes in body order; with `reuse_outer_constants`, a
// body constant whose twin (same name, dtype, shape and bytes) is still a constant of
// `graph` is read from there instead of being added again (a group being re-formed
// larger: fusion/group_util.h's ExtendFusedGroup). InvalidArgument when the body's
// inputs or outputs do not match the node's.
absl::StatusOr<std::vector<Node*>> InlineFusedGroupNodes(Graph& graph, Node* group, bool reuse_outer_constants);

// The body graph of a FusedGroup node (its "body" attribute), typed. Callers that
// keep it past the node's life hold the shared pointer.
absl::StatusOr<std::shared_ptr<const Graph>> FusedGroupBody(const Node& group);

// For readers of the text format (graph/text_format.h): when `group` is a FusedGroup
// whose "body" is still the string the printer wrote, parses and type-checks it into
// the graph attribute. Other nodes, and bodies already graphs, are left alone.
// InvalidArgument naming the node when the text does not parse or type-check.
absl::Status ReadFusedGroupBody(Node& group);

// Whether `members` are convex in `graph`: no path from a member through a
// non-member back to a member.
bool IsConvex(const Graph& graph, const std::vector<Node*>& members);

}  // namespace kiln
