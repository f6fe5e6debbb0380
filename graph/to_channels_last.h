// ToChannelsLast ("to-channels-last"): 2-D convolutions and pools run channels-last
// (NHWC), and the layout changes only where an NCHW value enters or leaves the
// channels-last region.
//
// Why: cuDNN's NCHW fp16 convolutions take its slow path (ResNet-50 at batch 128 ran
// several times slower in kiln with NCHW than under torch.compile with channels_last
// on the H100); tensor-core convolutions want the channels innermost.
//
// Seeds: Conv (4-D X), MaxPool (one output), AveragePool and GlobalAveragePool with
// a 4-D input become the same op with the kiln-internal attribute channels_last=1
// (graph/ops/channels_last.h: X [N, H, W, C], Y [N, OH, OW, OC], Conv's W [OC, KH, KW, C/g]).
// A constant W is permuted at compile time; a computed W gets a Transpose.
// The region grows forward over ops that do not care about the layout when one of
// their inputs is already channels-last:
//   - element-wise ops (OpDef::is_elementwise) with a rank-4 output: rank-4 operands
//     are taken channels-last (a constant is permuted, a computed value without an
//     NHWC twin gets Transpose [0,2,3,1]); operands with one element are kept; a
//     constant of lower rank is permuted as if padded to rank 4, with leading unit
//     dims dropped ([C,1,1] -> [C]); any other operand stops the op;
//   - BatchNormalization left after canonicalisation (constant parameters) becomes
//     Mul and Add by per-channel [C] constants;
//   - Concat of rank-4 values (the axis is remapped, channel 1 -> 3);
//   - Flatten/Reshape/Squeeze of a value whose NCHW spatial dims are 1 ([N, C, 1, 1]
//     and [N, 1, 1, C] hold the same bytes): the op reads the NHWC value unchanged
//     when that gives the same output type, else it stays outside the region;
//   - Transpose [0,2,3,1] of a value with an NHWC twin is the twin (the inverse pair
//     cancels); a Transpose [0,3,1,2] feeding a seed gives the seed its input.
// Every other reader of a channels-last value reads an NCHW copy made by one
// Transpose [0,3,1,2] that writes the original value (names of graph outputs stay).
//
// Preconditions: typed, canonicalised graph. Postconditions: typed, topologically
// sorted; graph inputs and outputs keep their names, shapes and values.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class ToChannelsLast {
 public:
  absl::string_view name() const { return "to-channels-last"; }
  // Returns whether any op was moved to channels-last.
  absl::StatusOr<bool> Run(Graph& graph);
};

// Whether `graph` has a Conv with 2 spatial dims (a 4-D input), the case where
// CompileOptions::layout "auto" picks channels-last.
bool HasConv2D(const Graph& graph);

}  // namespace kiln
