// RoiAlign: Y[r, c, ph, pw] pools region r (rois[r] = x1, y1, x2, y2, on image
// batch_indices[r]) of X[., c] into an out_h x out_w grid (graph/ops/roi_align.h).
#include "graph/ops/roi_align.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

absl::StatusOr<RoiAlignOptions> GetRoiAlignOptions(const Node& node) {
  RoiAlignOptions o;
  KILN_ASSIGN_OR_RETURN(std::string coord, node.GetString("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "avg"));
  if (coord != "half_pixel" && coord != "output_half_pixel") {
    return node.Error(absl::StrCat("coordinate_transformation_mode must be half_pixel or output_half_pixel, got '",
                                   coord, "'"));
  }
  if (mode != "avg" && mode != "max") return node.Error(absl::StrCat("mode must be avg or max, got '", mode, "'"));
  o.half_pixel = coord == "half_pixel";
  o.max = mode == "max";
  KILN_ASSIGN_OR_RETURN(o.out_h, node.GetInt("output_height", 1));
  KILN_ASSIGN_OR_RETURN(o.out_w, node.GetInt("output_width", 1));
  KILN_ASSIGN_OR_RETURN(o.sampling_ratio, node.GetInt("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(o.spatial_scale, node.GetFloat("spatial_scale", 1.f));
  if (o.out_h < 1 || o.out_w < 1 || o.sampling_ratio < 0 || o.sampling_ratio > 1024) {
    return node.Error("output_height and output_width must be >= 1 and sampling_ratio in [0, 1024]");
  }
  return o;
}

namespace {

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(RoiAlignOptions o, GetRoiAlignOptions(node));
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_RETURN_IF_ERROR(RequireFloat(node, 1));
  const Shape& x = node.input(0)->shape();
  const Shape& rois = node.input(1)->shape();
  const Value* idx = node.input(2);
  if (x.size() != 4 || rois.size() != 2 || rois[1] != 4 || idx->shape() != Shape{rois[0]} ||
      (idx->dtype() != DType::kInt64 && idx->dtype() != DType::kInt32)) {
    return node.Error(absl::StrCat("X must be [N, C, H, W], rois [R, 4] and batch_indices int [R], got ",
                                   ShapeToString(x), ", ", ShapeToString(rois), ", ", idx->TypeString()));
  }
  node.output(0)->SetType(node.input(0)->dtype(), {rois[0], x[1], o.out_h, o.out_w});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(RoiAlignOptions o, GetRoiAlignOptions(node));
  const Shape& xs = in[0]->shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], regions = in[1]->shape()[0];
  const std::vector<float> x = in[0]->ToFloat(), rois = in[1]->ToFloat();
  const std::vector<int64_t> batch = in[2]->ToInt64();
  std::vector<float> y(out[0].numel());
  const float offset = o.half_pixel ? 0.5f : 0.f;
  for (int64_t r = 0; r < regions; ++r) {
    if (batch[r] < 0 || batch[r] >= n) {
      return node.Error(absl::StrCat("batch_indices[", r, "] = ", batch[r], " is outside [0, ", n, ")"));
    }
    const float* roi = rois.data() + r * 4;
    const float x0 = roi[0] * o.spatial_scale - offset, y0 = roi[1] * o.spatial_scale - offset;
    float rw = roi[2] * o.spatial_scale - offset - x0, rh = roi[3] * o.spatial_scale - offset - y0;
    if (!o.half_pixel) {
      rw = std::max(rw, 1.f);
      rh = std::max(rh, 1.f);
    }
    const float bh = rh / static_cast<float>(o.out_h), bw = rw / static_cast<float>(o.out_w);
    const int64_t gh = RoiAlignGrid(rh, o.out_h, o.sampling_ratio), gw = RoiAlignGrid(rw, o.out_w, o.sampling_ratio);
    const float count = static_cast<float>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x.data() + (batch[r] * c + ch) * h * w;
      for (int64_t ph = 0; ph < o.out_h; ++ph) {
        for (int64_t pw = 0; pw < o.out_w; ++pw) {
          float acc = 0.f;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              float yy = y0 + ph * bh + (iy + 0.5f) * bh / static_cast<float>(gh);
              float xx = x0 + pw * bw + (ix + 0.5f) * bw / static_cast<float>(gw);
              float v = 0.f;
              if (yy >= -1.f && yy <= h && xx >= -1.f && xx <= w) {  // false for NaN
                yy = std::max(yy, 0.f);
                xx = std::max(xx, 0.f);
                int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh = yl + 1, xh = xl + 1;
                if (yl >= h - 1) yh = yl = h - 1, yy = static_cast<float>(yl);
                if (xl >= w - 1) xh = xl = w - 1, xx = static_cast<float>(xl);
                const float ly = yy - yl, lx = xx - xl, hy = 1.f - ly, hx = 1.f - lx;
                const float v1 = hy * hx * plane[yl * w + xl], v2 = hy * lx * plane[yl * w + xh];
                const float v3 = ly * hx * plane[yh * w + xl], v4 = ly * lx * plane[yh * w + xh];
                v = o.max ? std::max(std::max(std::max(v1, v2), v3), v4) : v1 + v2 + v3 + v4;
              }
              acc = o.max ? (first ? v : std::max(acc, v)) : acc + v;
              first = false;
            }
          }
          y[((r * c + ch) * o.out_h + ph) * o.out_w + pw] = o.max ? acc : acc / count;
        }
      }
    }
  }
  out[0] = Tensor::FromFloat(out[0].dtype(), out[0].shape(), y);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(roi_align) {
  registry.Register({.name = "RoiAlign", .min_inputs = 3, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
