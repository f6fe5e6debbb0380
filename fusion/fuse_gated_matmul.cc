// FuseGatedMatMul: Mul(f(X Wg), h(X Wu)) -> one MatMul of X with Wg and Wu interleaved
// in blocks of 8 columns, de-interleaved by Reshape / Split / Reshape, as one
// "gated-matmul" group.
#include "fusion/fuse_gated_matmul.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/op_registry.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// The columns of W' per block of each weight: one n8 block of the GEMM's accumulators.
constexpr int64_t kBlock = 8;

bool IsChainOp(const Node& n) {
  static const auto* ops =
      new absl::flat_hash_set<std::string>{"Relu",        "Gelu", "Sigmoid", "Tanh", "Erf", "LeakyRelu", "HardSwish",
                                           "HardSigmoid", "Add",  "Sub",     "Mul",  "Div", "Pow"};
  return n.domain().empty() && n.num_outputs() == 1 && ops->contains(n.op_type());
}

// Whether `split` cuts a plain MatMul's product, which it alone reads, into two equal
// parts along the last axis (a merged gate/up product's halves).
bool IsHalfSplit(const Graph& graph, const Node& split) {
  if (split.op_type() != "Split" || !split.domain().empty() || split.num_outputs() != 2 || !split.has_input(0)) {
    return false;
  }
  const Value* in = split.input(0);
  const Node* mm = in->producer();
  if (!IsPlainMatMul(mm) || in->uses().size() != 1 || graph.IsGraphOutput(in) || in->rank() < 2) return false;
  const int64_t rank = in->rank();
  int64_t axis = split.GetInt("axis", 0).value_or(0);
  if (axis < 0) axis += rank;
  Shape half = in->shape();
  half.back() /= 2;
  if (axis != rank - 1 || in->shape().back() % 2 != 0) return false;
  return split.output(0)->shape() == half && split.output(1)->shape() == half;
}

// An element-wise chain from a product to a value: the product (a MatMul's output, or
// one half of a merged gate/up MatMul's, `split` then set), the MatMul and the chain's
// nodes (empty when the value is the product).
struct Chain {
  Value* product = nullptr;
  Node* matmul = nullptr;
  Node* split = nullptr;
  std::vector<Node*> nodes;
};

// The chain computing `v` from exactly one product (IsChainOp nodes of the product's
// shape and dtype, other inputs constants that broadcast into it), or a chain with no
// product when `v` is computed otherwise.
Chain TraceChain(const Graph& graph, Value* v) {
  Chain chain;
  std::vector<Value*> work = {v};
  absl::flat_hash_set<const Node*> seen;
  std::vector<Node*> found;
  while (!work.empty()) {
    Value* w = work.back();
    work.pop_back();
    Node* p = w->producer();
    if (p == nullptr) return {};
    const bool half = IsHalfSplit(graph, *p);
    if (IsPlainMatMul(p) || half) {
      if (chain.product != nullptr && chain.product != w) return {};
      chain.product = w;
      chain.matmul = half ? p->input(0)->producer() : p;
      chain.split = half ? p : nullptr;
      continue;
    }
    if (!IsChainOp(*p)) return {};
    if (!seen.insert(p).second) continue;
    found.push_back(p);
    for (int i = 0; i < p->num_inputs(); ++i) {
      if (!p->has_input(i)) return {};
      Value* in = p->input(i);
      if (!in->is_constant()) work.push_back(in);
    }
  }
  if (chain.product == nullptr) return {};
  const Value* product = chain.product;
  for (const Node* n : found) {
    if (n->output(0)->shape() != product->shape() || n->output(0)->dtype() != product->dtype()) return {};
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* in = n->input(i);
      if (in->is_constant() && !BroadcastsInto(in->shape(), product->shape())) return {};
    }
  }
  chain.nodes = std::move(found);
  return chain;
}

// A 16-bit constant 2-D weight whose width (halved when `halves`) is a multiple of kBlock.
bool InterleavableWeight(const Value* w, bool halves) {
  if (!w->is_constant() || w->rank() != 2 || (w->dtype() != DType::kFloat16 && w->dtype() != DType::kBFloat16)) {
    return false;
  }
  const int64_t n = halves ? w->shape()[1] / 2 : w->shape()[1];
  return n > 0 && n % kBlock == 0 && (!halves || w->shape()[1] % 2 == 0);
}

