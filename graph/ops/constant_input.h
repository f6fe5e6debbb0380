// The constant value of an op input that fixes an output shape (Range, NonZero,
// Unique, Compress's condition, NonMaxSuppression): FailedPrecondition naming the
// node and the input when it is not a compile-time constant, so that callers that
// can bind inputs (the importer's constant_inputs, `--bind`) know to. Internal to
// graph/ops.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/graph.h"

namespace kiln::ops {

inline absl::StatusOr<const Tensor*> ShapeFixingConstant(const Node& node, int input, const char* what) {
  const Value* v = node.input(input);
  if (v == nullptr) return node.Error(absl::StrCat("input '", what, "' is missing"));
  if (!v->is_constant()) {
    return absl::FailedPreconditionError(absl::StrCat(
        node.Describe(), ": input '", what, "' ('", v->name(),
        "') must be a compile-time constant: its values fix the output shape, and kiln compiles static shapes "
        "(bind it with --bind)"));
  }
  return &v->constant();
}

}  // namespace kiln::ops
