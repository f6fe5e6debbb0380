// MarkCausalMasks ("mark-causal-masks"): on a dynamic graph, an attention group
// (fuse-attention) that reads a mask built from the sizes alone (graph/specialize.h
// SizeOnlyNodes: transformers' causal masks when the model has no attention_mask
// input, GPT-2's packed-sequence mask among them) learns that the mask is causal, so
// that codegen computes it from col <= row and skips the keys past each tile's last
// row, as it does for a constant causal mask in a static graph.
//
// Pattern: an input of a FusedGroup of pattern "attention" made by size-only nodes,
// of rank >= 2, that graph/causal_mask.h's MatchesCausalMask takes (one fill for an
// additive mask) at every sampled size. Marks: the group's causal_inputs (the input
// indices) and causal_fills (0 for a condition, else the additive fill); codegen
// (codegen/ops/attention.cc) uses a mark only where the mask's last two dims are the
// scores'. The mask's nodes stay (the group still lists the input).
// Sampled sizes: every symbol at its least, every symbol at an odd size inside its
// range, and each symbol at its largest with the others at their least; a mask of more
// than 2^24 elements at a sample (longer than 4096 x 4096), or one whose host
// evaluation fails, is not marked. Masks that
// differ from causal at some sizes (a sliding window shorter than the longest
// sequence) differ at the longest, which the samples hold; a mask causal at these
// sizes but not at others would be computed wrongly there: the pass trusts the
// samples, it does not prove.
// Runs after fuse-attention; static graphs are left alone (their masks are constants).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class MarkCausalMasks {
 public:
  absl::string_view name() const { return "mark-causal-masks"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
