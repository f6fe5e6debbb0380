// The pass pipeline: every pass of `kiln compile`, in order (compiler/pipeline.h).
#include "compiler/pipeline.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compiler/expand_groups.h"
#include "fusion/fuse_attention.h"
#include "fusion/fuse_concat.h"
#include "fusion/fuse_epilogue.h"
#include "fusion/fuse_gated_matmul.h"
#include "fusion/fuse_mlp.h"
#include "fusion/fuse_norms.h"
#include "fusion/fuse_pad.h"
#include "fusion/fuse_pointwise.h"
#include "fusion/fuse_prologue.h"
#include "fusion/fuse_rotary_matmul.h"
#include "fusion/fuse_siblings.h"
#include "fusion/mark_causal_masks.h"
#include "graph/collapse_view_chains.h"
#include "graph/conv1d_to_conv2d.h"
#include "graph/conv1x1_to_matmul.h"
#include "graph/eliminate_common_subexpressions.h"
#include "graph/eliminate_dead_code.h"
#include "graph/fold_batch_norm.h"
#include "graph/fold_transpose_into_matmul.h"
#include "graph/gather_to_reshape.h"
#include "graph/gemm_to_matmul.h"
#include "graph/infer_shapes.h"
#include "graph/lower_precision.h"
#include "graph/pad_conv_channels.h"
#include "graph/pad_hidden_width.h"
#include "graph/pad_matmul_width.h"
#include "graph/patchify_conv.h"
#include "graph/recognize_gelu.h"
#include "graph/recognize_layer_norm.h"
#include "graph/recognize_rms_norm.h"
#include "graph/recognize_rope.h"
#include "graph/remove_identity.h"
#include "graph/sum_to_add.h"
#include "graph/swap_reshape_elementwise.h"
#include "graph/tf32_math.h"
#include "graph/to_channels_last.h"
#include "graph/verifier.h"

