// The Hopper GEMM family on dynamic graphs (issue 34): a MatMul group whose rows vary
// with the dim symbols (the token count batch * seq of a transformer's projections)
// runs on kiln's kernel with the rows read at run time (gemm_sm90.cuh GEMM_DYNAMIC_M),
// one tile config per box of sizes. Everything else of the problem is fixed: K, N, the
// weights, a stacked product's batch (fuse-siblings, whose pieces lie the largest
// product apart), and every epilogue operand reads the same elements at every size
// (a bias per column, or an operand laid out as C).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/size_variants.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {
namespace {

struct DynamicGemm {
  GemmFamilyPlan plan;  // at the largest sizes
  DimExpr rows;         // C's rows (the plan's m at the largest sizes)
  std::vector<DimSymbol> symbols;
};

bool Fixed(const std::vector<DimExpr>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const DimExpr& d) { return d.IsConstant(); });
}

absl::StatusOr<DynamicGemm> Analyze(const Node& node) {
  if (!IsFusedGroup(node)) return NoKernel(node, "a MatMul outside a fused group (run-time sizes)");
  KILN_RETURN_IF_ERROR(Sm90Eligible(node));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(node));
  KILN_ASSIGN_OR_RETURN(GemmFamilyPlan p, PlanGemmForFamily(node));
  auto refuse = [&](const std::string& why) { return NoKernel(node, absl::StrCat(why, " (run-time sizes)")); };
  if (p.dual || p.prologue_a || p.prologue_b || p.gated || p.rotary_half > 0) {
    return refuse("a prologue, a second product, a gate or a rotation");
  }
  if (p.trans_a) return refuse("an A stored M-major");
  if (p.tf32) return refuse("tf32 operands");
  if (!Fixed(ValueDims(*node.input(p.b_input)))) return refuse("a B whose size varies");
  // C: [batch (fixed)..., rows..., N (fixed)].
  const std::vector<DimExpr> y = ValueDims(*node.output(0));
  if (y.size() < 2 || !y.back().IsConstant()) return refuse("a last dim that varies");
  size_t first = 0;
  for (int64_t batch = 1; batch < p.batch; ++first) {
    if (first + 2 >= y.size() || !y[first].IsConstant()) return refuse("a batch that varies");
    batch *= *y[first].constant();
    if (batch > p.batch) return refuse("a batch that is not C's leading dims");
  }
  DynamicGemm g{p, DimsProduct(std::vector<DimExpr>(y.begin() + first, y.end() - 1)), body->dim_symbols()};
  KILN_ASSIGN_OR_RETURN(int64_t largest, g.rows.Evaluate(LargestValues(g.symbols)));
  if (largest != p.m) return refuse("rows that are not C's");
  // A stacked product (batch > 1) shares A and lies the largest product apart, as its
  // pieces were planned (fuse-siblings' out_batch_stride).
  if (p.batch > 1) {
    bool stacked = false;
    for (const Node* n : body->nodes()) {
      if (n->op_type() == "MatMul") stacked |= n->GetInt("out_batch_stride", 0).value_or(0) == p.m * p.n;
    }
    if (p.a_batch != 0 || !stacked) return refuse("a batched product whose batch stride varies");
  }
  // Each epilogue operand: a row broadcast over C's rows (a bias), or laid out as C.
  const Shape& os = p.out_shape;
  for (const GemmFamilyPlan::EpilogueLoad& ld : p.epilogue_loads) {
    const Shape& v = ld.view;  // right-aligned against C
    bool column = ld.dense && v.size() <= os.size();
    for (size_t d = 0; column && d + 1 < v.size(); ++d) column = d + os.size() - v.size() < first || v[d] == 1;
    const bool like_c = ld.dense && p.batch == 1 && v == os && ValueDims(*node.input(ld.input)) == y;
    if (!column && !like_c) {
      return refuse(absl::StrCat("an epilogue operand ('", node.input(ld.input)->name(),
                                 "') read at strides that vary with the sizes"));
    }
  }
  return g;
}

