// Generated convolutions of NHWC Conv nodes and "conv+epilogue" groups: implicit GEMM
// on the tensor-core template (codegen/templates/gemm_sm80.cuh, GEMM_CONV; a grouped
// conv is one GEMM per group over gridDim.z, CONV_GROUPED), a direct kernel
// (codegen/templates/conv_depthwise.cuh) for depthwise convs (group == C == OC); both
// apply the group's element-wise chain (composed by ComposeElementwise, as the GEMM
// epilogue) per output element in fp32. See codegen/ops/families.h.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_source.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "graph/fused_group.h"
#include "graph/ops/window.h"

namespace kiln::codegen::ops {
namespace {

constexpr int64_t kInt32Limit = int64_t{1} << 31;

// X [n, h, w, c], W [oc, kh, kw, c / group], Y [n, oh, ow, oc]; pt / pl the top and
// left padding (the bottom and right ones only decide OH and OW).
struct ConvGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1, group = 1;
};

// The channels of a depthwise conv whose fp32 weights (KH*KW each) a block stages in
// 40 KiB of shared memory (codegen/templates/conv_depthwise.cuh).
int64_t DepthwiseTileChannels(const ConvGeometry& g) { return 40960 / (g.kh * g.kw * 4); }

absl::StatusOr<ConvGeometry> Geometry(const Node& where, const Node& conv) {
  absl::StatusOr<int64_t> channels_last = conv.GetInt("channels_last", 0);
  if (!channels_last.ok()) return channels_last.status();
  if (*channels_last != 1) {
    return NoKernel(where,
                    "NCHW Conv: the generated conv kernels take NHWC convs (channels_last = 1, made by "
                    "graph/to_channels_last); cuDNN runs it");
  }
  if (conv.num_inputs() < 2 || conv.input(0) == nullptr || conv.input(1) == nullptr || conv.num_outputs() != 1) {
    return NoKernel(where, "Conv without X and W");
  }
  const Value* x = conv.input(0);
  const Value* wt = conv.input(1);
  const Value* y = conv.output(0);
  if (!x->has_type() || !wt->has_type() || !y->has_type()) return NoKernel(where, "untyped Conv");
  if (x->rank() != 4 || wt->rank() != 4 || y->rank() != 4) {
    return NoKernel(where, absl::StrCat("Conv of ", x->TypeString(), ": only 2-D convolutions have generated kernels"));
  }
  const Shape& xs = x->shape();
  const Shape& ws = wt->shape();
  const Shape& ys = y->shape();
  ConvGeometry g;
  g.n = xs[0], g.h = xs[1], g.w = xs[2], g.c = xs[3];
  g.oc = ws[0], g.kh = ws[1], g.kw = ws[2];
  g.oh = ys[1], g.ow = ys[2];
  absl::StatusOr<int64_t> group = conv.GetInt("group", 1);
  if (!group.ok()) return group.status();
  if (conv.has_attr("kernel_shape")) {
    absl::StatusOr<std::vector<int64_t>> ks = conv.GetInts("kernel_shape");
    if (!ks.ok()) return ks.status();
    if (*ks != std::vector<int64_t>{g.kh, g.kw}) return NoKernel(where, "kernel_shape does not match W");
  }
  g.group = *group;
  if (g.group < 1 || g.c % g.group != 0 || ws[3] * g.group != g.c || g.oc % g.group != 0 || ys[0] != g.n ||
      ys[3] != g.oc) {
    return NoKernel(where, absl::StrCat("inconsistent NHWC Conv shapes X ", ShapeToString(xs), " W ",
                                        ShapeToString(ws), " Y ", ShapeToString(ys), " group ", g.group));
  }
  // Strides, dilations and padding as graph/ops/conv.cc resolves them.
  absl::StatusOr<kiln::ops::WindowGeometry> window =
      kiln::ops::ComputeWindow(conv, {g.h, g.w}, {g.kh, g.kw}, /*use_dilations=*/true, /*ceil_mode=*/false);
  if (!window.ok()) return NoKernel(where, std::string(window.status().message()));
  if (window->output != std::vector<int64_t>{g.oh, g.ow}) {
    return NoKernel(where, absl::StrCat("output ", ShapeToString(ys), " does not match the convolution arithmetic"));
  }
  g.sh = window->strides[0], g.sw = window->strides[1], g.dh = window->dilations[0], g.dw = window->dilations[1];
  g.pt = window->pads_begin[0];
  g.pl = window->pads_begin[1];
  for (const Value* v : {x, wt, y}) {
    if (v->numel() >= kInt32Limit) return NoKernel(where, "a Conv tensor of 2^31 or more elements");
  }
  if (g.n * g.oh * g.ow <= 0 || g.oc <= 0 || g.c <= 0) return NoKernel(where, "empty Conv");
  return g;
}

// What a conv kernel computes: the Conv, its loaded inputs and the epilogue.
struct ConvPlan {
  std::shared_ptr<const Graph> body;  // a group's body, which `conv` points into
  const Node* conv = nullptr;
  ConvGeometry g;
  int x_input = 0, w_input = 1;  // node input indices
  std::string code, result = "acc";
  std::vector<ElementwiseLoad> loads;  // the bias, then the epilogue's group inputs
  DType dt = DType::kFloat16;          // X and W
  DType out = DType::kFloat16;         // the node's output
  bool depthwise = false;
};

absl::Status Plan(const Node& node, ConvPlan& p) {
  absl::flat_hash_map<const Value*, int> input_index;
  const Graph* body = nullptr;
  if (IsFusedGroup(node)) {
    auto pattern = node.GetString("pattern", "");
    if (!pattern.ok() || *pattern != "conv+epilogue") return NoKernel(node, "not a conv+epilogue group");
    auto body_or = FusedGroupBody(node);
    if (!body_or.ok()) return NoKernel(node, std::string(body_or.status().message()));
    p.body = *std::move(body_or);
    body = p.body.get();
    if (node.num_outputs() != 1 || body->outputs().size() != 1) {
      return NoKernel(node, "conv group with several outputs");
    }
    for (size_t i = 0; i < body->inputs().size(); ++i) input_index[body->inputs()[i]] = static_cast<int>(i);
    for (const Node* n : body->nodes()) {
      if (n->op_type() != "Conv") continue;
      if (p.conv != nullptr) return NoKernel(node, "two Convs in the group");
      p.conv = n;
    }
    if (p.conv == nullptr) return NoKernel(node, "conv group without a Conv");
  } else if (node.op_type() == "Conv") {
    p.conv = &node;
    for (int i = 0; i < node.num_inputs(); ++i) input_index[node.input(i)] = i;
  } else {
    return NoKernel(node, "not a Conv");
  }
  const Node& conv = *p.conv;
  absl::StatusOr<ConvGeometry> g = Geometry(node, conv);
  if (!g.ok()) return g.status();
  p.g = *g;
  auto index_of = [&](int i) -> int {
    if (i >= conv.num_inputs() || conv.input(i) == nullptr) return -1;
    auto it = input_index.find(conv.input(i));
    return it == input_index.end() ? -2 : it->second;
  };
  p.x_input = index_of(0);
  p.w_input = index_of(1);
  const int b_input = index_of(2);
  if (p.x_input < 0 || p.w_input < 0 || b_input == -2) {
    return NoKernel(node, "a Conv input computed or held inside the group");
  }
  p.dt = conv.input(0)->dtype();
  p.out = node.output(0)->dtype();
  if (conv.input(1)->dtype() != p.dt || (b_input >= 0 && conv.input(2)->dtype() != p.dt)) {
    return NoKernel(node, "Conv inputs of different dtypes");
  }
  if (!IsFloating(p.out)) return NoKernel(node, "non-floating output");
  p.depthwise = p.g.group > 1 && p.g.group == p.g.c && p.g.oc == p.g.c;
  if (!p.depthwise && p.g.group > 65535) {
    return NoKernel(node, absl::StrCat("grouped Conv of ", p.g.group, " groups (one per gridDim.z, at most 65535)"));
  }
  if (p.depthwise) {
    if (p.dt != DType::kFloat16 && p.dt != DType::kBFloat16 && p.dt != DType::kFloat32) {
      return NoKernel(node, absl::StrCat("depthwise Conv of ", DTypeName(p.dt)));
    }
    if (DepthwiseTileChannels(p.g) < 8) {
      return NoKernel(node, absl::StrCat("depthwise Conv with a ", p.g.kh, "x", p.g.kw,
                                         " kernel (its weights for 8 channels exceed the shared memory)"));
    }
  } else if (p.dt != DType::kFloat16 && p.dt != DType::kBFloat16) {
    return NoKernel(node, absl::StrCat("tensor-core Conv of ", DTypeName(p.dt), " (f16 and bf16 only)"));
  }

  // The epilogue: the bias (the Conv's own input B) added to the accumulator, then
  // the group's chain.
  const Shape& ys = conv.output(0)->shape();
  if (node.output(0)->shape() != ys) return NoKernel(node, "group output shape differs from the Conv's");
  std::string acc = "acc";
  if (b_input >= 0) {
    p.loads.push_back({b_input, Domain::kFloat, Shape{p.g.oc}});
    p.code = "  const float cb = acc + g0;\n";
    acc = "cb";
  }
  p.result = acc;
  if (body == nullptr) return absl::OkStatus();
  std::vector<const Node*> epilogue;
  for (const Node* n : body->nodes()) {
    if (n != p.conv) epilogue.push_back(n);
  }
  ComposedElementwise composed;
  composed.loads = p.loads;
  composed.computed[conv.output(0)] = {acc, Domain::kFloat};
  if (absl::Status st = ComposeElementwise(node, *body, epilogue, ys, composed); !st.ok()) return st;
  auto res = composed.computed.find(body->outputs()[0]);
  if (res == composed.computed.end()) return NoKernel(node, "group output is not computed from the Conv");
  if (res->second.second != Domain::kFloat) return NoKernel(node, "epilogue result is not floating point");
  absl::StrAppend(&p.code, composed.code);
  p.loads = std::move(composed.loads);
  p.result = res->second.first;
  return absl::OkStatus();
}

// Offset of output element (row, col) = (n*OH*OW + oh*OW + ow, c) in a tensor of shape
// `view` broadcast against Y [N, OH, OW, OC].
absl::StatusOr<std::string> EpilogueOffset(const Node& node, const ConvGeometry& g, const Shape& view) {
  const Shape ys = {g.n, g.oh, g.ow, g.oc};
  std::vector<int64_t> st;
  if (!BroadcastStrides(view, ys, &st)) return NoKernel(node, "an epilogue input does not broadcast into the output");
  std::vector<std::string> terms;
  if (st[0] == st[1] * g.oh && st[1] == st[2] * g.ow) {
    if (st[2] != 0) terms.push_back(st[2] == 1 ? std::string("row") : absl::StrCat("row * ", st[2]));
  } else {
    if (st[0] != 0) terms.push_back(absl::StrCat("(row / ", g.oh * g.ow, ") * ", st[0]));
    if (st[1] != 0) terms.push_back(absl::StrCat("((row / ", g.ow, ") % ", g.oh, ") * ", st[1]));
    if (st[2] != 0) terms.push_back(absl::StrCat("(row % ", g.ow, ") * ", st[2]));
  }
  if (st[3] != 0) terms.push_back(st[3] == 1 ? std::string("col") : absl::StrCat("col * ", st[3]));
  if (terms.empty()) return std::string("0");
  std::string out = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) absl::StrAppend(&out, " + ", terms[i]);
  return out;
}

