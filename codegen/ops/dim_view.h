// DimView: StridedView (graph/strided_view.h) over dims that vary with a dynamic
// graph's dim symbols (issue 34). Where a chain of view ops (Transpose, Reshape and its
// kin, Expand) leaves the elements of the tensor it starts from, as dims and strides
// that are expressions over the symbols, so that a kernel with run-time sizes reads
// through the chain at every size of the ranges: the attention kernel's Q, K and V
// through the exporters' head split and a packed QKV product's selects. Within the
// chain a Reshape may merge dims that are not contiguous (torch's K^T: [B, H, S, D] to
// [B*H, S, D], transposed, and split back to [B, H, D, S]); at its end each dim has
// one stride, else there is no DimView. Neither has a Gather or a Slice along a dim
// that varies or merges others.
// Internal to codegen.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/dim_expr.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

struct DimView {
  std::vector<DimExpr> dims;
  std::vector<DimExpr> strides;  // elements; 0 where broadcast (Expand)
  DimExpr offset;                // where element 0 sits (a Gather's or a Slice's start)
};

// The dense view of `start` (a value of a dynamic graph or of a group body carrying
// its dims), then each of `views` applied in order (each reads the previous one's
// output, the first reads `start`); nullopt where one has no DimView form.
std::optional<DimView> DimViewOf(const Value& start, const std::vector<const Node*>& views);

// `view` with its dims permuted: dim i of the result is dim perm[i] of `view`.
// nullopt for a malformed perm.
std::optional<DimView> PermuteDimView(const DimView& view, const std::vector<int64_t>& perm);

// Whether `e` is a multiple of `v` at every size (v divides every coefficient).
bool DividesAll(const DimExpr& e, int64_t v);

// BatchRowColOffset (codegen/ops/kernel_util.h) over run-time sizes: the C expression
// of the element offset of (batch, row, col) in an operand of logical dims
// [batch..., R, C] with element strides `strides` (expressions, 0 where broadcast);
// `batch` is the flat index over the batch dims. The code reads kiln_dims_.
std::string DynamicBatchRowColOffset(const std::vector<DimExpr>& dims, const std::vector<DimExpr>& strides);

}  // namespace kiln::codegen::ops
