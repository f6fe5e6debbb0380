// The fused attention kernel (codegen/templates/attention_sm80.cuh) for "attention"
// FusedGroups (fusion/fuse_attention.h): the group's body is read back into Q, K, V,
// the element-wise ops on the scores (generated into the score functor by
// ComposeElementwise, like the GEMM epilogue), an optional scale on Q (the Q
// prologue functor) and the shapes, which are baked into the kernel.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/dim_view.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/ops/size_variants.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/causal_mask.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"
#include "graph/strided_view.h"

namespace kiln::codegen::ops {
namespace {

// Offset of element (batch, row, col) of a tensor of shape `view` broadcast against
// `shape` ([batch..., R, C]); `batch` is the flat index over shape's batch dims.
absl::StatusOr<std::string> BroadcastOffset(const Node& node, const Shape& view, const Shape& shape) {
  std::vector<int64_t> st;
  if (view.size() > shape.size() || !BroadcastStrides(view, shape, &st)) {
    return NoKernel(node, absl::StrCat("an input of shape ", ShapeToString(view), " does not broadcast into ",
                                       ShapeToString(shape)));
  }
  return BatchRowColOffset(shape, st);
}

// How the kernel reaches an operand (or the output): the group input (output) it
// reads (writes) and where the elements of the logical matrix [batch..., R, C] the
// MatMul sees sit in it: dense, or through the view members between them (the head
// split / merge of [B, S, H] activations, torch's key reshapes, GQA's repeat_kv;
// fusion/fuse_attention.h).
struct Layout {
  int index = -1;  // group input (or output) index
  StridedView view = StridedView::Dense({});
  bool through_views = false;
  const Shape& shape() const { return view.shape(); }
  // The body value the views start from and the views, in order (DimViewOf); for the
  // output, the inverse perm of its Transpose instead (empty: none).
  const Value* start = nullptr;
  std::vector<const Node*> views;
  std::vector<int64_t> inverse_perm;
};

// The element offset of batch entry `batch` (flat over `batch_shape`, which the
// layout's batch dims broadcast into: stride 0 where they have size 1 or no dim).
absl::StatusOr<std::string> BatchOffset(const Node& node, const Layout& l, const Shape& batch_shape) {
  std::optional<std::vector<ViewFactor>> factors = l.view.BatchFactors(2, batch_shape);
  if (!factors) return NoKernel(node, "an attention operand's batch dims do not broadcast");
  std::vector<std::string> terms;
  int64_t inner = 1;
  for (auto f = factors->rbegin(); f != factors->rend(); ++f) {
    if (f->stride != 0) {
      terms.push_back(absl::StrCat("(kiln_index)((batch / ", inner, ") % ", f->size, ") * ", f->stride, "LL"));
    }
    inner *= f->size;
  }
  if (l.view.offset() != 0) terms.push_back(absl::StrCat(l.view.offset(), "LL"));
  if (terms.empty()) return std::string("0");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&out, i ? " + " : "", terms[i]);
  return out;
}

// Whether the offset and every batch stride of `l` are multiples of 8 (16-byte
// aligned matrices for cp.async).
bool BatchStridesAligned(const Layout& l) {
  if (l.view.offset() % 8 != 0) return false;
  for (int d = 0; d + 2 < l.view.rank(); ++d) {
    for (const ViewFactor& f : l.view.factors(d)) {
      if (f.stride % 8 != 0) return false;
    }
  }
  return true;
}

// A group input that hides the keys after each query row (a causal mask), which the
// kernel computes instead of reading: a constant that graph/causal_mask.h's
// MatchesCausalMask takes (torch's tril masks under a Where; torch.export's SDPA form
// writes GPT-2's and Llama's causal mask as an additive constant, in fp16 -inf),
// [..., rows, cols]. A mask that varies with the sizes (a dynamic graph's, built from
// them alone) is one where fusion's mark-causal-masks found it so at sampled sizes
// (the group's causal_inputs / causal_fills) and its last two dims are the scores'.
std::optional<CausalMask> AsCausalMask(const Value* v, int64_t rows, int64_t cols) {
  if (v == nullptr || !v->is_constant() || v->rank() < 2) return std::nullopt;
  const Shape& s = v->shape();
  if (s[s.size() - 2] != rows || s.back() != cols) return std::nullopt;
  CausalMask m;
  std::optional<float> fill;
  if (!MatchesCausalMask(v->constant(), &m.additive, &fill) || (m.additive && !fill)) return std::nullopt;
  m.fill = fill.value_or(0.f);
  return m;
}

bool IsFlagSet(const Node& mm, const char* name) {
  absl::StatusOr<int64_t> v = mm.GetInt(name, 0);
  return !v.ok() || *v != 0;
}

struct AttentionPlan {
  std::shared_ptr<const Graph> body;
  const Node* mm1 = nullptr;
  const Node* mm2 = nullptr;
  const Node* softmax = nullptr;
  Layout q, k, v, o;                // q: the tensor the Q prologue starts from
  const Value* q_start = nullptr;   // that tensor in the body (a view output or a body input)
  std::vector<const Node*> q_chain;
  std::vector<const Node*> score_members;
  std::vector<const Node*> layout_members;  // views read or written through strides
  std::vector<const Node*> guard;           // IsNaN and Where after the Softmax, if any
  bool k_trans = false;
};

// torch's guard on the probabilities, Where(IsNaN(P), 0, P) (rows a mask left all
// -inf become 0 instead of NaN): its two nodes, or none. The kernel already writes
// such rows as 0 (O / l with l = 0 stores 0), so the guard costs nothing.
std::vector<const Node*> FindGuard(const Value* p) {
  const Node* isnan = nullptr;
  const Node* where = nullptr;
  for (const Use& u : p->uses()) {
    if (u.node->op_type() == "IsNaN" && u.index == 0) isnan = u.node;
    if (u.node->op_type() == "Where" && u.index == 2) where = u.node;
  }
  if (isnan == nullptr || where == nullptr || p->uses().size() != 2 || where->input(0) != isnan->output(0)) return {};
  const Value* fill = where->input(1);
  if (!fill->is_constant() || fill->numel() != 1 || fill->constant().ScalarFloat() != 0.f) return {};
  return {isnan, where};
}

// Layout `l` of operand `v`: through the view nodes between it and a group input.
absl::Status OperandLayout(const Node& group, const absl::flat_hash_map<const Value*, int>& input_index,
                           const Value* v, const char* what, Layout& l, std::vector<const Node*>& members) {
  std::vector<const Node*> views;  // nearest the operand first
  while (!input_index.contains(v)) {
    const Node* n = v->producer();
    if (n == nullptr || !IsViewNode(*n)) return NoKernel(group, absl::StrCat(what, " is computed inside the group"));
    views.push_back(n);
    v = n->input(0);
  }
  l.index = input_index.at(v);
  l.view = StridedView::Dense(v->shape());
  l.through_views = !views.empty();
  l.start = v;
  l.views.assign(views.rbegin(), views.rend());
  for (auto n = views.rbegin(); n != views.rend(); ++n) {
    if (!l.view.Apply(**n)) return NoKernel(group, absl::StrCat(what, " is read through views without strides"));
  }
  members.insert(members.end(), views.begin(), views.end());
  return absl::OkStatus();
}

absl::Status PlanAttention(const Node& group, AttentionPlan& plan) {
  auto body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  plan.body = *std::move(body_or);
  const Graph& body = *plan.body;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) return NoKernel(group, "attention group with several outputs");
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);

  std::vector<const Node*> mms;
  for (const Node* n : body.nodes()) {
    if (n->op_type() == "MatMul") mms.push_back(n);
    if (n->op_type() == "Softmax") {
      if (plan.softmax != nullptr) return NoKernel(group, "attention group with two Softmax nodes");
      plan.softmax = n;
    }
  }
  if (mms.size() != 2 || plan.softmax == nullptr) return NoKernel(group, "attention group without two MatMuls and a Softmax");
  plan.guard = FindGuard(plan.softmax->output(0));
  const Value* p = plan.guard.empty() ? plan.softmax->output(0) : plan.guard.back()->output(0);
  for (const Node* mm : mms) (mm->input(0) == p ? plan.mm2 : plan.mm1) = mm;
  if (plan.mm1 == nullptr || plan.mm2 == nullptr) return NoKernel(group, "no MatMul reads the Softmax output as A");
  const Value* x = plan.softmax->input(0);
  const int rank = x->rank();
  absl::StatusOr<int64_t> axis = plan.softmax->GetInt("axis", -1);
  if (!axis.ok()) return axis.status();
  if ((*axis < 0 ? *axis + rank : *axis) != rank - 1) return NoKernel(group, "a Softmax not over the last axis");
  if (IsFlagSet(*plan.mm1, "trans_a") || IsFlagSet(*plan.mm2, "trans_a") || IsFlagSet(*plan.mm2, "trans_b")) {
    return NoKernel(group, "attention MatMuls with trans_a, or a transposed V");
  }
  plan.k_trans = IsFlagSet(*plan.mm1, "trans_b");

  KILN_RETURN_IF_ERROR(OperandLayout(group, input_index, plan.mm1->input(1), "K", plan.k, plan.layout_members));
  KILN_RETURN_IF_ERROR(OperandLayout(group, input_index, plan.mm2->input(1), "V", plan.v, plan.layout_members));

  // Q, through its element-wise prologue members (Q's shape) up to a group input or a
  // view output.
  const Value* q = plan.mm1->input(0);
  std::vector<const Node*> chain;  // nearest the MatMul first
  auto is_start = [&](const Value* v) {
    return input_index.contains(v) || (v->producer() != nullptr && IsViewNode(*v->producer()));
  };
  while (!is_start(q)) {
    const Node* n = q->producer();
    const Shape& qs = plan.mm1->input(0)->shape();
    if (n == nullptr || n->num_outputs() != 1 || n->output(0)->shape() != qs) {
      return NoKernel(group, "Q is neither a group input nor an element-wise chain over Q's shape");
    }
    const Value* next = nullptr;
    for (const Value* in : n->inputs()) {
      if (in != nullptr && !in->is_constant() && in->shape() == qs) next = next ? next : in;
    }
    if (next == nullptr) return NoKernel(group, absl::StrCat("Q prologue member ", n->Describe(), " transforms no Q"));
    chain.push_back(n);
    q = next;
  }
  plan.q_start = q;
  KILN_RETURN_IF_ERROR(OperandLayout(group, input_index, q, "Q", plan.q, plan.layout_members));
  plan.q_chain.assign(chain.rbegin(), chain.rend());

  // The output: the P V product, or a layout Transpose of it (the view of the group
  // output that the product's [batch..., Sq, Dv] indices reach through the inverse perm).
  const Value* y = body.outputs()[0];
  plan.o.index = 0;
  plan.o.view = StridedView::Dense(y->shape());
  plan.o.start = y;
  if (y != plan.mm2->output(0)) {
    const Node* t = y->producer();
    if (t == nullptr || t->op_type() != "Transpose" || t->input(0) != plan.mm2->output(0)) {
      return NoKernel(group, "the group output is not the P V product");
    }
    const std::vector<int64_t> perm = PermOf(*t);  // graph/pattern_match.h; empty when malformed
    std::vector<int64_t> inverse(perm.size(), -1);
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(perm.size()) || inverse[perm[i]] != -1) {
        return NoKernel(group, "the output Transpose has an invalid perm");
      }
      inverse[perm[i]] = static_cast<int64_t>(i);
    }
    if (perm.empty() || !plan.o.view.Transpose(inverse)) {
      return NoKernel(group, "the output Transpose has an invalid perm");
    }
    plan.o.through_views = true;
    plan.o.inverse_perm = inverse;
    plan.layout_members.push_back(t);
  }

  absl::flat_hash_set<const Node*> other(plan.q_chain.begin(), plan.q_chain.end());
  other.insert(plan.layout_members.begin(), plan.layout_members.end());
  other.insert(plan.guard.begin(), plan.guard.end());
  other.insert({plan.mm1, plan.mm2, plan.softmax});
  for (const Node* n : body.nodes()) {
    if (!other.contains(n)) plan.score_members.push_back(n);
  }
  return absl::OkStatus();
}

