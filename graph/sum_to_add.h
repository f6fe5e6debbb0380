// SumToAdd ("sum-to-add"): the variadic Sum becomes the binary Add fusion knows.
//
// Pattern: Sum(x1, ..., xn) -> y (ONNX domain, n >= 1).
// Math: n == 1: y = x1 (the node goes, its readers read x1); n >= 2: a left-folded
// chain Add(...Add(Add(x1, x2), x3)..., xn) with multidirectional broadcasting, the
// last Add keeping the Sum's name and output value. Why: the light models' residual
// connections (ResNet-50, DenseNet, Inception from the ONNX model zoo) are Sums, and
// fuse-epilogue / fuse-pointwise take Add as a member (a conv's residual add becomes
// part of its epilogue) but not the variadic op.
// Preconditions, otherwise the node is kept: typed inputs; n == 1 only when y is not
// a graph output (a graph output keeps its name).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class SumToAdd {
 public:
  absl::string_view name() const { return "sum-to-add"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
