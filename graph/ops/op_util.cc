// Shared op helpers: broadcasting, axes, common inference and element-wise evaluation.
#include "graph/ops/op_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::ops {

absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return node.Error(absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                                     " cannot be broadcast together"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    if (!(rank == 0 && (axis == 0 || axis == -1))) {
      return node.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    }
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape) {
  const size_t rank = out_shape.size();
  const int64_t n = NumElements(out_shape);
  std::vector<int64_t> offsets(n);
  if (in_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) offsets[i] = i;
    return offsets;
  }
  // Strides of the input aligned to the output's rank; 0 where broadcast.
  std::vector<int64_t> in_strides(rank, 0);
  const std::vector<int64_t> s = Strides(in_shape);
  const size_t lead = rank - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides[lead + i] = in_shape[i] == 1 ? 0 : s[i];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = offset;
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++index[d] < out_shape[d]) {
        offset += in_strides[d];
        break;
      }
      offset -= in_strides[d] * (out_shape[d] - 1);
      index[d] = 0;
    }
  }
  return offsets;
}

absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what) {
  if (!node.has_input(input)) return node.Error(absl::StrCat("missing input '", what, "'"));
  const Tensor* t = node.input(input)->constant_or_null();
  if (t == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(node.Describe(), ": input '", what, "' ('",
                                                      node.input(input)->name(),
                                                      "') must be a compile-time constant: kiln needs static shapes"));
  }
  if (IsFloating(t->dtype())) {
    return node.Error(absl::StrCat("input '", what, "' must be an integer tensor, got ", t->TypeString()));
  }
  return t->ToInt64();
}

absl::Status InferSameAsInput(Node& node) {
  node.output(0)->SetType(node.input(0)->dtype(), node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype) {
  Shape shape = node.input(0)->shape();
  const DType dtype = node.input(0)->dtype();
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) continue;
    if (node.input(i)->dtype() != dtype) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(dtype), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
    KILN_ASSIGN_OR_RETURN(shape, BroadcastShapes(node, shape, node.input(i)->shape()));
  }
  node.output(0)->SetType(out_dtype.value_or(dtype), shape);
  return absl::OkStatus();
}

absl::Status RequireFloat(const Node& node, int i) {
  if (!IsFloating(node.input(i)->dtype())) {
    return node.Error(absl::StrCat("input ", i, " must be f32, f16 or bf16, got ",
                                   DTypeName(node.input(i)->dtype())));
  }
  return absl::OkStatus();
}

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

absl::Status RequireNumeric(const Node& node, int i) {
  if (node.input(i)->dtype() == DType::kBool) {
    return node.Error(absl::StrCat("input ", i, " must be numeric, got bool"));
  }
  return absl::OkStatus();
}

absl::Status RequireBool(const Node& node, int i) {
  if (node.input(i)->dtype() != DType::kBool) {
    return node.Error(absl::StrCat("input ", i, " must be bool, got ", DTypeName(node.input(i)->dtype())));
  }
  return absl::OkStatus();
}