// The operands' dtypes (f16 or bf16, all alike) and ranks the kernel takes.
absl::Status CheckOperands(const Node& group, const AttentionPlan& plan, DType dt) {
  const Value* q_in = group.input(plan.q.index);
  const Value* k_in = group.input(plan.k.index);
  const Value* v_in = group.input(plan.v.index);
  if (dt != DType::kFloat16 && dt != DType::kBFloat16) {
    return NoKernel(group, absl::StrCat("attention in ", DTypeName(dt), " (the kernel takes f16 or bf16)"));
  }
  for (const Value* t : {static_cast<const Value*>(plan.mm1->input(0)), q_in, k_in, v_in}) {
    if (t->dtype() != dt) {
      return NoKernel(group, absl::StrCat("attention operands of different dtypes (", DTypeName(t->dtype()), " and ",
                                          DTypeName(dt), ")"));
    }
  }
  for (const Layout* l : {&plan.q, &plan.k, &plan.v, &plan.o}) {
    if (l->shape().size() < 2) return NoKernel(group, "attention on vectors");
  }
  return absl::OkStatus();
}

// Row pitches of Q, K, V and O (elements), and how K is read.
struct AttentionPitches {
  int64_t q_ld = 0, k_ld = 0, v_ld = 0, o_ld = 0;
  bool k_rows_are_keys = false;  // K's head dim contiguous (ATTN_K_TRANS 1)
  bool k_async = false;          // K rows 16-byte aligned: cp.async loads
};

