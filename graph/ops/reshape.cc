// Reshape: same data, new shape from a constant `shape` input (0 copies a dim
// unless allowzero=1; -1 is inferred).
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, ConstantInts(node, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(int64_t allowzero, node.GetInt("allowzero", 0));
  const Shape& in = node.input(0)->shape();
  // An input of no elements (a dim of 0) leaves the exporter's computed shapes
  // ambiguous: say so, since the usual cause is a size the user chose.
  const std::string empty_input =
      NumElements(in) == 0 ? " (the input has no elements: was a dim set to 0, e.g. --dim NAME=0?)" : "";
  Shape out(target.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) {
        return node.Error(absl::StrCat("shape[", i, "] = 0 copies a dim the input lacks", empty_input));
      }
      d = in[i];
    }
    if (d == -1) {
      if (infer_at >= 0) return node.Error("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < 0) return node.Error(absl::StrCat("invalid dim ", d, " in shape"));
    out[i] = d;
    if (!CheckedMul(known, d, &known)) {
      return node.Error(absl::StrCat("shape ", ShapeToString(target), " has more elements than a 64-bit count holds"));
    }
  }
  const int64_t total = NumElements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return node.Error(absl::StrCat("cannot reshape ", ShapeToString(in), " to ", ShapeToString(target),
                                     known == 0 ? ": a -1 dim cannot be inferred beside a dim of 0" : "", empty_input));
    }
    out[infer_at] = total / known;
  }
  absl::StatusOr<int64_t> count = CheckedNumElements(out);
  if (!count.ok()) return node.Error(count.status().message());
  if (*count != total) {
    return node.Error(absl::StrCat("cannot reshape ", ShapeToString(in), " (", total, " elements) to ",
                                   ShapeToString(out)));
  }
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(reshape) {
  registry.Register({.name = "Reshape", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::EvalView, .is_view = true});
}
