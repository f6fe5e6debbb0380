// The GEMM plan (codegen/ops/gemm_plan.h): a MatMul group's body read into mainloops,
// prologue chains and the epilogue chain, and the problem as the kernels compute it.
#include "codegen/ops/gemm_plan.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/kernel_util.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"
#include "graph/tf32_math.h"

namespace kiln::codegen::ops {
namespace {

absl::StatusOr<bool> Flag(const Node& mm, const char* name) {
  absl::StatusOr<int64_t> v = mm.GetInt(name, 0);
  if (!v.ok()) return v.status();
  if (*v != 0 && *v != 1) return NoKernel(mm, absl::StrCat(name, " = ", *v));
  return *v == 1;
}

// M, N, K and the layouts of MatMul `mm` (operand values `a`, `b`).
absl::Status SetShapes(const Node& node, const Node& mm, LoopPlan& loop) {
  absl::StatusOr<bool> ta = Flag(mm, "trans_a"), tb = Flag(mm, "trans_b");
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  loop.a.trans = *ta;
  loop.b.trans = *tb;
  const Value* a = loop.a.stored;
  const Value* b = loop.b.stored;
  if (a->rank() < 2 || b->rank() < 2) return NoKernel(node, "MatMul with a 1-D operand");
  const Shape& as = a->shape();
  const Shape& bs = b->shape();
  const size_t ra = as.size(), rb = bs.size();
  loop.m = *ta ? as[ra - 1] : as[ra - 2];
  loop.k = *ta ? as[ra - 2] : as[ra - 1];
  loop.n = *tb ? bs[rb - 2] : bs[rb - 1];
  if ((*tb ? bs[rb - 1] : bs[rb - 2]) != loop.k) return NoKernel(node, "inconsistent MatMul shapes");
  return absl::OkStatus();
}

// The prologue of operand `i` of `mm` inside `body`: walks from the operand up
// through element-wise members of the operand's shape, along the input of that shape,
// to a group input (the loaded tensor).
absl::Status PlanOperand(const Node& group, const Graph& body, const Node& mm, int i,
                         const absl::flat_hash_map<const Value*, int>& input_index, OperandPlan& op) {
  op.stored = mm.input(i);
  const Value* x = op.stored;
  const Shape& shape = op.stored->shape();
  std::vector<const Node*> chain;  // nearest the MatMul first
  while (input_index.find(x) == input_index.end()) {
    const Node* p = x->producer();
    if (p == nullptr) {
      return NoKernel(group, absl::StrCat("MatMul operand '", x->name(), "' is a constant of the group"));
    }
    if (p->num_outputs() != 1 || p->output(0)->shape() != shape) {
      return NoKernel(
          group, absl::StrCat("prologue member ", p->Describe(), " is not element-wise over ", ShapeToString(shape)));
    }
    const Value* next = nullptr;
    for (const Value* in : p->inputs()) {
      if (in != nullptr && in->shape() == shape && !in->is_constant()) {
        next = in;
        break;
      }
    }
    if (next == nullptr) {
      return NoKernel(group, absl::StrCat("prologue member ", p->Describe(), " transforms no operand of shape ",
                                          ShapeToString(shape)));
    }
    chain.push_back(p);
    x = next;
  }
  op.loaded = x;
  op.input = input_index.at(x);
  if (chain.empty()) return absl::OkStatus();
  op.chain.assign(chain.rbegin(), chain.rend());
  if (x->dtype() != DType::kFloat32 && x->dtype() != DType::kFloat16 && x->dtype() != DType::kBFloat16) {
    return NoKernel(group, absl::StrCat("prologue loading ", DTypeName(x->dtype())));
  }
  ComposedElementwise composed;
  composed.computed[x] = {"x", Domain::kFloat};
  if (absl::Status st = ComposeElementwise(group, body, op.chain, shape, composed); !st.ok()) return st;
  auto out = composed.computed.find(op.stored);
  if (out == composed.computed.end() || out->second.second != Domain::kFloat) {
    return NoKernel(group, "prologue result is not floating point");
  }
  op.code = std::move(composed.code);
  op.result = out->second.first;
  op.loads = std::move(composed.loads);
  return absl::OkStatus();
}

// The only reader of `v` in `body` when it is a default-domain `op` reading `v` as its
// data input (input 0) and `v` is no output, else nullptr.
const Node* ReaderAsData(const Graph& body, const Value* v, const char* op) {
  const Node* r = OnlyReader(body, v);
  return r != nullptr && r->op_type() == op && r->domain().empty() && v->uses()[0].index == 0 ? r : nullptr;
}

// A gated product's de-interleaving in `body` (fusion/fuse_gated_matmul.h): `mm`'s
// [..., M, 2N] read only by a Reshape to [..., M, N/8, 2, 8], read only by a Split in
// two along axis -2, each half read only by a Reshape to [..., M, N]. Sets `gate` and
// `up` (those Reshapes' outputs) and appends the four nodes to `nodes`; false when the
// body has no such form.
bool GatedHalves(const Graph& body, const Node& mm, std::vector<const Node*>& nodes, const Value*& gate,
                 const Value*& up) {
  const Value* p = mm.output(0);
  const Node* pairs = ReaderAsData(body, p, "Reshape");
  if (pairs == nullptr || p->rank() < 2) return false;
  const Shape& ps = p->shape();
  Shape want(ps.begin(), ps.end() - 1);
  const int64_t n = ps.back() / 2;
  want.insert(want.end(), {n / 8, 2, 8});
  if (ps.back() % 16 != 0 || pairs->output(0)->shape() != want) return false;
  const Node* split = ReaderAsData(body, pairs->output(0), "Split");
  if (split == nullptr || split->num_outputs() != 2) return false;
  const int64_t rank = static_cast<int64_t>(want.size());
  const int64_t axis = split->GetInt("axis", 0).value_or(0);
  if (axis != rank - 2 && axis != -2) return false;
  Shape half_shape(ps.begin(), ps.end() - 1);
  half_shape.push_back(n);
  const Value* halves[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    const Node* back = ReaderAsData(body, split->output(i), "Reshape");
    if (back == nullptr || back->output(0)->shape() != half_shape) return false;
    halves[i] = back->output(0);
    nodes.push_back(back);
  }
  nodes.push_back(pairs);
  nodes.push_back(split);
  gate = halves[0];
  up = halves[1];
  return true;
}

// A rotary product's partner in `body` (fusion/fuse_rotary_matmul.h): `mm`'s
// [..., N] read by a Reshape to [..., N / 2h, 2, h], read only by a Slice reversing
// axis -2 (start 1, step -1; every other axis whole), read only by a Reshape back to
// [..., N]. Sets `partner` (that Reshape's output) and `half` (h) and appends the
// three nodes to `nodes`; false when the body has no such form.
bool RotaryPartner(const Graph& body, const Node& mm, std::vector<const Node*>& nodes, const Value*& partner,
                   int64_t& half) {
  const Value* p = mm.output(0);
  const Node* pairs = nullptr;
  for (const Use& u : p->uses()) {
    if (u.node->op_type() == "Reshape" && u.node->domain().empty() && u.index == 0) pairs = u.node;
  }
  if (pairs == nullptr || p->rank() < 2) return false;
  const Shape& ps = p->shape();
  const Shape& qs = pairs->output(0)->shape();
  if (qs.size() != ps.size() + 2 || qs[qs.size() - 2] != 2 || !std::equal(ps.begin(), ps.end() - 1, qs.begin())) {
    return false;
  }
  const int64_t h = qs.back();
  if (h <= 0 || qs[qs.size() - 3] * 2 * h != ps.back() || body.IsGraphOutput(pairs->output(0))) return false;
  const Node* swap = ReaderAsData(body, pairs->output(0), "Slice");
  if (!SwapsHalves(swap)) return false;
  const Node* back = ReaderAsData(body, swap->output(0), "Reshape");
  if (back == nullptr || back->output(0)->shape() != ps) return false;
  nodes.insert(nodes.end(), {pairs, swap, back});
  partner = back->output(0);
  half = h;
  return true;
}

// Fills `plan` from a FusedGroup body: one MatMul (operands group inputs or prologue
// chains) or two MatMuls of group inputs added together, then an element-wise chain
// over the product's shape.
absl::Status PlanGroup(const Node& group, GemmPlan& plan) {
  auto body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  plan.body = *std::move(body_or);
  const Graph& body = *plan.body;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) {
    return NoKernel(group, "matmul group with several outputs");
  }
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);

