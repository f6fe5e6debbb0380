// FuseAttention: MatMul -> scale -> (mask) -> Softmax -> MatMul -> one "attention"
// FusedGroup.
#include "fusion/fuse_attention.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"
#include "graph/strided_view.h"

namespace kiln {
namespace {

bool OneElement(const Value* v) { return v != nullptr && v->has_type() && v->numel() == 1; }

// Whether `v` is read only by `reader` and is not a graph output.
bool OnlyReader(const Graph& graph, const Value* v, const Node* reader) {
  if (graph.IsGraphOutput(v)) return false;
  for (const Use& u : v->uses()) {
    if (u.node != reader) return false;
  }
  return true;
}

std::string Readers(const Graph& graph, const Value* v, const Node* reader) {
  std::vector<std::string> names;
  for (const Node* c : Consumers(v)) {
    if (c != reader) names.push_back(Quote(c->name()));
  }
  if (graph.IsGraphOutput(v)) names.push_back("the graph outputs");
  return absl::StrJoin(names, ", ");
}

bool IsScoreOpType(const std::string& op) { return op == "Mul" || op == "Div" || op == "Add" || op == "Where"; }

// Which input of `p` (an element-wise op writing `shape`) carries the scores, or -1
// with `why` set when `p` is not one of the score ops (see the header).
int ScoresInput(const Node& p, const Shape& shape, std::string* why) {
  const std::string& op = p.op_type();
  auto full = [&](int i) { return p.has_input(i) && p.input(i)->has_type() && p.input(i)->shape() == shape; };
  auto produced_by_chain = [&](int i) {
    const Node* q = p.input(i)->producer();
    return q != nullptr && (q->op_type() == "MatMul" || IsScoreOpType(q->op_type()));
  };
  if (!IsScoreOpType(op) || p.num_outputs() != 1) {
    *why = absl::StrCat("unsupported op: ", Quote(p.name()), " (", op,
                        ") sits between the scores MatMul and the Softmax; the attention kernel applies Mul/Div by a "
                        "scalar, Add of a mask and Where(mask, scores, fill)");
    return -1;
  }
  if (!p.output(0)->has_type() || p.output(0)->shape() != shape) {
    *why = absl::StrCat("shape: ", Quote(p.name()), " writes ",
                        p.output(0)->has_type() ? ShapeToString(p.output(0)->shape()) : "?",
                        ", not the scores' shape ", ShapeToString(shape));
    return -1;
  }
  if (op == "Div") {
    if (full(0) && OneElement(p.input(1))) return 0;
    *why = absl::StrCat("unsupported op: ", Quote(p.name()), " (Div) is not the scores divided by one element");
    return -1;
  }
  if (op == "Mul") {
    if (full(0) && OneElement(p.input(1))) return 0;
    if (full(1) && OneElement(p.input(0))) return 1;
    *why = absl::StrCat("unsupported op: ", Quote(p.name()), " (Mul) is not the scores times one element");
    return -1;
  }
  if (op == "Add") {
    const bool f0 = full(0), f1 = full(1);
    int s = -1;
    if (f0 && f1) {
      s = !produced_by_chain(0) && produced_by_chain(1) ? 1 : 0;
    } else if (f0) {
      s = 0;
    } else if (f1) {
      s = 1;
    }
    if (s >= 0 && p.input(1 - s)->has_type() && BroadcastsInto(p.input(1 - s)->shape(), shape)) return s;
    *why = absl::StrCat("shape: ", Quote(p.name()), " (Add) does not add a mask that broadcasts into the scores ",
                        ShapeToString(shape));
    return -1;
  }
  // Where(C, S, f) or Where(C, f, S).
  const Value* c = p.input(0);
  int s = -1;
  if (full(1) && OneElement(p.input(2)) && (!full(2) || produced_by_chain(1))) {
    s = 1;
  } else if (full(2) && OneElement(p.input(1))) {
    s = 2;
  }
  if (s < 0 || c == nullptr || !c->has_type() || !BroadcastsInto(c->shape(), shape)) {
    *why = absl::StrCat("shape: ", Quote(p.name()),
                        " (Where) does not select between the scores and one fill value under a condition that "
                        "broadcasts into ",
                        ShapeToString(shape));
    return -1;
  }
  return s;
}

// A Reshape of the scores that regroups their batch dims only (the rows and columns,
// the last two dims, stay): Swin's shifted windows add their mask to the scores
// viewed as [B, windows, heads, N, N]. Element order is unchanged, so the kernel's
// flat batch index reaches both forms.
bool IsBatchRegroup(const Node& n) {
  if (n.op_type() != "Reshape" || !IsViewNode(n)) return false;
  const Shape& in = n.input(0)->shape();
  const Shape& out = n.output(0)->shape();
  return in.size() >= 2 && out.size() >= 2 && in[in.size() - 1] == out[out.size() - 1] &&
         in[in.size() - 2] == out[out.size() - 2];
}

// A one-element scale on Q: the index of Q0 in `p`, or -1.
int QScaleInput(const Node& p) {
  if (IsFusedGroup(p) || p.num_outputs() != 1 || !p.output(0)->has_type()) return -1;
  const Shape& shape = p.output(0)->shape();
  auto full = [&](int i) { return p.has_input(i) && p.input(i)->has_type() && p.input(i)->shape() == shape; };
  if (p.op_type() == "Div" && full(0) && OneElement(p.input(1))) return 0;
  if (p.op_type() == "Mul") {
    if (full(0) && OneElement(p.input(1))) return 0;
    if (full(1) && OneElement(p.input(0))) return 1;
  }
  return -1;
}

// Whether `t` is a Transpose the kernel writes its output through: rows stay
// contiguous (the last axis stays last).
bool IsOutputTranspose(const Node* t) {
  if (t == nullptr || t->op_type() != "Transpose" || IsFusedGroup(*t) || !t->output(0)->has_type()) return false;
  const std::vector<int64_t> perm = PermOf(*t);
  const int64_t r = static_cast<int64_t>(perm.size());
  return r >= 2 && perm[r - 1] == r - 1;
}

// A one-element Mul or Div of `n`'s other input that keeps its shape: the index of
// that input, or -1. Such a scale commutes with views and with the MatMul.
int ScalarScaleInput(const Node& n) {
  if (IsFusedGroup(n) || n.num_outputs() != 1 || !n.output(0)->has_type()) return -1;
  const Shape& shape = n.output(0)->shape();
  auto full = [&](int i) { return n.has_input(i) && n.input(i)->has_type() && n.input(i)->shape() == shape; };
  auto scalar = [&](int i) { return OneElement(n.input(i)) && n.input(i)->is_constant(); };
  if (n.op_type() == "Div" && full(0) && scalar(1)) return 0;
  if (n.op_type() == "Mul") {
    if (full(0) && scalar(1)) return 0;
    if (full(1) && scalar(0)) return 1;
  }
  return -1;
}

// torch's guard on the probabilities P of a fully masked row, Where(IsNaN(P), 0, P):
// its IsNaN and Where when P is read by those two alone, else none. The kernel
// writes such rows as 0 already (codegen/ops/attention.cc).
std::vector<Node*> NanGuard(const Graph& graph, Value* p) {
  Node* isnan = nullptr;
  Node* where = nullptr;
  for (const Use& u : p->uses()) {
    if (u.node->op_type() == "IsNaN" && u.index == 0) isnan = u.node;
    if (u.node->op_type() == "Where" && u.index == 2) where = u.node;
  }
  if (isnan == nullptr || where == nullptr || p->uses().size() != 2 || graph.IsGraphOutput(p) ||
      IsFusedGroup(*isnan) || IsFusedGroup(*where) || where->input(0) != isnan->output(0) ||
      !OnlyReader(graph, isnan->output(0), where)) {
    return {};
  }
  const Value* fill = where->input(1);
  if (!fill->is_constant() || fill->numel() != 1 || fill->constant().ScalarFloat() != 0.f) return {};
  if (!where->output(0)->has_type() || where->output(0)->shape() != p->shape()) return {};
  return {isnan, where};
}

// The view nodes between an operand and the tensor the kernel reads it from (the
// exporters' head split, torch's key reshapes, GQA's repeat_kv, the selects of a
// packed QKV product; graph/strided_view.h), with the one-element scales among them
// (torch scales Q and K by sqrt of the softmax scale), which the pass moves onto the
// scores.
struct OperandChain {
  std::vector<Node*> views;   // nearest the MatMul first
  std::vector<Node*> scales;  // Q and K only
};

// Whether the kernel can read the matrices of `view` ([batch..., R, C], R x C as the
// MatMul sees them) broadcast over the scores' batch dims `batch`: rows of contiguous
// C (or, for K, either axis contiguous) at a stride the kernel takes, from a 16-byte
// aligned start.
bool KernelReads(const StridedView& view, const Shape& batch, bool keys) {
  const int r = view.rank();
  const std::optional<std::vector<ViewFactor>> factors = r < 2 ? std::nullopt : view.BatchFactors(2, batch);
  if (!factors || view.offset() % 8 != 0) return false;
  auto stride = [&](int d, int64_t one) {
    return view.shape()[d] == 1 ? std::optional<int64_t>(one) : view.Stride(d);
  };
  const std::optional<int64_t> col = stride(r - 1, 1), row = stride(r - 2, view.shape()[r - 1]);
  if (!col || !row) return false;
  if (keys) return *col == 1 || *row == 1;
  if (*col != 1 || *row % 8 != 0) return false;
  for (const ViewFactor& f : *factors) {
    if (f.stride % 8 != 0) return false;
  }
  return true;
}

// Whether scale `n` scales a view (or a graph input, another scale, or a piece of a
// Split: fuse-siblings' merged projections, whose epilogue covers every piece): one
// that scales a computed result stays with it, where fuse-pointwise or the producer's
// epilogue applies it for free (a q_proj bias Add of its own and the scale after it
// are one kernel; the scale on every score would leave the Add a kernel of its own).
bool ScaleOfAView(const Node& n) {
  const Node* src = n.input(ScalarScaleInput(n))->producer();
  return src == nullptr || IsViewNode(*src) || ScalarScaleInput(*src) >= 0 ||
         (src->op_type() == "Split" && src->domain().empty());
}

// The view nodes (and, for Q and K, one-element scales) above an operand, nearest the
// MatMul first: as far up as each value is read by the node below it alone, or, for a
// view node's output, by view nodes (the selects of a packed QKV product read one
// tensor; TryFuse keeps such a shared node only when every reader joins the group).
std::vector<Node*> ViewWalk(const Graph& graph, Value* operand, const Node* reader, bool scales) {
  std::vector<Node*> walk;
  Value* x = operand;
  while (true) {
    Node* n = x->producer();
    if (n == nullptr || IsFusedGroup(*n) || graph.IsGraphOutput(x)) break;
    const bool view = IsViewNode(*n);
    bool readers_ok = OnlyReader(graph, x, reader);
    if (!readers_ok && view) {
      readers_ok = true;
      for (const Node* c : Consumers(x)) readers_ok &= IsViewNode(*c) && !IsFusedGroup(*c);
    }
    if (!readers_ok) break;
    if (view) {
      x = n->input(0);
    } else if (scales && ScalarScaleInput(*n) >= 0 && ScaleOfAView(*n)) {
      x = n->input(ScalarScaleInput(*n));
    } else {
      break;
    }
    walk.push_back(n);
    reader = n;
  }
  return walk;
}

// The longest chain of at most `max_len` nodes of `walk` (above `operand`) through
// which the kernel can read the operand, less the Reshapes at its far end that it does
// not need (they stay views outside the group).
OperandChain ViewChain(const std::vector<Node*>& walk, size_t max_len, const Shape& batch, bool keys) {
  // The chain of the nearest `len` nodes, if the kernel can read through it.
  auto chain_of = [&](size_t len) -> std::optional<OperandChain> {
    if (len == 0) return OperandChain{};
    Node* first = walk[len - 1];
    Value* start = first->input(IsViewNode(*first) ? 0 : ScalarScaleInput(*first));
    StridedView view = StridedView::Dense(start->shape());
    OperandChain chain;
    for (size_t i = len; i-- > 0;) {
      if (IsViewNode(*walk[i])) {
        if (!view.Apply(*walk[i])) return std::nullopt;
        chain.views.insert(chain.views.begin(), walk[i]);
      } else {
        chain.scales.insert(chain.scales.begin(), walk[i]);
      }
    }
    if (!KernelReads(view, batch, keys)) return std::nullopt;
    return chain;
  };
  for (size_t len = std::min(walk.size(), max_len); len > 0; --len) {
    std::optional<OperandChain> chain = chain_of(len);
    if (!chain) continue;
    while (len > 0 && walk[len - 1]->op_type() != "Transpose" && walk[len - 1]->op_type() != "Expand" &&
           walk[len - 1]->op_type() != "Gather" && walk[len - 1]->op_type() != "Slice" &&
           IsViewNode(*walk[len - 1])) {
      std::optional<OperandChain> shorter = chain_of(len - 1);
      if (!shorter) break;
      chain = std::move(shorter);
      --len;
    }
    return *chain;
  }
  return {};
}

// The chains of Q, K and V (`walks`, `keys` marking K's) such that every node in them
// is read only by nodes in them or by the MatMuls: a view node shared with a reader
// outside (another group's operand) cuts each chain that holds it below it.
std::vector<OperandChain> OperandChains(const Graph& graph, const std::vector<std::vector<Node*>>& walks,
                                        const std::vector<bool>& keys, const Shape& batch,
                                        const std::vector<const Node*>& matmuls) {
  std::vector<size_t> max_len(walks.size(), SIZE_MAX);
  while (true) {
    std::vector<OperandChain> chains;
    absl::flat_hash_set<const Node*> inside(matmuls.begin(), matmuls.end());
    for (size_t i = 0; i < walks.size(); ++i) {
      chains.push_back(ViewChain(walks[i], max_len[i], batch, keys[i]));
      inside.insert(chains.back().views.begin(), chains.back().views.end());
      inside.insert(chains.back().scales.begin(), chains.back().scales.end());
    }
    const Node* outside_read = nullptr;
    for (const OperandChain& c : chains) {
      for (const Node* n : c.views) {
        bool ok = !graph.IsGraphOutput(n->output(0));
        for (const Node* r : Consumers(n->output(0))) ok &= inside.contains(r);
        if (!ok && outside_read == nullptr) outside_read = n;
      }
    }
    if (outside_read == nullptr) return chains;
    for (size_t i = 0; i < walks.size(); ++i) {
      auto at = std::find(walks[i].begin(), walks[i].end(), outside_read);
      if (at != walks[i].end()) max_len[i] = std::min<size_t>(max_len[i], at - walks[i].begin());
    }
  }
}

// Moves the scales among Q's and K's views onto the scores: each scale node leaves its
// chain (its reader reads its input instead) and a node of the same op and constant
// scales the output of `mm1`, ahead of the other score ops. MatMul(view(Q) * c, K) =
// MatMul(Q, view(K) * c) = MatMul(Q, K) * c for a one-element c; the kernel applies it
// in fp32 to the scores in registers (measured faster than a Q prologue, which scales
// Q in shared memory before the first MMA). Returns the new score nodes, nearest the
// Softmax first.
std::vector<Node*> MoveScalesToScores(Graph& graph, Node* mm1, const std::vector<Node*>& scales,
                                      const char* suffix) {
  std::vector<Node*> moved;
  for (Node* scale : scales) {
    const int in = ScalarScaleInput(*scale);
    Value* c = scale->input(1 - in);
    const std::string op = scale->op_type(), name = scale->name();
    graph.ReplaceAllUsesWith(scale->output(0), scale->input(in));
    graph.RemoveNode(scale);
    Value* s = mm1->output(0);
    Value* scaled = graph.AddValue(absl::StrCat(s->name(), suffix), s->dtype(), s->shape());
    graph.ReplaceAllUsesWith(s, scaled);
    std::vector<Value*> ins = {s, c};
    if (in == 1) std::swap(ins[0], ins[1]);
    moved.push_back(graph.AddNode(op, ins, {scaled}, name));
  }
  return moved;
}

bool Flag(const Node& mm, const char* name) {
  absl::StatusOr<int64_t> v = mm.GetInt(name, 0);
  return !v.ok() || *v != 0;
}

Shape BatchDims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// Why the operands of an attention candidate do not fit the kernel ("" when they
// do): matrices of one f16/bf16 dtype, [..., Sq, D] x [..., Sk, D] -> [..., Sq, Sk]
// x [..., Sk, Dv], batch dims that broadcast, head dims the kernel takes. `shape` is
// the scores' shape.
std::string OperandRefusal(const Shape& shape, const Node& mm1, const Node& mm2, const Value* p) {
  const bool k_trans = Flag(mm1, "trans_b");
  const Value* q = mm1.input(0);
  const Value* k = mm1.input(1);
  const Value* v = mm2.input(1);
  const Value* y = mm2.output(0);
  for (const Value* t : {q, k, v, y}) {
    if (!t->has_type() || t->rank() < 2) {
      return absl::StrCat("shape: ", Quote(t->name()), " is ", t->has_type() ? t->TypeString() : "untyped",
                          "; attention needs matrices (rank >= 2)");
    }
  }
  const DType dt = q->dtype();
  const Value* scores = mm1.output(0);
  for (const Value* t : {k, v, scores, p, y}) {
    if (t->dtype() != dt) {
      return absl::StrCat("dtype: ", Quote(t->name()), " is ", DTypeName(t->dtype()), " but Q is ",
                          DTypeName(dt), "; the attention kernel reads one storage dtype");
    }
  }
  if (dt != DType::kFloat16 && dt != DType::kBFloat16) {
    return absl::StrCat("dtype: attention in ", DTypeName(dt),
                          "; the fused kernel runs f16/bf16 tensor cores (f32 attention stays batched MatMuls "
                          "and a softmax group)");
  }
  const Shape& qs = q->shape();
  const Shape& ks = k->shape();
  const Shape& vs = v->shape();
  const int64_t sq = qs[qs.size() - 2], d = qs.back();
  const int64_t sk = k_trans ? ks[ks.size() - 2] : ks.back();
  const int64_t dv = vs.back();
  const Shape batch = BatchDims(shape);
  Shape want_y = batch;
  want_y.push_back(sq);
  want_y.push_back(dv);
  if (shape.size() < 2 || shape[shape.size() - 2] != sq || shape.back() != sk || vs[vs.size() - 2] != sk ||
      y->shape() != want_y) {
    return absl::StrCat("shape: Q ", ShapeToString(qs), ", K ", ShapeToString(ks), k_trans ? " (trans_b)" : "",
                          ", V ", ShapeToString(vs), " and the output ", ShapeToString(y->shape()),
                          " are not [..., Sq, D] x [..., Sk, D] -> [..., Sq, Sk] x [..., Sk, Dv]");
  }
  for (const Value* t : {q, k, v}) {
    if (!BroadcastsInto(BatchDims(t->shape()), batch)) {
      return absl::StrCat("shape: the batch dims of ", Quote(t->name()), " ", ShapeToString(t->shape()),
                          " do not broadcast into the scores' ", ShapeToString(batch));
    }
  }
  for (int64_t dim : {d, dv}) {
    if (dim % FuseAttention::kHeadDimMultiple != 0 || dim > FuseAttention::kMaxHeadDim || dim <= 0) {
      return absl::StrCat("shape: head dims D = ", d, ", Dv = ", dv, "; the attention kernel takes multiples of ",
                          FuseAttention::kHeadDimMultiple, " up to ", FuseAttention::kMaxHeadDim);
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<bool> FuseAttention::Run(Graph& graph) {
  std::vector<Node*> softmaxes;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Softmax") softmaxes.push_back(n);
  }
  bool changed = false;
  for (Node* sm : softmaxes) {
    KILN_ASSIGN_OR_RETURN(bool fused, TryFuse(graph, sm));
    changed |= fused;
  }
  return changed;
}

absl::StatusOr<bool> FuseAttention::TryFuse(Graph& graph, Node* sm) {
  // Downstream: a MatMul reading the probabilities as A, maybe through torch's guard
  // Where(IsNaN(P), 0, P). Without one this is not attention (a classifier's
  // softmax): no report.
  const std::vector<Node*> guard = NanGuard(graph, sm->output(0));
  Value* p = guard.empty() ? sm->output(0) : guard.back()->output(0);
  Node* mm2 = nullptr;
  for (const Use& u : p->uses()) {
    if (u.node->op_type() == "MatMul" && u.index == 0 && !IsFusedGroup(*u.node)) {
      mm2 = u.node;
      break;
    }
  }
  if (mm2 == nullptr || !sm->input(0)->has_type()) return false;

  // Upstream: score ops back to the scores MatMul.
  Shape shape = sm->input(0)->shape();  // of the scores where the walk is; S's at its end
  std::vector<Node*> chain;  // nearest the Softmax first
  Node* reader = sm;
  Value* x = sm->input(0);
  Node* mm1 = nullptr;
  std::string why;
  auto members_so_far = [&]() {
    std::vector<std::string> names;
    if (mm1 != nullptr) names.push_back(mm1->name());
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) names.push_back((*it)->name());
    names.push_back(sm->name());
    for (const Node* n : guard) names.push_back(n->name());
    names.push_back(mm2->name());
    return names;
  };
  auto reject = [&](std::string reason) {
    ReportRejection(report_, name(), members_so_far(), std::move(reason));
    return false;
  };
  while (mm1 == nullptr) {
    Node* q = x->producer();
    if (q == nullptr || IsFusedGroup(*q)) return false;  // not computed here: not attention
    const bool regroup = IsBatchRegroup(*q);
    if (q->op_type() != "MatMul" && !IsScoreOpType(q->op_type()) && !regroup) {
      // Only worth reporting when a MatMul computes the scores further up.
      bool matmul_above = false;
      for (const Value* in : q->inputs()) {
        matmul_above |= in != nullptr && in->producer() != nullptr && in->producer()->op_type() == "MatMul";
      }
      if (!matmul_above) return false;
    }
    if (!OnlyReader(graph, x, reader)) {
      return reject(absl::StrCat("other consumers: the scores ", Quote(x->name()), " are also read by ",
                                 Readers(graph, x, reader), "; the attention kernel never writes them"));
    }
    if (q->op_type() == "MatMul") {
      mm1 = q;
      break;
    }
    const int s = regroup ? 0 : ScoresInput(*q, shape, &why);
    if (s < 0) return reject(why);
    chain.push_back(q);
    reader = q;
    x = q->input(s);
    shape = x->shape();
  }

  // The Softmax and the two MatMuls.
  if (sm->input(0)->shape() != shape) {
    return reject(absl::StrCat("shape: the scores ", ShapeToString(shape), " reach the Softmax as ",
                               ShapeToString(sm->input(0)->shape()),
                               "; the kernel takes batch regroupings that the Softmax input undoes"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, sm->GetInt("axis", -1));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  if (axis != static_cast<int64_t>(shape.size()) - 1) {
    return reject(absl::StrCat("unsupported op: ", Quote(sm->name()), " normalises axis ", axis,
                               "; attention normalises the last axis (the keys)"));
  }
  if (!OnlyReader(graph, p, mm2) || mm2->input(1) == p) {
    return reject(absl::StrCat("other consumers: the probabilities ", Quote(p->name()), " are also read by ",
                               Readers(graph, p, mm2), "; the attention kernel never writes them"));
  }
  if (Flag(*mm1, "trans_a")) {
    return reject(absl::StrCat("shape: ", Quote(mm1->name()), " reads Q transposed (trans_a)"));
  }
  if (Flag(*mm2, "trans_a") || Flag(*mm2, "trans_b")) {
    return reject(absl::StrCat("shape: ", Quote(mm2->name()), " reads its operands transposed (trans_a/trans_b)"));
  }
  if (std::string refusal = OperandRefusal(shape, *mm1, *mm2, p); !refusal.empty()) return reject(refusal);
  Value* q = mm1->input(0);
  Value* k = mm1->input(1);
  Value* v = mm2->input(1);
  Value* y = mm2->output(0);

  // The Q scale, the views of Q, K and V the kernel reads through strides (the head
  // split of [B, S, H] activations, the selects of a packed QKV product and the like),
  // scales among Q's and K's views (moved onto the scores), and the output's head
  // merge Transpose.
  Value* q0 = q;
  Node* q_reader = mm1;
  Node* qscale = q->producer();
  if (qscale != nullptr && QScaleInput(*qscale) >= 0 && OnlyReader(graph, q, mm1) && k != q) {
    q0 = qscale->input(QScaleInput(*qscale));
    q_reader = qscale;
  } else {
    qscale = nullptr;
  }
  const Shape batch = BatchDims(shape);
  std::vector<std::vector<Node*>> walks = {ViewWalk(graph, q0, q_reader, true), {}, {}};
  if (k != q) walks[1] = ViewWalk(graph, k, mm1, true);
  if (v != q && v != k) walks[2] = ViewWalk(graph, v, mm2, false);
  const std::vector<OperandChain> chains =
      OperandChains(graph, walks, {false, true, false}, batch, {q_reader, mm1, mm2});
  std::vector<Node*> members;
  for (const OperandChain& c : chains) {
    for (Node* n : c.views) {
      if (std::find(members.begin(), members.end(), n) == members.end()) members.push_back(n);
    }
  }
  // A constant scale on Q moves onto the scores too ((c q) k^T = c (q k^T), in fp32 in
  // the kernel): the kernel then makes no pass over Q. A computed one stays the Q
  // prologue.
  std::vector<Node*> q_scales = chains[0].scales;
  if (qscale != nullptr && ScalarScaleInput(*qscale) >= 0) {
    q_scales.insert(q_scales.begin(), qscale);
    qscale = nullptr;
  }
  std::vector<Node*> moved = MoveScalesToScores(graph, mm1, chains[1].scales, "/key_scale");
  const std::vector<Node*> q_moved = MoveScalesToScores(graph, mm1, q_scales, "/query_scale");
  moved.insert(moved.end(), q_moved.begin(), q_moved.end());
  chain.insert(chain.end(), moved.begin(), moved.end());
  if (qscale != nullptr) members.push_back(qscale);
  members.push_back(mm1);
  members.insert(members.end(), chain.rbegin(), chain.rend());
  members.push_back(sm);
  members.insert(members.end(), guard.begin(), guard.end());
  members.push_back(mm2);
  const std::vector<Node*> y_readers = Consumers(y);
  if (y_readers.size() == 1 && y->uses().size() == 1 && !graph.IsGraphOutput(y) && IsOutputTranspose(y_readers[0])) {
    members.push_back(y_readers[0]);
  }
  if (!moved.empty()) KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  std::string group_name = absl::StrCat("group_", mm1->name());
  for (const Node* n : graph.nodes()) {
    if (n->name() == group_name) group_name.clear();  // FormFusedGroup picks one
  }
  return FormAndReportGroup(graph, report_, name(), members, "attention", mm1, group_name);
}

}  // namespace kiln