// Whether the gate and up products can share one interleaved weight: two MatMuls of the
// same X with constant [K, N] weights of one 16-bit dtype, N a multiple of kBlock; or
// the two halves of one such MatMul's product (a merged gate_up weight [K, 2N]).
bool Pairable(const Chain& gate, const Chain& up) {
  if (gate.product == up.product || gate.matmul->input(0)->rank() < 2) return false;
  if (gate.split != nullptr || up.split != nullptr) {
    return gate.split == up.split && InterleavableWeight(gate.matmul->input(1), /*halves=*/true);
  }
  const Node& g = *gate.matmul;
  const Node& u = *up.matmul;
  if (g.input(0) != u.input(0)) return false;
  const Value* wg = g.input(1);
  const Value* wu = u.input(1);
  return InterleavableWeight(wg, false) && InterleavableWeight(wu, false) && wg->shape() == wu->shape() &&
         wg->dtype() == wu->dtype();
}

// [K, 2N]: Wg's and Wu's column blocks of kBlock alternating.
Tensor Interleave(const Tensor& wg, const Tensor& wu) {
  const int64_t k = wg.shape()[0], n = wg.shape()[1];
  const size_t es = DTypeSize(wg.dtype()), block = kBlock * es;
  Tensor out(wg.dtype(), {k, 2 * n});
  auto* dst = static_cast<uint8_t*>(out.mutable_raw_data());
  const auto* g = static_cast<const uint8_t*>(wg.raw_data());
  const auto* u = static_cast<const uint8_t*>(wu.raw_data());
  for (int64_t row = 0; row < k; ++row) {
    for (int64_t p = 0; p < n / kBlock; ++p) {
      std::memcpy(dst, g + (row * n + p * kBlock) * es, block);
      std::memcpy(dst + block, u + (row * n + p * kBlock) * es, block);
      dst += 2 * block;
    }
  }
  return out;
}

// The values of `chain` (its product, the merged MatMul's, its nodes' outputs) read
// outside `members`, or a graph output: their names.
std::vector<std::string> OutsideReaders(const Graph& graph, const Chain& chain, const std::vector<Node*>& members) {
  std::vector<std::string> out;
  std::vector<const Value*> values = {chain.product};
  if (chain.split != nullptr) values.push_back(chain.matmul->output(0));
  for (const Node* n : chain.nodes) values.push_back(n->output(0));
  for (const Value* v : values) {
    if (HasOutsideUse(graph, v, members)) out.push_back(v->name());
  }
  return out;
}

