// Reference evaluation of the pooling ops: GlobalAveragePool/GlobalMaxPool
// inference, a per-plane reduction loop, and a windowed pooling loop over
// 1 to 3 spatial dims. Internal to graph/ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/parallel.h"
#include "graph/graph.h"
#include "graph/ops/float_access.h"
#include "graph/ops/window.h"
#include "graph/tensor.h"

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