namespace kiln {
namespace {

// A fixed point is normally reached in two or three rounds; more means a pass
// keeps reporting changes it did not make (a bug).
constexpr int kMaxCanonicalRounds = 16;

// A graph pass class (Run(Graph&) -> StatusOr<bool>) as a pipeline entry.
template <typename P>
std::function<absl::StatusOr<bool>(Graph&, PassContext&)> GraphPass() {
  return [](Graph& graph, PassContext&) { return P().Run(graph); };
}
// A fusion pass class (constructed with the report) as a pipeline entry.
template <typename P>
std::function<absl::StatusOr<bool>(Graph&, PassContext&)> FusionPass() {
  return [](Graph& graph, PassContext& context) { return P(&context.report).Run(graph); };
}

// Constant folding as a pass: InferShapes with folding replaces every node whose
// inputs are all constant by constants, so the node count says whether it changed.
absl::StatusOr<bool> FoldConstants(Graph& graph, PassContext&) {
  const int before = graph.num_nodes();
  KILN_RETURN_IF_ERROR(InferShapes(graph, {.fold_constants = true}));
  return graph.num_nodes() != before;
}

bool Fusing(const Graph&, const PassContext& context) { return context.options.fuse; }
// Fusion for the Hopper family with kiln's GEMMs on (its paired epilogues: gated and
// rotary products).
bool HopperGemmsFusing(const Graph& graph, const PassContext& context) {
  return Fusing(graph, context) && context.kernel_options.hopper && context.kernel_options.GeneratesGemms();
}
bool Lowering(const Graph&, const PassContext& context) {
  return context.options.precision == "fp16" || context.options.precision == "bf16";
}

std::vector<Pass> Canonicalization() {
  const PassStage s = PassStage::kCanonicalize;
  return {
      {"remove-identity", s,
       "first, so that the patterns below match through no-op nodes (Identity chains and inference Dropout sit "
       "between the ops of exported blocks; Swin pads and crops by zero when the map is whole windows)",
       "", nullptr, GraphPass<RemoveIdentity>()},
      {"gather-to-reshape", s,
       "early, with the other rewrites that only re-spell a node: a Gather of every index of its axis in order is "
       "a Reshape, a view instead of a copy (the legacy exporter gathers BERT's padding mask by arange)",
       "", nullptr, GraphPass<GatherToReshape>()},
      {"sum-to-add", s,
       "before the pattern passes: a residual Sum becomes the Add that fuse-epilogue and fuse-pointwise take "
       "(the ONNX zoo's ResNet, DenseNet and Inception spell their residuals as Sum)",
       "", nullptr, GraphPass<SumToAdd>()},
      {"swap-reshape-elementwise", s,
       "before the pattern passes: an activation or scale after a Reshape moves before it, next to the MatMul "
       "whose epilogue takes it (GPT-2's Conv1D export reshapes between the Gemm and its gelu)",
       "", nullptr, GraphPass<SwapReshapeElementwise>()},
      {"gemm-to-matmul", s,
       "before the pattern passes: Linear layers become MatMul + Add, the one matmul form fusion builds "
       "epilogues on",
       "", nullptr, GraphPass<GemmToMatMul>()},
      {"fold-batch-norm", s,
       "folds BN into the Conv before it (or a per-channel Mul + Add) so that the Conv's epilogue (bias, ReLU) is "
       "adjacent to it when fusion runs",
       "", nullptr, GraphPass<FoldBatchNorm>()},
      {"patchify-conv", s,
       "after fold-batch-norm (a BN folds into the conv first): convs whose kernel tiles the input without overlap "
       "(ViT's patch embedding) become a MatMul over patches, which the GEMMs and epilogue fusion take",
       "", nullptr, GraphPass<PatchifyConv>()},
      {"conv1d-to-conv2d", s,
       "after patchify-conv, before the layout passes: a 1-D Conv becomes a 2-D one over a map of height 1, so that "
       "to-channels-last gives it the NHWC kernels (Whisper's audio stem ran in the NCL layout on cuDNN's slow fp16 "
       "path)",
       "", nullptr, GraphPass<Conv1dToConv2d>()},
      {"recognize-gelu", s,
       "GELU decompositions (opset < 20) become one Gelu: one epilogue activation instead of 7-8 pointwise ops", "",
       nullptr, GraphPass<RecognizeGelu>()},
      {"recognize-layer-norm", s,
       "LayerNorm decompositions (opset < 17) become one LayerNormalization, which has its own single kernel", "",
       nullptr, GraphPass<RecognizeLayerNorm>()},
      {"recognize-rms-norm", s,
       "RMSNorm decompositions (Llama, T5: Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul) become one "
       "RMSNormalization, which has its own single kernel",
       "", nullptr, GraphPass<RecognizeRmsNorm>()},
      {"recognize-rope", s,
       "RoPE's rotate_half (Slice, Neg, Concat) becomes a strided view of x as [..., 2, D/2], so that "
       "fuse-pointwise makes the whole rotation (x * cos + rotate_half(x) * sin) one kernel",
       "", nullptr, GraphPass<RecognizeRope>()},
      {"fold-constants", s,
       "after the rewrites: folds what they left constant (transposed or scaled weights) so that the next round "
       "sees constants, and re-infers every type",
       "", nullptr, FoldConstants},
      {"eliminate-common-subexpressions", s,
       "after fold-constants (folded values compare as constants), before the fusion passes: work an exporter "
       "repeats per layer runs once (the legacy SDPA export turns the one padding mask into an additive mask in "
       "every layer)",
       "", nullptr, GraphPass<EliminateCommonSubexpressions>()},
      {"fold-transpose-into-matmul", s,
       "after fold-constants (Transposes of weights are constants by then and flagged constant weights are "
       "re-laid out row-major), before DCE: MatMuls read transposed activations through trans_a/trans_b, so the "
       "Transposes they leave unused go",
       "", nullptr, GraphPass<FoldTransposeIntoMatMul>()},
      {"eliminate-dead-code", s, "last of each round: drops what the rewrites and folding left without uses", "",
       nullptr, GraphPass<EliminateDeadCode>()},
  };
}

// Whether `graph` has a depthwise Conv (one group per input channel, more than one).
bool HasDepthwiseConv(const Graph& graph) {
  for (const Node* n : graph.nodes()) {
    if (n->op_type() != "Conv" || !n->has_input(0) || !n->input(0)->has_type() || n->input(0)->rank() < 3) continue;
    const int64_t group = n->GetInt("group", 1).value_or(1);
    if (group > 1 && group == n->input(0)->shape()[1]) return true;
  }
  return false;
}

std::vector<Pass> LayoutAndPrecision() {
  return {
      {"pad-matmul-width", PassStage::kLayout,
       "after canonicalisation (weights are final constants), before lowering and fusion: a MatMul whose constant "
       "weight is not a multiple of 8 wide gets a zero-padded weight and a Slice of the product, so every row is "
       "16-byte aligned for the GEMMs",
       "", nullptr, GraphPass<PadMatMulWidth>()},
      {"to-channels-last", PassStage::kLayout,
       "after canonicalisation, before lowering and fusion: 2-D convs and pools run NHWC, with transposes only "
       "where the channels-last region meets NCHW values, so fusion sees the final layout",
       "--layout nhwc, or --layout auto on a graph with a 2-D Conv (with dim ranges: and no depthwise Conv)",
       [](const Graph& graph, const PassContext& context) {
         // A dynamic graph's convs run on cuDNN (kiln's conv kernels take fixed sizes),
         // whose NHWC depthwise convs are slower than its NCHW ones.
         return context.options.layout == Layout::kNhwc ||
                (context.options.layout == Layout::kAuto && HasConv2D(graph) &&
                 !(graph.is_dynamic() && HasDepthwiseConv(graph)));
       },
       [](Graph& graph, PassContext& context) {
         context.channels_last = true;
         return ToChannelsLast().Run(graph);
       }},
      {"pad-conv-channels", PassStage::kLayout,
       "after to-channels-last (it pads NHWC channels): a conv reading C % 8 != 0 channels (an image stem) reads "
       "them zero-padded to a multiple of 8, the 16-byte channel vectors fp16/bf16 tensor-core convs want",
       "to-channels-last ran and --precision is fp16 or bf16",
       [](const Graph& graph, const PassContext& context) {
         return context.channels_last && Lowering(graph, context);
       },
       GraphPass<PadConvChannels>()},
      {"conv1x1-to-matmul", PassStage::kLayout,
       "after pad-conv-channels (a padded channel count is the GEMM's K), before lowering and fusion: a 1x1 "
       "channels-last Conv at stride 1 is a GEMM over the pixels, so it runs on the GEMM families and fusion gives "
       "it their epilogues and A-prologues (EfficientNet's and MobileNetV3's expansion, squeeze-excitation and "
       "projection convs)",
       "to-channels-last ran and --conv-groups is auto (the default)",
       [](const Graph&, const PassContext& context) {
         return context.channels_last && context.kernel_options.conv_groups == codegen::ConvGroups::kAuto;
       },
       GraphPass<Conv1x1ToMatMul>()},
      {"pad-hidden-width", PassStage::kLayout,
       "right after conv1x1-to-matmul, whose squeeze-excitation FCs it needs as MatMuls: fc1's narrow product "
       "is widened to the 8 channels pad-conv-channels padded fc2's input to, so fc1 is an aligned GEMM with its "
       "activation in the epilogue and the Pad between them goes",
       "to-channels-last ran and --conv-groups is auto (the default)",
       [](const Graph&, const PassContext& context) {
         return context.channels_last && context.kernel_options.conv_groups == codegen::ConvGroups::kAuto;
       },
       GraphPass<PadHiddenWidth>()},
      {"collapse-view-chains", PassStage::kLayout,
       "last of the layout passes, after to-channels-last's Transposes: a chain of Transposes and Reshapes that "
       "keeps the stored element order becomes one Reshape (Whisper's stem between and after its convs, an image "
       "model's pooled map flattened), so those Transposes copy nothing; one with two Transposes or more becomes "
       "one Transpose (ConvNeXt's downsampling: the LayerNorm's NHWC output to NCHW, then to patches)",
       "", nullptr, GraphPass<CollapseViewChains>()},
      {"calibrate-fp16", PassStage::kPrecision,
       "right before lower-precision, on the graph it lowers: runs the CPU reference on the calibration inputs and "
       "keeps in f32 every node that reads or writes a value beyond fp16's safe range (changes nothing itself)",
       "--precision fp16 and --calibrate",
       [](const Graph&, const PassContext& context) {
         return context.options.precision == "fp16" && context.options.calibration != nullptr;
       },
       [](Graph& graph, PassContext& context) -> absl::StatusOr<bool> {
         absl::StatusOr<TensorMap> feeds = context.options.calibration(graph);
         if (!feeds.ok()) {
           return absl::Status(feeds.status().code(), absl::StrCat("calibration inputs: ", feeds.status().message()));
         }
         KILN_ASSIGN_OR_RETURN(context.float32_nodes, NodesOutsideRange(graph, *feeds, kFloat16SafeMagnitude));
         return false;
       }},
      {"lower-precision", PassStage::kPrecision,
       "after the layout passes, before fusion: the graph is lowered to its storage dtype (Casts only at the "
       "model's boundary and around f32 islands), so fusion, the memory plan and every backend see the same graph",
       "--precision is fp16 or bf16", Lowering,
       [](Graph& graph, PassContext& context) {
         const DType storage = context.options.precision == "bf16" ? DType::kBFloat16 : DType::kFloat16;
         return LowerPrecision(storage, context.float32_nodes).Run(graph);
       }},
  };
}

std::vector<Pass> FusionAndExpansion() {
  const PassStage f = PassStage::kFusion;
  const std::string when = "fusion is on (no --no-fuse)";
  return {
      {"fuse-gated-matmul", f,
       "first of fusion: fuse-siblings would stack a gated FFN's gate and up weights into a product it splits "
       "apart again; interleaved, the Hopper GEMM pairs them in its epilogue and writes only their product",
       "fusion is on, --arch sm_90a and --matmul-groups auto or generated (the Hopper family has the paired "
       "epilogue)",
       HopperGemmsFusing, FusionPass<FuseGatedMatMul>()},
      {"fuse-siblings", f,
       "right after fuse-gated-matmul (which takes gated FFNs' gate/up pairs first): merging Q/K/V (gate/up) weights "
       "changes which MatMuls exist, and the merged MatMul should get the epilogue",
       when, Fusing, [](Graph& graph, PassContext& context) { return FuseSiblings(&context.report).Run(graph); }},
      {"tf32-math", PassStage::kPrecision,
       "right after fuse-siblings, before the other fusion passes (with --no-fuse too): fp32 storage, and every f32 "
       "MatMul, Gemm and Conv marked for TF32 tensor-core math; constant MatMul weights, the merged Q/K/V ones "
       "included, stored [N, K] (K-major, as the tf32 wgmma reads them) before groups take the MatMuls in",
       "--precision tf32", [](const Graph&, const PassContext& context) { return context.options.precision == "tf32"; },
       GraphPass<Tf32Math>()},
      {"fuse-rotary-matmul", f,
       "after fuse-siblings, whose merged Q/K/V product it takes (and tf32-math, which leaves fp16 graphs alone), "
       "before fuse-attention, which then reads Q, K and V from it in place: RoPE's rotations of the Q and K pieces "
       "run in the product's epilogue instead of a Split copy and two rotation kernels",
       "fusion is on, --arch sm_90a and --matmul-groups auto or generated (the Hopper family has the paired "
       "epilogue)",
       HopperGemmsFusing, FusionPass<FuseRotaryMatMul>()},
      {"fuse-attention", f,
       "before the prologue and epilogue passes: they would give the scores MatMul the scale and mask as its "
       "epilogue (and a Q scale as its prologue), splitting the attention pattern",
       when, Fusing, FusionPass<FuseAttention>()},
      {"mark-causal-masks", f,
       "right after fuse-attention, whose groups it marks: on a dynamic graph a mask built from the sizes alone "
       "(GPT-2's causal mask without an attention_mask input) that is causal at sampled sizes is computed in the "
       "attention kernel, which then skips the keys past each tile's last row",
       "fusion is on and the graph has dim ranges",
       [](const Graph& graph, const PassContext& context) { return Fusing(graph, context) && graph.is_dynamic(); },
       GraphPass<MarkCausalMasks>()},
      {"fuse-prologue", f, "before the epilogue: it forms the matmul's group, which FuseEpilogue then extends", when,
       Fusing, FusionPass<FusePrologue>()},
      {"fuse-epilogue", f,
       "before pointwise fusion: element-wise ops after a matmul/conv belong in its epilogue (no extra kernel), not "
       "in a pointwise group of their own",
       when, Fusing, FusionPass<FuseEpilogue>()},
      {"fuse-mlp", f,
       "after fuse-epilogue, which forms the two matmul+epilogue groups it joins: a squeeze-excitation gate (fc1, "
       "activation, fc2, sigmoid over a few pooled rows) runs as one kernel instead of two tensor-core GEMMs",
       when, Fusing, FusionPass<FuseMlp>()},
      {"fuse-norms", f,
       "after the matmul passes (their epilogues take the residual Add first), before fuse-concat, which would "
       "take the cyclic shift's Concats as copies of their own: a LayerNorm or RMSNorm takes its residual Add and "
       "the row moves around it (Swin's cyclic shift and window partition, ViT's batch-first Transposes), which "
       "its kernel reads and writes through",
       when, Fusing, FusionPass<FuseNorms>()},
      {"fuse-concat", f,
       "before fuse-pointwise, which closes the fusion report (the views it takes are read by the Concat alone, "
       "so no other group wants them): a Concat reads the Slices and Transposes that feed it through strides "
       "(torch.roll's two Slices, Swin's patch merging), one copy instead of two",
       when, Fusing, FusionPass<FuseConcat>()},
      {"fuse-pad", f,
       "before fuse-pointwise, which would leave the Cast a lone node and the Transpose a copy: an image input's "
       "Cast to fp16, Transpose to channels-last and Pad of the channels become one kernel",
       when, Fusing, FusionPass<FusePad>()},
      {"fuse-pointwise", f,
       "last of fusion: whatever element-wise work is left becomes one kernel per chain; LayerNorm and Softmax take "
       "their residual add / scale and mask",
       when, Fusing,
       [](Graph& graph, PassContext& context) -> absl::StatusOr<bool> {
         KILN_ASSIGN_OR_RETURN(bool changed, FusePointwise(&context.report).Run(graph));
         context.report.groups = FinalGroups(context.report.groups);
         context.report.nodes_fused = graph.num_nodes();
         return changed;
       }},
      {"expand-groups-without-kernels", PassStage::kExpansion,
       "after fusion, once the kernel options are known: a group no GPU kernel takes (no library call, no "
       "generated kernel) is expanded into its members, keeping what cuBLASLt takes fused, so every bundle runs on "
       "the GPU; the report says why",
       when, Fusing,
       [](Graph& graph, PassContext& context) -> absl::StatusOr<bool> {
         KILN_ASSIGN_OR_RETURN(context.expanded,
                               ExpandGroupsWithoutKernels(graph, context.kernel_options, &context.report));
         return context.expanded > 0;
       }},
      {"fuse-expanded-tails", PassStage::kExpansion,
       "after an expansion: what an expanded group leaves (a library MatMul's residual add, erf-GELU, scale and "
       "mask) is fused again (fuse-norms, fuse-pointwise) as pointwise kernels or into the LayerNorm / Softmax it "
       "feeds; a group formed here that has no kernel is expanded too",
       "expand-groups-without-kernels expanded a group",
       [](const Graph&, const PassContext& context) { return context.expanded > 0; },
       [](Graph& graph, PassContext& context) -> absl::StatusOr<bool> {
         KILN_ASSIGN_OR_RETURN(bool norms, FuseNorms(&context.report).Run(graph));
         KILN_ASSIGN_OR_RETURN(bool changed, FusePointwise(&context.report).Run(graph));
         changed |= norms;
         KILN_ASSIGN_OR_RETURN(int expanded,
                               ExpandGroupsWithoutKernels(graph, context.kernel_options, &context.report));
         context.report.groups = FinalGroups(context.report.groups);
         return changed || expanded > 0;
       }},
  };
}

const std::vector<Pass>& AllPasses() {
  static const auto* passes = [] {
    auto* v = new std::vector<Pass>(Canonicalization());
    for (std::vector<Pass> part : {LayoutAndPrecision(), FusionAndExpansion()}) {
      for (Pass& p : part) v->push_back(std::move(p));
    }
    return v;
  }();
  return *passes;
}

// The passes that keep a dynamic graph (issue 34) valid at every size of its ranges:
// they change no shape and write no size into a constant. The fusion passes listed form
// groups whose bodies carry the graph's dims (graph/fused_group.h); a group that no
// kernel with run-time sizes takes is expanded again (codegen/op_kernels.h);
// fuse-siblings' stacked product keeps the largest sizes' distance between its
// matrices (the pieces are views at those offsets) and builds its shape constants
// from the dims; conv1x1-to-matmul's MatMul reads the conv's input as it is (its rows
// are batch x pixels) with a weight of fixed size. The others (layout and padding
// rewrites build Reshape targets and Slices from the largest shape; the MLP, concat
// and pad groups have no kernels with run-time sizes) run on static graphs only;
// CheckSpecializations (graph/specialize.h) catches a pass listed here that fixes a
// size.
bool DynamicSafe(const std::string& pass) {
  // clang-format off
  static const auto* safe = new absl::flat_hash_set<std::string>{
      "remove-identity", "sum-to-add", "swap-reshape-elementwise", "gemm-to-matmul", "fold-batch-norm",
      "recognize-gelu", "recognize-layer-norm", "recognize-rms-norm", "fold-constants",
      "eliminate-common-subexpressions", "fold-transpose-into-matmul", "eliminate-dead-code", "lower-precision",
      "tf32-math", "to-channels-last", "pad-conv-channels", "conv1x1-to-matmul", "fuse-siblings", "fuse-attention",
      "mark-causal-masks", "fuse-epilogue", "fuse-pointwise", "expand-groups-without-kernels", "fuse-expanded-tails"};
  // clang-format on
  return safe->contains(pass);
}

// Whether `pass` runs on `graph`: enabled, and safe for it when it is dynamic.
bool Runs(const Pass& pass, const Graph& graph, const PassContext& context) {
  if (graph.is_dynamic() && !DynamicSafe(pass.name)) return false;
  return pass.enabled == nullptr || pass.enabled(graph, context);
}

// Accumulates one pass run into the timing table (one row per pass).
void Record(std::vector<PassTiming>* timings, const std::string& pass, bool changed, double seconds, int nodes) {
  if (timings == nullptr) return;
  PassTiming* row = nullptr;
  for (PassTiming& t : *timings) {
    if (t.pass == pass) row = &t;
  }
  if (row == nullptr) row = &timings->emplace_back(PassTiming{pass});
  ++row->runs;
  row->changed |= changed;
  row->seconds += seconds;
  row->nodes_after = nodes;
}

// Runs one pass: the hooks (verification, --dump-after, timing) around it.
absl::StatusOr<bool> RunOne(const Pass& pass, Graph& graph, PassContext& context) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> changed = pass.run(graph, context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!changed.ok()) {
    return absl::Status(changed.status().code(), absl::StrCat(pass.name, ": ", changed.status().message()));
  }
  // A dynamic graph's dims are re-derived after every rewrite: values a pass created
  // get theirs, and a size the ranges vary that a pass fixed fails here or in
  // CheckSpecializations.
  if (*changed && graph.is_dynamic()) {
    if (absl::Status st = InferShapes(graph, {.fold_constants = false}); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(pass.name, " (dynamic dims after it): ", st.message()));
    }
  }
  if (context.options.verify_passes) {
    if (absl::Status st = VerifyGraph(graph, {.require_types = true}); !st.ok()) {
      return absl::InternalError(absl::StrCat(pass.name, " left an invalid graph: ", st.message()));
    }
  }
  Record(context.options.pass_timings, pass.name, *changed, seconds, graph.num_nodes());
  if (context.options.after_pass) context.options.after_pass(pass.name, graph);
  return *changed;
}

