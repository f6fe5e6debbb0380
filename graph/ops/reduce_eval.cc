// The Reduce* family: reduced axes, inference and reference evaluation.
#include "graph/ops/reduce_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

absl::StatusOr<std::vector<bool>> ReducedAxes(const Node& node, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(int64_t noop, node.GetInt("noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (node.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(node, 1, "axes"));
  } else if (node.has_attr("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, node.GetInts("axes"));
  }
  std::vector<bool> mask(rank, false);
  if (axes.empty()) {
    if (!noop) mask.assign(rank, true);
    return mask;
  }
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a, rank));
    if (rank == 0) continue;
    if (mask[axis]) return node.Error(absl::StrCat("axis ", a, " appears more than once in axes"));
    mask[axis] = true;
  }
  return mask;
}

absl::Status InferReduce(Node& node, bool allow_integer, bool allow_bool) {
  const DType dtype = node.input(0)->dtype();
  if ((dtype == DType::kBool && !allow_bool) || (IsInteger(dtype) && !allow_integer)) {
    return node.Error(absl::StrCat("input dtype ", DTypeName(dtype), " is not supported (expected ",
                                   allow_integer ? "a numeric" : "a floating", " dtype)"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, node.GetInt("keepdims", 1));
  const Shape& in = node.input(0)->shape();
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedAxes(node, static_cast<int64_t>(in.size())));
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!mask[i]) {
      out.push_back(in[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  node.output(0)->SetType(dtype, out);
  return absl::OkStatus();
}

namespace {

// Reduction as loops: outputs are `outer` rows of `inner` contiguous elements;
// row o reads input offsets outer_offsets[o] + r + [0, inner) (inner > 1) or
// outer_offsets[o] + r + [0, red_len) (inner == 1) for each r in red_offsets.
struct ReducePlan {
  int64_t inner = 1;
  int64_t red_len = 1;
  std::vector<int64_t> outer_offsets;
  std::vector<int64_t> red_offsets;
};

// Row-major offsets of every index of the given (size, stride) dims.
std::vector<int64_t> EnumerateOffsets(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  std::vector<int64_t> offsets = {0};
  for (const auto& [size, stride] : dims) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * size);
    for (int64_t base : offsets) {
      for (int64_t j = 0; j < size; ++j) next.push_back(base + j * stride);
    }
    offsets = std::move(next);
  }
  return offsets;
}

ReducePlan PlanReduce(const Shape& shape, const std::vector<bool>& reduced) {
  // Drop unit dims and merge neighbours of the same kind.
  std::vector<int64_t> dims;
  std::vector<bool> red;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!dims.empty() && red.back() == reduced[i]) {
      dims.back() *= shape[i];
    } else {
      dims.push_back(shape[i]);
      red.push_back(reduced[i]);
    }
  }
  ReducePlan plan;
  const std::vector<int64_t> strides = Strides(dims);
  size_t last = dims.size();
  if (!dims.empty()) {
    --last;
    (red.back() ? plan.red_len : plan.inner) = dims.back();
  }
  std::vector<std::pair<int64_t, int64_t>> kept_dims, red_dims;
  for (size_t i = 0; i < last; ++i) (red[i] ? red_dims : kept_dims).push_back({dims[i], strides[i]});
  plan.outer_offsets = EnumerateOffsets(kept_dims);
  plan.red_offsets = EnumerateOffsets(red_dims);
  return plan;
}

enum class MapFn { kIdentity, kAbs, kSquare };
enum class CombineFn { kAdd, kMul, kMax, kMin };

template <typename T, CombineFn C>
T Identity() {
  if constexpr (C == CombineFn::kAdd) return T{0};
  if constexpr (C == CombineFn::kMul) return T{1};
  if constexpr (C == CombineFn::kMax) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  if constexpr (C == CombineFn::kMin) {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }
}

template <typename T, MapFn M>
inline T Map(T x) {
  if constexpr (M == MapFn::kAbs) return x < 0 ? -x : x;
  if constexpr (M == MapFn::kSquare) return x * x;
  return x;
}

template <typename T, CombineFn C>
inline T Combine(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Wrap on overflow instead of undefined behaviour.
    using U = std::make_unsigned_t<T>;
    if constexpr (C == CombineFn::kAdd) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if constexpr (C == CombineFn::kMul) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    if constexpr (C == CombineFn::kAdd) return a + b;
    if constexpr (C == CombineFn::kMul) return a * b;
  }
  // NaN propagates through max and min, as in numpy.
  if constexpr (C == CombineFn::kMax) return (b > a || b != b) ? b : a;
  if constexpr (C == CombineFn::kMin) return (b < a || b != b) ? b : a;
}