int Kind(DType dt) { return dt == DType::kFloat16 ? 0 : dt == DType::kBFloat16 ? 1 : 2; }

// One group's GEMM (the whole conv's for group 1): M = N*OH*OW rows, N = OC/G output
// channels, K = KH*KW*C/G.
struct ConvGemmShape {
  int64_t m, n, k, cg;
};
ConvGemmShape GemmShape(const ConvGeometry& g) {
  const int64_t cg = g.c / g.group;
  return {g.n * g.oh * g.ow, g.oc / g.group, g.kh * g.kw * cg, cg};
}

// cp.async needs 16-byte chunks of one tap: C/G % 8 == 0 for A (then C and each
// group's channel offset are multiples of 8 too), K % 8 == 0 for B (each group's
// first row then starts 16-byte aligned as well).
GemmVariant ConvVariant(const ConvGeometry& g) {
  const ConvGemmShape s = GemmShape(g);
  GemmVariant v;
  v.mainloops[0].a.load = s.cg % 8 == 0 ? GemmLoad::kIm2colAsync : GemmLoad::kIm2colScalar;
  v.mainloops[0].b.trans = true;
  v.mainloops[0].b.load = s.k % 8 == 0 ? GemmLoad::kAsync : GemmLoad::kStagedScalar;
  return v;
}

