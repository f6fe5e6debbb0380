// FusePrologue ("fuse-prologue"): element-wise work on a MatMul input becomes part
// of the MatMul's group, applied in registers between the global load and the
// shared-memory store (shared-memory footprint unchanged).
//
// Pattern. For each MatMul M (not yet fused) and each of its two inputs x, walk up
// the producers of x while the producer P is
//   - element-wise (OpDef::is_elementwise) with one output of exactly x's shape
//     (the prologue transforms one loaded operand: exactly one input of P has P's
//     output shape and continues the walk; its other inputs, a scale, a bias along
//     the last dim, Clip bounds..., broadcast into it), e.g. unary activations,
//     Mul/Div by a scalar, Cast, broadcast Add/Sub;
//   - writing a float dtype;
//   - the only reader of its output (its output is read once, by the next node of
//     the walk, and is not a graph output): a prologue recomputes the operand per
//     tile, so an intermediate somebody else needs stays a tensor.
// The nodes taken on either input plus M form one group, pattern "prologue+matmul",
// anchor M. Math: unchanged (the body is the members).
//
// Not fused. A chain whose loaded operand is a constant and whose other operands are
// all constants is weight preprocessing: it is rejected with "constant: folded at
// compile time" (constant folding computes it once). A chain with a member that
// multiplies (or adds) a value computed at run time and shared by the operand's rows
// (squeeze-excitation's [N, 1, 1, C] scale on the [N, H, W, C] activations of the 1x1
// projection) is rejected ("computed scale: "): EfficientNet-B0 and MobileNetV3-Small
// (H200, fp16, batch 1 and 32) ran faster with that Mul as its own kernel and the GEMM
// loading A through TMA than with the register-A prologue
// (benchmarks/results/zoo_cnn_se_prologue_ab_h200_2026-11-29.csv). A chain whose loaded
// operand is written by a MatMul/Gemm/Conv (or a group anchored at one) is that anchor's
// epilogue and is left to FuseEpilogue ("epilogue: "): there it runs once per
// element, as a prologue once per tile that loads the element, for the same
// memory traffic. The first producer that fails a
// rule above is reported ("other consumers: ", "shape: ", "dtype: ") when it is
// element-wise; other producers (Reshape, LayerNorm, another MatMul) are not
// candidates. A MatMul with no prologue on either input forms no group.
//
// Preconditions: a typed graph. Runs after FuseSiblings (whose concatenated MatMul
// may then take a prologue) and before FuseEpilogue, which extends the
// "prologue+matmul" groups with their epilogue (pattern "prologue+matmul+epilogue").
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FusePrologue {
 public:
  explicit FusePrologue(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-prologue"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
