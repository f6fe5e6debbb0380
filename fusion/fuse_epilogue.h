// FuseEpilogue ("fuse-epilogue"): a MatMul/Gemm/Conv anchor plus the longest legal
// chain of element-wise work after it becomes one FusedGroup, so the anchor's
// accumulator tile is transformed in registers and stored once.
//
// Pattern. Anchor: a MatMul (2-D or batched) or Gemm ("matmul+epilogue"), a Conv
// ("conv+epilogue"), or a FusedGroup formed earlier whose pattern is
// "prologue+matmul" or "dual-matmul" and which has one output (re-formed with the
// epilogue through ExtendFusedGroup; pattern gets "+epilogue"). Starting at the
// anchor output y (shape S), the chain repeatedly takes one consumer of the current
// value v that is:
//   - an activation on v: Relu, Gelu (erf or tanh), Sigmoid, Tanh, LeakyRelu,
//     HardSwish, HardSigmoid, Clip (bounds of one element), or SiLU spelled
//     Mul(v, Sigmoid(v)) (both nodes);
//   - Add / Sub / Mul / Div of v and an operand that broadcasts INTO S (bias along
//     the last dim or per channel, a residual of shape S, a scalar scale, or any
//     other non-growing broadcast), of v's dtype;
//   - Cast to a float dtype.
// Each taken node's output must have shape S (an epilogue never grows the tile).
// Math: unchanged (the group's body is the members; codegen evaluates the chain in
// fp32 registers per accumulator element).
//
// Intermediates with other consumers (cost rule). When v (the anchor output or any
// chain value) is also read outside the chain, or is a graph output, the chain
// continues and v becomes an extra output of the group: writing one more tile costs
// one store per element from registers that already hold it, while stopping would
// cost a whole extra kernel that re-reads y from memory. Limits: at most
// kMaxExtraOutputs extra outputs per group (each one is another store stream in the
// epilogue: shared-memory staging and TMA descriptors), and every step must keep the
// group convex (an outside reader of v that feeds a later member's operand would
// need v before the kernel finishes). When several consumers of v are legal steps,
// the first in graph order that keeps the group convex is taken; the others read v.
//
// A residual left to its norm (cost rule). An Add of a full-size operand whose sum
// only a LayerNormalization reads is not taken ("cost: "): FuseNorms gives it to
// the norm's group. The same two tensors are read either way, but the norm streams
// them in a bandwidth-bound kernel while the GEMM's tile waits for the residual after
// its last MMA (docs/fusion.md; BERT's post-LN models ran faster this way on the H100,
// benchmarks/results/models_residual_in_norm_ab_h100_2026-11-27c.csv). A sum also read
// elsewhere (pre-LN's residual stream) stays in the epilogue.
//
// Stops: no consumer is a legal step. Every element-wise consumer looked at and not
// taken is reported with its reason ("unsupported op: ", "shape: ", "dtype: ",
// "other consumers: ", "not convex: ", "cost: "); non-element-wise consumers (Softmax,
// Reshape, another MatMul) are not candidates and are not reported. An anchor with
// an empty chain forms no group (single-node groups are not formed).
//
// Preconditions: a typed graph (InferShapes). Runs after FuseSiblings and
// FusePrologue (it extends their "dual-matmul" / "prologue+matmul" groups) and
// before FusePointwise (which would otherwise take the epilogue ops). Nodes already
// inside a FusedGroup are never touched.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseEpilogue {
 public:
  static constexpr int kMaxExtraOutputs = 2;

  explicit FuseEpilogue(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-epilogue"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
