// ConvTranspose's geometry, shared by the CPU reference (graph/ops/conv_transpose.cc)
// and the GPU kernel (codegen/ops/conv_transpose.cc). Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// Per spatial dim: input position i and kernel tap k write output position
// i * strides + k * dilations - pads_begin, kept where it lies in [0, output).
struct ConvTransposeGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, output;
};

// From the attributes (strides, dilations, pads, auto_pad, output_padding,
// output_shape) and the shapes of X and W; errors name the node.
absl::StatusOr<ConvTransposeGeometry> ComputeConvTransposeGeometry(const Node& node);

}  // namespace kiln::ops
