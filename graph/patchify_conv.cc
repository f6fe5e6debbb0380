// Conv with kernel == stride, no padding -> Reshape, Transpose, MatMul over patches.
#include "graph/patchify_conv.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v) {
    if (e != x) return false;
  }
  return true;
}

bool Qualifies(const Node& node) {
  if (node.op_type() != "Conv" || !node.domain().empty() || node.num_outputs() != 1) return false;
  if (node.num_inputs() < 2) return false;
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  const Value* y = node.output(0);
  if (x == nullptr || w == nullptr || !x->has_type() || !w->has_type() || !y->has_type()) return false;
  if (x->rank() != 4 || w->rank() != 4 || !w->is_constant() || !IsFloating(x->dtype())) return false;
  if (node.has_input(2) && (!node.input(2)->has_type() || node.input(2)->rank() != 1)) return false;
  const int64_t kh = w->shape()[2], kw = w->shape()[3];
  if (kh * kw < 2 || w->shape()[1] != x->shape()[1]) return false;
  absl::StatusOr<std::vector<int64_t>> strides = node.GetInts("strides", {1, 1});
  absl::StatusOr<std::vector<int64_t>> kernel = node.GetInts("kernel_shape", {kh, kw});
  absl::StatusOr<std::vector<int64_t>> pads = node.GetInts("pads", {0, 0, 0, 0});
  absl::StatusOr<std::vector<int64_t>> dilations = node.GetInts("dilations", {1, 1});
  absl::StatusOr<int64_t> group = node.GetInt("group", 1);
  absl::StatusOr<std::string> auto_pad = node.GetString("auto_pad", "NOTSET");
  if (!strides.ok() || !kernel.ok() || !pads.ok() || !dilations.ok() || !group.ok() || !auto_pad.ok()) return false;
  if (*strides != std::vector<int64_t>{kh, kw} || *kernel != std::vector<int64_t>{kh, kw}) return false;
  if (!AllEqual(*pads, 0) || !AllEqual(*dilations, 1) || *group != 1) return false;
  if (*auto_pad != "NOTSET" && *auto_pad != "VALID") return false;
  return x->shape()[2] % kh == 0 && x->shape()[3] % kw == 0;
}

void Rewrite(Graph& graph, Node* conv) {
  const std::string name = conv->name();
  Value* x = conv->input(0);
  const Value* w = conv->input(1);
  Value* b = conv->has_input(2) ? conv->input(2) : nullptr;
  Value* y = conv->output(0);
  const DType dtype = x->dtype();
  const int64_t n = x->shape()[0], c = x->shape()[1], h = x->shape()[2], wd = x->shape()[3];
  const int64_t oc = w->shape()[0], kh = w->shape()[2], kw = w->shape()[3];
  const int64_t oh = h / kh, ow = wd / kw, k = c * kh * kw;
  // The weight as [K, OC]: Wm[(ci kh + i) kw + j][o] = Wt[o][ci][i][j].
  const std::vector<float> wv = w->constant().ToFloat();
  std::vector<float> wm(wv.size());
  for (int64_t o = 0; o < oc; ++o) {
    for (int64_t r = 0; r < k; ++r) wm[r * oc + o] = wv[o * k + r];
  }
  Value* weight = graph.AddConstant(absl::StrCat(w->name(), "/patches"), Tensor::FromFloat(w->dtype(), {k, oc}, wm));
  graph.RemoveNode(conv);

  auto node = [&](const std::string& op, std::vector<Value*> in, const std::string& suffix, Shape shape) {
    Value* out = graph.AddValue(absl::StrCat(y->name(), suffix), dtype, std::move(shape));
    graph.AddNode(op, std::move(in), {out}, absl::StrCat(name, suffix));
    return out;
  };
  Value* p = node("Reshape", {x, IntsConstant(graph, absl::StrCat(name, "/patch_grid_shape"), {n, c, oh, kh, ow, kw})},
                  "/patch_grid", {n, c, oh, kh, ow, kw});
  Value* t = graph.AddValue(absl::StrCat(y->name(), "/patches_nhwc"), dtype, {n, oh, ow, c, kh, kw});
  graph.AddNode("Transpose", {p}, {t}, absl::StrCat(name, "/patches_nhwc"))
      ->SetAttr("perm", Attribute(std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
  Value* rows = node("Reshape", {t, IntsConstant(graph, absl::StrCat(name, "/patches_shape"), {n * oh * ow, k})},
                     "/patches", {n * oh * ow, k});
  Value* m = node("MatMul", {rows, weight}, "/matmul", {n * oh * ow, oc});
  if (b != nullptr) m = node("Add", {m, b}, "/bias", {n * oh * ow, oc});
  Value* grid = node("Reshape", {m, IntsConstant(graph, absl::StrCat(name, "/nhwc_shape"), {n, oh, ow, oc})},
                     "/nhwc", {n, oh, ow, oc});
  graph.AddNode("Transpose", {grid}, {y}, absl::StrCat(name, "/nchw"))
      ->SetAttr("perm", Attribute(std::vector<int64_t>{0, 3, 1, 2}));
}

}  // namespace

absl::StatusOr<bool> PatchifyConv::Run(Graph& graph) { return RewriteEachMatch(graph, Qualifies, Rewrite); }

}  // namespace kiln