// PickGemmConfig's choice for one group's GEMM (or a 64x64 fallback the gather
// admits), 64x64 instead of 128x128 tiles short of two waves; when that is 64x64 and
// its tiles (over all groups) do not fill one wave of
// `sm_count` SMs (batch-1 CNNs: ResNet-50's 56x56 stage has 49
// tiles of 64x64 for OC = 64, its 7x7 stage 8), the first of 64x32, 32x64, 32x32 that
// does, else the one of them with the most tiles. (Split-K would serve the small-M
// stages better; see docs/gpu.md.) Outputs of up to 32 channels take tiles of 16 or 32
// columns with all warps along M.
GemmConfig PickConvConfig(const ConvGeometry& g, const GemmVariant& v, int sm_count) {
  const ConvGemmShape s = GemmShape(g);
  auto tiles = [&](const GemmConfig& c) { return ((s.m + c.bm - 1) / c.bm) * ((s.n + c.bn - 1) / c.bn) * g.group; };
  GemmConfig picked = GemmConfig{64, 64, 32, 2, 2, 2};
  for (const GemmConfig& c : {PickGemmConfig(s.m, s.n, s.k, g.group, v), GemmConfig{64, 64, 32, 2, 2, 4},
                              GemmConfig{64, 64, 32, 2, 2, 3}, GemmConfig{64, 64, 32, 2, 2, 2}}) {
    if (VerifyConvGemmConfig(c, v).ok()) {
      picked = c;
      break;
    }
  }
  const int64_t wave = sm_count > 0 ? sm_count : 132;
  // A narrow output (a stem conv's 16 or 32 channels): tiles as wide as the output with
  // all warps along M, and as many rows as keep two waves (64 while they fill one; fewer
  // rows go to the small-M rules below). Per-CTA costs dominate such a short GEMM (K =
  // 72 for a 3x3 stem over 8 channels): at batch 32 MobileNetV3's stem took 67 us in
  // 64x16 tiles (as in 64x64 ones), 46 in 128x16, 36 in 256x16 with 8 warps (ncu on
  // the H200; benchmarks/results/zoo_cnn_stem_h200_2026-12-04.txt).
  if (g.group == 1 && s.n <= 32) {
    const int bn = s.n <= 16 ? 16 : 32;
    for (const GemmConfig& c : {GemmConfig{256, bn, 32, 8, 1, 4}, GemmConfig{128, bn, 32, 4, 1, 4}}) {
      if (tiles(c) >= 2 * wave && VerifyConvGemmConfig(c, v).ok()) return c;
    }
    const GemmConfig narrow{64, bn, 32, 4, 1, 4};
    if (tiles(narrow) >= wave && VerifyConvGemmConfig(narrow, v).ok()) return narrow;
  }
  // 128x128 tiles short of two waves leave too few CTAs per SM to hide the gather's
  // latency (Whisper-base's first stem conv: 96 tiles of 8 k-steps; docs/kernels/conv.md).
  const GemmConfig quarter{64, 64, 32, 2, 2, 4};
  if (picked.bm * picked.bn > 64 * 64 && tiles(picked) < 2 * wave && VerifyConvGemmConfig(quarter, v).ok()) {
    return quarter;
  }
  if (picked.bm * picked.bn > 64 * 64 || tiles(picked) >= wave) return picked;
  std::optional<GemmConfig> most;
  for (const GemmConfig& c : {GemmConfig{64, 32, 32, 2, 2, 4}, GemmConfig{32, 64, 32, 2, 2, 4},
                              GemmConfig{32, 32, 32, 2, 2, 4}}) {
    if (!VerifyConvGemmConfig(c, v).ok()) continue;
    if (tiles(c) >= wave) return c;
    if (!most.has_value() || tiles(c) > tiles(*most)) most = c;
  }
  return most.has_value() && tiles(*most) > tiles(picked) ? *most : picked;
}

