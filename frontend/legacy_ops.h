// Rewrites nodes written against older ONNX opsets into the newest form of their
// op, which is the only form kiln's op definitions implement.
//
// Rules (opset = the model's default-domain opset, or the node's own where
// `node_opsets` gives one: nodes from an ONNX function body, frontend/expand_functions.h):
//   - attributes that later became inputs move to constant inputs:
//     Squeeze/Unsqueeze axes (< 13), ReduceSum axes (< 13), other Reduce* axes (< 18),
//     Split split (< 13), Clip min/max (< 11), Pad pads/value (< 11),
//     Slice starts/ends/axes (< 10);
//   - Softmax/LogSoftmax (< 13) coerced their input to 2-D at `axis` (default 1):
//     rewritten as Flatten(axis) -> op(axis=-1) -> Reshape(Shape(x));
//   - BatchNormalization drops spatial=1/is_test/consumed_inputs (spatial=0 is an error);
//     Dropout drops is_test; all ops drop consumed_inputs;
//   - opset < 7 binary ops: `broadcast`/`axis` legacy broadcasting becomes numpy
//     broadcasting (B reshaped with trailing 1s when an axis is given);
//   - PRelu (< 7) applied a 1-D slope per channel: reshaped to [C, 1, ..., 1];
//   - Cast (< 6) named its type as a string; Concat (< 4) defaulted axis to 1.
#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "graph/graph.h"

namespace kiln {

absl::Status UpgradeLegacyNodes(Graph& graph, int64_t model_opset,
                                const absl::flat_hash_map<const Node*, int64_t>& node_opsets = {});

}  // namespace kiln
