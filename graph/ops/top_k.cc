// TopK: the k largest (or smallest) elements along `axis` and their int64 indices;
// k is a constant input. Ties keep the lower index first; results are always sorted.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<int64_t> GetK(const Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> k, ConstantInts(node, 1, "K"));
  if (k.size() != 1) return node.Error(absl::StrCat("K must hold exactly one value, got ", k.size()));
  if (k[0] < 0) return node.Error(absl::StrCat("K must be >= 0, got ", k[0]));
  return k[0];
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, node.GetInt("largest", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sorted, node.GetInt("sorted", 1));
  (void)largest;
  (void)sorted;
  const Shape& in = node.input(0)->shape();
  if (in.empty()) return node.Error("input must have rank >= 1, got a scalar");
  const DType kdt = node.input(1)->dtype();
  if (kdt != DType::kInt64) return node.Error(absl::StrCat("K must be i64, got ", DTypeName(kdt)));
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, static_cast<int64_t>(in.size())));
  KILN_ASSIGN_OR_RETURN(int64_t k, GetK(node));
  if (k > in[axis]) {
    return node.Error(absl::StrCat("K = ", k, " exceeds the size ", in[axis], " of axis ", axis_attr,
                                   " (input ", ShapeToString(in), ")"));
  }
  Shape out = in;
  out[axis] = k;
  node.output(0)->SetType(node.input(0)->dtype(), out);
  if (node.num_outputs() > 1) node.output(1)->SetType(DType::kInt64, out);
  return absl::OkStatus();
}

// Strict order "a comes before b": by value (NaN counts as the largest), then by index.
template <typename T>
bool Before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na && nb) return ia < ib;
      return largest ? na : nb;
    }
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

template <typename T>
void Select(const T* x, const AxisSplit& s, int64_t k, bool largest, T* values, int64_t* indices) {
  ParallelFor(s.outer * s.inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(s.len, 1)),
              [&](int64_t b, int64_t e) {
                std::vector<int64_t> order(s.len);
                for (int64_t t = b; t < e; ++t) {
                  const int64_t o = t / s.inner, i = t % s.inner;
                  const T* p = x + o * s.len * s.inner + i;
                  for (int64_t l = 0; l < s.len; ++l) order[l] = l;
                  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                    [&](int64_t a, int64_t c) {
                                      return Before<T>(p[a * s.inner], a, p[c * s.inner], c, largest);
                                    });
                  const int64_t base = o * k * s.inner + i;
                  for (int64_t j = 0; j < k; ++j) {
                    values[base + j * s.inner] = p[order[j] * s.inner];
                    indices[base + j * s.inner] = order[j];
                  }
                }
              });
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& x = *in[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, node.GetInt("largest", 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, x.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t k, GetK(node));
  const AxisSplit s = SplitAtAxis(x.shape(), axis);
  const Shape& oshape = out[0].shape();
  std::vector<int64_t> idx(NumElements(oshape));
  if (IsFloating(x.dtype())) {
    const FloatView xv(x);
    FloatSink sink(out[0]);
    Select<float>(xv.data(), s, k, largest != 0, sink.data(), idx.data());
    sink.Commit();
  } else {
    const std::vector<int64_t> xv = x.ToInt64();
    std::vector<int64_t> vals(idx.size());
    Select<int64_t>(xv.data(), s, k, largest != 0, vals.data(), idx.data());
    out[0] = Tensor::FromInt64(out[0].dtype(), oshape, vals);
  }
  if (out.size() > 1) out[1] = Tensor::FromInt64(DType::kInt64, oshape, idx);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(top_k) {
  registry.Register({.name = "TopK", .min_inputs = 2, .max_inputs = 2, .min_outputs = 2,
                     .max_outputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
