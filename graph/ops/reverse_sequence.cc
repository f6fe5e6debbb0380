// ReverseSequence: for each batch entry b, the first sequence_lens[b] steps along
// time_axis are reversed; the rest are copied. time_axis and batch_axis are 0 or 1.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, node.GetInt("time_axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, node.GetInt("batch_axis", 1));
  const Shape& x = node.input(0)->shape();
  if (x.size() < 2) return node.Error(absl::StrCat("input must have rank >= 2, got ", node.input(0)->TypeString()));
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0))) {
    return node.Error(absl::StrCat("time_axis and batch_axis must be 0 and 1 in some order, got ", time_axis, " and ",
                                   batch_axis));
  }
  const Value* lens = node.input(1);
  if (lens->dtype() != DType::kInt64 || lens->shape() != Shape{x[batch_axis]}) {
    return node.Error(absl::StrCat("sequence_lens must be i64[", x[batch_axis], "], got ", lens->TypeString()));
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, node.GetInt("time_axis", 0));
  const Shape& x = in[0]->shape();
  const int64_t batch_axis = 1 - time_axis;
  const std::vector<int64_t> lens = in[1]->ToInt64();
  const std::vector<int64_t> strides = Strides(x);
  const int64_t inner = strides[1];  // elements per (dim0, dim1) entry
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  for (int64_t b = 0; b < x[batch_axis]; ++b) {
    if (lens[b] < 0 || lens[b] > x[time_axis]) {
      return node.Error(absl::StrCat("sequence_lens[", b, "] = ", lens[b], " is outside [0, ", x[time_axis], "]"));
    }
    for (int64_t t = 0; t < x[time_axis]; ++t) {
      const int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      auto at = [&](int64_t tt) { return time_axis == 0 ? tt * strides[0] + b * inner : b * strides[0] + tt * inner; };
      std::memcpy(dst + at(t) * es, src + at(from) * es, inner * es);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(reverse_sequence) {
  registry.Register(
      {.name = "ReverseSequence", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