// The passes of `stages` that are enabled, in order; the canonicalisation round
// repeated to a fixed point.
// Returns whether any pass changed the graph.
absl::StatusOr<bool> RunStages(Graph& graph, PassContext& context, const std::vector<PassStage>& stages) {
  auto wanted = [&](const Pass& p) { return std::find(stages.begin(), stages.end(), p.stage) != stages.end(); };
  const std::vector<Pass>& passes = AllPasses();
  bool any = false;
  size_t i = 0;
  while (i < passes.size()) {
    if (passes[i].stage != PassStage::kCanonicalize) {
      if (wanted(passes[i]) && Runs(passes[i], graph, context)) {
        // The fusion report counts the nodes from before the first fusion pass.
        if (passes[i].stage == PassStage::kFusion && !context.fusion_started) {
          context.fusion_started = true;
          context.report.nodes_before = graph.num_nodes();
        }
        KILN_ASSIGN_OR_RETURN(bool changed, RunOne(passes[i], graph, context));
        any |= changed;
      }
      ++i;
      continue;
    }
    size_t end = i;
    while (end < passes.size() && passes[end].stage == PassStage::kCanonicalize) ++end;
    if (wanted(passes[i])) {
      bool changed = true;
      int round = 0;
      for (; changed && round < kMaxCanonicalRounds; ++round) {
        changed = false;
        for (size_t j = i; j < end; ++j) {
          if (!Runs(passes[j], graph, context)) continue;
          KILN_ASSIGN_OR_RETURN(bool c, RunOne(passes[j], graph, context));
          changed |= c;
          any |= c;
        }
      }
      if (changed) {
        return absl::InternalError(absl::StrCat("canonicalisation: no fixed point after ", kMaxCanonicalRounds,
                                                " rounds (a pass reports changes forever)"));
      }
    }
    i = end;
  }
  return any;
}

