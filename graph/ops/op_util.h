// Shared helpers for op files: broadcasting, axes, common inference and
// element-wise evaluation. Internal to graph/ops.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Multidirectional (numpy) broadcast of two shapes; error names the node.
absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b);

// Normalises a possibly negative axis into [0, rank); error names the node.
absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank);

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// For each element of `out_shape` (row-major), the offset of the element of a
// tensor of `in_shape` broadcast to it. in_shape must broadcast to out_shape.
std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape);

// The integer values of a constant input (shape/axes arguments). Fails with a
// message naming the node when the input is absent, and with FailedPrecondition
// when it is not a compile-time constant (the importer can then bind it).
absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what);

// Slice's plan per input axis: first element, step and number of elements taken.
struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};
// The plan of a Slice node whose starts/ends/axes/steps are constants (defined in
// slice.cc; used by its inference and by the GPU kernel generator).
absl::StatusOr<std::vector<AxisSlice>> ConstantSlicePlan(const Node& node);

// Inference: output 0 has input 0's dtype and shape.
absl::Status InferSameAsInput(Node& node);
// Inference: output 0 has input 0's dtype and the broadcast shape of all inputs;
// all inputs must share a dtype. `out_dtype` overrides the output dtype (e.g. bool).
absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype = std::nullopt);
// Fails unless input `i` has a floating dtype (f32, f16, bf16).
absl::Status RequireFloat(const Node& node, int i);

// Element-wise evaluation. Floating inputs are computed as float with `ff`;
// integer and bool inputs as int64 with `fi` (pass nullptr when the op is only
// defined on floating types). The result is stored in out's dtype.
absl::Status EvalUnary(const Node& node, const Tensor& in, Tensor& out,
                       const std::function<float(float)>& ff,
                       const std::function<int64_t(int64_t)>& fi = nullptr);
absl::Status EvalBinary(const Node& node, const Tensor& a, const Tensor& b, Tensor& out,
                        const std::function<float(float, float)>& ff,
                        const std::function<int64_t(int64_t, int64_t)>& fi = nullptr);

}  // namespace kiln::ops

namespace kiln::ops {

// ---- Data movement (any dtype: bytes are copied, never converted) -------------

// Where the elements of an iteration space of shape S live in a buffer: element
// (j_0, ..., j_{r-1}) is at sum_d tables[d][j_d] (in elements). tables[d] has S[d]
// entries. This covers strided views (transpose, slice with steps, broadcast with
// stride 0) and per-axis index maps (pad modes, tile).
using OffsetTables = std::vector<std::vector<int64_t>>;

// Tables of a strided view: tables[d][j] = j * strides[d]. A view that starts at
// an offset is expressed by offsetting the buffer pointer.
OffsetTables StridedTables(const Shape& shape, absl::Span<const int64_t> strides);

// For each element of the iteration space `shape`, copies the `elem_size` bytes at
// src[src_at] to dst[dst_at]. Trailing axes that are contiguous in both buffers are
// copied as one memcpy run; rows are spread over threads. O(number of elements).
void CopyElements(const void* src, const OffsetTables& src_at, void* dst,
                  const OffsetTables& dst_at, const Shape& shape, size_t elem_size);

// CopyElements into a dense row-major destination of `shape`.
void CopyToDense(const void* src, const OffsetTables& src_at, void* dst, const Shape& shape,
                 size_t elem_size);

// Writes `n` copies of the `elem_size`-byte element `value` to dst.
void FillElements(void* dst, int64_t n, const void* value, size_t elem_size);

// Fails unless input `i` is numeric (any supported dtype except bool).
absl::Status RequireNumeric(const Node& node, int i);
// Fails unless input `i` has dtype bool.
absl::Status RequireBool(const Node& node, int i);
// Inference for float-only unary ops: input 0 must be f32/f16/bf16; output 0
// copies its dtype and shape.
absl::Status InferFloatUnary(Node& node);

// Element-wise fold over all present inputs broadcast together to out's shape:
// acc = in[0], then acc = f(acc, in[k]). Floating inputs fold in fp32 with `ff`
// (then `finish` maps each result, when given); integer and bool inputs fold in
// int64 with `fi` (nullptr when only defined on floating types). Inputs share a dtype.
absl::Status EvalVariadic(const Node& node, absl::Span<const Tensor* const> in, Tensor& out,
                          const std::function<float(float, float)>& ff,
                          const std::function<int64_t(int64_t, int64_t)>& fi = nullptr,
                          const std::function<float(float)>& finish = nullptr);

}  // namespace kiln::ops

