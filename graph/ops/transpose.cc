// Transpose: permutes the axes of the input (`perm`; default reverses them).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {
namespace {

absl::StatusOr<std::vector<int64_t>> Perm(const Node& node) {
  const int64_t rank = node.input(0)->rank();
  std::vector<int64_t> dflt(rank);
  for (int64_t i = 0; i < rank; ++i) dflt[i] = rank - 1 - i;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.GetInts("perm", dflt));
  if (static_cast<int64_t>(perm.size()) != rank) {
    return node.Error(absl::StrCat("perm [", absl::StrJoin(perm, ","), "] has ", perm.size(),
                                   " entries for an input of rank ", rank));
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    if (p < -rank || p >= rank || seen[p < 0 ? p + rank : p]) {
      return node.Error(absl::StrCat("perm [", absl::StrJoin(perm, ","),
                                     "] is not a permutation of the axes of rank ", rank));
    }
    if (p < 0) p += rank;
    seen[p] = true;
  }
  return perm;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Perm(node));
  const Shape& in = node.input(0)->shape();
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  node.output(0)->SetType(node.input(0)->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Perm(node));
  const std::vector<int64_t> in_strides = Strides(in[0]->shape());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  const Shape& shape = out[0].shape();
  CopyToDense(in[0]->raw_data(), StridedTables(shape, strides), out[0].mutable_raw_data(), shape,
              DTypeSize(in[0]->dtype()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(transpose) { registry.Register({.name = "Transpose", .infer = ops::Infer, .eval = ops::Eval}); }