absl::StatusOr<AttentionPitches> Pitches(const Node& group, const AttentionPlan& plan, int64_t sk) {
  // Row pitches. Q, V and O rows are contiguous; K is read by rows of keys (its head
  // dim contiguous, ATTN_K_TRANS 1) or by rows of the head dim (keys contiguous).
  // A dim of size 1 has no stride of its own: `one` stands in (any value reaches its
  // one row or column).
  auto stride = [](const Layout& l, int d, int64_t one) -> std::optional<int64_t> {
    return l.shape()[d] == 1 ? std::optional<int64_t>(one) : l.view.Stride(d);
  };
  auto pitch = [&](const Layout& l, const char* what) -> absl::StatusOr<int64_t> {
    const int r = l.view.rank();
    const std::optional<int64_t> col = stride(l, r - 1, 1), row = stride(l, r - 2, l.shape()[r - 1]);
    if (col != 1 || !row || *row % 8 != 0 || !BatchStridesAligned(l)) {
      return NoKernel(group, absl::StrCat(what, " rows are not contiguous and 16-byte aligned"));
    }
    return *row;
  };
  AttentionPitches p;
  KILN_ASSIGN_OR_RETURN(p.q_ld, pitch(plan.q, "Q"));
  KILN_ASSIGN_OR_RETURN(p.v_ld, pitch(plan.v, "V"));
  KILN_ASSIGN_OR_RETURN(p.o_ld, pitch(plan.o, "the output"));
  const int kr = plan.k.view.rank();
  const int key_dim = plan.k_trans ? kr - 2 : kr - 1, d_dim = plan.k_trans ? kr - 1 : kr - 2;
  const std::optional<int64_t> d_stride = stride(plan.k, d_dim, 1);
  const std::optional<int64_t> key_stride = stride(plan.k, key_dim, d_stride == 1 ? plan.k.shape()[d_dim] : 1);
  if (!d_stride || !key_stride) return NoKernel(group, "K is read through views without strides");
  if (*d_stride == 1) {
    p.k_rows_are_keys = true;
    p.k_ld = *key_stride;
  } else if (*key_stride == 1) {
    p.k_ld = *d_stride;
  } else {
    return NoKernel(group, "K is contiguous along neither the keys nor the head dim");
  }
  p.k_async = p.k_ld % 8 == 0 && BatchStridesAligned(plan.k) && (p.k_rows_are_keys || sk % 8 == 0);
  return p;
}

// The group inputs that are a causal mask (AsCausalMask): computed, not loaded.
absl::flat_hash_map<int, CausalMask> CausalInputs(const Node& group, int64_t sq, int64_t sk) {
  absl::flat_hash_map<int, CausalMask> causal_inputs;
  for (int i = 0; i < group.num_inputs(); ++i) {
    if (std::optional<CausalMask> m = AsCausalMask(group.input(i), sq, sk)) causal_inputs[i] = *m;
  }
  return causal_inputs;
}