template <typename T, MapFn M, CombineFn C>
T ReduceContiguous(const T* p, int64_t n) {
  T part[8];
  for (T& v : part) v = Identity<T, C>();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) part[l] = Combine<T, C>(part[l], Map<T, M>(p[i + l]));
  }
  T acc = Identity<T, C>();
  for (; i < n; ++i) acc = Combine<T, C>(acc, Map<T, M>(p[i]));
  for (int l = 0; l < 8; ++l) acc = Combine<T, C>(acc, part[l]);
  return acc;
}

template <typename T, MapFn M, CombineFn C>
void RunReduce(const ReducePlan& plan, const T* x, T* out) {
  constexpr int64_t kInnerChunk = 4096;
  const int64_t chunks_per_row = (plan.inner + kInnerChunk - 1) / kInnerChunk;
  const int64_t tasks = static_cast<int64_t>(plan.outer_offsets.size()) * chunks_per_row;
  const int64_t work =
      static_cast<int64_t>(plan.red_offsets.size()) * plan.red_len * std::min(plan.inner, kInnerChunk);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(work, 1));
  ParallelFor(tasks, grain, [&](int64_t b, int64_t e) {
    std::vector<T> acc;
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / chunks_per_row;
      const int64_t i0 = (t % chunks_per_row) * kInnerChunk;
      const T* base = x + plan.outer_offsets[o];
      T* dst = out + o * plan.inner;
      if (plan.inner == 1) {
        T a = Identity<T, C>();
        for (int64_t r : plan.red_offsets)
          a = Combine<T, C>(a, ReduceContiguous<T, M, C>(base + r, plan.red_len));
        dst[0] = a;
        continue;
      }
      const int64_t len = std::min(kInnerChunk, plan.inner - i0);
      acc.assign(len, Identity<T, C>());
      for (int64_t r : plan.red_offsets) {
        const T* p = base + r + i0;
        for (int64_t i = 0; i < len; ++i) acc[i] = Combine<T, C>(acc[i], Map<T, M>(p[i]));
      }
      std::copy(acc.begin(), acc.end(), dst + i0);
    }
  });
}

template <typename T>
void DispatchReduce(ReduceKind kind, const ReducePlan& plan, const T* x, T* out) {
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
    case ReduceKind::kLogSum:
      return RunReduce<T, MapFn::kIdentity, CombineFn::kAdd>(plan, x, out);
    case ReduceKind::kL1:
      return RunReduce<T, MapFn::kAbs, CombineFn::kAdd>(plan, x, out);
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      return RunReduce<T, MapFn::kSquare, CombineFn::kAdd>(plan, x, out);
    case ReduceKind::kProd:
      return RunReduce<T, MapFn::kIdentity, CombineFn::kMul>(plan, x, out);
    case ReduceKind::kMax:
      return RunReduce<T, MapFn::kIdentity, CombineFn::kMax>(plan, x, out);
    case ReduceKind::kMin:
      return RunReduce<T, MapFn::kIdentity, CombineFn::kMin>(plan, x, out);
  }
}

}  // namespace

absl::Status EvalReduce(const Node& node, ReduceKind kind, const Tensor& in, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedAxes(node, in.rank()));
  const ReducePlan plan = PlanReduce(in.shape(), mask);
  int64_t count = 1;
  for (int i = 0; i < in.rank(); ++i) {
    if (mask[i]) count *= in.shape()[i];
  }
  const int64_t n = out.numel();
  if (IsFloating(in.dtype())) {
    const FloatView x(in);
    FloatSink sink(out);
    float* y = sink.data();
    DispatchReduce<float>(kind, plan, x.data(), y);
    if (kind == ReduceKind::kMean) {
      const float scale = 1.f / static_cast<float>(count);
      for (int64_t i = 0; i < n; ++i) y[i] = count == 0 ? std::nanf("") : y[i] * scale;
    } else if (kind == ReduceKind::kL2) {
      for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(y[i]);
    } else if (kind == ReduceKind::kLogSum) {
      for (int64_t i = 0; i < n; ++i) y[i] = std::log(y[i]);
    }
    sink.Commit();
    return absl::OkStatus();
  }
  const std::vector<int64_t> x = in.ToInt64();
  std::vector<int64_t> y(n);
  DispatchReduce<int64_t>(kind, plan, x.data(), y.data());
  for (int64_t& v : y) {
    if (kind == ReduceKind::kMean) v = count == 0 ? 0 : v / count;
    if (kind == ReduceKind::kL2) v = static_cast<int64_t>(std::sqrt(static_cast<double>(v)));
    if (kind == ReduceKind::kLogSum) v = static_cast<int64_t>(std::log(static_cast<double>(v)));
  }
  out = Tensor::FromInt64(out.dtype(), out.shape(), y);
  return absl::OkStatus();
}

}  // namespace kiln::ops