  std::vector<const Node*> mms;
  for (const Node* n : body.nodes()) {
    if (n->op_type() == "MatMul") mms.push_back(n);
    if (n->op_type() == "Gemm") return NoKernel(group, "Gemm inside the group (canonicalisation makes it a MatMul)");
  }
  if (mms.empty()) return NoKernel(group, "group without a MatMul");
  if (mms.size() > 2) return NoKernel(group, "more than two MatMuls in the group");
  absl::flat_hash_set<const Node*> not_epilogue(mms.begin(), mms.end());
  const Value* acc = mms[0]->output(0);
  if (mms.size() == 2) {
    // Dual: Add(P, Q) of the two products, each read only by it.
    const Node* add = nullptr;
    for (const Node* n : body.nodes()) {
      if (n->op_type() != "Add" || n->num_inputs() != 2) continue;
      const Value* x = n->input(0);
      const Value* y = n->input(1);
      if ((x == mms[0]->output(0) && y == mms[1]->output(0)) || (x == mms[1]->output(0) && y == mms[0]->output(0))) {
        add = n;
      }
    }
    if (add == nullptr) return NoKernel(group, "two MatMuls that are not added together");
    for (const Node* mm : mms) {
      const Value* p = mm->output(0);
      if (p->uses().size() != 1 || body.IsGraphOutput(p)) {
        return NoKernel(group, "a dual-matmul product read elsewhere");
      }
      if (p->shape() != add->output(0)->shape() || p->dtype() != add->output(0)->dtype()) {
        return NoKernel(group, "dual-matmul products of different shapes or dtypes");
      }
    }
    not_epilogue.insert(add);
    acc = add->output(0);
  }
  const Value* acc_up = nullptr;
  const Value* acc_partner = nullptr;
  if (mms.size() == 1) {
    std::vector<const Node*> pairing;
    if (GatedHalves(body, *mms[0], pairing, acc, acc_up)) {
      plan.gated = true;
    } else if (group.GetString("pattern", "").value_or("") == "rotary-matmul") {
      RotaryPartner(body, *mms[0], pairing, acc_partner, plan.rotary_half);
    }
    not_epilogue.insert(pairing.begin(), pairing.end());
  }
  for (const Node* mm : mms) {
    LoopPlan loop;
    loop.mm = mm;
    for (int i = 0; i < 2; ++i) {
      OperandPlan& op = i == 0 ? loop.a : loop.b;
      if (absl::Status st = PlanOperand(group, body, *mm, i, input_index, op); !st.ok()) return st;
      if (!op.chain.empty() && mms.size() == 2) return NoKernel(group, "dual-matmul with a prologue");
      not_epilogue.insert(op.chain.begin(), op.chain.end());
    }
    if (absl::Status st = SetShapes(group, *mm, loop); !st.ok()) return st;
    plan.loops.push_back(std::move(loop));
  }
  const Shape& shape = acc->shape();
  if (group.output(0)->shape() != shape) return NoKernel(group, "group output shape differs from the MatMul's");