// On a dynamic graph: the inputs mark-causal-masks found causal at sampled sizes
// (the group's causal_inputs, with causal_fills: 0 for a condition, else the additive
// mask's fill) whose last two dims are the scores' `sq` and `sk` at every size.
absl::flat_hash_map<int, CausalMask> MarkedCausalInputs(const Node& group, const DimExpr& sq, const DimExpr& sk) {
  absl::flat_hash_map<int, CausalMask> causal_inputs;
  const std::vector<int64_t> inputs = group.GetInts("causal_inputs", {}).value_or(std::vector<int64_t>{});
  const std::vector<float> fills = group.GetFloats("causal_fills", {}).value_or(std::vector<float>{});
  for (size_t j = 0; j < inputs.size() && j < fills.size(); ++j) {
    if (inputs[j] < 0 || inputs[j] >= group.num_inputs()) continue;
    const Value* v = group.input(static_cast<int>(inputs[j]));
    if (v == nullptr || v->rank() < 2) continue;
    const std::vector<DimExpr> dims = ValueDims(*v);
    if (dims[dims.size() - 2] != sq || dims.back() != sk) continue;
    causal_inputs[static_cast<int>(inputs[j])] = CausalMask{fills[j] != 0.f, fills[j]};
  }
  return causal_inputs;
}

// When the Softmax reads the scores through a causal mask that leaves them unchanged
// on and below the diagonal and takes them to a value exp() makes 0 above it (a Where
// of the condition with a fill <= -1e30, or the Add of an additive mask), the keys
// past a CTA's last row are skipped (ATTN_CAUSAL_LIMIT).
bool CausalLimit(const AttentionPlan& plan, const absl::flat_hash_map<int, CausalMask>& causal_inputs,
                 const Shape& ss) {
  const Node* w = plan.softmax->input(0)->producer();
  if (w == nullptr) return false;
  auto causal = [&](const Value* v, bool additive) {
    for (size_t i = 0; i < plan.body->inputs().size(); ++i) {
      auto it = causal_inputs.find(static_cast<int>(i));
      if (plan.body->inputs()[i] == v && it != causal_inputs.end() && it->second.additive == additive) return true;
    }
    return false;
  };
  if (w->op_type() == "Where") {
    const Value* fill = w->input(2);
    return causal(w->input(0), false) && fill->is_constant() && fill->numel() == 1 &&
           fill->constant().ScalarFloat() <= -1e30f && w->input(1)->shape() == ss;
  }
  if (w->op_type() == "Add") {
    return (causal(w->input(1), true) && w->input(0)->shape() == ss) ||
           (causal(w->input(0), true) && w->input(1)->shape() == ss);
  }
  return false;
}

// The sizes of a planned attention group: the scores' batch dims, Sq, Sk and the
// head dims.
struct AttentionDims {
  Shape batch_shape;
  int64_t batch = 0, sq = 0, sk = 0, d = 0, dv = 0;
};

// The sizes, or NoKernel for sizes the kernel does not take (head dims, empty or
// too many batch entries, tensors past 2^31 elements).
absl::StatusOr<AttentionDims> CheckDims(const Node& group, const AttentionPlan& plan) {
  const Value* s = plan.mm1->output(0);
  if (s->rank() < 2) return NoKernel(group, "attention on vectors");
  const Shape& ss = s->shape();
  AttentionDims r;
  r.batch_shape = Shape(ss.begin(), ss.end() - 2);
  r.batch = NumElements(r.batch_shape);
  r.sq = ss[ss.size() - 2];
  r.sk = ss.back();
  r.d = plan.q.shape().back();
  r.dv = plan.v.shape().back();
  Shape want_o = r.batch_shape;
  want_o.push_back(r.sq);
  want_o.push_back(r.dv);
  if (plan.o.shape() != want_o) return NoKernel(group, "attention output is not [batch..., Sq, Dv]");
  if (r.d % 8 != 0 || r.dv % 8 != 0 || r.d > kAttentionMaxHeadDim || r.dv > kAttentionMaxHeadDim) {
    return NoKernel(group, absl::StrCat("attention with head dims D = ", r.d, ", Dv = ", r.dv,
                                        " (the kernel takes multiples of 8 up to ", kAttentionMaxHeadDim, ")"));
  }
  if (r.sq <= 0 || r.sk <= 0 || r.batch <= 0) return NoKernel(group, "empty attention");
  if (r.batch > 65535) return NoKernel(group, "attention over more than 65535 batch entries");
  for (const Value* t : {group.input(plan.q.index), group.input(plan.k.index), group.input(plan.v.index),
                         group.output(0)}) {
    if (t->numel() >= (int64_t{1} << 31)) return NoKernel(group, "attention tensors of 2^31 or more elements");
  }
  return r;
}

// The sizes of an attention group of a dynamic graph (issue 34) as expressions over
// the dim symbols: the scores' dims, and the dims and strides each operand is read at.
struct DynamicAttention {
  std::vector<DimExpr> scores;  // [batch..., Sq, Sk]
  std::vector<DimExpr> batch_dims;
  DimExpr batch, sq, sk;
  DimView q, k, v, o;
};

