// ONNX function ops: an op kiln has no definition of, whose ONNX schema defines it as
// a function of other ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Celu,
// MeanVarianceNormalization, the window functions, ...), is replaced by that body,
// as ONNX's own reference runtime does. Bodies may call further function ops;
// expansion repeats until none is left (at most kMaxFunctionDepth levels).
//
// A body is written against its function's opset, which may be older than the
// model's: the opset of every node that came from a body is returned, so that the
// legacy rewrites (frontend/legacy_ops.h) read each node at its own opset.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace kiln {

inline constexpr int kMaxFunctionDepth = 8;

// Expands, in place and in order, every default-domain node of `model`'s graph whose
// op `supported` rejects and whose ONNX schema (at the model's opset) has a function
// body. `node_opsets` receives, by position in the new node list, the opset of each
// node that came from a body. Errors name the node whose body cannot be built.
absl::Status ExpandFunctionOps(onnx::ModelProto& model, const std::function<bool(const std::string&)>& supported,
                               std::map<int, int64_t>* node_opsets);

}  // namespace kiln