  std::vector<const Node*> epilogue;
  for (const Node* n : body.nodes()) {
    if (!not_epilogue.contains(n)) epilogue.push_back(n);
  }
  ComposedElementwise composed;
  composed.computed[acc] = {"acc", Domain::kFloat};
  if (acc_up != nullptr) composed.computed[acc_up] = {"acc_up", Domain::kFloat};
  if (acc_partner != nullptr) composed.computed[acc_partner] = {"acc_partner", Domain::kFloat};
  if (absl::Status st = ComposeElementwise(group, body, epilogue, shape, composed); !st.ok()) return st;
  plan.epilogue_code = std::move(composed.code);
  plan.loads = std::move(composed.loads);
  if (!epilogue.empty()) {
    const bool special = std::any_of(epilogue.begin(), epilogue.end(),
                                     [](const Node* n) { return PointwiseUsesSpecialFunction(n->op_type()); });
    plan.epilogue_work = special ? EpilogueWork::kSpecial : EpilogueWork::kLight;
  }
  auto out = composed.computed.find(body.outputs()[0]);
  if (out == composed.computed.end()) return NoKernel(group, "group output is not computed from the MatMul");
  if (out->second.second != Domain::kFloat) return NoKernel(group, "epilogue result is not floating point");
  plan.result = out->second.first;
  const Node* last = body.outputs()[0]->producer();
  const DType out_dt = group.output(0)->dtype();
  if (!plan.gated && plan.rotary_half == 0 && last != nullptr &&
      std::find(epilogue.begin(), epilogue.end(), last) != epilogue.end() &&
      (out_dt == DType::kFloat16 || out_dt == DType::kBFloat16)) {
    auto in = composed.computed.find(last->input(0));
    std::string packed;
    if (last->op_type() == "Relu") {
      packed = absl::StrCat("kiln_relu_", FloatSuffix(out_dt), "x2");
    } else if (last->op_type() == "Gelu" && out_dt == DType::kFloat16 &&
               last->GetString("approximate", "none").value_or("") == "tanh") {
      packed = "kiln_gelu_tanh_f16x2";
    }
    if (!packed.empty() && in != composed.computed.end() && in->second.second == Domain::kFloat) {
      plan.packed_tail = packed;
      plan.tail_input = in->second.first;
    }
  }
  return absl::OkStatus();
}

