#include "codegen/ops/row_moves_code.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/ops/kernel_util.h"
#include "common/status_macros.h"

namespace kiln::codegen::ops {
namespace {

bool IsMoveOp(const std::string& op) { return op == "Reshape" || op == "Transpose" || op == "Slice" || op == "Concat"; }

}  // namespace

// `name`(r): the source row of row r of a row-move chain's result (RowMap::SourceRow).
std::string RowMapFn(const std::string& name, const RowMap& map) {
  std::string src = absl::StrCat("static __device__ __forceinline__ kiln_idx_t ", name, "(kiln_idx_t r) {\n");
  for (const RowMap::Stage& s : map.stages()) {
    const int n = static_cast<int>(s.out_rows.size());
    absl::StrAppend(&src, "{\nkiln_idx_t q = r;\n");
    for (int d = n - 1; d > 0; --d) {
      absl::StrAppend(&src, "const kiln_idx_t o", d, " = q % ", s.out_rows[d], ";\nq /= ", s.out_rows[d], ";\n");
    }
    absl::StrAppend(&src, "const kiln_idx_t o0 = q;\n");
    const int m = static_cast<int>(s.in_rows.size());
    absl::StrAppend(&src, "kiln_idx_t");
    for (int d = 0; d < m; ++d) absl::StrAppend(&src, d ? ", " : " ", "i", d);
    absl::StrAppend(&src, ";\n");
    if (!s.perm.empty()) {
      for (int i = 0; i < n; ++i) absl::StrAppend(&src, "i", s.perm[i], " = o", i, ";\n");
    } else {
      for (size_t p = 0; p < s.pieces.size(); ++p) {
        const RowMap::Piece& piece = s.pieces[p];
        if (s.pieces.size() > 1) {
          const std::string test = absl::StrCat("if (o", s.axis, " < ", piece.end, ") {\n");
          absl::StrAppend(&src, p == 0 ? test : p + 1 == s.pieces.size() ? "} else {\n" : "} else " + test);
        }
        for (int d = 0; d < m; ++d) {
          const std::string c =
              d == s.axis && piece.begin != 0 ? absl::StrCat("(o", d, " - ", piece.begin, ")") : absl::StrCat("o", d);
          absl::StrAppend(&src, "i", d, " = ", piece.slice[d].start, " + ", piece.slice[d].step, " * ", c, ";\n");
        }
      }
      if (s.pieces.size() > 1) absl::StrAppend(&src, "}\n");
    }
    absl::StrAppend(&src, "r = i0;\n");
    for (int d = 1; d < m; ++d) absl::StrAppend(&src, "r = r * ", s.in_rows[d], " + i", d, ";\n");
    absl::StrAppend(&src, "}\n");
  }
  return absl::StrCat(src, "return r;\n}\n");
}

absl::StatusOr<RowMoves> FindRowMoves(const Node& group, const Graph& body, const Node& anchor, int64_t axis) {
  RowMoves moves;
  auto add = [&](const std::vector<RowMoveStep>& steps) -> absl::StatusOr<int> {
    absl::StatusOr<RowMap> map = RowMap::Of(steps);
    if (!map.ok()) return NoKernel(group, std::string(map.status().message()));
    for (const Node* n : RowMoveNodes(steps)) moves.nodes.push_back(n);
    moves.maps.push_back(*std::move(map));
    return static_cast<int>(moves.maps.size()) - 1;
  };
  const std::vector<RowMoveStep> out = RowMovesFrom(body, anchor.output(0));
  if (!out.empty() && !IsLoneTranspose(out)) {
    if (axis != anchor.input(0)->rank() - 1)
      return NoKernel(group, "row moves after a norm over more than the last axis");
    if (body.outputs().size() != 1 || body.outputs()[0] != out.back().out) {
      return NoKernel(group, "row moves after the norm, with other group outputs (the kernel's rows are y's)");
    }
    KILN_ASSIGN_OR_RETURN(moves.y_map, add(out));
    if (moves.maps.back().rows_in() != moves.maps.back().rows_out()) {
      return NoKernel(group, "row moves after the norm that change the row count");
    }
    moves.y_end = out.back().out;
  }
  for (const Node* n : body.nodes()) {
    if (IsMoveOp(n->op_type())) continue;
    for (Value* v : n->inputs()) {
      if (v == nullptr || v->producer() == nullptr || moves.views.contains(v)) continue;
      const std::vector<RowMoveStep> in = RowMovesInto(body, v);
      const auto& ins = body.inputs();
      const auto source = in.empty() ? ins.end() : std::find(ins.begin(), ins.end(), in.front().in);
      if (source == ins.end() || IsLoneTranspose(in) || !MovesRows(in)) continue;
      KILN_ASSIGN_OR_RETURN(int m, add(in));
      moves.views[v] = {static_cast<int>(source - ins.begin()), m};
    }
  }
  return moves;
}

}  // namespace kiln::codegen::ops
