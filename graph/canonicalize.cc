// The canonicalisation pipeline: the passes that run before fusion, in order.
#include "graph/canonicalize.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/eliminate_dead_code.h"
#include "graph/fold_batch_norm.h"
#include "graph/gemm_to_matmul.h"
#include "graph/infer_shapes.h"
#include "graph/recognize_gelu.h"
#include "graph/recognize_layer_norm.h"
#include "graph/remove_identity.h"

namespace kiln {
namespace {

// A fixed point is normally reached in two or three rounds; more means a pass
// keeps reporting changes it did not make (a bug).
constexpr int kMaxRounds = 16;

template <typename Pass>
absl::StatusOr<bool> RunPass(Pass pass, Graph& graph) {
  absl::StatusOr<bool> changed = pass.Run(graph);
  if (!changed.ok()) {
    return absl::Status(changed.status().code(), absl::StrCat(pass.name(), ": ", changed.status().message()));
  }
  return *changed;
}

// Constant folding as a pass: InferShapes with folding replaces every node whose
// inputs are all constant by constants, so the node count says whether it changed.
absl::StatusOr<bool> FoldConstants(Graph& graph) {
  const int before = graph.num_nodes();
  absl::Status s = InferShapes(graph, {.fold_constants = true});
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("fold-constants: ", s.message()));
  return graph.num_nodes() != before;
}

}  // namespace

absl::StatusOr<bool> Canonicalize(Graph& graph) {
  bool any = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    // First, so that the patterns below match through no-op nodes (Identity chains
    // and inference Dropout sit between the ops of exported blocks).
    KILN_ASSIGN_OR_RETURN(bool c, RunPass(RemoveIdentity(), graph));
    changed |= c;
    // Before the pattern passes: the Linear layers of 2-D inputs become MatMul + Add,
    // the one matmul form fusion builds epilogues on.
    KILN_ASSIGN_OR_RETURN(c, RunPass(GemmToMatMul(), graph));
    changed |= c;
    // Folds BN into the Conv before it (or a per-channel Mul + Add) so that the Conv's
    // epilogue (bias, ReLU) is adjacent to it when fusion runs.
    KILN_ASSIGN_OR_RETURN(c, RunPass(FoldBatchNorm(), graph));
    changed |= c;
    // GELU decompositions (opset < 20) become one Gelu: one epilogue activation
    // instead of seven or eight pointwise ops.
    KILN_ASSIGN_OR_RETURN(c, RunPass(RecognizeGelu(), graph));
    changed |= c;
    // LayerNorm decompositions (opset < 17) become one LayerNormalization, which
    // has its own single kernel.
    KILN_ASSIGN_OR_RETURN(c, RunPass(RecognizeLayerNorm(), graph));
    changed |= c;
    // After the rewrites: folds what they left constant (Transpose or Mul of a
    // constant, Constant nodes) so that the next round's patterns see constants, and
    // re-infers types of everything.
    KILN_ASSIGN_OR_RETURN(c, FoldConstants(graph));
    changed |= c;
    // Last: drops what the rewrites and folding left without uses.
    KILN_ASSIGN_OR_RETURN(c, RunPass(EliminateDeadCode(), graph));
    changed |= c;
    any |= changed;
    if (!changed) return any;
  }
  return absl::InternalError(
      absl::StrCat("canonicalize: no fixed point after ", kMaxRounds, " rounds (a pass reports changes forever)"));
}

}  // namespace kiln