// The rewrite of a matched pattern: returns the group's members (the new MatMul first).
absl::StatusOr<std::vector<Node*>> Rewrite(Graph& graph, const Chain& gate, const Chain& up) {
  Value* x = gate.matmul->input(0);
  Value* g_out = gate.product;
  Value* u_out = up.product;
  const Shape shape = g_out->shape();
  const int64_t n = shape.back();
  const std::string base = gate.matmul->name();
  Tensor wg, wu;
  if (gate.split != nullptr) {  // a merged [K, 2N] weight: its column halves
    const Tensor& w = gate.matmul->input(1)->constant();
    wg = ColumnBlock(w, gate.split->output(0) == g_out ? 0 : n, n);
    wu = ColumnBlock(w, up.split->output(0) == u_out ? 0 : n, n);
    graph.RemoveNode(gate.split);
    graph.RemoveNode(gate.matmul);
  } else {
    wg = gate.matmul->input(1)->constant();
    wu = up.matmul->input(1)->constant();
    graph.RemoveNode(gate.matmul);
    graph.RemoveNode(up.matmul);
  }
  Value* weight = graph.AddConstant(absl::StrCat(base, "/gated_weight"), Interleave(wg, wu));
  Value* product = graph.AddValue(absl::StrCat(base, "/gated_out"));
  Node* matmul = graph.AddNode("MatMul", {x, weight}, {product}, absl::StrCat(base, "/gated"));
  KILN_RETURN_IF_ERROR(InferNode(*matmul));
  std::vector<int64_t> pairs(shape.begin(), shape.end() - 1);
  pairs.insert(pairs.end(), {n / kBlock, 2, kBlock});
  Value* paired = graph.AddValue(absl::StrCat(base, "/gated_pairs"));
  Node* reshape =
      graph.AddNode("Reshape", {product, IntsConstant(graph, absl::StrCat(base, "/gated_pairs_shape"), pairs)},
                    {paired}, absl::StrCat(base, "/gated_pairs"));
  KILN_RETURN_IF_ERROR(InferNode(*reshape));
  Value* halves[2] = {graph.AddValue(absl::StrCat(base, "/gated_gate")),
                      graph.AddValue(absl::StrCat(base, "/gated_up"))};
  Node* split = graph.AddNode("Split", {paired, IntsConstant(graph, absl::StrCat(base, "/gated_split"), {1, 1})},
                              {halves[0], halves[1]}, absl::StrCat(base, "/gated_split"));
  split->SetAttr("axis", Attribute(static_cast<int64_t>(pairs.size()) - 2));
  KILN_RETURN_IF_ERROR(InferNode(*split));
  Value* target =
      IntsConstant(graph, absl::StrCat(base, "/gated_shape"), std::vector<int64_t>(shape.begin(), shape.end()));
  std::vector<Node*> members = {matmul, reshape, split};
  Value* outs[2] = {g_out, u_out};
  for (int i = 0; i < 2; ++i) {
    Node* back =
        graph.AddNode("Reshape", {halves[i], target}, {outs[i]}, absl::StrCat(base, i == 0 ? "/gated_g" : "/gated_u"));
    KILN_RETURN_IF_ERROR(InferNode(*back));
    if (outs[i]->shape() != shape) {
      return absl::InternalError(absl::StrCat("fuse-gated-matmul: the rewrite changed the shape of ", outs[i]->name()));
    }
    members.push_back(back);
  }
  return members;
}

}  // namespace

absl::StatusOr<bool> FuseGatedMatMul::Run(Graph& graph) {
  // Matches first (the rewrite removes MatMuls other matches may name), then rewrites.
  struct Match {
    Node* join;
    Chain gate, up;
  };
  std::vector<Match> matches;
  absl::flat_hash_set<const Node*> taken;
  for (Node* j : graph.nodes()) {
    if (!IsOp(j, "Mul", 2)) continue;
    Chain gate = TraceChain(graph, j->input(0));
    Chain up = TraceChain(graph, j->input(1));
    if (gate.product == nullptr || up.product == nullptr || !Pairable(gate, up)) continue;
    if (j->output(0)->shape() != gate.product->shape()) continue;
    if (taken.contains(gate.matmul) || taken.contains(up.matmul)) continue;
    std::vector<Node*> members = {gate.matmul, up.matmul, j};
    if (gate.split != nullptr) members = {gate.matmul, gate.split, j};
    members.insert(members.end(), gate.nodes.begin(), gate.nodes.end());
    members.insert(members.end(), up.nodes.begin(), up.nodes.end());
    std::vector<std::string> outside = OutsideReaders(graph, gate, members);
    for (std::string& name : OutsideReaders(graph, up, members)) outside.push_back(std::move(name));
    if (!outside.empty()) {
      ReportRejection(report_, name(), NodeNames(members),
                      absl::StrCat("other consumers: ", Quote(outside[0]),
                                   " is read outside the gated product (the kernel never writes it)"));
      continue;
    }
    taken.insert(gate.matmul);
    taken.insert(up.matmul);
    matches.push_back({j, std::move(gate), std::move(up)});
  }
  if (matches.empty()) return false;
  std::vector<std::vector<Node*>> groups;
  for (Match& m : matches) {
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> members, Rewrite(graph, m.gate, m.up));
    members.insert(members.end(), m.gate.nodes.begin(), m.gate.nodes.end());
    members.insert(members.end(), m.up.nodes.begin(), m.up.nodes.end());
    members.push_back(m.join);
    groups.push_back(std::move(members));
  }
  KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  for (const std::vector<Node*>& members : groups) {
    FormAndReportGroup(graph, report_, name(), members, "gated-matmul", members[0]);
  }
  return true;
}

}  // namespace kiln