// The strides of `view`'s batch dims broadcast against `batch_dims` (right-aligned; a
// fixed 1 or a missing dim reads stride 0), followed by zeros for the row and column;
// nullopt when a dim neither matches nor broadcasts.
std::optional<std::vector<DimExpr>> BatchOnlyStrides(const DimView& view, const std::vector<DimExpr>& batch_dims) {
  const int own = static_cast<int>(view.dims.size()) - 2, n = static_cast<int>(batch_dims.size());
  if (own < 0 || own > n) return std::nullopt;
  std::vector<DimExpr> st(n + 2, DimExpr());
  for (int j = n - own; j < n; ++j) {
    const DimExpr& d = view.dims[j - (n - own)];
    if (d == batch_dims[j]) {
      st[j] = view.strides[j - (n - own)];
    } else if (d.constant() != 1) {
      return std::nullopt;
    }
  }
  return st;
}

// The run-time sizes of `plan`'s group, or nullopt when its sizes are fixed. The row
// pitches must be the fixed `pitches` at every size and the batch strides multiples of
// 8 (aligned rows for cp.async); NoKernel otherwise.
absl::StatusOr<std::optional<DynamicAttention>> PlanDynamic(const Node& group, const AttentionPlan& plan,
                                                            AttentionPitches& pitches) {
  if (!HasDynamicValues(group)) return std::nullopt;
  DynamicAttention r;
  r.scores = ValueDims(*plan.mm1->output(0));
  const size_t n = r.scores.size();
  r.batch_dims.assign(r.scores.begin(), r.scores.end() - 2);
  r.batch = DimsProduct(r.batch_dims);
  r.sq = r.scores[n - 2];
  r.sk = r.scores[n - 1];
  auto view_of = [&](const Layout& l, const char* what) -> absl::StatusOr<DimView> {
    std::optional<DimView> v = DimViewOf(*l.start, l.views);
    if (v && !l.inverse_perm.empty()) v = PermuteDimView(*v, l.inverse_perm);
    if (!v) {
      return NoKernel(group, absl::StrCat(what, " is read through views whose strides are not expressions of the "
                                                "sizes (run-time sizes)"));
    }
    return *std::move(v);
  };
  KILN_ASSIGN_OR_RETURN(r.q, view_of(plan.q, "Q"));
  KILN_ASSIGN_OR_RETURN(r.k, view_of(plan.k, "K"));
  KILN_ASSIGN_OR_RETURN(r.v, view_of(plan.v, "V"));
  KILN_ASSIGN_OR_RETURN(r.o, view_of(plan.o, "the output"));
  // Dim `d` of `v` is read at fixed stride `want` (or has size 1 at every size).
  auto fixed = [](const DimView& v, size_t d, int64_t want) {
    return v.dims[d].constant() == 1 || v.strides[d] == DimExpr::Constant(want);
  };
  auto rows = [&](const DimView& v, int64_t pitch) {
    const size_t r = v.dims.size();
    return r >= 2 && v.dims[r - 1].IsConstant() && fixed(v, r - 1, 1) && fixed(v, r - 2, pitch);
  };
  const size_t kr = r.k.dims.size();  // >= 2: CheckOperands refused vectors
  const size_t key_dim = plan.k_trans ? kr - 2 : kr - 1, d_dim = plan.k_trans ? kr - 1 : kr - 2;
  const bool k_ok = pitches.k_rows_are_keys ? fixed(r.k, d_dim, 1) && fixed(r.k, key_dim, pitches.k_ld)
                                            : fixed(r.k, key_dim, 1) && fixed(r.k, d_dim, pitches.k_ld);
  if (!rows(r.q, pitches.q_ld) || !rows(r.v, pitches.v_ld) || !rows(r.o, pitches.o_ld) || !k_ok) {
    return NoKernel(group, "attention operands whose row pitches vary with the sizes");
  }
  for (const DimView* v : {&r.q, &r.k, &r.v, &r.o}) {
    std::optional<std::vector<DimExpr>> st = BatchOnlyStrides(*v, r.batch_dims);
    if (!st) return NoKernel(group, "an attention operand's batch dims do not broadcast at every size");
    st->push_back(v->offset);
    for (const DimExpr& e : *st) {
      if (!DividesAll(e, 8)) return NoKernel(group, "attention operands whose batch strides are not 16-byte aligned");
    }
  }
  pitches.k_async = pitches.k_async && (pitches.k_rows_are_keys || DividesAll(r.sk, 8));
  return r;
}

// A tile config and the sizes it serves (KernelLaunch::size_boxes; empty: all).
struct AttentionVariant {
  AttentionConfig cfg;
  std::vector<std::vector<std::array<int64_t, 2>>> boxes;
};

// The tile configs of a group with run-time sizes: PickAttentionConfig at the middle
// of each power-of-two box of the symbols that the batch, Sq and Sk depend on, boxes
// with the same config joined into one variant; one variant without boxes when every
// box gets the same config.
std::vector<AttentionVariant> DynamicVariants(const Graph& body, const DynamicAttention& dyn, int64_t d, int64_t dv,
                                              bool k_trans, bool hopper) {
  std::vector<AttentionVariant> out;
  for (const SizeBox& box : PowerOfTwoBoxes(body.dim_symbols(), {dyn.batch, dyn.sq, dyn.sk})) {
    auto at = [&](const DimExpr& e) { return e.Evaluate(box.middle).value_or(1); };
    const AttentionConfig cfg = PickAttentionConfig(at(dyn.batch), at(dyn.sq), at(dyn.sk), d, dv, k_trans, hopper);
    auto same = [&](const AttentionVariant& v) {
      return v.cfg.bm == cfg.bm && v.cfg.bn == cfg.bn && v.cfg.splits == cfg.splits && v.cfg.wgmma == cfg.wgmma &&
             v.cfg.overlap == cfg.overlap;
    };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) it = out.insert(out.end(), AttentionVariant{cfg, {}});
    it->boxes.push_back(box.ranges);
  }
  if (out.size() == 1) out[0].boxes.clear();
  return out;
}

