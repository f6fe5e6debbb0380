// Tensor-core GEMM kernels (codegen/templates/gemm_sm80.cuh; fp32 operands: the SIMT
// template, gemm_simt.cuh) for MatMul and for the MatMul-anchored fused groups: the
// operands' layouts (trans_a / trans_b), a prologue chain per operand and the
// epilogue chain (each member's expression from
// codegen/ops/pointwise.cc, composed by ComposeElementwise) in fp32 registers, and
// the two mainloops of a dual-matmul.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codegen/kernel_cache.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/gemm_source.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "graph/fused_group.h"
#include "graph/tf32_math.h"

namespace kiln::codegen::ops {
namespace {

// One operand of a mainloop: the node input loaded (the operand itself, or the
// group input its prologue chain starts from), the MatMul's operand value (its stored
// shape) and the prologue functor's code.
struct OperandPlan {
  int input = 0;                     // node input index of the loaded tensor
  const Value* stored = nullptr;     // the MatMul operand (body or node value)
  const Value* loaded = nullptr;     // the loaded tensor (body or node value)
  bool trans = false;
  std::vector<const Node*> chain;    // prologue members, in evaluation order
  std::string code, result = "x";    // functor statements and result (of `x`)
  std::vector<ElementwiseLoad> loads;  // group inputs the functor reads (g<l>)
};

struct LoopPlan {
  const Node* mm = nullptr;
  OperandPlan a, b;
  int64_t m = 0, n = 0, k = 0;
};

// What the kernel computes: one or two mainloops, then the epilogue chain.
struct GemmPlan {
  std::shared_ptr<const Graph> body;  // a group's body, which the plan's values point into
  std::vector<LoopPlan> loops;
  std::string epilogue_code;  // statements computing the result from `acc`
  std::string result = "acc";
  std::vector<ElementwiseLoad> loads;  // group inputs the epilogue reads (g<l>)
  EpilogueWork epilogue_work = EpilogueWork::kNone;  // for the sm90 tile costs
  // A last op that the sm90 TMA-store epilogue applies to the packed 16-bit result
  // instead: a ReLU (relu(round(x)) == round(relu(x)), exact), or GELU's tanh form
  // for an fp16 result (fp16x2 arithmetic, on the rounded input). The packed function
  // ("kiln_relu_f16x2", templates/pointwise.cuh) and the value it takes (the op's
  // input), else empty.
  std::string packed_tail, tail_input;
};

// Offset of element (batch, row, col) of an operand of shape `view` broadcast
// against `shape` ([batch..., R, C]).
// `folded`: the offset as FoldedRowColOffset gives it (`row` over the batch too).
absl::StatusOr<std::string> BroadcastOffset(const Node& node, const Shape& view, const Shape& shape,
                                            bool folded = false) {
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
      return NoKernel(group, absl::StrCat("prologue member ", p->Describe(), " is not element-wise over ",
                                          ShapeToString(shape)));
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
  if (last != nullptr && std::find(epilogue.begin(), epilogue.end(), last) != epilogue.end() &&
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

// The template's element kind of a loaded dtype (0 fp16, 1 bf16, 2 fp32).
int Kind(DType dt) { return dt == DType::kFloat16 ? 0 : dt == DType::kBFloat16 ? 1 : 2; }

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

// `view`, a load that RowsFoldWithBatch, against the folded output [rows, N]: [1, n]
// where it is broadcast over the batch and rows, else [rows, n].
Shape FoldedView(const Shape& view, int64_t rows) {
  if (view.empty()) return Shape{1, 1};
  const bool broadcast = std::all_of(view.begin(), view.end() - 1, [](int64_t d) { return d == 1; });
  return Shape{broadcast ? 1 : rows, view.back()};
}

// Everything GenerateMatMulGroup knows before it picks a tile config: the problem as
// the kernels compute it, with a batch that folds into the rows (FoldsBatchIntoRows)
// already folded (m = batch * M, batch 1, a_batch 0, out_shape [batch * M, N]).
struct GemmPrep {
  GemmPlan plan;
  GemmVariant variant;
  std::vector<int64_t> a_batch, b_batch;
  int64_t m = 0, n = 0, batch = 1, k_total = 0;
  DType dt = DType::kFloat16;
  const Value* y = nullptr;
  bool folded = false;
  Shape out_shape;  // C as the kernels see it: y's shape, or [batch * M, N] folded

  // An epilogue load's view against out_shape.
  Shape View(const Shape& view) const { return folded ? FoldedView(view, m) : view; }
};

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
  if (rows * prep.n >= (int64_t{1} << 31)) return false;
  for (size_t i = 0; i < plan.loops.size(); ++i) {
    const LoopPlan& l = plan.loops[i];
    if (l.a.trans || !l.b.chain.empty() || prep.b_batch[i] != 0 ||
        prep.a_batch[i] != prep.m * l.k || rows * l.k >= (int64_t{1} << 31)) {
      return false;
    }
  }
  const Shape& ys = prep.y->shape();
  return std::all_of(plan.loads.begin(), plan.loads.end(),
                     [&](const ElementwiseLoad& load) { return RowsFoldWithBatch(load, ys); });
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
    if (l.m != m || l.n != n) return NoKernel(node, "inconsistent MatMul shapes");
    if (l.k <= 0) return NoKernel(node, "MatMul with K = 0");
    if (m * l.k >= (int64_t{1} << 31) || l.k * n >= (int64_t{1} << 31)) {
      return NoKernel(node, "MatMul operand of 2^31 or more elements per batch");
    }
    k_total += l.k;
    auto batch_stride = [&](const Value* v, int64_t per) -> absl::StatusOr<int64_t> {
      const int64_t nb = NumElements(Shape(v->shape().begin(), v->shape().end() - 2));
      if (nb == 1) return int64_t{0};
      if (nb == batch) return per;
      return NoKernel(node, "MatMul operand broadcast over part of the batch");
    };
    absl::StatusOr<int64_t> ab = batch_stride(a, m * l.k), bb = batch_stride(b, l.k * n);
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
        g.load = vec ? GemmLoad::kStagedVector : GemmLoad::kStagedScalar;
      } else if (!op.chain.empty()) {
        g.load = aligned ? GemmLoad::kStagedVector : GemmLoad::kStagedScalar;
      } else {
        g.load = aligned ? GemmLoad::kAsync : GemmLoad::kStagedScalar;
      }
    }
    variant.mainloops.push_back(ml);
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

std::string HashPrefix(absl::string_view text) { return Sha256Hex(text).substr(0, 16); }

}  // namespace

int64_t GemmProblem::KTotal() const {
  int64_t t = 0;
  for (int64_t x : k) t += x;
  return t;
}

double GemmProblem::Flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(KTotal()) *
         static_cast<double>(batch);
}

