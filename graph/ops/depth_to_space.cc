// DepthToSpace: moves blocks of channels of an NCHW tensor into blocksize x
// blocksize spatial blocks (mode DCR, the default, or CRD).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

struct Params {
  int64_t b;
  bool crd;
};

absl::StatusOr<Params> GetParams(const Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t b, node.GetInt("blocksize"));
  KILN_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "DCR"));
  if (b <= 0) return node.Error(absl::StrCat("blocksize must be positive, got ", b));
  if (mode != "DCR" && mode != "CRD") {
    return node.Error(absl::StrCat("unknown mode '", mode, "' (expected DCR or CRD)"));
  }
  return Params{b, mode == "CRD"};
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(Params p, GetParams(node));
  const Shape& in = node.input(0)->shape();
  if (in.size() != 4) return node.Error(absl::StrCat("input must be 4-D NCHW, got ", ShapeToString(in)));
  if (in[1] % (p.b * p.b) != 0) {
    return node.Error(
        absl::StrCat("channels (", in[1], ") must be divisible by blocksize^2 (", p.b * p.b, ")"));
  }
  node.output(0)->SetType(node.input(0)->dtype(), {in[0], in[1] / (p.b * p.b), in[2] * p.b, in[3] * p.b});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(Params p, GetParams(node));
  const Shape& s = in[0]->shape();
  const int64_t n = s[0], c = s[1] / (p.b * p.b), h = s[2], w = s[3], b = p.b;
  // The output seen as [N, C', H, b, W, b] reads the input seen as
  // [N, b, b, C', H, W] (DCR) or [N, C', b, b, H, W] (CRD).
  const std::vector<int64_t> st = Strides(p.crd ? Shape{n, c, b, b, h, w} : Shape{n, b, b, c, h, w});
  const std::vector<int64_t> strides = p.crd ? std::vector<int64_t>{st[0], st[1], st[4], st[2], st[5], st[3]}
                                             : std::vector<int64_t>{st[0], st[3], st[4], st[1], st[5], st[2]};
  const Shape space = {n, c, h, b, w, b};
  CopyToDense(in[0]->raw_data(), StridedTables(space, strides), out[0].mutable_raw_data(), space,
              DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(depth_to_space) {
  registry.Register({.name = "DepthToSpace", .infer = ops::Infer, .eval = ops::Eval});
}
