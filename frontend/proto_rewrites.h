// Rewrites of the ONNX model itself, before kiln builds its graph, for node forms
// kiln's op definitions do not take:
//   - Upsample (opsets 7-9, deprecated) becomes Resize with the coordinate transform
//     Upsample used (asymmetric; nearest rounds down), its scales attribute (opset
//     < 9) an initializer;
//   - If whose condition is a compile-time constant (an initializer, a Constant node's
//     output or a bound input) becomes the nodes of the branch it takes; an If on a
//     run-time condition is FailedPrecondition naming the node (kiln compiles one
//     static graph), so callers that can bind inputs know to.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "graph/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln {

// `bound`: inputs fixed at compile time (ImportOptions::constant_inputs).
absl::Status RewriteOnnxModel(onnx::ModelProto& model, const std::map<std::string, Tensor>& bound);

}  // namespace kiln
