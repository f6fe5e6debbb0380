// ArgMax / ArgMin: inference and reference evaluation.
#include "graph/ops/arg_reduce.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/ops/axes.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

absl::Status InferArgReduce(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, node.GetInt("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t last, node.GetInt("select_last_index", 0));
  (void)last;
  const Shape& in = node.input(0)->shape();
  if (in.empty()) return node.Error("input must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, static_cast<int64_t>(in.size())));
  if (in[axis] == 0) {
    return node.Error(absl::StrCat("cannot reduce over axis ", axis_attr, " of size 0 (input ",
                                   ShapeToString(in), ")"));
  }
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d != axis) out.push_back(in[d]);
    else if (keepdims) out.push_back(1);
  }
  node.output(0)->SetType(DType::kInt64, out);
  return absl::OkStatus();
}

namespace {

template <typename T>
void ArgReduceLoop(const T* x, const AxisSplit& s, bool is_max, bool last, int64_t* y) {
  ParallelFor(s.outer * s.inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.len, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                  const int64_t o = t / s.inner, i = t % s.inner;
                  const T* p = x + o * s.len * s.inner + i;
                  int64_t best = 0;
                  T bv = p[0];
                  for (int64_t l = 1; l < s.len; ++l) {
                    const T v = p[l * s.inner];
                    const bool better = is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
                    if (better) {
                      bv = v;
                      best = l;
                    }
                  }
                  y[t] = best;
                }
              });
}

}  // namespace

absl::Status EvalArgReduce(const Node& node, const Tensor& in, Tensor& out, bool is_max) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t last, node.GetInt("select_last_index", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, axis_attr, in.rank()));
  const AxisSplit s = SplitAtAxis(in.shape(), axis);
  int64_t* y = out.mutable_data<int64_t>();
  if (IsFloating(in.dtype())) {
    const FloatView x(in);
    ArgReduceLoop<float>(x.data(), s, is_max, last != 0, y);
  } else {
    const std::vector<int64_t> x = in.ToInt64();
    ArgReduceLoop<int64_t>(x.data(), s, is_max, last != 0, y);
  }
  return absl::OkStatus();
}

}  // namespace kiln::ops
