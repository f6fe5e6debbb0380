// Shared pieces of the quantized ops (graph/ops/quantized.h).
#include "graph/ops/quantized.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/window.h"

namespace kiln::ops {

absl::Status RequireQuantized(const Node& node, int i, const char* what) {
  const DType t = node.input(i)->dtype();
  if (t != DType::kInt8 && t != DType::kUInt8) {
    return node.Error(absl::StrCat(what, " must be int8 or uint8, got ", DTypeName(t)));
  }
  return absl::OkStatus();
}

absl::StatusOr<PerAxis> QuantizationAxis(const Node& node, int scale_input) {
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 1));
  const Shape& x = node.input(0)->shape();
  const Value* scale = node.input(scale_input);
  PerAxis p;
  if (scale->numel() == 1 && scale->rank() <= 1) return p;
  KILN_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(node, axis_attr, x.size()));
  if (scale->rank() != 1 || scale->shape()[0] != x[p.axis]) {
    return node.Error(absl::StrCat("the scale ", scale->TypeString(), " must be one value or one per index of axis ",
                                   p.axis, " of ", ShapeToString(x)));
  }
  p.per_axis = true;
  p.dim = x[p.axis];
  for (size_t d = p.axis + 1; d < x.size(); ++d) p.inner *= x[d];
  return p;
}

absl::StatusOr<IntMatMulPlan> PlanIntMatMul(const Node& node, int a, int b, int a_zp, int b_zp) {
  const Shape& sa = node.input(a)->shape();
  const Shape& sb = node.input(b)->shape();
  if (sa.size() < 2 || sb.size() < 2) {
    return node.Error(absl::StrCat("operands must have rank >= 2, got ", ShapeToString(sa), " and ",
                                   ShapeToString(sb)));
  }
  IntMatMulPlan p;
  p.m = sa[sa.size() - 2], p.k = sa.back(), p.n = sb.back();
  if (sb[sb.size() - 2] != p.k) {
    return node.Error(absl::StrCat("inner dims differ: ", ShapeToString(sa), " x ", ShapeToString(sb)));
  }
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(node, ba, bb));
  p.out = batch;
  p.out.push_back(p.m);
  p.out.push_back(p.n);
  p.batches = NumElements(batch);
  const std::vector<int64_t> oa = BroadcastOffsets(ba, batch), ob = BroadcastOffsets(bb, batch);
  p.a_batch.assign(oa.begin(), oa.end());
  p.b_batch.assign(ob.begin(), ob.end());
  auto zp_kind = [&](int i, int64_t per, const char* what, bool* per_flag) -> absl::Status {
    if (i < 0 || !node.has_input(i)) return absl::OkStatus();
    const int64_t n = node.input(i)->numel();
    if (n == 1) return absl::OkStatus();
    if (n != per || node.input(i)->rank() != 1) {
      return node.Error(absl::StrCat(what, " ", node.input(i)->TypeString(), " must be one value or ", per));
    }
    *per_flag = true;
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(zp_kind(a_zp, p.m, "a_zero_point", &p.a_zp_per_row));
  KILN_RETURN_IF_ERROR(zp_kind(b_zp, p.n, "b_zero_point", &p.b_zp_per_col));
  return p;
}

std::vector<int64_t> IntMatMul(const IntMatMulPlan& p, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                               const std::vector<int64_t>& a_zp, const std::vector<int64_t>& b_zp) {
  std::vector<int64_t> c(p.batches * p.m * p.n);
  for (int64_t t = 0; t < p.batches; ++t) {
    const int64_t* am = a.data() + p.a_batch[t] * p.m * p.k;
    const int64_t* bm = b.data() + p.b_batch[t] * p.k * p.n;
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t za = a_zp.empty() ? 0 : a_zp[p.a_zp_per_row ? i : 0];
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t zb = b_zp.empty() ? 0 : b_zp[p.b_zp_per_col ? j : 0];
        int64_t acc = 0;
        for (int64_t q = 0; q < p.k; ++q) acc += (am[i * p.k + q] - za) * (bm[q * p.n + j] - zb);
        c[(t * p.m + i) * p.n + j] = acc;
      }
    }
  }
  return c;
}

