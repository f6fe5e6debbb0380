// FuseAttention: MatMul -> scale -> (mask) -> Softmax -> MatMul -> one "attention"
// FusedGroup.
#include "fusion/fuse_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"

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

// The normalised perm of Transpose `t` (empty when absent or invalid).
std::vector<int64_t> PermOf(const Node& t) {
  const int64_t r = t.input(0)->has_type() ? t.input(0)->rank() : -1;
  std::vector<int64_t> dflt;
  for (int64_t i = r - 1; i >= 0; --i) dflt.push_back(i);
  absl::StatusOr<std::vector<int64_t>> perm = t.GetInts("perm", dflt);
  if (!perm.ok() || static_cast<int64_t>(perm->size()) != r) return {};
  for (int64_t& p : *perm) p = p < 0 ? p + r : p;
  return *perm;
}

// Whether `t` is a Transpose the kernel reads (or writes) through strides instead:
// the operand's rows stay contiguous (the last axis stays last), or, for the keys,
// the head dim is the input's last axis (either K layout of the kernel).
bool IsLayoutTranspose(const Node* t, bool keys) {
  if (t == nullptr || t->op_type() != "Transpose" || IsFusedGroup(*t) || !t->output(0)->has_type()) return false;
  const std::vector<int64_t> perm = PermOf(*t);
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2) return false;
  return perm[r - 1] == r - 1 || (keys && perm[r - 2] == r - 1);
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
  Value* p = sm->output(0);
  // Downstream: a MatMul reading the probabilities as A. Without one this is not
  // attention (a classifier's softmax): no report.
  Node* mm2 = nullptr;
  for (const Use& u : p->uses()) {
    if (u.node->op_type() == "MatMul" && u.index == 0 && !IsFusedGroup(*u.node)) {
      mm2 = u.node;
      break;
    }
  }
  if (mm2 == nullptr || !sm->input(0)->has_type()) return false;

  // Upstream: score ops back to the scores MatMul.
  const Shape& shape = sm->input(0)->shape();
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
    if (q->op_type() != "MatMul" && !IsScoreOpType(q->op_type())) {
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
    const int s = ScoresInput(*q, shape, &why);
    if (s < 0) return reject(why);
    chain.push_back(q);
    reader = q;
    x = q->input(s);
  }

  // The Softmax and the two MatMuls.
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

  // The Q scale, and the layout Transposes of Q, K, V and of the output (the head
  // split and merge of [B, S, H] activations), which the kernel reads through strides.
  std::vector<Node*> members;
  Value* q0 = q;
  Node* q_reader = mm1;
  Node* qscale = q->producer();
  if (qscale != nullptr && QScaleInput(*qscale) >= 0 && OnlyReader(graph, q, mm1) && k != q) {
    q0 = qscale->input(QScaleInput(*qscale));
    q_reader = qscale;
  } else {
    qscale = nullptr;
  }
  auto layout = [&](Value* operand, const Node* reader, bool keys) {
    Node* t = operand->producer();
    if (IsLayoutTranspose(t, keys) && OnlyReader(graph, operand, reader)) members.push_back(t);
  };
  layout(q0, q_reader, false);
  if (k != q) layout(k, mm1, true);
  if (v != q && v != k) layout(v, mm2, false);
  if (qscale != nullptr) members.push_back(qscale);
  members.push_back(mm1);
  members.insert(members.end(), chain.rbegin(), chain.rend());
  members.push_back(sm);
  members.push_back(mm2);
  const std::vector<Node*> y_readers = Consumers(y);
  if (y_readers.size() == 1 && y->uses().size() == 1 && !graph.IsGraphOutput(y) &&
      IsLayoutTranspose(y_readers[0], false)) {
    members.push_back(y_readers[0]);
  }
  std::string group_name = absl::StrCat("group_", mm1->name());
  for (const Node* n : graph.nodes()) {
    if (n->name() == group_name) group_name.clear();  // FormFusedGroup picks one
  }
  return FormAndReportGroup(graph, report_, name(), members, "attention", mm1, group_name);
}

}  // namespace kiln
