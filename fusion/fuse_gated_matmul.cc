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

bool IsPlainMatMul(const Node* n) {
  return n != nullptr && n->op_type() == "MatMul" && n->domain().empty() && n->num_inputs() == 2 && n->has_input(0) &&
         n->has_input(1) && TransposedOperands(*n).empty();
}

// An element-wise chain from a MatMul's product to a value: the MatMul and the chain's
// nodes (empty when the value is the product).
struct Chain {
  Node* matmul = nullptr;
  std::vector<Node*> nodes;
};

// The chain computing `v` from exactly one MatMul product (IsChainOp nodes of the
// product's shape and dtype, other inputs constants that broadcast into it), or a
// chain with no MatMul when `v` is computed otherwise.
Chain TraceChain(Value* v) {
  Chain chain;
  std::vector<Value*> work = {v};
  absl::flat_hash_set<const Node*> seen;
  std::vector<Node*> found;
  while (!work.empty()) {
    Value* w = work.back();
    work.pop_back();
    Node* p = w->producer();
    if (p == nullptr) return {};
    if (IsPlainMatMul(p)) {
      if (chain.matmul != nullptr && chain.matmul != p) return {};
      chain.matmul = p;
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
  if (chain.matmul == nullptr) return {};
  const Value* product = chain.matmul->output(0);
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

// Whether MatMuls `g` and `u` can share one interleaved weight: the same X, constant
// 2-D [K, N] weights of one 16-bit dtype with N a multiple of kBlock.
bool Pairable(const Node& g, const Node& u) {
  if (&g == &u || g.input(0) != u.input(0)) return false;
  const Value* wg = g.input(1);
  const Value* wu = u.input(1);
  if (!wg->is_constant() || !wu->is_constant() || wg->rank() != 2 || wg->shape() != wu->shape()) return false;
  if (wg->dtype() != wu->dtype() || (wg->dtype() != DType::kFloat16 && wg->dtype() != DType::kBFloat16)) return false;
  return wg->shape()[1] % kBlock == 0 && wg->shape()[1] > 0 && g.input(0)->rank() >= 2;
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

// The values of `chain` (its product and its nodes' outputs) read outside
// `members`, or a graph output: their names.
std::vector<std::string> OutsideReaders(const Graph& graph, const Chain& chain, const std::vector<Node*>& members) {
  std::vector<std::string> out;
  std::vector<const Value*> values = {chain.matmul->output(0)};
  for (const Node* n : chain.nodes) values.push_back(n->output(0));
  for (const Value* v : values) {
    if (HasOutsideUse(graph, v, members)) out.push_back(v->name());
  }
  return out;
}

// The rewrite of a matched pattern: returns the group's members (the new MatMul first).
absl::StatusOr<std::vector<Node*>> Rewrite(Graph& graph, Node* g, Node* u) {
  Value* x = g->input(0);
  Value* g_out = g->output(0);
  Value* u_out = u->output(0);
  const Shape shape = g_out->shape();
  const int64_t n = shape.back();
  const std::string base = g->name();
  Value* weight = graph.AddConstant(absl::StrCat(base, "/gated_weight"),
                                    Interleave(g->input(1)->constant(), u->input(1)->constant()));
  graph.RemoveNode(g);
  graph.RemoveNode(u);
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
    Chain gate = TraceChain(j->input(0));
    Chain up = TraceChain(j->input(1));
    if (gate.matmul == nullptr || up.matmul == nullptr || !Pairable(*gate.matmul, *up.matmul)) continue;
    if (j->output(0)->shape() != gate.matmul->output(0)->shape()) continue;
    if (taken.contains(gate.matmul) || taken.contains(up.matmul)) continue;
    std::vector<Node*> members = {gate.matmul, up.matmul, j};
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
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> members, Rewrite(graph, m.gate.matmul, m.up.matmul));
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