absl::StatusOr<IntConvPlan> PlanIntConv(const Node& node, int x, int w) {
  const Shape& xs = node.input(x)->shape();
  const Shape& ws = node.input(w)->shape();
  if (xs.size() < 3 || ws.size() != xs.size()) {
    return node.Error(absl::StrCat("x must be [N, C, spatial...] and w of its rank, got ", ShapeToString(xs),
                                   " and ", ShapeToString(ws)));
  }
  IntConvPlan p;
  KILN_ASSIGN_OR_RETURN(p.group, node.GetInt("group", 1));
  if (p.group < 1 || xs[1] != ws[1] * p.group || ws[0] % p.group != 0) {
    return node.Error(absl::StrCat("x ", ShapeToString(xs), " and w ", ShapeToString(ws), " do not fit group ",
                                   p.group));
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, ComputeWindow(node, Shape(xs.begin() + 2, xs.end()),
                                                        std::vector<int64_t>(ws.begin() + 2, ws.end()),
                                                        /*use_dilations=*/true, /*ceil_mode=*/false));
  p.out = {xs[0], ws[0]};
  p.out.insert(p.out.end(), g.output.begin(), g.output.end());
  p.strides = g.strides;
  p.dilations = g.dilations;
  p.pads_begin = g.pads_begin;
  return p;
}

std::vector<int64_t> IntConv(const IntConvPlan& p, const Shape& xs, const Shape& ws, const std::vector<int64_t>& x,
                             const std::vector<int64_t>& w, int64_t x_zp, const std::vector<int64_t>& w_zp) {
  const int sd = static_cast<int>(xs.size()) - 2;
  const int64_t m = ws[0], cg = ws[1], mg = m / p.group;
  int64_t in_plane = 1, taps = 1;
  for (int i = 0; i < sd; ++i) {
    in_plane *= xs[i + 2];
    taps *= ws[i + 2];
  }
  std::vector<int64_t> y(NumElements(p.out));
  for (size_t o = 0; o < y.size(); ++o) {
    std::vector<int64_t> pos(sd);
    int64_t r = static_cast<int64_t>(o);
    for (int i = sd - 1; i >= 0; --i) {
      pos[i] = r % p.out[i + 2];
      r /= p.out[i + 2];
    }
    const int64_t oc = r % m, n = r / m;
    const int64_t zw = w_zp.empty() ? 0 : w_zp[w_zp.size() == 1 ? 0 : oc];
    int64_t acc = 0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      const int64_t xb = (n * xs[1] + (oc / mg) * cg + ci) * in_plane, wb = (oc * cg + ci) * taps;
      for (int64_t tap = 0; tap < taps; ++tap) {
        int64_t t = tap, xi = 0, stride = 1;
        bool inside = true;
        for (int i = sd - 1; i >= 0; --i) {
          const int64_t k = t % ws[i + 2];
          t /= ws[i + 2];
          const int64_t ii = pos[i] * p.strides[i] - p.pads_begin[i] + k * p.dilations[i];
          inside = inside && ii >= 0 && ii < xs[i + 2];
          xi += ii * stride;
          stride *= xs[i + 2];
        }
        if (inside) acc += (x[xb + xi] - x_zp) * (w[wb + tap] - zw);
      }
    }
    y[o] = acc;
  }
  return y;
}

int64_t Requantize(double v, int64_t zp, DType to) {
  if (std::isnan(v)) v = 0;  // 0/0: the zero point
  const double r = std::nearbyint(v) + static_cast<double>(zp);  // half to even
  return static_cast<int64_t>(std::clamp<double>(r, QuantMin(to), QuantMax(to)));
}

}  // namespace kiln::ops
