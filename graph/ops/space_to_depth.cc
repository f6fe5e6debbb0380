// SpaceToDepth: moves blocksize x blocksize spatial blocks of an NCHW tensor
// into channels (the inverse of DepthToSpace in DCR mode).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t b, node.GetInt("blocksize"));
  if (b <= 0) return node.Error(absl::StrCat("blocksize must be positive, got ", b));
  const Shape& in = node.input(0)->shape();
  if (in.size() != 4) return node.Error(absl::StrCat("input must be 4-D NCHW, got ", ShapeToString(in)));
  if (in[2] % b != 0 || in[3] % b != 0) {
    return node.Error(
        absl::StrCat("height and width (", in[2], ", ", in[3], ") must be divisible by blocksize ", b));
  }
  node.output(0)->SetType(node.input(0)->dtype(), {in[0], in[1] * b * b, in[2] / b, in[3] / b});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t b, node.GetInt("blocksize"));
  const Shape& s = in[0]->shape();
  const int64_t n = s[0], c = s[1], h = s[2] / b, w = s[3] / b;
  // The output seen as [N, b, b, C, H', W'] reads the input seen as
  // [N, C, H', b, W', b].
  const std::vector<int64_t> st = Strides({n, c, h, b, w, b});
  const Shape space = {n, b, b, c, h, w};
  CopyToDense(in[0]->raw_data(), StridedTables(space, {st[0], st[3], st[5], st[1], st[2], st[4]}),
              out[0].mutable_raw_data(), space, DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(space_to_depth) {
  registry.Register({.name = "SpaceToDepth", .infer = ops::Infer, .eval = ops::Eval});
}
