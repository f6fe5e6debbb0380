// FuseConcat ("fuse-concat"): a Concat and the strided views that feed it become one
// FusedGroup (pattern "concat") that codegen runs as one strided copy per input,
// each reading its part straight from the tensor the views start from.
//
// Pattern: Concat(x_1, ..., x_n) where some x_i is the output of a chain of Slice,
// Transpose or Expand nodes with constant arguments (fusion/group_util.h,
// IsStridedView), each read only by nodes of the group and not a graph output.
// torch.roll exports as Concat(Slice(x, a:), Slice(x, :a)) per rolled axis (Swin's
// cyclic shift), Swin's patch merging as Concat of four step-2 Slices of two step-2
// Slices (each of those read by two of the four).
// Math: unchanged (the group's body is the members, which the CPU reference
// evaluates); each Slice no longer writes its part to memory before the Concat
// copies it again.
//
// Runs after the attention, prologue and epilogue passes and before fuse-pointwise
// (which closes the fusion report); the views it takes are read by the Concat alone,
// so no other group wants them.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseConcat {
 public:
  explicit FuseConcat(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-concat"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
