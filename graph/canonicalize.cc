// The canonicalisation pipeline: the passes that run before fusion, in order.
#include "graph/canonicalize.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/eliminate_dead_code.h"
#include "graph/fold_batch_norm.h"
#include "graph/fold_transpose_into_matmul.h"
#include "graph/gemm_to_matmul.h"
#include "graph/infer_shapes.h"
#include "graph/patchify_conv.h"
#include "graph/recognize_gelu.h"
#include "graph/recognize_layer_norm.h"
#include "graph/remove_identity.h"
#include "graph/sum_to_add.h"
#include "graph/swap_reshape_elementwise.h"

namespace kiln {
namespace {

// A fixed point is normally reached in two or three rounds; more means a pass
// keeps reporting changes it did not make (a bug).
constexpr int kMaxRounds = 16;

template <typename Pass>
std::function<absl::StatusOr<bool>(Graph&)> Runner() {
  return [](Graph& graph) { return Pass().Run(graph); };
}

// Constant folding as a pass: InferShapes with folding replaces every node whose
// inputs are all constant by constants, so the node count says whether it changed.
absl::StatusOr<bool> FoldConstants(Graph& graph) {
  const int before = graph.num_nodes();
  KILN_RETURN_IF_ERROR(InferShapes(graph, {.fold_constants = true}));
  return graph.num_nodes() != before;
}

}  // namespace

const std::vector<CanonicalPass>& CanonicalPasses() {
  static const auto* passes = new std::vector<CanonicalPass>{
      {"remove-identity",
       "first, so that the patterns below match through no-op nodes (Identity chains and inference Dropout sit "
       "between the ops of exported blocks)",
       Runner<RemoveIdentity>()},
      {"sum-to-add",
       "before the pattern passes: a residual Sum becomes the Add that fuse-epilogue and fuse-pointwise take "
       "(the ONNX zoo's ResNet, DenseNet and Inception spell their residuals as Sum)",
       Runner<SumToAdd>()},
      {"swap-reshape-elementwise",
       "before the pattern passes: an activation or scale after a Reshape moves before it, next to the MatMul "
       "whose epilogue takes it (GPT-2's Conv1D export reshapes between the Gemm and its gelu)",
       Runner<SwapReshapeElementwise>()},
      {"gemm-to-matmul",
       "before the pattern passes: Linear layers become MatMul + Add, the one matmul form fusion builds "
       "epilogues on",
       Runner<GemmToMatMul>()},
      {"fold-batch-norm",
       "folds BN into the Conv before it (or a per-channel Mul + Add) so that the Conv's epilogue (bias, ReLU) is "
       "adjacent to it when fusion runs",
       Runner<FoldBatchNorm>()},
      {"patchify-conv",
       "after fold-batch-norm (a BN folds into the conv first): convs whose kernel tiles the input without overlap "
       "(ViT's patch embedding) become a MatMul over patches, which the GEMMs and epilogue fusion take",
       Runner<PatchifyConv>()},
      {"recognize-gelu",
       "GELU decompositions (opset < 20) become one Gelu: one epilogue activation instead of 7-8 pointwise ops",
       Runner<RecognizeGelu>()},
      {"recognize-layer-norm",
       "LayerNorm decompositions (opset < 17) become one LayerNormalization, which has its own single kernel",
       Runner<RecognizeLayerNorm>()},
      {"fold-constants",
       "after the rewrites: folds what they left constant (transposed or scaled weights) so that the next round "
       "sees constants, and re-infers every type",
       FoldConstants},
      {"fold-transpose-into-matmul",
       "after fold-constants (Transposes of weights are constants by then and flagged constant weights are "
       "re-laid out row-major), before DCE: MatMuls read transposed activations through trans_a/trans_b, so the "
       "Transposes they leave unused go",
       Runner<FoldTransposeIntoMatMul>()},
      {"eliminate-dead-code", "last of each round: drops what the rewrites and folding left without uses",
       Runner<EliminateDeadCode>()},
  };
  return *passes;
}

absl::StatusOr<bool> Canonicalize(Graph& graph,
                                  const std::function<void(const std::string& pass, const Graph& graph)>& after_pass) {
  bool any = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (const CanonicalPass& pass : CanonicalPasses()) {
      absl::StatusOr<bool> c = pass.run(graph);
      if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(pass.name, ": ", c.status().message()));
      changed |= *c;
      if (after_pass) after_pass(pass.name, graph);
    }
    any |= changed;
    if (!changed) return any;
  }
  return absl::InternalError(
      absl::StrCat("canonicalize: no fixed point after ", kMaxRounds, " rounds (a pass reports changes forever)"));
}

}  // namespace kiln