std::string Describe(const Node& node, const ConvPlan& p, const char* how) {
  const bool fused = IsFusedGroup(node);
  // No node name: identical layers share one module.
  const std::string what =
      fused ? absl::StrCat("fused group (", node.GetString("pattern", "").value_or(""), ")") : std::string("Conv");
  const ConvGeometry& g = p.g;
  return absl::StrCat("\n// ", what, ": Conv NHWC ", p.conv->input(0)->TypeString(), " x ",
                      p.conv->input(1)->TypeString(), " -> ", node.output(0)->TypeString(), ", kernel ", g.kh, "x",
                      g.kw, " stride ", g.sh, "x", g.sw, " pad ", g.pt, ",", g.pl, " dilation ", g.dh, "x", g.dw,
                      " group ", g.group, " (", how, ")\n");
}

// Both conv kernels' parameters start Y, X, W, then the epilogue's group inputs
// (their loads into `epilogue`).
absl::Status StartConvLaunch(const Node& node, const ConvPlan& p, KernelLaunch& launch, GemmEpilogueSource& epilogue) {
  launch.args = {0, InputArg(node, p.x_input), InputArg(node, p.w_input)};
  return AppendGemmEpilogueLoads(
      node, p.loads, [&](const Shape& view) { return EpilogueOffset(node, p.g, view); }, epilogue, launch);
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateImplicitGemm(const Node& node, const ConvPlan& p,
                                                               const GemmConfig* config, int sm_count) {
  const ConvGeometry& g = p.g;
  const ConvGemmShape s = GemmShape(g);
  const GemmVariant variant = ConvVariant(g);
  const GemmConfig cfg = config != nullptr ? *config : PickConvConfig(g, variant, sm_count);
  if (absl::Status valid = VerifyConvGemmConfig(cfg, variant); !valid.ok()) {
    if (config != nullptr) return valid;
    return NoKernel(node, absl::StrCat("no tile config for this conv: ", valid.message()));
  }
  const int64_t tiles = ((s.m + cfg.bm - 1) / cfg.bm) * ((s.n + cfg.bn - 1) / cfg.bn);
  if (tiles >= kInt32Limit) return NoKernel(node, "too many tiles");

  KernelLaunch launch;
  GemmEpilogueSource epilogue;
  if (absl::Status st = StartConvLaunch(node, p, launch, epilogue); !st.ok()) return st;
  const int a_mode = GemmLoadMode(variant.mainloops[0].a.load), b_mode = GemmLoadMode(variant.mainloops[0].b.load);
  const char* t = StorageTypeName(p.dt);
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), Describe(node, p, "implicit GEMM"));
  // A grouped conv: group g = blockIdx.z reads X's channels from g*C/G, W's rows
  // from g*OC/G and writes Y's columns from g*OC/G (the template's CONV_GROUPED).
  const bool grouped = g.group > 1;
  absl::StrAppend(&src, "#define GEMM_BF16 ", p.dt == DType::kBFloat16 ? 1 : 0, "\n#define GEMM_M ", s.m,
                  "\n#define GEMM_N ", s.n, "\n#define GEMM_K ", s.k, "\n#define GEMM_A_BATCH ",
                  grouped ? s.cg : 0, "LL\n#define GEMM_B_BATCH ", grouped ? s.n * s.k : 0,
                  "LL\n#define GEMM_C_BATCH ", grouped ? s.n : 0,
                  "LL\n#define GEMM_TRANS_A 0\n#define GEMM_TRANS_B 1\n#define GEMM_A_MODE ",
                  a_mode, "\n#define GEMM_B_MODE ", b_mode, "\n#define GEMM_A_KIND ", Kind(p.dt),
                  "\n#define GEMM_B_KIND ", Kind(p.dt), "\n#define GEMM_A_T ", t, "\n#define GEMM_B_T ", t,
                  "\n#define GEMM_PROLOGUE_A kiln_gemm_identity{}\n#define GEMM_PROLOGUE_B kiln_gemm_identity{}\n");
  absl::StrAppend(&src, "#define GEMM_CONV 1\n#define CONV_N ", g.n, "\n#define CONV_H ", g.h, "\n#define CONV_W ",
                  g.w, "\n#define CONV_C ", g.c, "\n#define CONV_OH ", g.oh, "\n#define CONV_OW ", g.ow,
                  "\n#define CONV_KW ", g.kw, "\n#define CONV_SH ", g.sh, "\n#define CONV_SW ", g.sw,
                  "\n#define CONV_PT ", g.pt, "\n#define CONV_PL ", g.pl, "\n#define CONV_DH ", g.dh,
                  "\n#define CONV_DW ", g.dw, "\n");
  if (grouped) {
    absl::StrAppend(&src, "#define CONV_GROUPED 1\n#define CONV_CG ", s.cg, "\n#define CONV_OC ", g.oc, "\n");
  }
  absl::StrAppend(&src, GemmSourceTail(cfg, p.out, "", "", epilogue, p.code, p.result));
  launch.source = std::move(src);
  launch.grid = {static_cast<uint32_t>(tiles), 1, static_cast<uint32_t>(g.group)};
  launch.block = {static_cast<uint32_t>(cfg.warps_m * cfg.warps_n * 32), 1, 1};
  launch.shared_bytes = static_cast<uint32_t>(GemmSharedBytes(cfg, variant));
  return std::vector<KernelLaunch>{std::move(launch)};
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateDepthwise(const Node& node, const ConvPlan& p) {
  const ConvGeometry& g = p.g;
  const int vec = g.c % 8 == 0 && DTypeSize(p.dt) == 2 && DTypeSize(p.out) == 2 ? 8 : 1;
  const int64_t groups = g.c / vec;
  // A block: tx channel groups x ty pixel lanes, about 256 threads; its weights (tx * vec
  // channels x KH*KW taps, fp32) in shared memory.
  const int tx = static_cast<int>(std::min<int64_t>({groups, 32, DepthwiseTileChannels(g) / vec}));
  const int ty = std::max(1, 256 / tx);
  const int64_t pixels = g.n * g.oh * g.ow;
  if (pixels >= kInt32Limit) return NoKernel(node, "too many output pixels");
  // Outputs per thread (adjacent in a row, sharing their input columns): 8 while that
  // leaves about 256 threads per SM of an H100 (33792), else 4, or 2 while there are
  // still about 64 per SM (8448), else 1. Work per thread beat thread count in sweeps
  // over the zoo's CNNs: a 256-thread block per SM as the bar for 4 was slower on
  // ConvNeXt-T at batch 1 and no faster elsewhere; 2 or 1 output per thread everywhere
  // was slower at batch 32, 8 everywhere faster there but slower at batch 1
  // (benchmarks/results/zoo_cnn_depthwise_launch_sweep_h200_2026-11-29.txt); 8 only
  // above the 33792 bar took ConvNeXt-T at batch 32 from 1.88 to 1.78-1.79 ms and left
  // the other rows as they were (zoo_cnn_depthwise_variants_h100_2026-12-05.txt). The
  // kernel is bound by L1 throughput (ncu: 94% at batch 32), which the input columns
  // and weights that more outputs share save.
  int r = groups * ((g.ow + 7) / 8) * g.n * g.oh >= 33792 ? 8 : 4;
  while (r > 1 && groups * ((g.ow + r - 1) / r) * g.n * g.oh < 8448) r /= 2;
  const int64_t segments = g.n * g.oh * ((g.ow + r - 1) / r);
  const int64_t tiles = (groups + tx - 1) / tx;
  const int64_t lanes = std::clamp<int64_t>((segments + ty - 1) / ty, 1, 65535);  // 1 when empty: idle
  KernelLaunch launch;
  GemmEpilogueSource epilogue;
  if (absl::Status st = StartConvLaunch(node, p, launch, epilogue); !st.ok()) return st;
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), Describe(node, p, "depthwise"));
  absl::StrAppend(&src, "#define DW_N ", g.n, "\n#define DW_H ", g.h, "\n#define DW_W ", g.w, "\n#define DW_C ", g.c,
                  "\n#define DW_OH ", g.oh, "\n#define DW_OW ", g.ow, "\n#define DW_KH ", g.kh, "\n#define DW_KW ",
                  g.kw, "\n#define DW_SH ", g.sh, "\n#define DW_SW ", g.sw, "\n#define DW_PT ", g.pt,
                  "\n#define DW_PL ", g.pl, "\n#define DW_DH ", g.dh, "\n#define DW_DW ", g.dw, "\n#define DW_VEC ",
                  vec, "\n#define DW_TX ", tx, "\n#define DW_TY ", ty, "\n#define DW_R ", r, "\n#define DW_T ",
                  StorageTypeName(p.dt), "\n#define DW_OUT_T ", StorageTypeName(p.out),
                  "\n#define DW_LOAD(p, i) KILN_LOAD_", FloatSuffix(p.dt),
                  "(p, i)\n#define DW_STORE(p, i, v) KILN_STORE_", FloatSuffix(p.out),
                  "(p, i, v)\n#define KILN_EPILOGUE_PARAMS ", epilogue.params,
                  "\n#define KILN_EPILOGUE_ARGS ", epilogue.args, "\n",
                  GemmEpilogueFunction(epilogue, p.code, p.result), TemplateSource("conv_depthwise.cuh"));
  launch.source = std::move(src);
  launch.grid = {static_cast<uint32_t>(tiles), static_cast<uint32_t>(lanes), 1};
  launch.block = {static_cast<uint32_t>(tx), static_cast<uint32_t>(ty), 1};
  return std::vector<KernelLaunch>{std::move(launch)};
}

}  // namespace