// The tile for the rows `samples` of one box of sizes: where the heuristic splits K at
// the box's most rows (few tiles), its pick at the box's middle `mid`; else the config
// of Sm90TileCosts (unsplit, no stream-K) whose predicted time is closest to the best
// one at every sample (the least worst ratio), since one config serves the whole box.
Sm90GemmConfig PickForBox(const GemmFamilyPlan& p, const std::vector<int64_t>& samples, int64_t mid, int sm_count) {
  const int64_t most = *std::max_element(samples.begin(), samples.end());
  Sm90GemmConfig heuristic = PickSm90GemmConfig(mid, p.n, p.k, p.batch, sm_count, false, p.epilogue_work);
  heuristic.stream_k = false;
  if (PickSm90GemmConfig(most, p.n, p.k, p.batch, sm_count, false, p.epilogue_work).split_k > 1) return heuristic;
  std::vector<double> best(samples.size(), 0);
  for (const Sm90TileCost& cost : Sm90TileCosts()) {
    for (size_t i = 0; i < samples.size(); ++i) {
      const double us = cost.PredictUs(samples[i], p.n, p.k, p.batch, sm_count, p.epilogue_work);
      if (best[i] == 0 || us < best[i]) best[i] = us;
    }
  }
  const Sm90TileCost* pick = nullptr;
  double pick_ratio = 0;
  for (const Sm90TileCost& cost : Sm90TileCosts()) {
    if (cost.config.stream_k || cost.config.swap_ab || cost.config.split_k > 1) continue;
    double worst = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      worst = std::max(worst, cost.PredictUs(samples[i], p.n, p.k, p.batch, sm_count, p.epilogue_work) / best[i]);
    }
    if (pick == nullptr || worst < pick_ratio) pick = &cost, pick_ratio = worst;
  }
  return pick != nullptr ? pick->config : heuristic;
}

}  // namespace

absl::Status DynamicSm90Eligible(const Node& node) { return Analyze(node).status(); }

absl::StatusOr<std::vector<KernelLaunch>> GenerateDynamicMatMulGroupSm90(const Node& node, int sm_count) {
  KILN_ASSIGN_OR_RETURN(const DynamicGemm g, Analyze(node));
  const GemmFamilyPlan& p = g.plan;
  if (sm_count <= 0) sm_count = 132;
  // Per box of sizes a tile (PickForBox; no stream-K, whose split is made for one tile
  // count); boxes with the same tile share a launch.
  struct Variant {
    Sm90GemmConfig config;
    std::vector<std::vector<std::array<int64_t, 2>>> boxes;
    int64_t max_m = 0;
  };
  std::vector<Variant> variants;
  for (const SizeBox& box : PowerOfTwoBoxes(g.symbols, {g.rows}, /*halves=*/true)) {
    std::vector<int64_t> lo, hi;
    for (const auto& range : box.ranges) lo.push_back(range[0]), hi.push_back(range[1]);
    KILN_ASSIGN_OR_RETURN(const int64_t least, g.rows.Evaluate(lo));
    KILN_ASSIGN_OR_RETURN(const int64_t mid, g.rows.Evaluate(box.middle));
    KILN_ASSIGN_OR_RETURN(const int64_t most, g.rows.Evaluate(hi));
    const Sm90GemmConfig cfg = PickForBox(p, {std::max<int64_t>(least, 1), mid, most}, mid, sm_count);
    const std::string text = Sm90GemmConfigString(cfg);
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const Variant& v) { return Sm90GemmConfigString(v.config) == text; });
    if (it == variants.end()) it = variants.insert(variants.end(), Variant{cfg, {}, 0});
    it->boxes.push_back(box.ranges);
    it->max_m = std::max(it->max_m, most);
  }
  const std::string code = DimCode(g.rows);
  std::vector<KernelLaunch> launches;
  for (Variant& v : variants) {
    absl::StatusOr<KernelLaunch> l = GenerateSm90RunTimeRows(node, v.config, {code, v.max_m}, sm_count);
    if (!l.ok() && v.config.split_k > 1) {  // a split the most rows' workspace does not fit
      v.config.split_k = 1;
      l = GenerateSm90RunTimeRows(node, v.config, {code, v.max_m}, sm_count);
    }
    if (!l.ok()) return NoKernel(node, absl::StrCat("run-time sizes: ", l.status().message()));
    if (variants.size() > 1) l->size_boxes = std::move(v.boxes);
    launches.push_back(*std::move(l));
  }
  return launches;
}

}  // namespace kiln::codegen::ops
