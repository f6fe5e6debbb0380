// PadMatMulWidth ("pad-matmul-width"): a MatMul whose constant weight has a width N
// that is not a multiple of 8 computes a zero-padded width instead, and a Slice
// gives back the N columns.
//
// fp16/bf16 rows of an odd width are not 16-byte aligned, and cuBLASLt then falls
// back to slow kernels: GPT-2's LM head (1024 x 50257 x 768) took a large share of
// the model's step time on the H100. Padding the weight to N8 = N rounded up to 8
// (zero columns) makes every leading dimension aligned; the Slice gives back the N
// columns. Measured on the H100 with GPT-2 at batch 8, the padded LM head and the
// Slice together took much less time than the unaligned LM head, and the whole model
// ran faster. The Slice costs no pass of its own where an element-wise node is its
// only reader: FusePointwise has that node's kernel read through it (GPT-2's logits:
// Cast(Slice(P)) in one pass).
//
// Pattern: MatMul(A, W), no layout flags, W a constant [K, N] read by nothing else,
// N % 8 != 0 and N >= kMinPaddedWidth (small widths cost little either way).
// Rewrite: W' = [K, N8] constant (W then zeros), P = MatMul(A, W') [..., N8],
// Y = Slice(P, starts [0], ends [N], axes [-1]) writing the MatMul's old output.
// Runs once after canonicalisation, before precision lowering and fusion (the
// MatMul may still take an epilogue; the Slice is its own kernel only where no
// element-wise reader takes it).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

inline constexpr int64_t kMinPaddedWidth = 256;

class PadMatMulWidth {
 public:
  absl::string_view name() const { return "pad-matmul-width"; }
  // Returns whether any MatMul was padded.
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
