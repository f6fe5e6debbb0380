// Row kernels reading and writing through row moves (graph/row_moves.h): the device
// function of a chain's RowMap and the chains of a row group's body. Internal to
// codegen (codegen/ops/row.cc; docs/kernels/pointwise_and_rows.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/row_moves.h"

namespace kiln::codegen::ops {

// `name`(r): the source row of row r of a row-move chain's result (RowMap::SourceRow).
std::string RowMapFn(const std::string& name, const RowMap& map);

// The row-move chains (graph/row_moves.h) of a row group's body: y written through
// one (not a lone Transpose, which y_row_strides places), inputs read through others.
struct RowMoves {
  std::vector<RowMap> maps;
  int y_map = -1;
  const Value* y_end = nullptr;                                  // the chain's result, the group output y is
  absl::flat_hash_map<const Value*, std::pair<int, int>> views;  // ComposedElementwise::row_views
  std::vector<const Node*> nodes;
};

// The chains of `body` (the group `group`'s) around row kernel anchor `anchor`
// normalising `axis`: the one its output goes through (y_map, y_end), unless it is
// a lone Transpose, and those that write inputs of its element-wise members (views).
// NoKernel for a chain after the norm that the kernel cannot run over.
absl::StatusOr<RowMoves> FindRowMoves(const Node& group, const Graph& body, const Node& anchor, int64_t axis);

}  // namespace kiln::codegen::ops
