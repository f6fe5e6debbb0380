// GatherToReshape ("gather-to-reshape"): a Gather whose constant indices take every
// element of its axis once, in order, is a Reshape.
//
// Pattern: y = Gather(x, idx) {axis a} with idx a constant integer tensor whose
// elements, in row-major order, are 0, 1, ..., n - 1 for n = x.shape[a] (negative
// indices counted from the end), typed x and y.
// Rewrite: y = Reshape(x, shape(y)) under y's name ("<gather>/shape" the new constant).
// Math: y = x with axis a replaced by idx's dims; as the indices run through axis a in
// order, y holds x's elements in x's order.
// Why: the legacy exporter builds BERT's and DistilBERT's padding mask through a
// Flatten and a Gather of arange(batch * seq) (the zoo's bert.legacy and
// distilbert.legacy): a copy kernel for a view.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class GatherToReshape {
 public:
  absl::string_view name() const { return "gather-to-reshape"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
