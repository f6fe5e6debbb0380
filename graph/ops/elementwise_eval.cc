// Element-wise reference evaluation: unary, binary and variadic folds.
#include "graph/ops/elementwise_eval.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {

namespace {
constexpr int64_t kGrain = 1 << 14;
}  // namespace

absl::Status EvalUnary(const Node& node, const Tensor& in, Tensor& out,
                       const std::function<float(float)>& ff,
                       const std::function<int64_t(int64_t)>& fi) {
  const int64_t n = in.numel();
  if (IsFloating(in.dtype())) {
    std::vector<float> x = in.ToFloat();
    ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] = ff(x[i]);
    });
    out = Tensor::FromFloat(out.dtype(), out.shape(), x);
    return absl::OkStatus();
  }
  if (!fi) return node.Error(absl::StrCat("not defined for dtype ", DTypeName(in.dtype())));
  std::vector<int64_t> x = in.ToInt64();
  for (int64_t i = 0; i < n; ++i) x[i] = fi(x[i]);
  out = Tensor::FromInt64(out.dtype(), out.shape(), x);
  return absl::OkStatus();
}

absl::Status EvalBinary(const Node& node, const Tensor& a, const Tensor& b, Tensor& out,
                        const std::function<float(float, float)>& ff,
                        const std::function<int64_t(int64_t, int64_t)>& fi) {
  const int64_t n = out.numel();
  const std::vector<int64_t> oa = BroadcastOffsets(a.shape(), out.shape());
  const std::vector<int64_t> ob = BroadcastOffsets(b.shape(), out.shape());
  if (IsFloating(a.dtype())) {
    const std::vector<float> x = a.ToFloat(), y = b.ToFloat();
    std::vector<float> r(n);
    ParallelFor(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) r[i] = ff(x[oa[i]], y[ob[i]]);
    });
    out = Tensor::FromFloat(out.dtype(), out.shape(), r);
    return absl::OkStatus();
  }
  if (!fi) return node.Error(absl::StrCat("not defined for dtype ", DTypeName(a.dtype())));
  const std::vector<int64_t> x = a.ToInt64(), y = b.ToInt64();
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = fi(x[oa[i]], y[ob[i]]);
  out = Tensor::FromInt64(out.dtype(), out.shape(), r);
  return absl::OkStatus();
}

namespace {

// Folds the inputs of EvalVariadic in element type T (float or int64).
template <typename T, typename Load, typename Fn>
std::vector<T> FoldInputs(absl::Span<const Tensor* const> in, const Shape& out_shape, Load load,
                          const Fn& f) {
  const int64_t n = NumElements(out_shape);
  std::vector<T> acc;
  bool first = true;
  for (const Tensor* t : in) {
    if (t == nullptr) continue;
    std::vector<T> x = load(*t);
    if (first && t->shape() == out_shape) {
      acc = std::move(x);
    } else if (first) {
      const std::vector<int64_t> o = BroadcastOffsets(t->shape(), out_shape);
      acc.resize(n);
      for (int64_t i = 0; i < n; ++i) acc[i] = x[o[i]];
    } else if (t->shape() == out_shape) {
      ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) acc[i] = f(acc[i], x[i]);
      });
    } else {
      const std::vector<int64_t> o = BroadcastOffsets(t->shape(), out_shape);
      ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) acc[i] = f(acc[i], x[o[i]]);
      });
    }
    first = false;
  }
  acc.resize(n);
  return acc;
}

}  // namespace

absl::Status EvalVariadic(const Node& node, absl::Span<const Tensor* const> in, Tensor& out,
                          const std::function<float(float, float)>& ff,
                          const std::function<int64_t(int64_t, int64_t)>& fi,
                          const std::function<float(float)>& finish) {
  if (in.empty() || in[0] == nullptr) return node.Error("needs at least one input");
  const int64_t n = out.numel();
  if (IsFloating(in[0]->dtype())) {
    std::vector<float> acc =
        FoldInputs<float>(in, out.shape(), [](const Tensor& t) { return t.ToFloat(); }, ff);
    if (finish) {
      ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) acc[i] = finish(acc[i]);
      });
    }
    out = Tensor::FromFloat(out.dtype(), out.shape(), acc);
    return absl::OkStatus();
  }
  if (!fi) return node.Error(absl::StrCat("not defined for dtype ", DTypeName(in[0]->dtype())));
  const std::vector<int64_t> acc =
      FoldInputs<int64_t>(in, out.shape(), [](const Tensor& t) { return t.ToInt64(); }, fi);
  out = Tensor::FromInt64(out.dtype(), out.shape(), acc);
  return absl::OkStatus();
}

}  // namespace kiln::ops