absl::Status InferFloatUnary(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  return InferSameAsInput(node);
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

// ---- Data movement ------------------------------------------------------------

#include <cstring>

namespace kiln::ops {
namespace {

// True when table[j] == table[0] + j * step for every j.
bool IsAffine(const std::vector<int64_t>& table, int64_t step) {
  for (size_t j = 1; j < table.size(); ++j) {
    if (table[j] != table[0] + static_cast<int64_t>(j) * step) return false;
  }
  return true;
}

// One row of single elements: dst[dt[j]] = src[st[j]].
template <typename T>
void CopyRowElements(const uint8_t* src, const int64_t* st, uint8_t* dst, const int64_t* dt,
                     int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(dst + dt[j] * sizeof(T), src + st[j] * sizeof(T), sizeof(T));
  }
}

constexpr int64_t kCopyGrainBytes = 1 << 16;

}  // namespace

OffsetTables StridedTables(const Shape& shape, absl::Span<const int64_t> strides) {
  OffsetTables tables(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    tables[d].resize(shape[d]);
    for (int64_t j = 0; j < shape[d]; ++j) tables[d][j] = j * strides[d];
  }
  return tables;
}

void CopyElements(const void* src_ptr, const OffsetTables& src_at, void* dst_ptr,
                  const OffsetTables& dst_at, const Shape& shape, size_t elem_size) {
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  const int64_t es = static_cast<int64_t>(elem_size);
  const int rank = static_cast<int>(shape.size());
  if (NumElements(shape) == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  // Merge trailing axes that are contiguous in both buffers into one run of
  // `run` elements starting at (src0, dst0) relative to the row's offsets.
  int64_t run = 1, src0 = 0, dst0 = 0;
  int k = rank;
  while (k > 0 && IsAffine(src_at[k - 1], run) && IsAffine(dst_at[k - 1], run)) {
    src0 += src_at[k - 1][0];
    dst0 += dst_at[k - 1][0];
    run *= shape[k - 1];
    --k;
  }
  if (k == 0) {  // One contiguous block.
    const int64_t bytes = run * es;
    ParallelFor(bytes, kCopyGrainBytes, [&](int64_t b, int64_t e) {
      std::memcpy(dst + dst0 * es + b, src + src0 * es + b, e - b);
    });
    return;
  }
  // Axis k-1 is the row axis, iterated with its tables; axes [0, k-1) are outer.
  // Work items are (row, j) pairs, each a run of `run` elements.
  const int row_axis = k - 1;
  const int64_t row_len = shape[row_axis];
  const int64_t* st = src_at[row_axis].data();
  const int64_t* dt = dst_at[row_axis].data();
  int64_t rows = 1;
  for (int d = 0; d < row_axis; ++d) rows *= shape[d];
  const int64_t run_bytes = run * es;
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / run_bytes);
  ParallelFor(rows * row_len, grain, [&](int64_t begin, int64_t end) {
    // Multi-index of the first row over the outer axes, and its offsets.
    std::vector<int64_t> index(row_axis, 0);
    int64_t s_off = src0, d_off = dst0;
    int64_t rem = begin / row_len;
    for (int d = row_axis - 1; d >= 0; --d) {
      index[d] = rem % shape[d];
      rem /= shape[d];
      s_off += src_at[d][index[d]];
      d_off += dst_at[d][index[d]];
    }
    int64_t j0 = begin % row_len;
    for (int64_t i = begin; i < end;) {
      const int64_t j1 = std::min(row_len, j0 + (end - i));
      const uint8_t* s = src + s_off * es;
      uint8_t* t = dst + d_off * es;
      if (run > 1) {
        for (int64_t j = j0; j < j1; ++j) std::memcpy(t + dt[j] * es, s + st[j] * es, run_bytes);
      } else {
        const int64_t n = j1 - j0;
        switch (elem_size) {
          case 1: CopyRowElements<uint8_t>(s, st + j0, t, dt + j0, n); break;
          case 2: CopyRowElements<uint16_t>(s, st + j0, t, dt + j0, n); break;
          case 4: CopyRowElements<uint32_t>(s, st + j0, t, dt + j0, n); break;
          case 8: CopyRowElements<uint64_t>(s, st + j0, t, dt + j0, n); break;
          default:
            for (int64_t j = j0; j < j1; ++j) std::memcpy(t + dt[j] * es, s + st[j] * es, es);
        }
      }
      i += j1 - j0;
      j0 = 0;
      if (i >= end) break;
      // Advance the odometer over the outer axes to the next row.
      for (int d = row_axis - 1; d >= 0; --d) {
        s_off -= src_at[d][index[d]];
        d_off -= dst_at[d][index[d]];
        if (++index[d] < shape[d]) {
          s_off += src_at[d][index[d]];
          d_off += dst_at[d][index[d]];
          break;
        }
        index[d] = 0;
        s_off += src_at[d][0];
        d_off += dst_at[d][0];
      }
    }
  });
}

void CopyToDense(const void* src, const OffsetTables& src_at, void* dst, const Shape& shape,
                 size_t elem_size) {
  CopyElements(src, src_at, dst, StridedTables(shape, Strides(shape)), shape, elem_size);
}

void FillElements(void* dst_ptr, int64_t n, const void* value, size_t elem_size) {
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  if (n <= 0) return;
  const auto* v = static_cast<const uint8_t*>(value);
  bool all_same = true;
  for (size_t b = 1; b < elem_size; ++b) all_same = all_same && v[b] == v[0];
  if (all_same) {
    std::memset(dst, v[0], static_cast<size_t>(n) * elem_size);
    return;
  }
  // Write one element, then double the filled prefix.
  std::memcpy(dst, v, elem_size);
  const size_t total = static_cast<size_t>(n) * elem_size;
  size_t filled = elem_size;
  while (filled < total) {
    const size_t chunk = std::min(filled, total - filled);
    std::memcpy(dst + filled, dst, chunk);
    filled += chunk;
  }
}

}  // namespace kiln::ops

