// The GEMM generators' plan of a MatMul or MatMul group (codegen/ops/gemm_plan.cc):
// its mainloops (operands, layouts, prologue chains), the epilogue chain composed from
// the accumulator (two accumulators for a gated product), and the problem as the
// kernels compute it (a batch folded into the rows). Shared by the sm_80 / SIMT
// generator and the Hopper family's plan (codegen/ops/gemm.cc). Internal to codegen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/pointwise_spec.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// One operand of a mainloop: the node input loaded (the operand itself, or the
// group input its prologue chain starts from), the MatMul's operand value (its stored
// shape) and the prologue functor's code.
struct OperandPlan {
  int input = 0;                  // node input index of the loaded tensor
  const Value* stored = nullptr;  // the MatMul operand (body or node value)
  const Value* loaded = nullptr;  // the loaded tensor (body or node value)
  bool trans = false;
  std::vector<const Node*> chain;      // prologue members, in evaluation order
  std::string code, result = "x";      // functor statements and result (of `x`)
  std::vector<ElementwiseLoad> loads;  // group inputs the functor reads (g<l>)
};

struct LoopPlan {
  const Node* mm = nullptr;
  OperandPlan a, b;
  int64_t m = 0, n = 0, k = 0;
};

// What the kernel computes: one or two mainloops, then the epilogue chain.
struct GemmPlan {
  std::shared_ptr<const Graph> body;  // a group's body, which the plan's values point into
  std::vector<LoopPlan> loops;
  std::string epilogue_code;  // statements computing the result from `acc`
  std::string result = "acc";
  std::vector<ElementwiseLoad> loads;                // group inputs the epilogue reads (g<l>)
  EpilogueWork epilogue_work = EpilogueWork::kNone;  // for the sm90 tile costs
  // A last op that the sm90 TMA-store epilogue applies to the packed 16-bit result
  // instead: a ReLU (relu(round(x)) == round(relu(x)), exact), or GELU's tanh form
  // for an fp16 result (fp16x2 arithmetic, on the rounded input). The packed function
  // ("kiln_relu_f16x2", templates/pointwise.cuh) and the value it takes (the op's
  // input), else empty.
  std::string packed_tail, tail_input;
  // A gated product (fusion/fuse_gated_matmul.h): the MatMul's N is twice the
  // output's, its n8 column blocks alternating between the gate ("acc" in the
  // epilogue code) and the up product ("acc_up") of the same output columns.
  bool gated = false;
  // A rotary product (fusion/fuse_rotary_matmul.h): "acc_partner" in the epilogue code
  // is the product's column rotary_half away within its aligned block of
  // 2 * rotary_half columns (0: none).
  int64_t rotary_half = 0;
};

// `view`, a load that broadcasts into the output and reads its batch and row dims all
// densely or all broadcast, against the folded output [rows, N]: [1, n] where it is
// broadcast over the batch and rows, else [rows, n].
Shape FoldedView(const Shape& view, int64_t rows);

// Everything GenerateMatMulGroup knows before it picks a tile config: the problem as
// the kernels compute it, with a batch that folds into the rows (FoldsBatchIntoRows)
// already folded (m = batch * M, batch 1, a_batch 0, out_shape [batch * M, N]).
struct GemmPrep {
  GemmPlan plan;
  GemmVariant variant;
  std::vector<int64_t> a_batch, b_batch;
  int64_t m = 0, n = 0, batch = 1, k_total = 0;
  DType dt = DType::kFloat16;
  const Value* y = nullptr;
  bool folded = false;
  Shape out_shape;  // C as the kernels see it: y's shape, or [batch * M, N] folded

  // An epilogue load's view against out_shape.
  Shape View(const Shape& view) const { return folded ? FoldedView(view, m) : view; }
};

// Fills `prep` for a MatMul or a MatMul-anchored FusedGroup; NoKernel naming the form
// kiln's GEMMs do not take.
absl::Status PrepareMatMul(const Node& node, GemmPrep& prep);

// Offset of element (batch, row, col) of an operand of shape `view` broadcast
// against `shape` ([batch..., R, C]); `folded`: the offset as FoldedRowColOffset gives
// it (`row` over the batch too).
absl::StatusOr<std::string> BroadcastOffset(const Node& node, const Shape& view, const Shape& shape,
                                            bool folded = false);

// The templates' element kind of a loaded dtype (0 fp16, 1 bf16, 2 fp32).
int GemmDTypeKind(DType dt);

}  // namespace kiln::codegen::ops
