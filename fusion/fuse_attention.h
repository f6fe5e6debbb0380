// FuseAttention ("fuse-attention"): scaled dot-product attention, the chain
// MatMul -> scale -> (mask) -> Softmax -> MatMul, becomes one FusedGroup (pattern
// "attention", anchored at the scores MatMul) that codegen runs as one
// flash-attention kernel (codegen/ops/attention.cc): the scores never reach memory.
//
// Pattern (found from each Softmax P = Softmax(X) that a MatMul reads as its A):
//   S  = MatMul(Q, K')        Q [..., Sq, D], no trans_a; K' the keys either as
//                             [..., D, Sk] (a Transpose output) or stored [..., Sk, D]
//                             with trans_b = 1 (fold-transpose-into-matmul's form)
//   X  = element-wise ops on S only, in any order and number, each writing S's shape
//        or a regrouping of its batch dims:
//          Mul(S, c) / Mul(c, S) / Div(S, c)   c of one element (the 1/sqrt(D) scale)
//          Add(S, M) / Add(M, S)               M broadcasts into S (BERT's additive
//                                              [B,1,1,Sk] mask)
//          Where(C, S, f) / Where(C, f, S)     f of one element, C broadcasts into S
//                                              (GPT-2's causal mask, DistilBERT's
//                                              masked_fill)
//          Reshape(S) keeping the last two dims (Swin's shifted windows add their mask
//                                              to [B, windows, H, N, N]; the Softmax
//                                              reads S's shape again)
//   P  = Softmax(X) over the last axis (the keys), maybe guarded Where(IsNaN(P), 0, P)
//   Y  = MatMul(P, V)         V [..., Sk, Dv], no trans flags
// and, when present, a scale on Q: Q = Mul(Q0, c) / Mul(c, Q0) / Div(Q0, c) with c of
// one element (DistilBERT scales q, not the scores). Batch dims of Q, K', V and the
// mask broadcast into S's. Math: unchanged (the group's body is the members, which the
// CPU reference evaluates).
//
// Views join too, so that the kernel reads Q, K and V through strides instead of copy
// kernels: the longest chain of view nodes above each (Transpose, Reshape, Unsqueeze,
// Squeeze, Flatten, Expand, constant Slice, one-index Gather; graph/strided_view.h)
// that the kernel can read, less the Reshapes at its far end: the exporters' head
// splits, torch.export's key reshapes, GQA's repeat_kv, the selects of a packed QKV
// product. Each value in a chain is read by the next node alone, or, for a view
// shared by the chains (the selects' Transpose), only by view nodes that all join;
// a view also read outside cuts the chains below it. One-element constant scales
// of views among Q's and K's chains move onto the scores (MatMul(Q * a, K * b) =
// MatMul(Q, K) * a * b; the kernel applies them in fp32); a scale of a computed
// value (Whisper's q_proj bias Add) stays with it, where fuse-pointwise joins the two. The output's Transpose joins when it is the
// product's only reader and keeps the last axis last.
//
// Preconditions for a group, each refused with a report entry (the members then go
// on to the later passes: the scores MatMul gets its epilogue, the Softmax its scale
// and mask, as before this pass existed):
//   - every intermediate (S, each X step, P, a scaled Q) is read only by the next
//     member and is not a graph output ("other consumers: ");
//   - the Softmax normalises the last axis; only the ops above sit between the MatMuls
//     ("unsupported op: ");
//   - Q, K', V, S and Y share one dtype, f16 or bf16 ("dtype: ": the kernel runs the
//     tensor cores of those; f32 attention stays batched MatMuls and a softmax group);
//   - D and Dv are multiples of kHeadDimMultiple up to kMaxHeadDim, and the operands'
//     batch dims broadcast into S's without growing it ("shape: ").
// A Softmax that no MatMul reads, or whose input no MatMul computes through such ops,
// is not a candidate and is not reported.
//
// Runs after fuse-siblings and before fuse-prologue and fuse-epilogue, which would
// otherwise take the scale and mask into the scores MatMul's epilogue (and the Q scale
// into its prologue). Nodes already inside a FusedGroup are never touched.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseAttention {
 public:
  // Head dims the fused kernel takes (codegen/ops/attention.cc checks the same).
  static constexpr int64_t kMaxHeadDim = 128;
  static constexpr int64_t kHeadDimMultiple = 8;

  explicit FuseAttention(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-attention"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  absl::StatusOr<bool> TryFuse(Graph& graph, Node* softmax);

  FusionReport* report_;
};

}  // namespace kiln
