// Resize on the GPU: one thread per output element. The per-axis taps (input index
// and weight of each output position) come from the reference's plan
// (graph/ops/resize.h) and are baked into the kernel as tables; the element sums the
// products of its axes' weights over every combination of taps, in double, as the
// reference does. Axes the plan leaves unchanged read their own index.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/resize.h"

namespace kiln::codegen::ops {
namespace {

bool IsIdentityAxis(const std::vector<kiln::ops::ResizeTaps>& taps, int64_t in_len) {
  if (static_cast<int64_t>(taps.size()) != in_len) return false;
  for (int64_t o = 0; o < in_len; ++o) {
    if (taps[o].idx.size() != 1 || taps[o].idx[0] != o || taps[o].w[0] != 1.0) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateResize(const Node& node) {
  absl::StatusOr<kiln::ops::ResizePlan> plan = kiln::ops::PlanResize(node);
  if (!plan.ok()) return plan.status();
  const Shape& in = node.input(0)->shape();
  const int rank = static_cast<int>(in.size());
  const std::vector<int64_t> strides = DenseStrides(in);
  const DType dt = node.input(0)->dtype();
  std::string tables, decompose, loops, close;
  std::string weight = "1.0", offset = "0";
  for (int d = rank - 1; d >= 0; --d) {
    absl::StrAppend(&decompose, "const kiln_index c", d, " = r_ % ", plan->out[d], ";\nr_ /= ", plan->out[d], ";\n");
  }
  bool may_extrapolate = false;
  for (int d = 0; d < rank; ++d) {
    const auto& taps = plan->taps[d];
    if (IsIdentityAxis(taps, in[d])) {
      absl::StrAppend(&offset, " + c", d, " * ", strides[d]);
      continue;
    }
    size_t width = 1;
    for (const auto& t : taps) width = std::max(width, t.idx.size());
    std::string idx, w, count;
    for (const auto& t : taps) {
      may_extrapolate |= t.idx.empty();
      absl::StrAppend(&count, count.empty() ? "" : ",", t.idx.size());
      for (size_t k = 0; k < width; ++k) {
        absl::StrAppend(&idx, idx.empty() ? "" : ",", k < t.idx.size() ? t.idx[k] : 0);
        absl::StrAppend(&w, w.empty() ? "" : ",", absl::StrFormat("%.17g", k < t.w.size() ? t.w[k] : 0.0));
      }
    }
    absl::StrAppend(&tables, "__device__ const kiln_index kIdx", d, "[] = {", idx, "};\n__device__ const double kW", d,
                    "[] = {", w, "};\n__device__ const int kCount", d, "[] = {", count, "};\n");
    absl::StrAppend(&loops, "for (int k", d, " = 0; k", d, " < kCount", d, "[c", d, "]; ++k", d, ") {\n");
    absl::StrAppend(&close, "}\n");
    absl::StrAppend(&weight, " * kW", d, "[c", d, " * ", width, " + k", d, "]");
    absl::StrAppend(&offset, " + kIdx", d, "[c", d, " * ", width, " + k", d, "] * ", strides[d]);
  }
  std::string extrapolate;
  if (may_extrapolate) {
    std::string empty;
    for (int d = 0; d < rank; ++d) {
      if (!IsIdentityAxis(plan->taps[d], in[d])) absl::StrAppend(&empty, empty.empty() ? "" : " || ", "kCount", d, "[c", d, "] == 0");
    }
    extrapolate = absl::StrCat("if (", empty, ") acc = ", FloatLit(plan->extrapolation), ";\n");
  }
  const DType ot = node.output(0)->dtype();
  const std::string store = IsFloating(ot) ? StoreFrom(ot, Domain::kFloat, "out0", "w", "(float)acc")
                                           : StoreFrom(ot, Domain::kInt, "out0", "w", "(kiln_i64)llrint(acc)");
  const int64_t n = node.output(0)->numel();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0)};
  l.source = absl::StrCat(
      "// Resize ", node.input(0)->TypeString(), " -> ", node.output(0)->TypeString(), "\n", tables,
      "extern \"C\" __global__ void KILN_KERNEL(", Param(ot, false, "out0"), ", ", Param(dt, true, "in0"), ") {\n",
      GridStrideLoop(n, "w"), "kiln_index r_ = w;\n", decompose, "(void)r_;\ndouble acc = 0.0;\n", loops,
      "acc += (", weight, ") * (double)", LoadAs(dt, IsFloating(dt) ? Domain::kFloat : Domain::kInt, "in0", offset),
      ";\n", close, extrapolate, store, "\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
