// Where: element-wise condition ? x : y over the broadcast of all three inputs;
// condition is bool, x and y share a dtype (copied bit-exactly).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  if (node.input(0)->dtype() != DType::kBool) {
    return node.Error(absl::StrCat("condition must be bool, got ", DTypeName(node.input(0)->dtype())));
  }
  const DType dtype = node.input(1)->dtype();
  if (node.input(2)->dtype() != dtype) {
    return node.Error(absl::StrCat("X and Y must share a dtype, got ", DTypeName(dtype), " and ",
                                   DTypeName(node.input(2)->dtype())));
  }
  KILN_ASSIGN_OR_RETURN(Shape shape,
                        BroadcastShapes(node, node.input(0)->shape(), node.input(1)->shape()));
  KILN_ASSIGN_OR_RETURN(shape, BroadcastShapes(node, shape, node.input(2)->shape()));
  node.output(0)->SetType(dtype, shape);
  return absl::OkStatus();
}

// Selects elements of type T (a same-sized stand-in for the real dtype).
template <typename T>
void Select(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  const int64_t n = out.numel();
  const std::vector<int64_t> oc = BroadcastOffsets(cond.shape(), out.shape());
  const std::vector<int64_t> ox = BroadcastOffsets(x.shape(), out.shape());
  const std::vector<int64_t> oy = BroadcastOffsets(y.shape(), out.shape());
  const uint8_t* c = cond.data<uint8_t>();
  const T* px = static_cast<const T*>(x.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  T* po = static_cast<T*>(out.mutable_raw_data());
  ParallelFor(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) po[i] = c[oc[i]] ? px[ox[i]] : py[oy[i]];
  });
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  switch (DTypeSize(out[0].dtype())) {
    case 1: Select<uint8_t>(*in[0], *in[1], *in[2], out[0]); break;
    case 2: Select<uint16_t>(*in[0], *in[1], *in[2], out[0]); break;
    case 4: Select<uint32_t>(*in[0], *in[1], *in[2], out[0]); break;
    case 8: Select<uint64_t>(*in[0], *in[1], *in[2], out[0]); break;
    default:
      return node.Error(absl::StrCat("unsupported dtype ", DTypeName(out[0].dtype())));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(where) {
  registry.Register({.name = "Where", .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