// Whether the epilogue load of `view` (broadcast against the output `ys`, [batch...,
// M, N]) reads C's batch and row dims either all densely or all broadcast: then the
// batch folds into M (FoldsBatchIntoRows).
bool RowsFoldWithBatch(const ElementwiseLoad& load, const Shape& ys) {
  if (!load.strides.empty() || load.offset != 0 || load.view.size() > ys.size()) return false;
  const size_t lead = ys.size() - load.view.size();
  bool dense = true, broadcast = true;
  for (size_t d = 0; d + 1 < ys.size(); ++d) {
    const int64_t v = d < lead ? 1 : load.view[d - lead];
    dense = dense && v == ys[d];
    broadcast = broadcast && v == 1;
  }
  return dense || broadcast;
}

// Whether a batched GEMM group runs as one GEMM of batch * M rows: every mainloop's
// A is stored [batch..., M, K] (dense, not transposed; a prologue's loads index the
// folded row, MakePrologueSource) and its B is shared by the batch and has no
// prologue, and every epilogue operand folds (RowsFoldWithBatch). C
// [batch..., M, N] is then [batch * M, N]. BERT at 77 tokens and batch 4 is a GEMM of
// 308 rows, where 4 batches of 77 rows would compute 128 rows of 64-row tiles each.
bool FoldsBatchIntoRows(const GemmPrep& prep) {
  const GemmPlan& plan = prep.plan;
  if (prep.batch <= 1) return false;
  const int64_t rows = prep.batch * prep.m;
  if (rows * (plan.gated ? 2 * prep.n : prep.n) >= (int64_t{1} << 31)) return false;
  for (size_t i = 0; i < plan.loops.size(); ++i) {
    const LoopPlan& l = plan.loops[i];
    if (l.a.trans || !l.b.chain.empty() || prep.b_batch[i] != 0 || prep.a_batch[i] != prep.m * l.k ||
        rows * l.k >= (int64_t{1} << 31)) {
      return false;
    }
  }
  const Shape& ys = prep.y->shape();
  return std::all_of(plan.loads.begin(), plan.loads.end(),
                     [&](const ElementwiseLoad& load) { return RowsFoldWithBatch(load, ys); });
}