const char* StageTitle(PassStage stage) {
  switch (stage) {
    case PassStage::kCanonicalize:
      return "canonicalisation (one round, repeated until it changes nothing)";
    case PassStage::kLayout:
      return "layout";
    case PassStage::kPrecision:
      return "precision";
    case PassStage::kFusion:
      return "fusion";
    case PassStage::kExpansion:
      return "expansion (every group gets a GPU kernel)";
  }
  return "";
}

}  // namespace

const std::vector<Pass>& Pipeline() { return AllPasses(); }

std::string PipelineHelp() {
  int width = 0;  // the longest pass name, so that the reasons line up
  for (const Pass& p : Pipeline()) width = std::max(width, static_cast<int>(p.name.size()));
  std::string out = "The passes of kiln compile, in order (--dump-after PASS prints the graph after one):\n";
  std::optional<PassStage> stage;
  for (const Pass& p : Pipeline()) {
    if (p.stage != stage) {
      stage = p.stage;
      absl::StrAppend(&out, StageTitle(p.stage), ":\n");
    }
    absl::StrAppendFormat(&out, "  %-*s %s\n", width, p.name, p.why);
    if (!p.when.empty()) absl::StrAppendFormat(&out, "  %-*s runs when: %s\n", width, "", p.when);
    if (!DynamicSafe(p.name)) {
      absl::StrAppendFormat(&out, "  %-*s static shapes only (skipped for --dim NAME=LO..HI)\n", width, "");
    }
  }
  return out;
}