// The element offset of a batch entry of `view` (DynamicAttention's batch dims), from
// the tensor the view starts in.
std::string DynamicBatchOffset(const DimView& view, const DynamicAttention& dyn) {
  std::vector<DimExpr> dims = dyn.batch_dims;
  dims.push_back(DimExpr::Constant(1));
  dims.push_back(DimExpr::Constant(1));
  const std::string batch = DynamicBatchRowColOffset(dims, *BatchOnlyStrides(view, dyn.batch_dims));
  if (view.offset == DimExpr()) return batch;
  return absl::StrCat(DimCode(view.offset), " + ", batch);
}

// The group's element-wise functors: the score functor (the members between the
// MatMul and the Softmax, from `acc`) and the Q prologue (from `x`), with the
// expressions they return.
struct AttentionFunctors {
  ComposedElementwise scores, qpro;
  std::string score_result = "acc", q_result = "x";
};

absl::StatusOr<AttentionFunctors> ComposeFunctors(const Node& group, const AttentionPlan& plan) {
  AttentionFunctors f;
  const Value* s = plan.mm1->output(0);
  f.scores.regroup_batch = true;  // Swin's shifted windows: the mask added to [B, windows, heads, N, N]
  f.scores.computed[s] = {"acc", Domain::kFloat};
  KILN_RETURN_IF_ERROR(ComposeElementwise(group, *plan.body, plan.score_members, s->shape(), f.scores));
  if (plan.softmax->input(0) != s) {
    auto it = f.scores.computed.find(plan.softmax->input(0));
    if (it == f.scores.computed.end() || it->second.second != Domain::kFloat) {
      return NoKernel(group, "the Softmax input is not a float computed from the scores");
    }
    f.score_result = it->second.first;
  }
  const Value* q = plan.mm1->input(0);
  if (!plan.q_chain.empty()) {
    f.qpro.computed[plan.q_start] = {"x", Domain::kFloat};
    KILN_RETURN_IF_ERROR(ComposeElementwise(group, *plan.body, plan.q_chain, q->shape(), f.qpro));
    auto it = f.qpro.computed.find(q);
    if (it == f.qpro.computed.end() || it->second.second != Domain::kFloat) {
      return NoKernel(group, "the Q prologue result is not floating point");
    }
    f.q_result = it->second.first;
  }
  return f;
}

// The kernel parameters and arguments of the functors' group-input loads, and the
// launch's argument list they extend.
struct AttentionLoadParams {
  std::string params, args;
  std::vector<int> launch_args;
};