// Whether the sm_80 template's tf32 form takes mainloop `l` of a group marked for TF32
// math: A [M, K] and B [N, K] (the K-major fragments its ldmatrix loads), no
// prologue, K a multiple of 4 (16-byte fp32 rows for cp.async) and twice K an int
// (the template's K in 16-bit units).
bool TakesTf32Mma(const LoopPlan& l) {
  return !l.a.trans && l.b.trans && l.a.chain.empty() && l.b.chain.empty() && l.k % 4 == 0 && l.k < (int64_t{1} << 30);
}

}  // namespace

absl::StatusOr<std::string> BroadcastOffset(const Node& node, const Shape& view, const Shape& shape, bool folded) {
  if (view.size() > shape.size()) return NoKernel(node, "an element-wise input of higher rank than its chain's shape");
  const size_t r = shape.size(), lead = r - view.size();
  std::vector<int64_t> st(r, 0);
  const std::vector<int64_t> dense = DenseStrides(view);
  for (size_t d = 0; d < view.size(); ++d) {
    if (view[d] != 1 && view[d] != shape[lead + d]) return NoKernel(node, "an element-wise input does not broadcast");
    st[lead + d] = view[d] == 1 ? 0 : dense[d];
  }
  return folded ? FoldedRowColOffset(shape, st) : BatchRowColOffset(shape, st);
}

int GemmDTypeKind(DType dt) { return dt == DType::kFloat16 ? 0 : dt == DType::kBFloat16 ? 1 : 2; }

Shape FoldedView(const Shape& view, int64_t rows) {
  if (view.empty()) return Shape{1, 1};
  const bool broadcast = std::all_of(view.begin(), view.end() - 1, [](int64_t d) { return d == 1; });
  return Shape{broadcast ? 1 : rows, view.back()};
}