namespace kiln::ops {

// Converts `in` to dtype `to` with ONNX Cast semantics: floats to integers
// truncate toward zero (NaN gives 0, out-of-range values saturate to int64 then
// wrap), anything to bool is x != 0, integers convert exactly through int64.
Tensor CastTensor(const Tensor& in, DType to);

}  // namespace kiln::ops

namespace kiln::ops {

// ---- NN ops: fp32 access, sliding windows, reductions -------------------------

// Read access to a tensor's elements as fp32: f32 data is used in place, other
// dtypes are converted once.
class FloatView {
 public:
  explicit FloatView(const Tensor& t);
  FloatView(const FloatView&) = delete;
  FloatView& operator=(const FloatView&) = delete;
  const float* data() const { return ptr_; }

 private:
  std::vector<float> copy_;
  const float* ptr_ = nullptr;
};

// Write access to an output as fp32: f32 outputs are written in place, other
// dtypes through a buffer that Commit() converts into the tensor.
class FloatSink {
 public:
  explicit FloatSink(Tensor& t);
  FloatSink(const FloatSink&) = delete;
  FloatSink& operator=(const FloatSink&) = delete;
  float* data() { return ptr_; }
  void Commit();

 private:
  Tensor& tensor_;
  std::vector<float> buffer_;
  float* ptr_ = nullptr;
};

// Sliding-window geometry of Conv and the pooling ops, one entry per spatial dim.
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output;
};

// Reads strides, dilations (when `use_dilations`), pads and auto_pad (NOTSET,
// SAME_UPPER, SAME_LOWER, VALID) from `node` and computes pads and the output
// size for spatial input dims `in` and window `kernel`. With `ceil_mode` the
// window count rounds up, but a window starting in the end padding is dropped.
absl::StatusOr<WindowGeometry> ComputeWindow(const Node& node, const Shape& in, std::vector<int64_t> kernel,
                                             bool use_dilations, bool ceil_mode);

// WindowGeometry lifted to exactly 3 spatial dims (leading unit dims for 1-D and
// 2-D windows), so one loop nest serves every rank.
struct Window3 {
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
};
Window3 LiftWindow(const Shape& in_spatial, const WindowGeometry& w);

// For each output index along dim `d` of `g`: the input position of tap 0, the
// taps [lo, hi) that land inside the input, and the taps [lo_pad, hi_pad) that
// land inside the input extended by its pads.
struct TapRange {
  int64_t start, lo, hi, lo_pad, hi_pad;
};
std::vector<TapRange> TapRanges(const Window3& g, int d);

// Softmax, or LogSoftmax when `log`, of `in` along `axis` (in [0, rank)) into out.
void SoftmaxAlongAxis(const Tensor& in, int64_t axis, bool log, Tensor& out);

// The Reduce* family: element map, combine and finish.
enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum };

// Which axes of a rank-`rank` input a Reduce* node reduces: the optional constant
// axes input 1, with noop_with_empty_axes deciding what empty axes mean.
absl::StatusOr<std::vector<bool>> ReducedAxes(const Node& node, int64_t rank);
// Inference for Reduce*: keepdims, axes; dtype checks (integers reduce in int64,
// bool only where `allow_bool`).
absl::Status InferReduce(Node& node, bool allow_integer, bool allow_bool);
// Reference evaluation of a Reduce* node, linear time, parallel over outputs.
absl::Status EvalReduce(const Node& node, ReduceKind kind, const Tensor& in, Tensor& out);

}  // namespace kiln::ops

namespace kiln::ops {

// ---- Axis-wise ops: ArgMax/ArgMin, CumSum, Hardmax, TopK ----------------------

// A shape viewed as [outer, len, inner] around `axis` (in [0, rank)); element
// (o, l, i) is at (o * len + l) * inner + i.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit SplitAtAxis(const Shape& shape, int64_t axis);

// ArgMax / ArgMin: attributes axis, keepdims, select_last_index; numeric input;
// int64 output.
absl::Status InferArgReduce(Node& node);
absl::Status EvalArgReduce(const Node& node, const Tensor& in, Tensor& out, bool is_max);

}  // namespace kiln::ops

