// CumSum: cumulative sum along a constant `axis` input (exclusive, reverse).
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<int64_t> Axis(const Node& node, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ConstantInts(node, 1, "axis"));
  if (axis.size() != 1) {
    return node.Error(absl::StrCat("axis must hold exactly one value, got ", axis.size()));
  }
  return NormalizeAxis(node, axis[0], rank);
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  const DType adt = node.input(1)->dtype();
  if (adt != DType::kInt64 && adt != DType::kInt32) {
    return node.Error(absl::StrCat("axis must be i32 or i64, got ", DTypeName(adt)));
  }
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, node.GetInt("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, node.GetInt("reverse", 0));
  (void)exclusive;
  (void)reverse;
  if (node.input(0)->rank() == 0) return node.Error("input must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, node.input(0)->rank()));
  (void)axis;
  return InferSameAsInput(node);
}

template <typename T, typename Acc>
void Scan(const T* x, T* y, const AxisSplit& s, bool exclusive, bool reverse) {
  ParallelFor(s.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.len * s.inner, 1)),
              [&](int64_t b, int64_t e) {
                std::vector<Acc> acc(s.inner);
                for (int64_t o = b; o < e; ++o) {
                  std::fill(acc.begin(), acc.end(), Acc{0});
                  for (int64_t k = 0; k < s.len; ++k) {
                    const int64_t l = reverse ? s.len - 1 - k : k;
                    const int64_t base = (o * s.len + l) * s.inner;
                    for (int64_t i = 0; i < s.inner; ++i) {
                      if (exclusive) {
                        y[base + i] = static_cast<T>(acc[i]);
                        acc[i] += static_cast<Acc>(x[base + i]);
                      } else {
                        acc[i] += static_cast<Acc>(x[base + i]);
                        y[base + i] = static_cast<T>(acc[i]);
                      }
                    }
                  }
                }
              });
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& x = *in[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, x.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, node.GetInt("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, node.GetInt("reverse", 0));
  const AxisSplit s = SplitAtAxis(x.shape(), axis);
  if (IsFloating(x.dtype())) {
    const FloatView xv(x);
    FloatSink sink(out[0]);
    Scan<float, double>(xv.data(), sink.data(), s, exclusive != 0, reverse != 0);
    sink.Commit();
  } else {
    const std::vector<int64_t> xv = x.ToInt64();
    std::vector<int64_t> y(xv.size());
    Scan<int64_t, int64_t>(xv.data(), y.data(), s, exclusive != 0, reverse != 0);
    out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), y);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(cum_sum) {
  registry.Register({.name = "CumSum", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval});
}