absl::Status PrepareMatMul(const Node& node, GemmPrep& prep) {
  GemmPlan& plan = prep.plan;
  if (IsFusedGroup(node)) {
    if (absl::Status s = PlanGroup(node, plan); !s.ok()) return s;
  } else if (node.op_type() == "MatMul") {
    LoopPlan loop;
    loop.mm = &node;
    loop.a.stored = loop.a.loaded = node.input(0);
    loop.b.stored = loop.b.loaded = node.input(1);
    loop.b.input = 1;
    if (absl::Status st = SetShapes(node, node, loop); !st.ok()) return st;
    plan.loops.push_back(std::move(loop));
  } else {
    return NoKernel(node, "not a MatMul");
  }
  const Value* y = prep.y = node.output(0);
  const DType dt = prep.dt = plan.loops[0].a.stored->dtype();
  if (!IsFloating(y->dtype())) return NoKernel(node, "non-floating output");
  const Shape& ys = y->shape();
  if (ys.size() < 2) return NoKernel(node, "MatMul output of rank < 2");
  const int64_t m = prep.m = ys[ys.size() - 2], n = prep.n = ys[ys.size() - 1];
  const Shape out_batch(ys.begin(), ys.end() - 2);
  const int64_t batch = prep.batch = NumElements(out_batch);
  if (m <= 0 || n <= 0 || batch <= 0) return NoKernel(node, "empty MatMul");
  if (batch > 65535) return NoKernel(node, "batch > 65535");
  if (m * n >= (int64_t{1} << 31)) return NoKernel(node, "MatMul output of 2^31 or more elements per batch");

  GemmVariant& variant = prep.variant;
  variant.mainloops.clear();
  std::vector<int64_t>& a_batch = prep.a_batch;
  std::vector<int64_t>& b_batch = prep.b_batch;
  int64_t& k_total = prep.k_total;
  variant.simt = dt == DType::kFloat32;
  variant.tf32 = variant.simt && std::all_of(plan.loops.begin(), plan.loops.end(),
                                             [](const LoopPlan& l) { return MarkedForTf32(*l.mm); });
  for (const LoopPlan& l : plan.loops) {
    const Value* a = l.a.stored;
    const Value* b = l.b.stored;
    if ((dt != DType::kFloat16 && dt != DType::kBFloat16 && !variant.simt) || a->dtype() != dt || b->dtype() != dt) {
      return NoKernel(node, absl::StrCat("MatMul of ", DTypeName(a->dtype()), " x ", DTypeName(b->dtype()),
                                         " (kiln's GEMMs take two f16, bf16 or f32 operands)"));
    }
    if (l.m != m || l.n != (plan.gated ? 2 * n : n)) return NoKernel(node, "inconsistent MatMul shapes");
    if (l.k <= 0) return NoKernel(node, "MatMul with K = 0");
    if (m * l.k >= (int64_t{1} << 31) || l.k * l.n >= (int64_t{1} << 31)) {
      return NoKernel(node, "MatMul operand of 2^31 or more elements per batch");
    }
    k_total += l.k;
    auto batch_stride = [&](const Value* v, int64_t per) -> absl::StatusOr<int64_t> {
      const int64_t nb = NumElements(Shape(v->shape().begin(), v->shape().end() - 2));
      if (nb == 1) return int64_t{0};
      if (nb == batch) return per;
      return NoKernel(node, "MatMul operand broadcast over part of the batch");
    };
    absl::StatusOr<int64_t> ab = batch_stride(a, m * l.k), bb = batch_stride(b, l.k * l.n);
    if (!ab.ok()) return ab.status();
    if (!bb.ok()) return bb.status();
    a_batch.push_back(*ab);
    b_batch.push_back(*bb);
    GemmMainloop ml;
    ml.k = l.k;
    for (int i = 0; i < 2; ++i) {
      const OperandPlan& op = i == 0 ? l.a : l.b;
      GemmOperand& g = i == 0 ? ml.a : ml.b;
      g.trans = op.trans;
      const bool aligned = op.stored->shape().back() % 8 == 0;
      g.element_bytes = static_cast<int>(DTypeSize(op.loaded->dtype()));
      if (variant.simt) {  // gemm_simt.cuh: 16-byte loads of fp32 rows of a multiple of 4
        const bool vec = op.stored->shape().back() % 4 == 0 && op.loaded->dtype() == DType::kFloat32;
        // Without a prologue such an operand can also be copied by cp.async (STAGES > 2).
        g.load = !vec ? GemmLoad::kStagedScalar : op.chain.empty() ? GemmLoad::kAsync : GemmLoad::kStagedVector;
      } else if (!op.chain.empty()) {
        g.load = aligned ? GemmLoad::kStagedVector : GemmLoad::kStagedScalar;
      } else {
        g.load = aligned ? GemmLoad::kAsync : GemmLoad::kStagedScalar;
      }
    }
    variant.mainloops.push_back(ml);
  }
  if (variant.tf32 && std::all_of(plan.loops.begin(), plan.loops.end(), TakesTf32Mma)) {
    // TF32 on the sm_80 template's tensor cores (GEMM_TF32): it sees each fp32 element
    // of the K-major rows as two 16-bit ones, copied by cp.async.
    variant.simt = false;
    for (GemmMainloop& ml : variant.mainloops) {
      ml.k *= 2;
      for (GemmOperand* g : {&ml.a, &ml.b}) {
        g->load = GemmLoad::kAsync;
        g->element_bytes = 2;
      }
    }
  }
  prep.out_shape = ys;
  if (FoldsBatchIntoRows(prep)) {
    prep.folded = true;
    prep.m *= prep.batch;
    prep.batch = 1;
    std::fill(a_batch.begin(), a_batch.end(), 0);
    prep.out_shape = Shape{prep.m, n};
  }
  return absl::OkStatus();
}

}  // namespace kiln::codegen::ops