absl::Status VerifyConvGemmConfig(const GemmConfig& config, const GemmVariant& variant) {
  if (absl::Status s = VerifyGemmConfig(config, variant); !s.ok()) return s;
  if (config.split_k != 1) {  // the template could (GEMM_SPLIT_K); the launch has no workspace here
    return absl::InvalidArgumentError(absl::StrCat("GEMM tile config ", GemmConfigString(config),
                                                   ": split-K is not used for convolutions"));
  }
  if (variant.mainloops[0].a.load == GemmLoad::kIm2colScalar) {
    const int threads = config.warps_m * config.warps_n * 32;
    const int tile = config.bm * config.bk;
    if (tile % threads != 0 || config.bk % (tile / threads) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GEMM tile config ", GemmConfigString(config), ": the register-staged im2col gather gives each of ",
          threads, " threads a run of BM*BK/threads k's of one row, which must divide BK = ", config.bk));
    }
  }
  return absl::OkStatus();
}

absl::Status ConvKernelFits(const Node& node) {
  ConvPlan p;
  return Plan(node, p);
}

absl::StatusOr<bool> ConvKernelIsDepthwise(const Node& node) {
  ConvPlan p;
  if (absl::Status st = Plan(node, p); !st.ok()) return st;
  return p.depthwise;
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateConv(const Node& node, const GemmConfig* config, int sm_count) {
  ConvPlan p;
  if (absl::Status st = Plan(node, p); !st.ok()) return st;
  if (p.depthwise) return GenerateDepthwise(node, p);
  return GenerateImplicitGemm(node, p, config, sm_count);
}

}  // namespace kiln::codegen::ops