#include <cmath>

namespace kiln::ops {

Tensor CastTensor(const Tensor& in, DType to) {
  if (in.dtype() == to) return in;
  if (!IsFloating(in.dtype())) return Tensor::FromInt64(to, in.shape(), in.ToInt64());
  std::vector<float> values = in.ToFloat();
  if (IsFloating(to) || to == DType::kBool) return Tensor::FromFloat(to, in.shape(), values);
  std::vector<int64_t> ints(values.size());
  for (size_t i = 0; i < values.size(); ++i) ints[i] = TruncToInt64(values[i]);
  return Tensor::FromInt64(to, in.shape(), ints);
}

}  // namespace kiln::ops

// ---- NN ops: fp32 access, sliding windows, reductions -------------------------

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::ops {

FloatView::FloatView(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    ptr_ = t.data<float>();
  } else {
    copy_ = t.ToFloat();
    ptr_ = copy_.data();
  }
}

FloatSink::FloatSink(Tensor& t) : tensor_(t) {
  if (t.dtype() == DType::kFloat32) {
    ptr_ = t.mutable_data<float>();
  } else {
    buffer_.resize(t.numel());
    ptr_ = buffer_.data();
  }
}

void FloatSink::Commit() {
  if (tensor_.dtype() != DType::kFloat32) {
    tensor_ = Tensor::FromFloat(tensor_.dtype(), tensor_.shape(), buffer_);
  }
}