// Code declaring g<l> for each of `loads` (group inputs of a functor over `shape`,
// `dims` when the sizes vary): a causal mask input computed from col <= row (score
// functor only), else a load through parameter <prefix><l> (e: the score functor, p:
// the Q prologue), appended to `out`.
absl::StatusOr<std::string> EmitLoads(const Node& group, const AttentionPlan& plan,
                                      const absl::flat_hash_map<int, CausalMask>& causal_inputs,
                                      const std::optional<DynamicAttention>& dyn,
                                      const std::vector<ElementwiseLoad>& loads, const char* prefix, const Shape& shape,
                                      const std::vector<DimExpr>& dims, AttentionLoadParams& out) {
  std::string code;
  for (size_t l = 0; l < loads.size(); ++l) {
    const ElementwiseLoad& ld = loads[l];
    const Value* in = group.input(ld.input);
    if (auto it = causal_inputs.find(ld.input); prefix[0] == 'e' && it != causal_inputs.end()) {
      const std::string masked = it->second.additive ? FloatLit(it->second.fill) : "0";
      const std::string kept = it->second.additive ? "0" : "1";
      absl::StrAppend(&code, "  const ", DomainType(ld.domain), " g", l, " = (", DomainType(ld.domain),
                      ")(col <= row ? ", kept, " : ", masked, ");  // causal mask ", in->name(), "\n");
      continue;
    }
    const std::string p = absl::StrCat(prefix, l);
    absl::StrAppend(&out.params, ", ", Param(in->dtype(), true, p));
    absl::StrAppend(&out.args, ", ", p);
    absl::StatusOr<std::string> off = BroadcastOffset(group, ld.view, ld.into.empty() ? shape : ld.into);
    if (!off.ok()) return off.status();
    if (dyn) {
      // A regrouping of the scores' batch dims (Swin's windows) has the dims of the
      // body's Reshape that writes it.
      std::vector<DimExpr> into = dims;
      for (const Node* n : plan.body->nodes()) {
        if (!ld.into.empty() && n->op_type() == "Reshape" && n->output(0)->shape() == ld.into) {
          into = ValueDims(*n->output(0));
        }
      }
      std::vector<DimExpr> st;
      if (ld.view != in->shape() || (!ld.into.empty() && into == dims) ||
          !DynamicBroadcastStrides(ValueDims(*in), into, &st)) {
        return NoKernel(group, absl::StrCat("the attention reads ", in->name(),
                                            " through a broadcast that does not hold at every size"));
      }
      off = DynamicBatchRowColOffset(into, st);
    }
    absl::StrAppend(&code, "  const ", DomainType(ld.domain), " g", l, " = ", LoadAs(in->dtype(), ld.domain, p, *off),
                    ";\n");
    out.launch_args.push_back(InputArg(group, ld.input));
  }
  return code;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateAttentionGroup(const Node& group, const AttentionConfig* config,
                                                                 bool hopper) {
  if (!IsFusedGroup(group)) return NoKernel(group, "not an attention group");
  AttentionPlan plan;
  if (absl::Status st = PlanAttention(group, plan); !st.ok()) return st;
  const Value* q_in = group.input(plan.q.index);
  const Value* k_in = group.input(plan.k.index);
  const Value* v_in = group.input(plan.v.index);
  const Value* y = group.output(0);
  const Value* s = plan.mm1->output(0);
  const DType dt = y->dtype();
  if (absl::Status st = CheckOperands(group, plan, dt); !st.ok()) return st;
  KILN_ASSIGN_OR_RETURN(const AttentionDims dims, CheckDims(group, plan));
  const Shape& ss = s->shape();
  const Shape& batch_shape = dims.batch_shape;
  const int64_t batch = dims.batch, sq = dims.sq, sk = dims.sk, d = dims.d, dv = dims.dv;

  KILN_ASSIGN_OR_RETURN(AttentionPitches pitches, Pitches(group, plan, sk));
  KILN_ASSIGN_OR_RETURN(const std::optional<DynamicAttention> dyn, PlanDynamic(group, plan, pitches));
  const int64_t k_ld = pitches.k_ld;
  const bool k_rows_are_keys = pitches.k_rows_are_keys;
  const bool k_async = pitches.k_async;

  // The wgmma kernel copies every K tile with cp.async (16-byte aligned rows).
  hopper = hopper && k_async;
  std::vector<AttentionVariant> variants = {
      {config != nullptr ? *config : PickAttentionConfig(batch, sq, sk, d, dv, k_rows_are_keys, hopper), {}}};
  if (dyn && config == nullptr) variants = DynamicVariants(*plan.body, *dyn, d, dv, k_rows_are_keys, hopper);
  for (const AttentionVariant& v : variants) {
    if (absl::Status valid = VerifyAttentionConfig(v.cfg, d, dv, k_rows_are_keys); !valid.ok()) {
      if (config != nullptr) return valid;
      return NoKernel(group, absl::StrCat("no tile config: ", valid.message()));
    }
    if (v.cfg.wgmma && !k_async) {
      return absl::InvalidArgumentError(
          "the wgmma attention kernel copies K with cp.async: K's rows must be 16-byte aligned");
    }
  }

  KILN_ASSIGN_OR_RETURN(const AttentionFunctors f, ComposeFunctors(group, plan));

  // A causal mask (a Where condition or an additive mask) is computed from col <=
  // row: a constant one, or where the sizes vary one built from them alone.
  const absl::flat_hash_map<int, CausalMask> causal_inputs =
      dyn ? MarkedCausalInputs(group, dyn->sq, dyn->sk) : CausalInputs(group, sq, sk);
  const bool causal_limit = CausalLimit(plan, causal_inputs, ss);

  Shape q_iter = batch_shape;  // Q broadcast over the scores' batch dims
  q_iter.push_back(sq);
  q_iter.push_back(d);
  std::vector<DimExpr> score_dims, q_dims;
  if (dyn) {
    score_dims = dyn->scores;
    q_dims = dyn->batch_dims;
    q_dims.push_back(dyn->sq);
    q_dims.push_back(DimExpr::Constant(d));
  }
  // Loads of group inputs: e<l> for the score functor, p<l> for the Q prologue.
  AttentionLoadParams lp;
  lp.launch_args = {0, InputArg(group, plan.q.index), InputArg(group, plan.k.index), InputArg(group, plan.v.index)};
  KILN_ASSIGN_OR_RETURN(const std::string score_loads,
                        EmitLoads(group, plan, causal_inputs, dyn, f.scores.loads, "e", ss, score_dims, lp));
  KILN_ASSIGN_OR_RETURN(const std::string q_loads,
                        EmitLoads(group, plan, causal_inputs, dyn, f.qpro.loads, "p", q_iter, q_dims, lp));
  std::string& params = lp.params;
  std::string& args = lp.args;
  KernelLaunch launch;
  launch.args = lp.launch_args;

  absl::StatusOr<std::string> q_off = BatchOffset(group, plan.q, batch_shape);
  absl::StatusOr<std::string> k_off = BatchOffset(group, plan.k, batch_shape);
  absl::StatusOr<std::string> v_off = BatchOffset(group, plan.v, batch_shape);
  absl::StatusOr<std::string> o_off = BatchOffset(group, plan.o, batch_shape);
  for (const auto* o : {&q_off, &k_off, &v_off, &o_off}) {
    if (!o->ok()) return o->status();
  }
  std::string sq_code = absl::StrCat(sq), sk_code = absl::StrCat(sk);
  if (dyn) {
    q_off = DynamicBatchOffset(dyn->q, *dyn);
    k_off = DynamicBatchOffset(dyn->k, *dyn);
    v_off = DynamicBatchOffset(dyn->v, *dyn);
    o_off = DynamicBatchOffset(dyn->o, *dyn);
    sq_code = absl::StrCat("(int)", DimCode(dyn->sq));
    sk_code = absl::StrCat("(int)", DimCode(dyn->sk));
    absl::StrAppend(&params, ", const kiln_dims kiln_dims_");
    absl::StrAppend(&args, ", kiln_dims_");
  }

  auto describe = [&](const Layout& l, const Value* v) {
    return absl::StrCat(DTypeName(dt), ShapeToString(l.shape()),
                        l.through_views ? absl::StrCat(" read from ", v->TypeString()) : "");
  };
  // No group name in the source: the layers' identical groups share one module.
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n// fused attention: Q ", describe(plan.q, q_in),
                                 plan.q_chain.empty() ? "" : " (scaled)", ", K ", describe(plan.k, k_in),
                                 plan.k_trans ? " (trans_b)" : "", ", V ", describe(plan.v, v_in), " -> ",
                                 describe(plan.o, y), causal_limit ? "; causal" : "", "\n");
  absl::StrAppend(&src, "#define ATTN_BF16 ", dt == DType::kBFloat16 ? 1 : 0, "\n#define ATTN_SQ ", sq_code,
                  "\n#define ATTN_SK ", sk_code, "\n#define ATTN_D ", d, "\n#define ATTN_DV ", dv,
                  "\n#define ATTN_Q_LD ", pitches.q_ld, "\n#define ATTN_K_LD ", k_ld, "\n#define ATTN_V_LD ",
                  pitches.v_ld, "\n#define ATTN_O_LD ", pitches.o_ld, "\n#define ATTN_K_TRANS ",
                  k_rows_are_keys ? 1 : 0, "\n#define ATTN_K_ASYNC ", k_async ? 1 : 0, "\n");
  const size_t tile_at = src.size();  // the tile config's defines and the kernel's padding go here
  absl::StrAppend(&src, "#define ATTN_Q_PROLOGUE ", plan.q_chain.empty() ? 0 : 1, "\n#define ATTN_CAUSAL_LIMIT ",
                  causal_limit ? 1 : 0,
                  "\n#define ATTN_T ", StorageTypeName(dt), "\n#define KILN_ATTN_PARAMS ", params,
                  "\n#define KILN_ATTN_ARGS ", args, "\n");
  for (const auto& [name, off] : {std::pair{"q", &q_off}, {"k", &k_off}, {"v", &v_off}, {"o", &o_off}}) {
    absl::StrAppend(&src, "static __device__ __forceinline__ kiln_index kiln_attn_", name,
                    "_offset(int batch KILN_ATTN_PARAMS) { return ", **off, "; }\n");
  }
  absl::StrAppend(&src,
                  "static __device__ __forceinline__ float kiln_attn_score(float acc, int row, int col, int batch "
                  "KILN_ATTN_PARAMS) {\n",
                  score_loads, f.scores.code, "  return ", f.score_result, ";\n}\n");
  if (!plan.q_chain.empty()) {
    absl::StrAppend(&src,
                    "static __device__ __forceinline__ float kiln_attn_q_prologue(float x, int row, int col, int batch "
                    "KILN_ATTN_PARAMS) {\n",
                    q_loads, f.qpro.code, "  return ", f.q_result, ";\n}\n");
  }
  absl::StrAppend(&src, TemplateSource("mma_sm80.cuh"), TemplateSource("attention_common.cuh"));
  std::vector<KernelLaunch> launches;
  for (const AttentionVariant& v : variants) {
    const AttentionConfig& cfg = v.cfg;
    KernelLaunch& l = launches.emplace_back(launch);
    // Head dims padded to the kernel's k and n steps: 16 (mma.sync), 64 (one
    // 128-byte swizzle row of the wgmma kernel's tiles).
    const int64_t pad = cfg.wgmma ? 64 : 16;
    l.source = absl::StrCat(src.substr(0, tile_at), "#define ATTN_BM ", cfg.bm, "\n#define ATTN_BN ", cfg.bn,
                            "\n#define ATTN_SPLITS ", cfg.splits, "\n#define ATTN_OVERLAP ", cfg.overlap ? 1 : 0,
                            "\n#define ATTN_DP ", (d + pad - 1) / pad * pad, "\n#define ATTN_DVP ",
                            (dv + pad - 1) / pad * pad, "\n", src.substr(tile_at));
    if (cfg.wgmma) {
      absl::StrAppend(
          &l.source, TemplateSource("wgmma_sm90.cuh"),
          WgmmaFunction("kiln_attn_wgmma_qk", cfg.bn, dt, false, k_rows_are_keys, false, true),
          WgmmaFunction("kiln_attn_wgmma_pv", static_cast<int>((dv + 63) / 64 * 64), dt, false, false, true, true),
          TemplateSource("attention_sm90.cuh"), TemplateSource("attention_undef.cuh"));
      l.block = {static_cast<uint32_t>(cfg.bm * 2), 1, 1};
    } else {
      absl::StrAppend(&l.source, TemplateSource("attention_sm80.cuh"), TemplateSource("attention_undef.cuh"));
      l.block = {static_cast<uint32_t>(cfg.bm / 16 * 32 * cfg.splits), 1, 1};
    }
    l.grid = {static_cast<uint32_t>((sq + cfg.bm - 1) / cfg.bm), static_cast<uint32_t>(batch), 1};
    l.shared_bytes = static_cast<uint32_t>(AttentionSharedBytes(cfg, d, dv, k_rows_are_keys));
    if (dyn) {  // the grid at the run's sizes: ceil(Sq / BM) x batch
      l.dim_param = true;
      l.grid_extents = {dyn->sq, dyn->batch, DimExpr::Constant(1)};
      l.grid_per_block = {cfg.bm, 1, 0};
      l.size_boxes = v.boxes;
    }
  }
  return launches;
}

}  // namespace kiln::codegen::ops
