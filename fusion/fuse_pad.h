// FusePad ("fuse-pad"): a constant-mode Pad and the conversions and strided views
// that feed it become one FusedGroup (pattern "pad") that codegen runs as one kernel
// reading each element where the chain starts.
//
// Pattern: Pad(x, pads[, value[, axes]]) in "constant" mode whose pads, value and
// axes are constants the group body holds inline (or absent), whose data input x is
// the end of a chain of at most
// one Cast between floating dtypes and Transposes, Slices or Expands with constant
// arguments (fusion/group_util.h, IsStridedView), each read only by the next node of
// the chain and not a graph output. An image model's input as kiln's own passes leave
// it: Cast to fp16 (lower-precision), Transpose to channels-last (to-channels-last),
// Pad of the channels to a multiple of 8 (pad-conv-channels): three kernels writing
// the whole image three times, one kernel now.
// Math: unchanged (the group's body is the members; a Cast between float dtypes
// converts through fp32 whichever side of the views it sits).
//
// Runs before fuse-pointwise (which would otherwise leave the Cast alone, a single
// node, and the Transpose a copy).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FusePad {
 public:
  explicit FusePad(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-pad"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