// ---- Global pools -------------------------------------------------------------
namespace kiln::ops {

// Inference for GlobalAveragePool/GlobalMaxPool: float X [N, C, spatial...] ->
// [N, C, 1, ...].
absl::Status InferGlobalPool(Node& node);

// Output element t = reduce(plane t of X, plane size) for each of the N*C planes
// of a [N, C, spatial...] tensor, in parallel.
template <typename Reduce>
void EvalPerPlane(const Tensor& in, Tensor& out, Reduce reduce) {
  const Shape& xs = in.shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t size = planes == 0 ? 0 : in.numel() / planes;
  const FloatView x(in);
  FloatSink sink(out);
  float* y = sink.data();
  ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(size, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) y[t] = reduce(x.data() + t * size, size);
  });
  sink.Commit();
}

}  // namespace kiln::ops

// ---- Windowed pools -----------------------------------------------------------
namespace kiln::ops {

// Evaluates a pooling window over X [N, C, spatial...] (1 to 3 spatial dims) in
// parallel over the N*C planes. For each output position the taps inside the
// input are folded as acc = step(acc, x) from `init`, and the output is
// finish(acc, d, h, w) with the position's tap ranges (for divisors).
template <typename Step, typename Finish>
void EvalWindowPool(const Tensor& in, Tensor& out, const WindowGeometry& win, float init, Step step,
                    Finish finish) {
  const Shape& xs = in.shape();
  const Window3 g = LiftWindow(Shape(xs.begin() + 2, xs.end()), win);
  const std::vector<TapRange> rd = TapRanges(g, 0), rh = TapRanges(g, 1), rw = TapRanges(g, 2);
  const int64_t planes = xs[0] * xs[1];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const FloatView x(in);
  FloatSink sink(out);
  float* y = sink.data();
  const int64_t work = out_plane * g.kernel[0] * g.kernel[1] * g.kernel[2];
  ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* plane = x.data() + t * in_plane;
      float* dst = y + t * out_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const TapRange& d = rd[od];
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const TapRange& h = rh[oh];
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const TapRange& w = rw[ow];
            float acc = init;
            for (int64_t td = d.lo; td < d.hi; ++td) {
              const int64_t id = d.start + td * g.dilation[0];
              for (int64_t th = h.lo; th < h.hi; ++th) {
                const float* row = plane + (id * g.in[1] + h.start + th * g.dilation[1]) * g.in[2];
                for (int64_t tw = w.lo; tw < w.hi; ++tw) acc = step(acc, row[w.start + tw * g.dilation[2]]);
              }
            }
            *dst++ = finish(acc, d, h, w);
          }
        }
      }
    }
  });
  sink.Commit();
}

}  // namespace kiln::ops

// ---- Views and softmax --------------------------------------------------------
namespace kiln::ops {

// Evaluation of every view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity):
// the output is input 0's bytes under the inferred shape.
absl::Status EvalView(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out);

// Softmax/LogSoftmax (opset 13): float input, `axis` attribute (default -1) in range.
absl::Status InferSoftmaxNode(Node& node);
absl::Status EvalSoftmaxNode(const Node& node, const Tensor& in, bool log, Tensor& out);

}  // namespace kiln::ops

// ---- Channels-last layout (kiln-internal) -------------------------------------
namespace kiln::ops {

// The kiln-internal int attribute `channels_last` of Conv, MaxPool, AveragePool and
// GlobalAveragePool (default 0; set by the to-channels-last pass). When 1, X is
// [N, H, W, C] and the output is [N, OH, OW, OC]; Conv's W is [OC, KH, KW, C/group]
// (cuDNN's KRSC). Fails unless the value is 0 or 1, and, for 1, unless input 0 has
// rank 4 (channels-last covers 2-D spatial ops only).
absl::StatusOr<bool> ChannelsLast(const Node& node);

// Axis permutations between NCHW and NHWC: out.shape[i] = in.shape[perm[i]].
inline constexpr int64_t kNchwToNhwc[4] = {0, 2, 3, 1};
inline constexpr int64_t kNhwcToNchw[4] = {0, 3, 1, 2};

// `t` with its axes permuted (any dtype): out.shape[i] = t.shape[perm[i]].
Tensor PermuteAxes(const Tensor& t, absl::Span<const int64_t> perm);

// The CPU reference of a channels-last node through its NCHW form: the first
// `permuted` inputs go NHWC -> NCHW (the rest as they are), `nchw` computes an
// [N, C, H, W] output from them, which lands in `y` ([N, H, W, C]) permuted back.
using NchwEval = std::function<absl::Status(absl::Span<const Tensor* const> in, Tensor& y)>;
absl::Status EvalThroughNchw(absl::Span<const Tensor* const> in, size_t permuted, Tensor& y, const NchwEval& nchw);

}  // namespace kiln::ops