absl::Status CheckPassName(const std::string& name) {
  std::vector<std::string> names;
  for (const Pass& p : Pipeline()) {
    if (p.name == name) return absl::OkStatus();
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pass '", name, "'; the passes, in order: ", absl::StrJoin(names, ", ")));
}

std::string PassTimingTable(const std::vector<PassTiming>& timings) {
  int width = 4;
  double total = 0;
  for (const PassTiming& t : timings) {
    width = std::max(width, static_cast<int>(t.pass.size()));
    total += t.seconds;
  }
  std::string out = absl::StrFormat("%-*s %5s %8s %10s %6s\n", width, "pass", "runs", "changed", "ms", "nodes");
  for (const PassTiming& t : timings) {
    absl::StrAppendFormat(&out, "%-*s %5d %8s %10.2f %6d\n", width, t.pass, t.runs, t.changed ? "yes" : "no",
                          t.seconds * 1e3, t.nodes_after);
  }
  absl::StrAppendFormat(&out, "%-*s %5s %8s %10.2f\n", width, "total", "", "", total * 1e3);
  return out;
}

absl::Status RunPipeline(Graph& graph, PassContext& context) {
  return RunStages(graph, context,
                   {PassStage::kCanonicalize, PassStage::kLayout, PassStage::kPrecision, PassStage::kFusion,
                    PassStage::kExpansion})
      .status();
}

absl::StatusOr<bool> RunCanonicalization(Graph& graph) {
  const CompileOptions options;
  const codegen::KernelOptions kernel_options;
  PassContext context(options, kernel_options);
  return RunStages(graph, context, {PassStage::kCanonicalize});
}

absl::StatusOr<FusionReport> RunFusion(Graph& graph) {
  const CompileOptions options;
  const codegen::KernelOptions kernel_options;
  PassContext context(options, kernel_options);
  KILN_RETURN_IF_ERROR(RunStages(graph, context, {PassStage::kFusion}).status());
  return context.report;
}

}  // namespace kiln