absl::StatusOr<WindowGeometry> ComputeWindow(const Node& node, const Shape& in, std::vector<int64_t> kernel,
                                             bool use_dilations, bool ceil_mode) {
  const size_t n = in.size();
  WindowGeometry g;
  if (kernel.size() != n) {
    return node.Error(absl::StrCat("kernel_shape ", ShapeToString(kernel), " has ", kernel.size(),
                                   " entries but the input has ", n, " spatial dims ", ShapeToString(in)));
  }
  g.kernel = std::move(kernel);
  KILN_ASSIGN_OR_RETURN(g.strides, node.GetInts("strides", std::vector<int64_t>(n, 1)));
  if (use_dilations) {
    KILN_ASSIGN_OR_RETURN(g.dilations, node.GetInts("dilations", std::vector<int64_t>(n, 1)));
  } else {
    g.dilations.assign(n, 1);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.GetInts("pads", std::vector<int64_t>(2 * n, 0)));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, node.GetString("auto_pad", "NOTSET"));
  if (g.strides.size() != n) {
    return node.Error(absl::StrCat("strides ", ShapeToString(g.strides), " must have ", n,
                                   " entries (one per spatial dim)"));
  }
  if (g.dilations.size() != n) {
    return node.Error(absl::StrCat("dilations ", ShapeToString(g.dilations), " must have ", n,
                                   " entries (one per spatial dim)"));
  }
  if (pads.size() != 2 * n) {
    return node.Error(absl::StrCat("pads ", ShapeToString(pads), " must have ", 2 * n,
                                   " entries (begin and end per spatial dim)"));
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return node.Error(
        absl::StrCat("auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  g.pads_begin.resize(n);
  g.pads_end.resize(n);
  g.output.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = g.kernel[i], s = g.strides[i], d = g.dilations[i];
    if (k < 1) return node.Error(absl::StrCat("kernel_shape ", ShapeToString(g.kernel), " must be positive"));
    if (s < 1) return node.Error(absl::StrCat("strides ", ShapeToString(g.strides), " must be positive"));
    if (d < 1) return node.Error(absl::StrCat("dilations ", ShapeToString(g.dilations), " must be positive"));
    if (pads[i] < 0 || pads[i + n] < 0) {
      return node.Error(absl::StrCat("pads ", ShapeToString(pads), " must not be negative"));
    }
    const int64_t window = (k - 1) * d + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + window - in[i]);
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pads_end[i] = total - g.pads_begin[i];
      g.output[i] = out;
      continue;
    }
    if (auto_pad == "NOTSET") {
      g.pads_begin[i] = pads[i];
      g.pads_end[i] = pads[i + n];
    }
    const int64_t padded = in[i] + g.pads_begin[i] + g.pads_end[i];
    if (padded < window) {
      return node.Error(absl::StrCat("the window along spatial dim ", i, " (kernel ", k, ", dilation ", d,
                                     ", so ", window, " wide) is larger than the padded input (", in[i],
                                     " + pads ", g.pads_begin[i], "+", g.pads_end[i], ")"));
    }
    int64_t out = ceil_mode ? (padded - window + s - 1) / s + 1 : (padded - window) / s + 1;
    if (ceil_mode && (out - 1) * s >= in[i] + g.pads_begin[i]) --out;
    g.output[i] = out;
  }
  return g;
}

Window3 LiftWindow(const Shape& in_spatial, const WindowGeometry& w) {
  Window3 g;
  const size_t lead = 3 - in_spatial.size();
  for (size_t d = 0; d < 3; ++d) {
    const bool real = d >= lead;
    const size_t i = d - lead;
    g.in[d] = real ? in_spatial[i] : 1;
    g.out[d] = real ? w.output[i] : 1;
    g.kernel[d] = real ? w.kernel[i] : 1;
    g.stride[d] = real ? w.strides[i] : 1;
    g.dilation[d] = real ? w.dilations[i] : 1;
    g.pad_begin[d] = real ? w.pads_begin[i] : 0;
    g.pad_end[d] = real ? w.pads_end[i] : 0;
  }
  return g;
}

std::vector<TapRange> TapRanges(const Window3& g, int d) {
  // Taps t in [0, kernel) with lower <= start + t * dilation < upper.
  auto taps = [&](int64_t start, int64_t lower, int64_t upper, int64_t* lo, int64_t* hi) {
    const int64_t dil = g.dilation[d];
    auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
    *lo = std::clamp<int64_t>(ceil_div(lower - start, dil), 0, g.kernel[d]);
    *hi = std::clamp<int64_t>(ceil_div(upper - start, dil), *lo, g.kernel[d]);
  };
  std::vector<TapRange> ranges(g.out[d]);
  for (int64_t o = 0; o < g.out[d]; ++o) {
    TapRange& r = ranges[o];
    r.start = o * g.stride[d] - g.pad_begin[d];
    taps(r.start, 0, g.in[d], &r.lo, &r.hi);
    taps(r.start, -g.pad_begin[d], g.in[d] + g.pad_end[d], &r.lo_pad, &r.hi_pad);
  }
  return ranges;
}

