// Slice: takes [start, end) with a step along the listed axes; starts/ends/axes/
// steps are constant inputs, clamped as in the ONNX spec (negative steps walk
// backwards; INT64_MAX / INT64_MIN ends mean "to the end").
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/slice.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<AxisSlice>> Plan(const Node& node, const Shape& shape,
                                            const std::vector<int64_t>& starts,
                                            const std::vector<int64_t>& ends,
                                            const std::vector<int64_t>* axes_in,
                                            const std::vector<int64_t>* steps_in) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<AxisSlice> plan(rank);
  for (int64_t d = 0; d < rank; ++d) plan[d] = {0, 1, shape[d]};
  const size_t n = starts.size();
  if (ends.size() != n) {
    return node.Error(absl::StrCat("starts has ", n, " entries but ends has ", ends.size()));
  }
  std::vector<int64_t> axes(n), steps(n, 1);
  for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  if (axes_in != nullptr) {
    if (axes_in->size() != n) {
      return node.Error(absl::StrCat("axes has ", axes_in->size(), " entries but starts has ", n));
    }
    axes = *axes_in;
  }
  if (steps_in != nullptr) {
    if (steps_in->size() != n) {
      return node.Error(absl::StrCat("steps has ", steps_in->size(), " entries but starts has ", n));
    }
    steps = *steps_in;
  }
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    if (axes[i] < -rank || axes[i] >= rank) {
      return node.Error(absl::StrCat("axis ", axes[i], " in axes [", absl::StrJoin(axes, ","),
                                     "] is out of range for input of rank ", rank));
    }
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (seen[a]) return node.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat axis ", a));
    seen[a] = true;
    int64_t step = steps[i];
    if (step == 0) return node.Error(absl::StrCat("steps[", i, "] is 0"));
    const int64_t dim = shape[a];
    // |step| >= dim takes at most one element whatever its size: bound it so the
    // arithmetic below cannot overflow.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end - step - 1) / -step : 0;
    }
    plan[a] = {count > 0 ? start : 0, step, count};
  }
  return plan;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<AxisSlice> plan, ConstantSlicePlan(node));
  const Shape& in = node.input(0)->shape();
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) out[d] = plan[d].count;
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const std::vector<int64_t> starts = in[1]->ToInt64(), ends = in[2]->ToInt64();
  std::vector<int64_t> axes, steps;
  if (in.size() > 3 && in[3] != nullptr) axes = in[3]->ToInt64();
  if (in.size() > 4 && in[4] != nullptr) steps = in[4]->ToInt64();
  const Shape& shape = in[0]->shape();
  KILN_ASSIGN_OR_RETURN(std::vector<AxisSlice> plan,
                        Plan(node, shape, starts, ends, in.size() > 3 && in[3] ? &axes : nullptr,
                             in.size() > 4 && in[4] ? &steps : nullptr));
  if (out[0].numel() == 0) return absl::OkStatus();
  const std::vector<int64_t> in_strides = Strides(shape);
  std::vector<int64_t> strides(shape.size());
  int64_t base = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    base += plan[d].start * in_strides[d];
    strides[d] = plan[d].step * in_strides[d];
  }
  const size_t es = DTypeSize(in[0]->dtype());
  const Shape& out_shape = out[0].shape();
  CopyToDense(static_cast<const uint8_t*>(in[0]->raw_data()) + base * es, StridedTables(out_shape, strides),
              out[0].mutable_raw_data(), out_shape, es);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<AxisSlice>> ConstantSlicePlan(const Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ConstantInts(node, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ConstantInts(node, 2, "ends"));
  std::vector<int64_t> axes, steps;
  if (node.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(node, 3, "axes"));
  }
  if (node.has_input(4)) {
    KILN_ASSIGN_OR_RETURN(steps, ConstantInts(node, 4, "steps"));
  }
  return Plan(node, node.input(0)->shape(), starts, ends, node.has_input(3) ? &axes : nullptr,
              node.has_input(4) ? &steps : nullptr);
}

}  // namespace kiln::ops

KILN_OP_FILE(slice) {
  registry.Register(
      {.name = "Slice", .min_inputs = 3, .max_inputs = 5, .infer = ops::Infer, .eval = ops::Eval});
}
