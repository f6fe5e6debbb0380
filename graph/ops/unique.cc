// Unique: the distinct elements (or, with `axis`, the distinct slices along it) of a
// constant input, sorted ascending (sorted=1, default; slices lexicographically) or in
// order of first occurrence; optional outputs: the index of each one's first
// occurrence, the unique index of every input element (or slice), and the counts. The
// number of distinct values fixes the shapes, so the input must be a constant (the
// node folds at import).
#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/constant_input.h"

namespace kiln::ops {
namespace {

struct Result {
  std::vector<int64_t> first;    // per unique slice: its first occurrence, in output order
  std::vector<int64_t> inverse;  // per input slice: its unique index
  std::vector<int64_t> counts;
  int64_t slice = 1;             // elements per slice
  AxisSplit split;
};

absl::StatusOr<Result> Compute(const Node& node, const Tensor& x) {
  KILN_ASSIGN_OR_RETURN(int64_t sorted, node.GetInt("sorted", 1));
  Result r;
  if (node.has_attr("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, node.GetInt("axis"));
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a, x.rank()));
    r.split = SplitAtAxis(x.shape(), axis);
  } else {
    r.split = AxisSplit{1, x.numel(), 1};
  }
  const AxisSplit& s = r.split;
  r.slice = s.outer * s.inner;
  // Slice l as a vector of doubles (exact for every kiln dtype but int64 beyond 2^53).
  const std::vector<float> f = IsFloating(x.dtype()) ? x.ToFloat() : std::vector<float>();
  const std::vector<int64_t> iv = IsFloating(x.dtype()) ? std::vector<int64_t>() : x.ToInt64();
  auto slice_of = [&](int64_t l) {
    std::vector<double> v;
    v.reserve(r.slice);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t at = (o * s.len + l) * s.inner + i;
        v.push_back(f.empty() ? static_cast<double>(iv[at]) : static_cast<double>(f[at]));
      }
    }
    return v;
  };
  std::map<std::vector<double>, int64_t> seen;  // slice -> first occurrence
  std::vector<std::vector<double>> order;       // in first-occurrence order
  std::vector<std::vector<double>> slices(s.len);
  for (int64_t l = 0; l < s.len; ++l) {
    slices[l] = slice_of(l);
    if (seen.emplace(slices[l], l).second) order.push_back(slices[l]);
  }
  if (sorted != 0) std::sort(order.begin(), order.end());
  std::map<std::vector<double>, int64_t> index;
  for (size_t u = 0; u < order.size(); ++u) {
    index[order[u]] = static_cast<int64_t>(u);
    r.first.push_back(seen[order[u]]);
  }
  r.counts.assign(order.size(), 0);
  for (int64_t l = 0; l < s.len; ++l) {
    const int64_t u = index[slices[l]];
    r.inverse.push_back(u);
    ++r.counts[u];
  }
  return r;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ShapeFixingConstant(node, 0, "X"));
  KILN_ASSIGN_OR_RETURN(Result r, Compute(node, *x));
  const int64_t u = static_cast<int64_t>(r.first.size());
  Shape y = {u};
  if (node.has_attr("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, node.GetInt("axis"));
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a, x->rank()));
    y = x->shape();
    y[axis] = u;
  }
  node.output(0)->SetType(x->dtype(), y);
  const Shape sizes[] = {{u}, {static_cast<int64_t>(r.inverse.size())}, {u}};
  for (int o = 1; o < node.num_outputs(); ++o) {
    if (node.output(o) != nullptr) node.output(o)->SetType(DType::kInt64, sizes[o - 1]);
  }
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(Result r, Compute(node, *in[0]));
  const AxisSplit& s = r.split;
  const size_t es = DTypeSize(in[0]->dtype());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  const int64_t u = static_cast<int64_t>(r.first.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < u; ++j) {
      std::memcpy(dst + (o * u + j) * s.inner * es, src + (o * s.len + r.first[j]) * s.inner * es, s.inner * es);
    }
  }
  const std::vector<int64_t>* extra[] = {&r.first, &r.inverse, &r.counts};
  for (size_t o = 1; o < out.size(); ++o) {
    out[o] = Tensor::FromInt64(DType::kInt64, out[o].shape(), *extra[o - 1]);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(unique) {
  registry.Register({.name = "Unique", .min_outputs = 1, .max_outputs = 4, .infer = ops::Infer, .eval = ops::Eval});
}
