// RowMoves: chains of nodes that move whole rows of a tensor (its vectors along the
// last axis) without changing them, and the map from a row of a chain's result to
// the row of its start that it copies.
//
// Swin's shifted-window blocks move rows four times around each attention: the
// cyclic shift (torch.roll, exported as Concat(Slice(x, s:), Slice(x, :s)) per rolled
// axis), the window partition (Reshape, Transpose keeping the channels last, Reshape)
// and their inverses after the projection. Each is a copy kernel of the whole
// activation; a row kernel (LayerNorm) that reads or writes through the chain's row
// map does the same work in its own loads and stores (fusion/fuse_norms.h,
// codegen/ops/row.cc).
//
// A step is one of:
//  - Reshape that keeps the last dim (the row index is unchanged);
//  - Transpose whose perm keeps the last axis last;
//  - Slice with constant arguments that takes the whole last axis;
//  - Concat along an axis other than the last, all of whose inputs are such Slices of
//    one value, each read by that Concat alone (the step reads that value).
// Values are static-shaped; dtypes pass unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/ops/slice.h"

namespace kiln {

struct RowMoveStep {
  std::vector<Node*> nodes;  // the Slices then the Concat, or the one node
  Value* in = nullptr;
  Value* out = nullptr;
};

// The steps reading `v` onward: each step's output is read by the next step alone
// and is no graph output; the walk stops before a value read by anything else.
std::vector<RowMoveStep> RowMovesFrom(const Graph& graph, Value* v);

// The steps ending at `v`, first step first: walking back from `v`, each step's
// output is read by the following step alone (by `v`'s readers for the last) and is
// no graph output.
std::vector<RowMoveStep> RowMovesInto(const Graph& graph, Value* v);

// Whether some step copies (anything but a Reshape).
bool MovesRows(const std::vector<RowMoveStep>& steps);

// Whether the chain is one Transpose: kernels read it through strides or store each
// row where it puts it, without a RowMap.
bool IsLoneTranspose(const std::vector<RowMoveStep>& steps);

// All nodes of `steps`, in order.
std::vector<Node*> RowMoveNodes(const std::vector<RowMoveStep>& steps);

// For each row of a chain's result, the row of the chain's input it holds. Rows are
// indexed over all dims but the last, row-major.
class RowMap {
 public:
  struct Piece {  // rows [begin, end) along `axis` of a stage's output come from `slice`
    int64_t begin = 0, end = 0;
    std::vector<ops::AxisSlice> slice;  // per input dim
  };
  struct Stage {                // one copying step, undone from a result row to an input row
    Shape out_rows, in_rows;    // the step's output and input shapes without their last dim
    std::vector<int64_t> perm;  // Transpose: output dim i is input dim perm[i]
    int axis = 0;               // Slice / Concat: the pieces along `axis` of the output
    std::vector<Piece> pieces;
  };

  // The map of `steps` (RowMovesFrom / RowMovesInto). InvalidArgument when a step is
  // not a row move.
  static absl::StatusOr<RowMap> Of(const std::vector<RowMoveStep>& steps);

  // The stages in the order a result row goes through them (the last step's first).
  const std::vector<Stage>& stages() const { return stages_; }
  int64_t rows_in() const { return rows_in_; }
  int64_t rows_out() const { return rows_out_; }

  // The input row that result row `row` copies.
  int64_t SourceRow(int64_t row) const;

 private:
  std::vector<Stage> stages_;
  int64_t rows_in_ = 0, rows_out_ = 0;
};

}  // namespace kiln
