// Trilu: keeps the upper (upper=1, default) or lower triangle of the last two
// axes, shifted by the optional scalar diagonal offset k; the rest becomes 0.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t upper, node.GetInt("upper", 1));
  (void)upper;
  if (node.input(0)->rank() < 2) {
    return node.Error(absl::StrCat("input must have rank >= 2, got ", node.input(0)->TypeString()));
  }
  if (node.has_input(1)) {
    const Value* k = node.input(1);
    if (k->dtype() != DType::kInt64 || k->numel() != 1) {
      return node.Error(absl::StrCat("k must be an i64 scalar, got ", k->TypeString()));
    }
  }
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t upper, node.GetInt("upper", 1));
  const int64_t k = in.size() > 1 && in[1] != nullptr ? in[1]->ScalarInt64() : 0;
  const Shape& s = in[0]->shape();
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const int64_t es = static_cast<int64_t>(DTypeSize(in[0]->dtype()));
  out[0] = *in[0];
  if (out[0].numel() == 0) return absl::OkStatus();
  auto* p = static_cast<uint8_t*>(out[0].mutable_raw_data());
  const int64_t mats = out[0].numel() / (rows * cols);
  // Zero is all-zero bytes in every dtype; each row's zeroed part is one run.
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      uint8_t* row = p + (m * rows + i) * cols * es;
      // Keep j - i >= k (upper) or j - i <= k (lower).
      const int64_t edge = std::clamp<int64_t>(upper ? i + k : i + k + 1, 0, cols);
      if (upper) {
        std::memset(row, 0, edge * es);
      } else {
        std::memset(row + edge * es, 0, (cols - edge) * es);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(trilu) {
  registry.Register(
      {.name = "Trilu", .min_inputs = 1, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