absl::StatusOr<GemmProblem> DescribeMatMulGroup(const Node& node) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  GemmProblem p;
  p.m = prep.m;
  p.n = prep.n;
  p.batch = prep.batch;
  p.dtype = prep.dt;
  p.variant = prep.variant;
  std::string hashed = absl::StrCat("out ", DTypeName(prep.y->dtype()), "\n");
  auto loads_text = [&](const std::vector<ElementwiseLoad>& loads) {
    std::string t;
    for (const ElementwiseLoad& l : loads) {
      absl::StrAppend(&t, " load ", DTypeName(node.input(l.input)->dtype()), ShapeToString(l.view), " ",
                      static_cast<int>(l.domain));
    }
    return t;
  };
  for (size_t i = 0; i < prep.plan.loops.size(); ++i) {
    const LoopPlan& l = prep.plan.loops[i];
    p.k.push_back(l.k);
    if (i > 0) p.layout += "+";
    p.layout += l.a.trans ? "T" : "N";
    p.layout += l.b.trans ? "T" : "N";
    if (prep.batch > 1 && prep.a_batch[i] == 0) p.layout += "a";
    if (prep.batch > 1 && prep.b_batch[i] == 0) p.layout += "b";
    for (const OperandPlan* op : {&l.a, &l.b}) {
      absl::StrAppend(&hashed, "operand ", DTypeName(op->loaded->dtype()), ShapeToString(op->stored->shape()), "\n");
      for (const Node* c : op->chain) absl::StrAppend(&hashed, " ", c->op_type());
      absl::StrAppend(&hashed, "\n", op->code, "return ", op->result, ";", loads_text(op->loads), "\n");
    }
  }
  if (prep.variant.tf32) absl::StrAppend(&hashed, "tf32\n");
  absl::StrAppend(&hashed, "epilogue\n", prep.plan.epilogue_code, "return ", prep.plan.result, ";",
                  loads_text(prep.plan.loads), "\n");
  std::vector<std::string> ops;
  std::string pattern = "MatMul";
  if (prep.plan.body != nullptr) {
    pattern = node.GetString("pattern", "").value_or("group");
    for (const Node* b : prep.plan.body->nodes()) ops.push_back(b->op_type());
  }
  p.signature = absl::StrCat(pattern, "[", absl::StrJoin(ops, ","), "]#", HashPrefix(hashed));
  return p;
}

