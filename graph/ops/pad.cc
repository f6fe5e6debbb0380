// Pad: pads (or, with negative pads, crops) each axis; constant `pads`, optional
// scalar `constant_value` and `axes` inputs; modes constant, reflect, edge, wrap.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

enum class Mode { kConstant, kReflect, kEdge, kWrap };

struct Plan {
  Mode mode = Mode::kConstant;
  std::vector<int64_t> begin, end;  // per axis of the input, may be negative
};

absl::StatusOr<Plan> MakePlan(const Node& node, const Shape& shape, const std::vector<int64_t>& pads,
                              const std::vector<int64_t>* axes_in) {
  Plan plan;
  KILN_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "constant"));
  if (mode == "constant") {
    plan.mode = Mode::kConstant;
  } else if (mode == "reflect") {
    plan.mode = Mode::kReflect;
  } else if (mode == "edge") {
    plan.mode = Mode::kEdge;
  } else if (mode == "wrap") {
    plan.mode = Mode::kWrap;
  } else {
    return node.Error(absl::StrCat("unknown mode '", mode, "' (expected constant, reflect, edge or wrap)"));
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  if (axes_in != nullptr) {
    axes = *axes_in;
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n) {
    return node.Error(absl::StrCat("pads [", absl::StrJoin(pads, ","), "] has ", pads.size(),
                                   " entries; expected 2 x ", n, " (begin and end for each axis)"));
  }
  plan.begin.assign(rank, 0);
  plan.end.assign(rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    if (axes[i] < -rank || axes[i] >= rank) {
      return node.Error(absl::StrCat("axis ", axes[i], " in axes [", absl::StrJoin(axes, ","),
                                     "] is out of range for input of rank ", rank));
    }
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (seen[a]) return node.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat axis ", a));
    seen[a] = true;
    plan.begin[a] = pads[i];
    plan.end[a] = pads[n + i];
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t out = shape[d] + plan.begin[d] + plan.end[d];
    if (out < 0) {
      return node.Error(absl::StrCat("pads ", plan.begin[d], " and ", plan.end[d], " on axis ", d,
                                     " of size ", shape[d], " give a negative size"));
    }
    const int64_t kept = shape[d] + std::min<int64_t>(plan.begin[d], 0) + std::min<int64_t>(plan.end[d], 0);
    if (plan.mode != Mode::kConstant && out > 0 && kept <= 0) {
      return node.Error(absl::StrCat("mode '", mode, "' needs data to pad from, but axis ", d, " of size ",
                                     shape[d], " has none left after pads ", plan.begin[d], " and ",
                                     plan.end[d]));
    }
  }
  return plan;
}

// Input index read by output index j of one axis in a non-constant mode. The
// axis is first cropped to [lo, lo + n) by negative pads; `pb` >= 0 is the pad
// in front of the cropped data.
int64_t SourceIndex(Mode mode, int64_t j, int64_t pb, int64_t lo, int64_t n) {
  int64_t i = j - pb;
  switch (mode) {
    case Mode::kEdge:
      i = std::clamp<int64_t>(i, 0, n - 1);
      break;
    case Mode::kWrap:
      i %= n;
      if (i < 0) i += n;
      break;
    case Mode::kReflect:
      if (n == 1) {
        i = 0;
      } else {
        const int64_t period = 2 * (n - 1);
        i %= period;
        if (i < 0) i += period;
        if (i >= n) i = period - i;
      }
      break;
    case Mode::kConstant:
      break;
  }
  return lo + i;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ConstantInts(node, 1, "pads"));
  std::vector<int64_t> axes;
  if (node.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(node, 3, "axes"));
  }
  const Shape& in = node.input(0)->shape();
  KILN_ASSIGN_OR_RETURN(Plan plan, MakePlan(node, in, pads, node.has_input(3) ? &axes : nullptr));
  if (node.has_input(2)) {
    const Value* cv = node.input(2);
    if (cv->dtype() != node.input(0)->dtype() || cv->numel() != 1) {
      return node.Error(absl::StrCat("constant_value must be a one-element ",
                                     DTypeName(node.input(0)->dtype()), " tensor like the data, got ",
                                     cv->TypeString()));
    }
  }
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] + plan.begin[d] + plan.end[d];
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const std::vector<int64_t> pads = in[1]->ToInt64();
  std::vector<int64_t> axes;
  const bool has_axes = in.size() > 3 && in[3] != nullptr;
  if (has_axes) axes = in[3]->ToInt64();
  const Shape& shape = in[0]->shape();
  KILN_ASSIGN_OR_RETURN(Plan plan, MakePlan(node, shape, pads, has_axes ? &axes : nullptr));
  const Shape& out_shape = out[0].shape();
  const size_t es = DTypeSize(in[0]->dtype());
  const std::vector<int64_t> in_strides = Strides(shape), out_strides = Strides(out_shape);
  const int rank = static_cast<int>(shape.size());
  const auto* src = static_cast<const uint8_t*>(in[0]->raw_data());
  auto* dst = static_cast<uint8_t*>(out[0].mutable_raw_data());
  if (out[0].numel() == 0) return absl::OkStatus();

  if (plan.mode == Mode::kConstant) {
    // Fill with the constant (outputs arrive zero-filled), then copy the box of
    // input data that survives the pads.
    if (in.size() > 2 && in[2] != nullptr) {
      FillElements(dst, out[0].numel(), in[2]->raw_data(), es);
    }
    Shape box(rank);
    int64_t src_off = 0, dst_off = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t first = std::max<int64_t>(0, plan.begin[d]);  // output index
      const int64_t last = std::min<int64_t>(out_shape[d], plan.begin[d] + shape[d]);
      box[d] = std::max<int64_t>(0, last - first);
      src_off += (first - plan.begin[d]) * in_strides[d];
      dst_off += first * out_strides[d];
    }
    if (NumElements(box) == 0) return absl::OkStatus();
    CopyElements(src + src_off * es, StridedTables(box, in_strides), dst + dst_off * es,
                 StridedTables(box, out_strides), box, es);
    return absl::OkStatus();
  }

  OffsetTables src_at(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t lo = std::max<int64_t>(0, -plan.begin[d]);
    const int64_t n = shape[d] - lo - std::max<int64_t>(0, -plan.end[d]);
    const int64_t pb = std::max<int64_t>(0, plan.begin[d]);
    src_at[d].resize(out_shape[d]);
    for (int64_t j = 0; j < out_shape[d]; ++j) {
      src_at[d][j] = SourceIndex(plan.mode, j, pb, lo, n) * in_strides[d];
    }
  }
  CopyToDense(src, src_at, dst, out_shape, es);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(pad) {
  registry.Register(
      {.name = "Pad", .min_inputs = 2, .max_inputs = 4, .infer = ops::Infer, .eval = ops::Eval});
}