void SoftmaxAlongAxis(const Tensor& in, int64_t axis, bool log, Tensor& out) {
  const Shape& shape = in.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t len = shape.empty() ? 1 : shape[axis];
  const FloatView xv(in);
  FloatSink sink(out);
  const float* x = xv.data();
  float* y = sink.data();
  // Rows of `len` elements `inner` apart, processed `inner` at a time so the loops
  // over the row's positions stay contiguous.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len * std::min(inner, kChunk), 1));
  ParallelFor(outer * chunks, grain, [&](int64_t b, int64_t e) {
    std::vector<float> mx, sum;
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / chunks;
      const int64_t i0 = (t % chunks) * kChunk;
      const int64_t n = std::min(kChunk, inner - i0);
      const float* xs = x + o * len * inner + i0;
      float* ys = y + o * len * inner + i0;
      mx.assign(n, -std::numeric_limits<float>::infinity());
      sum.assign(n, 0.f);
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        for (int64_t i = 0; i < n; ++i) mx[i] = std::max(mx[i], row[i]);
      }
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        float* dst = ys + l * inner;
        for (int64_t i = 0; i < n; ++i) {
          dst[i] = std::exp(row[i] - mx[i]);
          sum[i] += dst[i];
        }
      }
      for (int64_t l = 0; l < len; ++l) {
        const float* row = xs + l * inner;
        float* dst = ys + l * inner;
        if (log) {
          for (int64_t i = 0; i < n; ++i) dst[i] = row[i] - mx[i] - std::log(sum[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) dst[i] /= sum[i];
        }
      }
    }
  });
  sink.Commit();
}

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

namespace kiln::ops {

AxisSplit SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.len = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

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

// ---- Global pools -------------------------------------------------------------
namespace kiln::ops {

absl::Status InferGlobalPool(Node& node) {
  const Value* x = node.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  if (x->rank() < 2) {
    return node.Error(absl::StrCat("input X must be [N, C, spatial...], got ", x->TypeString()));
  }
  Shape out = x->shape();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

}  // namespace kiln::ops

// ---- Views and softmax --------------------------------------------------------
namespace kiln::ops {

absl::Status EvalView(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  out[0] = in[0]->Reshaped(out[0].shape());
  return absl::OkStatus();
}

absl::Status InferSoftmaxNode(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(NormalizeAxis(node, axis, node.input(0)->rank()).status());
  return InferSameAsInput(node);
}

absl::Status EvalSoftmaxNode(const Node& node, const Tensor& in, bool log, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, in.rank()));
  SoftmaxAlongAxis(in, axis, log, out);
  return absl::OkStatus();
}

}  // namespace kiln::ops

// ---- Channels-last layout -----------------------------------------------------
namespace kiln::ops {

absl::StatusOr<bool> ChannelsLast(const Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t cl, node.GetInt("channels_last", 0));
  if (cl != 0 && cl != 1) return node.Error(absl::StrCat("channels_last must be 0 or 1, got ", cl));
  if (cl == 1 && node.input(0)->rank() != 4) {
    return node.Error(absl::StrCat("channels_last=1 needs a 4-D input X [N, H, W, C] (2-D spatial only), got ",
                                   node.input(0)->TypeString()));
  }
  return cl == 1;
}

absl::Status EvalThroughNchw(absl::Span<const Tensor* const> in, size_t permuted, Tensor& y, const NchwEval& nchw) {
  std::vector<Tensor> moved;
  moved.reserve(permuted);
  std::vector<const Tensor*> args;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i < permuted) {
      moved.push_back(PermuteAxes(*in[i], kNhwcToNchw));
      args.push_back(&moved.back());
    } else {
      args.push_back(in[i]);
    }
  }
  const Shape& ys = y.shape();
  Tensor out(y.dtype(), {ys[0], ys[3], ys[1], ys[2]});
  KILN_RETURN_IF_ERROR(nchw(args, out));
  y = PermuteAxes(out, kNchwToNhwc);
  return absl::OkStatus();
}

Tensor PermuteAxes(const Tensor& t, absl::Span<const int64_t> perm) {
  const Shape& in = t.shape();
  const std::vector<int64_t> in_strides = Strides(in);
  Shape shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = in[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  Tensor out(t.dtype(), shape);
  CopyToDense(t.raw_data(), StridedTables(shape, strides), out.mutable_raw_data(), shape, DTypeSize(t.dtype()));
  return out;
}

}  // namespace kiln::ops