namespace {

// The prologue of operand `op` ('a' or 'b') as both template families take it:
// `struct kiln_prologue_<which> { float operator()(float x, int row, int col, int
// batch) }` over the stored operand's coordinates, reading kernel parameters
// p<which><l> (`params`, ", const kiln_f16* __restrict__ pa0"), built by `object`
// ("kiln_prologue_a{pa0}"); `args` are the launch args of those parameters.
struct PrologueSource {
  std::string params, functor, object;
  std::vector<int> args;
};
// `folded`: the GEMM's batch folds into its rows (GemmPrep::folded), so the functor
// gets the folded row and batch 0.
absl::StatusOr<PrologueSource> MakePrologueSource(const Node& node, const OperandPlan& op, char which, bool folded) {
  PrologueSource p;
  std::string members, loads, init;
  for (size_t l = 0; l < op.loads.size(); ++l) {
    const Value* v = node.input(op.loads[l].input);
    const std::string param = absl::StrCat("p", std::string(1, which), l);
    absl::StrAppend(&p.params, ", ", Param(v->dtype(), true, param));
    absl::StrAppend(&members, "  ", Param(v->dtype(), true, absl::StrCat("p", l)), ";\n");
    absl::StrAppend(&init, l ? ", " : "", param);
    absl::StatusOr<std::string> off = BroadcastOffset(node, op.loads[l].view, op.stored->shape(), folded);
    if (!off.ok()) return off.status();
    absl::StrAppend(&loads, "    const ", DomainType(op.loads[l].domain), " g", l, " = ",
                    LoadAs(v->dtype(), op.loads[l].domain, absl::StrCat("p", l), *off), ";\n");
    p.args.push_back(InputArg(node, op.loads[l].input));
  }
  p.functor = absl::StrCat("// The prologue of ", which == 'a' ? "A" : "B", " (", op.chain.size(), " op(s) from ",
                           op.loaded->TypeString(), "), at (row, col) of the stored ",
                           ShapeToString(op.stored->shape()), ".\nstruct kiln_prologue_", std::string(1, which),
                           " {\n  static constexpr bool kIdentity = false;\n", members,
                           "  __device__ __forceinline__ float operator()(float x, int row, int col, int batch) const {\n",
                           loads, op.code, "    return ", op.result, ";\n  }\n};\n");
  p.object = absl::StrCat("kiln_prologue_", std::string(1, which), "{", init, "}");
  return p;
}

// The kernel source's comment line describing the group and its products:
// "// fused group (PATTERN): MatMul f16[..] x f16[..] [+ MatMul ...] -> f16[..]\n". No
// node name: identical layers then share one module (one NVRTC compile).
std::string GroupComment(const Node& node, const GemmPlan& plan, const Value& y) {
  std::string s = IsFusedGroup(node)
                      ? absl::StrCat("// fused group (", node.GetString("pattern", "").value_or(""), "):")
                      : std::string("//");
  for (const LoopPlan& l : plan.loops) {
    absl::StrAppend(&s, l.mm == plan.loops[0].mm ? " " : " + ", "MatMul ", l.a.stored->TypeString(),
                    l.a.trans ? " (trans_a)" : "", " x ", l.b.stored->TypeString(), l.b.trans ? " (trans_b)" : "");
  }
  absl::StrAppend(&s, " -> ", y.TypeString(), "\n");
  return s;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroup(const Node& node, const GemmConfig* config,
                                                              int sm_count) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  const GemmPlan& plan = prep.plan;
  const GemmVariant& variant = prep.variant;
  const std::vector<int64_t>& a_batch = prep.a_batch;
  const std::vector<int64_t>& b_batch = prep.b_batch;
  const int64_t m = prep.m, n = prep.n, batch = prep.batch;
  const DType dt = prep.dt;
  const Value* y = prep.y;
  const Shape& ys = prep.out_shape;
  GemmConfig cfg;
  if (config != nullptr) {
    cfg = *config;
  } else {
    GemmProblem problem;
    problem.m = m;
    problem.n = n;
    problem.batch = batch;
    for (const LoopPlan& l : plan.loops) problem.k.push_back(l.k);
    problem.variant = variant;
    cfg = HeuristicGemmConfig(problem, sm_count);
  }
  if (absl::Status valid = VerifyGemmConfig(cfg, variant); !valid.ok()) {
    if (config != nullptr) return valid;
    return NoKernel(node, absl::StrCat("no tile config for this form: ", valid.message()));
  }
  const int64_t tiles = ((m + cfg.bm - 1) / cfg.bm) * ((n + cfg.bn - 1) / cfg.bn);
  if (tiles >= (int64_t{1} << 31)) return NoKernel(node, "too many tiles");

  KernelLaunch launch;
  launch.family = variant.simt ? "gemm_simt" : "gemm_sm80";
  launch.args = {0};
  for (const LoopPlan& l : plan.loops) {
    launch.args.push_back(InputArg(node, l.a.input));
    launch.args.push_back(InputArg(node, l.b.input));
  }
  // Prologue functors (kernel parameters pa<l> / pb<l>), then the epilogue's (e<l>).
  std::string functors, prologue_params, prologue_objects[2];
  for (int i = 0; i < 2; ++i) {
    const OperandPlan& op = i == 0 ? plan.loops[0].a : plan.loops[0].b;
    if (op.chain.empty()) {
      prologue_objects[i] = "kiln_gemm_identity{}";
      continue;
    }
    absl::StatusOr<PrologueSource> pro = MakePrologueSource(node, op, i == 0 ? 'a' : 'b', prep.folded);
    if (!pro.ok()) return pro.status();
    absl::StrAppend(&prologue_params, pro->params);
    absl::StrAppend(&functors, pro->functor);
    prologue_objects[i] = pro->object;
    launch.args.insert(launch.args.end(), pro->args.begin(), pro->args.end());
  }
  GemmEpilogueSource epilogue;
  if (absl::Status st = AppendGemmEpilogueLoads(
          node, plan.loads, [&](const Shape& view) { return BroadcastOffset(node, prep.View(view), ys); }, epilogue,
          launch);
      !st.ok()) {
    return st;
  }

  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n", GroupComment(node, plan, *y));
  auto mode = GemmLoadMode;
  const LoopPlan& l0 = plan.loops[0];
  const GemmMainloop& v0 = variant.mainloops[0];
  absl::StrAppend(&src, "#define GEMM_BF16 ", dt == DType::kBFloat16 ? 1 : 0, "\n#define GEMM_M ", m,
                  "\n#define GEMM_N ", n, "\n#define GEMM_K ", l0.k, "\n#define GEMM_A_BATCH ", a_batch[0],
                  "LL\n#define GEMM_B_BATCH ", b_batch[0], "LL\n#define GEMM_C_BATCH ", batch > 1 ? m * n : 0,
                  "LL\n#define GEMM_TRANS_A ", l0.a.trans ? 1 : 0, "\n#define GEMM_TRANS_B ", l0.b.trans ? 1 : 0,
                  "\n#define GEMM_A_MODE ", mode(v0.a.load), "\n#define GEMM_B_MODE ", mode(v0.b.load),
                  "\n#define GEMM_A_KIND ", Kind(l0.a.loaded->dtype()), "\n#define GEMM_B_KIND ",
                  Kind(l0.b.loaded->dtype()), "\n#define GEMM_A_T ", StorageTypeName(l0.a.loaded->dtype()),
                  "\n#define GEMM_B_T ", StorageTypeName(l0.b.loaded->dtype()), "\n#define GEMM_PROLOGUE_A ",
                  prologue_objects[0], "\n#define GEMM_PROLOGUE_B ", prologue_objects[1], "\n");
  if (plan.loops.size() == 2) {
    const LoopPlan& l1 = plan.loops[1];
    const GemmMainloop& v1 = variant.mainloops[1];
    absl::StrAppend(&src, "#define GEMM_DUAL 1\n#define GEMM_K2 ", l1.k, "\n#define GEMM_A2_BATCH ", a_batch[1],
                    "LL\n#define GEMM_B2_BATCH ", b_batch[1], "LL\n#define GEMM_TRANS_A2 ", l1.a.trans ? 1 : 0,
                    "\n#define GEMM_TRANS_B2 ", l1.b.trans ? 1 : 0, "\n#define GEMM_A2_MODE ", mode(v1.a.load),
                    "\n#define GEMM_B2_MODE ", mode(v1.b.load), "\n");
  }
  if (variant.simt && y->dtype() == DType::kFloat32 && n % 4 == 0) absl::StrAppend(&src, "#define GEMM_OUT_VEC 1\n");
  absl::StrAppend(&src, GemmSourceTail(cfg, y->dtype(), prologue_params, functors, epilogue, plan.epilogue_code,
                                       plan.result, variant.simt));
  launch.source = std::move(src);
  if (absl::Status st = SetGemmGridAndWorkspace(cfg, tiles, batch, launch); !st.ok()) {
    if (config != nullptr) return st;
    return NoKernel(node, std::string(st.message()));
  }
  launch.block = {static_cast<uint32_t>(cfg.warps_m * cfg.warps_n * 32), 1, 1};
  launch.shared_bytes = static_cast<uint32_t>(GemmSharedBytes(cfg, variant));
  return std::vector<KernelLaunch>{std::move(launch)};
}

namespace {

// The problem's shape, layouts and operands as the Hopper family reads them.
GemmFamilyPlan FamilyProblem(const GemmPrep& prep) {
  const GemmPlan& plan = prep.plan;
  const LoopPlan& l0 = plan.loops[0];
  GemmFamilyPlan f;
  f.m = prep.m;
  f.n = prep.n;
  f.k = l0.k;
  f.batch = prep.batch;
  f.a_batch = prep.a_batch[0];
  f.b_batch = prep.b_batch[0];
  f.trans_a = l0.a.trans;
  f.trans_b = l0.b.trans;
  f.dual = plan.loops.size() > 1;
  f.tf32 = prep.variant.tf32;
  f.dtype = prep.dt;
  f.out_dtype = prep.y->dtype();
  f.a_input = l0.a.input;
  f.b_input = l0.b.input;
  f.a_shape = l0.a.stored->shape();
  f.b_shape = l0.b.stored->shape();
  if (plan.loops.size() > 1) {
    const LoopPlan& l1 = plan.loops[1];
    f.k2 = l1.k;
    f.a2_batch = prep.a_batch[1];
    f.b2_batch = prep.b_batch[1];
    f.trans_a2 = l1.a.trans;
    f.trans_b2 = l1.b.trans;
    f.a2_input = l1.a.input;
    f.b2_input = l1.b.input;
    f.a2_shape = l1.a.stored->shape();
    f.b2_shape = l1.b.stored->shape();
  }
  // A folded batch: A is read as one [batch * M, K] matrix (a 2-D tensor map).
  if (prep.folded) {
    f.a_shape = Shape{f.m, f.k};
    if (f.dual) f.a2_shape = Shape{f.m, f.k2};
  }
  return f;
}

}  // namespace

absl::StatusOr<GemmFamilyPlan> PlanGemmForFamily(const Node& node) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  if (prep.variant.simt && !prep.variant.tf32) {
    return NoKernel(node,
                    "sm90 GEMM family: f32 operands without TF32 math (the SIMT template takes them; "
                    "--precision tf32 runs them on tensor cores)");
  }
  const GemmPlan& plan = prep.plan;
  const LoopPlan& l0 = plan.loops[0];
  GemmFamilyPlan f = FamilyProblem(prep);
  const Shape& ys = prep.out_shape;
  f.prologue_a = !l0.a.chain.empty();
  f.prologue_b = !l0.b.chain.empty();
  f.a_loaded_dtype = l0.a.loaded->dtype();
  if (f.prologue_a) {  // the same functor as the sm_80 template's (parameters pa<l>)
    absl::StatusOr<PrologueSource> pro = MakePrologueSource(node, l0.a, 'a', prep.folded);
    if (!pro.ok()) return pro.status();
    f.prologue_params = std::move(pro->params);
    f.prologue_a_functor = std::move(pro->functor);
    f.prologue_a_object = std::move(pro->object);
    f.prologue_args = std::move(pro->args);
  }
  GemmEpilogueSource epilogue;
  KernelLaunch loads;
  if (absl::Status st = AppendGemmEpilogueLoads(
          node, plan.loads, [&](const Shape& view) { return BroadcastOffset(node, prep.View(view), ys); },
          epilogue, loads);
      !st.ok()) {
    return st;
  }
  f.epilogue_args = std::move(loads.args);
  f.epilogue_defines = absl::StrCat("#define KILN_EPILOGUE_PARAMS ", epilogue.params, "\n#define KILN_EPILOGUE_ARGS ",
                                    epilogue.args, "\n");
  // Loads that depend on the output column alone (a bias; a per-channel scale): the
  // sm90 template prefetches the lines a tile's epilogue will read while its
  // mainloop runs (KILN_EPILOGUE_PREFETCH in gemm_sm90.cuh), and the TMA-store
  // epilogue holds 16-bit ones in registers, two columns a register, loaded while
  // the tile's last wgmmas run (kiln_epilogue_columns, kiln_epilogue_at).
  // 16-bit loads dense along the output's rows (a residual) are read there a column
  // pair at a time, one 4-byte load for the two elements a thread's fragment holds
  // (kiln_epilogue_at2): half the load instructions, which bound that epilogue.
  std::string prefetch, members, column_loads, values, unpack, at_loads, paired, unpaired, aligned, prefetch_rows;
  int registers = 0;
  for (size_t l = 0; l < plan.loads.size(); ++l) {
    const ElementwiseLoad& ld = plan.loads[l];
    const Shape view = prep.View(ld.view);
    const bool dense_rows = !view.empty() && ld.strides.empty() && ld.offset == 0 && ys.size() >= 2 &&
                            view.back() == ys.back() && ys.back() > 1;
    const bool column = dense_rows && std::all_of(view.begin(), view.end() - 1, [](int64_t d) { return d == 1; });
    if (column) absl::StrAppend(&prefetch, " kiln_sm90_prefetch_columns(e", l, ", first, t);");
    const DType dt = node.input(ld.input)->dtype();
    const bool sixteen = dt == DType::kFloat16 || dt == DType::kBFloat16;
    const std::string g = absl::StrCat("g", l), e = absl::StrCat("e", l);
    if (column && sixteen && ld.domain == Domain::kFloat) {
      const std::string r = absl::StrCat("r", registers);
      absl::StrAppend(&members, "  unsigned ", r, "[BN / 8];  // ", e, "\n");
      absl::StrAppend(&column_loads, "    kiln_column_pairs(", r, ", ", e, ", first, bound);\n");
      absl::StrAppend(&values, "  float ", g, ";\n");
      absl::StrAppend(&unpack, "    kiln_unpack_", FloatSuffix(dt), "x2(", r, "[j], lo.", g, ", hi.", g, ");\n");
      absl::StrAppend(&at_loads, "  const float ", g, " = kiln_c.", g, ";\n");
      ++registers;
      continue;
    }
    // Dense rows of even length: every other stride of the offset is a multiple of
    // the row, so columns col (even) and col + 1 are one aligned 4-byte word when
    // the pointer is (KILN_EPILOGUE_PAIRS_ALIGNED). Only operands that vary along
    // C's rows: one broadcast over them (a bias per batch entry) is loaded once per
    // column already, the compiler sharing it between the rows, and pairs measured
    // slower there (session 1 of
    // benchmarks/results/gemm_sm90_residual_pairs_ncu_h100_2026-11-26c.csv).
    const size_t rank = ys.size();
    const bool per_row = view.size() >= 2 && view[view.size() - 2] == ys[rank - 2] && ys[rank - 2] > 1;
    if (dense_rows && per_row && sixteen && ld.domain == Domain::kFloat && ys.back() % 2 == 0) {
      const std::string& off = epilogue.offset[l];
      absl::StrAppend(&values, "  float ", g, ";\n");
      absl::StrAppend(&at_loads, "  const float ", g, " = kiln_c.", g, ";\n");
      absl::StrAppend(&paired, "    kiln_unpack_", FloatSuffix(dt), "x2(__ldg(reinterpret_cast<const unsigned*>(", e,
                      " + (", off, "))), kiln_c0.", g, ", kiln_c1.", g, ");\n");
      absl::StrAppend(&unpaired, "    kiln_c0.", g, " = ", LoadAs(dt, ld.domain, e, off), ";\n    kiln_c1.", g,
                      " = ", LoadAs(dt, ld.domain, e, absl::StrCat("(", off, ") + 1")), ";\n");
      absl::StrAppend(&aligned, aligned.empty() ? "" : " && ", "(reinterpret_cast<unsigned long long>(", e,
                      ") & 3) == 0");
      absl::StrAppend(&prefetch_rows, " kiln_sm90_prefetch_row(", e, " + (", off, "), bytes);");
      continue;
    }
    absl::StrAppend(&at_loads, epilogue.load[l]);
  }
  if (!prefetch.empty()) absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PREFETCH(first, t)", prefetch, "\n");
  f.epilogue_function = GemmEpilogueFunction(epilogue, plan.epilogue_code, plan.result);
  // The TMA-store epilogue's form of the functor: column operands from registers, and
  // without a last op that it applies to the packed result instead (KILN_EPILOGUE_TAIL).
  if (registers > 0 || !paired.empty() || !plan.packed_tail.empty()) {
    absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_AT 1\n#define KILN_EPILOGUE_COLUMNS ", registers,
                    "\n");
    if (!aligned.empty()) absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PAIRS_ALIGNED (", aligned, ")\n");
    if (!prefetch_rows.empty()) {
      absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PREFETCH_ROWS(row, col, batch, bytes)",
                      prefetch_rows, "\n");
    }
    if (!plan.packed_tail.empty()) {
      absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_TAIL(x) ", plan.packed_tail, "(x)\n");
    }
    absl::StrAppend(
        &f.epilogue_function,
        "// The 16-bit column operands in registers: r<i>[j] holds columns first + 8 j and\n"
        "// first + 8 j + 1 (zeros at or past `bound`); at(j, lo, hi) gives columns first + 8 j\n"
        "// and first + 8 j + 1 of each as fp32, once for all the rows of the columns.\n"
        "struct kiln_epilogue_column_values {\n", values, "};\nstruct kiln_epilogue_columns {\n", members,
        "  __device__ __forceinline__ void load(int first, int bound KILN_EPILOGUE_PARAMS) {\n", column_loads,
        "  }\n  __device__ __forceinline__ void at(int j, kiln_epilogue_column_values& lo, "
        "kiln_epilogue_column_values& hi) const {\n", unpack, "  }\n};\n"
        "// kiln_epilogue with the column operands from kiln_c",
        plan.packed_tail.empty() ? "" : absl::StrCat(", up to ", plan.packed_tail, "'s input"),
        ".\nstatic __device__ __forceinline__ float kiln_epilogue_at(float acc, int row, int col, int batch, "
        "const kiln_epilogue_column_values& kiln_c KILN_EPILOGUE_PARAMS) {\n",
        at_loads, plan.epilogue_code, "  return ", plan.packed_tail.empty() ? plan.result : plan.tail_input,
        ";\n}\n"
        "// kiln_epilogue_at on columns col and col + 1 of a row (kiln_c0, kiln_c1: their\n"
        "// column operands), the row-dense operands one 4-byte load for both (PAIRED: the\n"
        "// pointers are 4-byte aligned, KILN_EPILOGUE_PAIRS_ALIGNED) or two 2-byte loads.\n"
        "template <bool PAIRED>\n"
        "static __device__ __forceinline__ void kiln_epilogue_at2(float& acc0, float& acc1, int row, int col, "
        "int batch, kiln_epilogue_column_values kiln_c0, kiln_epilogue_column_values kiln_c1 "
        "KILN_EPILOGUE_PARAMS) {\n",
        paired.empty() ? "" : absl::StrCat("  if (PAIRED) {\n", paired, "  } else {\n", unpaired, "  }\n"),
        "  acc0 = kiln_epilogue_at(acc0, row, col, batch, kiln_c0 KILN_EPILOGUE_ARGS);\n"
        "  acc1 = kiln_epilogue_at(acc1, row, col + 1, batch, kiln_c1 KILN_EPILOGUE_ARGS);\n}\n");
  }
  f.epilogue_work = plan.epilogue_work;
  f.description = GroupComment(node, plan, *prep.y);
  for (const ElementwiseLoad& ld : plan.loads) {
    f.epilogue_loads.push_back({ld.input, prep.View(ld.view), ld.strides.empty() && ld.offset == 0});
  }
  f.out_shape = ys;
  return f;
}

}  // namespace kiln::codegen::ops
