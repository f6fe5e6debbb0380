// CollapseViewChains ("collapse-view-chains"): a chain of Transposes and Reshapes
// that leaves the elements in the order they are stored becomes one Reshape of the
// chain's start (or nothing, when the shapes agree), so the Transposes copy nothing.
//
// Pattern: y = V_n(... V_1(x)) for n >= 2 layout views V_i (Transpose, Reshape,
// Unsqueeze, Squeeze, Flatten) with at least one Transpose, where element i of y (in
// row-major order) is element i of x: the composed strided view (graph/strided_view.h)
// is dense at offset 0. The longest such chain ending at each view is taken.
// Rewrite: y = Reshape(x, shape(y)) under y's name (y keeps its name and graph output
// status); when shape(x) == shape(y) and y is not a graph output, y's readers read x.
// Views the chain leaves unread go.
// Second form: a chain with two Transposes or more whose elements move as one
// permutation of its start split into dims (the composed view's factors, sorted by
// stride, tile the start densely) becomes y = Reshape(Transpose(Reshape(x, split),
// perm)), the outer Reshape left out when the Transpose gives y's shape: one copy
// instead of one per Transpose. ConvNeXt's downsampling writes a LayerNorm's NHWC
// output back to NCHW and the patchified 2x2 conv after it (graph/patchify_conv.h)
// gathers its patches from that copy.
// Math: a view that keeps the element order is a Reshape.
// Why: to-channels-last closes an NHWC region with a Transpose back to NCHW where the
// model reshapes or transposes again: Whisper's stem (Conv1d as a height-1 Conv2d,
// graph/conv1d_to_conv2d.h) goes NHWC -> NCHW -> [N, C, L] between its two convs and
// back, and its encoder transposes [N, C, L] to [N, L, C], which is the NHWC data as
// it is; an image model's head flattens the pooled [N, 1, 1, C] map the same way.
// Preconditions: a typed graph; views with typed inputs and outputs (IsViewNode).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class CollapseViewChains {
 public:
  absl::string_view name() const { return "collapse-view-chains"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
