// RecognizeRope ("recognize-rope"): rotary position embedding as the exporters write
// it (Llama, GPT-NeoX: q * cos + rotate_half(q) * sin, rotate_half(x) =
// Concat(-x[..., D/2:], x[..., :D/2])) becomes element-wise work over x viewed as
// [..., 2, D/2], where rotate_half is a strided view (the two halves swapped by a
// Slice of step -1) times a sign, so fuse-pointwise makes the whole rotation one
// kernel instead of a Slice, a Neg, a Concat and the products.
//
// Pattern (Mul and Add operands in either order):
//   s1  = Slice(x, 0, D/2, axis = -1)      s2 = Slice(x, D/2, D, axis = -1)
//   rot = Concat(Neg(s2), s1, axis = -1)
//   y   = Add(Mul(x, cos), Mul(rot, sin))
// -> x5 = Reshape(x, [..., 2, D/2]) (when x = Transpose(x0) keeps the last axis last
//    and only the pattern reads x: Transpose(Reshape(x0, [..., 2, D/2])), which
//    fuse-pointwise reads through strides, so the head split's copy goes too),
//    cos5 and sin5 likewise,
//    rot5 = Mul(Slice(x5, start 1, step -1, axis -2), [[-1], [1]]),
//    y = Reshape(Add(Mul(x5, cos5), Mul(rot5, sin5)), x's shape)   (writing y's value).
// Math: identical element by element (the same products and sum; rot5[..., 0, j] =
// -x[..., D/2 + j], rot5[..., 1, j] = x[..., j]).
// Preconditions: D = x.shape[-1] is even; the Slices have constant arguments taking
// exactly those halves; cos and sin have x's dtype, last dim D and broadcast into x;
// s1, s2, the Neg, rot and the two products are read by the pattern alone and are no
// graph outputs.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class RecognizeRope {
 public:
  absl::string_view name() const { return "recognize-rope"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
