// NonMaxSuppression: per batch and class, the boxes scoring above score_threshold,
// taken greedily by score (ties: the lower index first) while their IoU with every
// box already taken is at most iou_threshold, at most max_output_boxes_per_class of
// them; output [selected, 3] int64 (batch, class, box). The number selected fixes
// the output shape, so boxes and scores must be constants (the node folds at
// import): kiln does not run detection post-processing on run-time data.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/constant_input.h"

namespace kiln::ops {
namespace {

struct Box {
  float y1, x1, y2, x2;
};

Box Corners(const float* b, bool center) {
  if (center) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// IoU of two boxes; 0 when either has no area.
float Iou(const Box& a, const Box& b) {
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return 0.f;
  const float h = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float w = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = h * w;
  return inter / (area_a + area_b - inter);
}

absl::StatusOr<std::vector<int64_t>> Select(const Node& node) {
  KILN_ASSIGN_OR_RETURN(const Tensor* boxes_t, ShapeFixingConstant(node, 0, "boxes"));
  KILN_ASSIGN_OR_RETURN(const Tensor* scores_t, ShapeFixingConstant(node, 1, "scores"));
  KILN_ASSIGN_OR_RETURN(int64_t center, node.GetInt("center_point_box", 0));
  const Shape& bs = boxes_t->shape();
  const Shape& ss = scores_t->shape();
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1]) {
    return node.Error(absl::StrCat("boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got ",
                                   ShapeToString(bs), " and ", ShapeToString(ss)));
  }
  int64_t max_per_class = 0;
  float iou_threshold = 0.f, score_threshold = -INFINITY;
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int i = 2; i < 5; ++i) {
    if (!node.has_input(i) || node.input(i)->numel() == 0) continue;
    KILN_ASSIGN_OR_RETURN(const Tensor* t, ShapeFixingConstant(node, i, names[i - 2]));
    if (i == 2) max_per_class = t->ScalarInt64();
    if (i == 3) iou_threshold = t->ScalarFloat();
    if (i == 4) score_threshold = t->ScalarFloat();
  }
  const std::vector<float> boxes = boxes_t->ToFloat(), scores = scores_t->ToFloat();
  std::vector<int64_t> out;
  for (int64_t b = 0; b < bs[0]; ++b) {
    for (int64_t c = 0; c < ss[1]; ++c) {
      const float* sc = scores.data() + (b * ss[1] + c) * ss[2];
      std::vector<int64_t> order;
      for (int64_t i = 0; i < ss[2]; ++i) {
        if (sc[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      std::vector<Box> taken;
      for (int64_t i : order) {
        if (static_cast<int64_t>(taken.size()) >= max_per_class) break;
        const Box box = Corners(boxes.data() + (b * bs[1] + i) * 4, center != 0);
        bool keep = true;
        for (const Box& t : taken) keep = keep && Iou(box, t) <= iou_threshold;
        if (!keep) continue;
        taken.push_back(box);
        out.insert(out.end(), {b, c, i});
      }
    }
  }
  return out;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sel, Select(node));
  node.output(0)->SetType(DType::kInt64, {static_cast<int64_t>(sel.size()) / 3, 3});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const>, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sel, Select(node));
  out[0] = Tensor::FromInt64(DType::kInt64, out[0].shape(), sel);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(non_max_suppression) {
  registry.Register(
      {.name = "NonMaxSuppression", .min_inputs = 2, .max_inputs = 5, .infer = ops::Infer, .eval = ops::Eval});
}
