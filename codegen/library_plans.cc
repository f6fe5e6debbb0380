// The plans of kiln's cuBLASLt and cuDNN calls (codegen/library_plans.h).
#include "codegen/library_plans.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/fused_group.h"
#include "graph/ops/window.h"
#include "graph/symbolic_shapes.h"
#include "graph/tf32_math.h"

namespace kiln::codegen::libplan {
namespace {

// f32 data of a node marked for TF32 math (graph/tf32_math.h).
bool MarkedTf32(const Node& node, DType dtype) { return dtype == DType::kFloat32 && MarkedForTf32(node); }

// Checks what every library kernel needs: typed values, one float storage dtype.
absl::Status CheckTypes(const Node& node, int min_inputs, int max_inputs) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return node.Unsupported(absl::StrCat("domain '", node.domain(), "' has no library kernel"));
  }
  if (node.num_inputs() < min_inputs || node.num_inputs() > max_inputs || node.num_outputs() != 1) {
    return node.Unsupported(absl::StrCat("unexpected number of inputs/outputs (", ShapesOf(node), ")"));
  }
  if (node.output(0) == nullptr || !node.output(0)->has_type()) {
    return node.Unsupported("output has no inferred type");
  }
  const DType dtype = node.output(0)->dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return node.Unsupported(absl::StrCat("dtype ", DTypeName(dtype), " has no library kernel (f32, f16, bf16)"));
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) {
      if (i < min_inputs) return node.Unsupported(absl::StrCat("input ", i, " is absent"));
      continue;
    }
    if (!v->has_type()) return node.Unsupported(absl::StrCat("input ", i, " has no inferred type"));
    if (v->dtype() != dtype) {
      return node.Unsupported(absl::StrCat("mixed dtypes (", ShapesOf(node), ")"));
    }
  }
  return absl::OkStatus();
}

Shape AsMatrixA(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape AsMatrixB(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }

absl::Status CheckGemmSize(const Node& node, const GemmPlan& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0) {
    return node.Unsupported(absl::StrCat("zero-sized matrix product has no library kernel (", ShapesOf(node), ")"));
  }
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.batch > INT32_MAX) {
    return node.Unsupported(absl::StrCat("matrix dimensions exceed 2^31 (", ShapesOf(node), ")"));
  }
  return absl::OkStatus();
}

// MatMul's layout flags (graph/ops/mat_mul.cc): trans_a / trans_b say that the
// operand is stored with its last two dims swapped (A as [.., K, M], B as [.., N, K]).
// They become cuBLASLt's TRANSB / TRANSA (its operands are ours swapped, see the top).

// ---------------------------------------------------------------------------
// Fused groups whose body one library call runs.

// A group body that is a chain: the anchor, then epilogue nodes each reading the
// previous node's output, the last writing the group's only output. Intermediate
// values are read by the next node only (not by another member, not outside).
struct Chain {
  std::shared_ptr<const Graph> body;
  std::vector<const Node*> nodes;  // anchor first
};

absl::StatusOr<Chain> ParseChain(const Node& group, std::initializer_list<absl::string_view> patterns,
                                 const std::string& anchor_op) {
  absl::StatusOr<std::string> pattern = group.GetString("pattern", "");
  if (!pattern.ok()) return pattern.status();
  if (std::find(patterns.begin(), patterns.end(), *pattern) == patterns.end()) {
    return group.Unsupported(absl::StrCat("pattern '", *pattern, "' has no library kernel"));
  }
  if (group.num_outputs() != 1 || group.output(0) == nullptr || !group.output(0)->has_type()) {
    return group.Unsupported("a library kernel writes exactly one typed output");
  }
  absl::StatusOr<std::shared_ptr<const Graph>> body = FusedGroupBody(group);
  if (!body.ok()) return body.status();
  Chain chain;
  chain.body = std::move(*body);
  const Graph& g = *chain.body;
  if (g.outputs().size() != 1 || static_cast<int>(g.inputs().size()) != group.num_inputs()) {
    return group.Unsupported("body inputs/outputs do not match the group's");
  }
  const Node* anchor = nullptr;
  for (const Node* n : g.nodes()) {
    if (n->op_type() != anchor_op) continue;
    if (anchor != nullptr) return group.Unsupported(absl::StrCat("body has more than one ", anchor_op));
    anchor = n;
  }
  if (anchor == nullptr) return group.Unsupported(absl::StrCat("body has no ", anchor_op));
  for (const Node* cur = anchor;;) {
    chain.nodes.push_back(cur);
    if (!cur->domain().empty() && cur->domain() != "ai.onnx") {
      return group.Unsupported(absl::StrCat("body node ", cur->Describe(), " is not an ONNX op"));
    }
    if (cur->num_outputs() != 1 || cur->output(0) == nullptr || !cur->output(0)->has_type()) {
      return group.Unsupported(absl::StrCat("body node ", cur->Describe(), " does not have one typed output"));
    }
    const Value* v = cur->output(0);
    if (v == g.outputs()[0]) break;
    if (g.IsGraphOutput(v) || v->uses().size() != 1) {
      return group.Unsupported(absl::StrCat("intermediate value '", v->name(), "' is read outside the epilogue chain"));
    }
    cur = v->uses()[0].node;
  }
  if (static_cast<int>(chain.nodes.size()) != g.num_nodes()) {
    return group.Unsupported("body nodes outside the anchor's epilogue chain (a prologue?)");
  }
  const Value* out = g.outputs()[0];
  const Value* anchored = anchor->output(0);
  if (out->dtype() != anchored->dtype() || out->shape() != anchored->shape() ||
      group.output(0)->dtype() != out->dtype() || group.output(0)->shape() != out->shape()) {
    return group.Unsupported("the epilogue changes the anchor's dtype or shape");
  }
  for (const Node* n : chain.nodes) {
    if (n->output(0)->dtype() != out->dtype() || n->output(0)->shape() != out->shape()) {
      return group.Unsupported(absl::StrCat("body node ", n->Describe(), " changes the dtype or shape"));
    }
  }
  return chain;
}

// Position of `v` among the body's inputs (= the group node's inputs), -1 if none.
int BodyInput(const Graph& body, const Value* v) {
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    if (body.inputs()[i] == v && v != nullptr) return static_cast<int>(i);
  }
  return -1;
}

// For an Add in the chain: the operand that is not the previous node's output
// (nullptr when both are, or the Add is malformed).
const Value* OtherOperand(const Node& add, const Node& prev) {
  if (add.num_inputs() != 2 || add.input(0) == nullptr || add.input(1) == nullptr) return nullptr;
  if (add.input(0) == prev.output(0) && add.input(1) != prev.output(0)) return add.input(1);
  if (add.input(1) == prev.output(0) && add.input(0) != prev.output(0)) return add.input(0);
  return nullptr;
}

// "matmul+epilogue": MatMul(A, W) [+ Add(bias [N] or [1,N], or a per-batch bias
// [batch.., 1, N] when the MatMul is a strided batch)] [+ Add(residual of the output's
// shape, one matrix)] [+ Relu | Gelu(tanh)], one cuBLASLt call with a BIAS / RELU /
// GELU epilogue and the residual as C. A, W, the bias and the residual are group
// inputs. cuBLASLt's GELU epilogue is the tanh approximation, so erf Gelu is refused.

}  // namespace

std::string ShapesOf(const Node& node) {
  std::vector<std::string> ins, outs;
  for (const Value* v : node.inputs()) ins.push_back(v == nullptr ? "(absent)" : v->TypeString());
  for (const Value* v : node.outputs()) outs.push_back(v == nullptr ? "(absent)" : v->TypeString());
  return absl::StrCat("inputs ", absl::StrJoin(ins, ", "), " -> ", absl::StrJoin(outs, ", "));
}

absl::StatusOr<GemmPlan> PlanMatMul(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 2); !s.ok()) return s;
  const Shape& a = node.input(0)->shape();
  const Shape& b = node.input(1)->shape();
  if (a.empty() || b.empty()) return node.Unsupported(absl::StrCat("scalar operand (", ShapesOf(node), ")"));
  GemmPlan p;
  auto ta = node.GetInt("trans_a", 0);
  auto tb = node.GetInt("trans_b", 0);
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  if ((*ta != 0 && *ta != 1) || (*tb != 0 && *tb != 1)) {
    return node.Unsupported(absl::StrCat("trans_a / trans_b must be 0 or 1 (", ShapesOf(node), ")"));
  }
  p.trans_a = *ta == 1;
  p.trans_b = *tb == 1;
  if ((p.trans_a && a.size() < 2) || (p.trans_b && b.size() < 2)) {
    return node.Unsupported(absl::StrCat("trans_a / trans_b on a 1-D operand (", ShapesOf(node), ")"));
  }
  // The logical (untransposed) shapes: A [.., M, K], B [.., K, N].
  auto swap_last_two = [](Shape s) {
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return s;
  };
  const Shape sa = p.trans_a ? swap_last_two(a) : AsMatrixA(a);
  const Shape sb = p.trans_b ? swap_last_two(b) : AsMatrixB(b);
  p.dtype = node.output(0)->dtype();
  p.tf32 = MarkedTf32(node, p.dtype);
  p.m = sa[sa.size() - 2];
  p.k = sa.back();
  p.n = sb.back();
  if (sb[sb.size() - 2] != p.k) return node.Unsupported(absl::StrCat("inner dimensions differ (", ShapesOf(node), ")"));
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  const int64_t pa = Prod(batch_a), pb = Prod(batch_b);
  if (pb == 1 && (!p.trans_a || pa == 1)) {
    // B is one matrix: A's batch folds into M (A and Y are contiguous). Not for a
    // transposed A: its matrices are [K, M] blocks, not rows of one [batch*M, K].
    p.m *= pa;
  } else if (pb == 1) {
    // B is one matrix shared by a batch of transposed A matrices: strided batch
    // with B's stride 0.
    p.batch = pa;
    p.stride_a = p.m * p.k;
    p.stride_b = 0;
    p.stride_d = p.m * p.n;
  } else if (pa == 1) {
    // A is one matrix broadcast over B's batch.
    p.batch = pb;
    p.stride_a = 0;
    p.stride_b = p.k * p.n;
    p.stride_d = p.m * p.n;
  } else {
    const size_t rank = std::max(batch_a.size(), batch_b.size());
    batch_a.insert(batch_a.begin(), rank - batch_a.size(), 1);
    batch_b.insert(batch_b.begin(), rank - batch_b.size(), 1);
    if (batch_a != batch_b) {
      return node.Unsupported(absl::StrCat(
          "batch dimensions broadcast against each other (only equal batches or a single matrix on one side "
          "have a library kernel; ",
          ShapesOf(node), ")"));
    }
    p.batch = pa;
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
    p.stride_d = p.m * p.n;
  }
  if (node.output(0)->numel() != p.batch * p.m * p.n) {
    return node.Unsupported(absl::StrCat("unexpected output shape (", ShapesOf(node), ")"));
  }
  // fuse-siblings' stacked product on a dynamic graph (fusion/fuse_siblings.h): the
  // matrices keep the distance of the largest sizes, where the Split's pieces start.
  if (absl::StatusOr<int64_t> stride = node.GetInt("out_batch_stride", 0); stride.ok() && *stride != 0) {
    if (p.batch == 1 || *stride < p.m * p.n) {
      return node.Unsupported(absl::StrCat("out_batch_stride ", *stride, " on a product of ", p.batch,
                                           " matrices of ", p.m * p.n, " elements (", ShapesOf(node), ")"));
    }
    p.stride_d = *stride;
  }
  if (absl::Status s = CheckGemmSize(node, p); !s.ok()) return s;
  return p;
}

absl::StatusOr<GemmPlan> PlanGemm(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 3); !s.ok()) return s;
  const Shape& a = node.input(0)->shape();
  const Shape& b = node.input(1)->shape();
  if (a.size() != 2 || b.size() != 2) return node.Unsupported(absl::StrCat("A and B must be matrices (", ShapesOf(node), ")"));
  GemmPlan p;
  p.dtype = node.output(0)->dtype();
  p.tf32 = MarkedTf32(node, p.dtype);
  auto ta = node.GetInt("transA", 0);
  auto tb = node.GetInt("transB", 0);
  auto alpha = node.GetFloat("alpha", 1.f);
  auto beta = node.GetFloat("beta", 1.f);
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  if (!alpha.ok()) return alpha.status();
  if (!beta.ok()) return beta.status();
  p.trans_a = *ta != 0;
  p.trans_b = *tb != 0;
  p.alpha = *alpha;
  p.m = p.trans_a ? a[1] : a[0];
  p.k = p.trans_a ? a[0] : a[1];
  p.n = p.trans_b ? b[0] : b[1];
  if ((p.trans_b ? b[1] : b[0]) != p.k) return node.Unsupported(absl::StrCat("inner dimensions differ (", ShapesOf(node), ")"));
  if (node.output(0)->shape() != Shape{p.m, p.n}) {
    return node.Unsupported(absl::StrCat("unexpected output shape (", ShapesOf(node), ")"));
  }
  if (node.has_input(2) && *beta != 0.f) {
    const Shape& c = node.input(2)->shape();
    if (c.size() > 2) return node.Unsupported(absl::StrCat("C has rank > 2 (", ShapesOf(node), ")"));
    Shape c2 = c;
    c2.insert(c2.begin(), 2 - c2.size(), 1);
    if ((c2[0] != 1 && c2[0] != p.m) || (c2[1] != 1 && c2[1] != p.n)) {
      return node.Unsupported(absl::StrCat("C does not broadcast to [M, N] (", ShapesOf(node), ")"));
    }
    p.beta = *beta;
    p.c_rows = c2[0];
    p.c_cols = c2[1];
    if (p.c_rows == p.m && p.c_cols == p.n) {
      p.c_kind = CKind::kFull;
    } else if (p.c_rows == 1 && p.c_cols == p.n && p.beta == 1.f) {
      p.c_kind = CKind::kBias;
    } else {
      p.c_kind = CKind::kMaterialize;
    }
  }
  if (absl::Status s = CheckGemmSize(node, p); !s.ok()) return s;
  return p;
}

absl::StatusOr<ConvPlan> PlanConv(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 3); !s.ok()) return s;
  absl::StatusOr<int64_t> channels_last = node.GetInt("channels_last", 0);
  if (!channels_last.ok()) return channels_last.status();
  const bool nhwc = *channels_last == 1;
  if (nhwc && node.input(0)->rank() != 4) {
    return node.Unsupported(absl::StrCat("channels_last=1 needs a 2-D convolution (", ShapesOf(node), ")"));
  }
  // The shapes in NCHW order ([N, C, H, W], [M, C/g, KH, KW], [N, M, OH, OW]).
  auto nchw = [&](const Shape& s) { return nhwc && s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; };
  const Shape x = nchw(node.input(0)->shape());
  const Shape wt = nchw(node.input(1)->shape());
  const Shape y = nchw(node.output(0)->shape());
  if (x.size() != 3 && x.size() != 4) {
    return node.Unsupported(absl::StrCat("only 1-D and 2-D convolutions have a library kernel (", ShapesOf(node), ")"));
  }
  if (wt.size() != x.size() || y.size() != x.size()) return node.Unsupported(absl::StrCat("rank mismatch (", ShapesOf(node), ")"));
  for (const Value* v : node.inputs()) {
    if (v != nullptr && v->numel() > INT32_MAX) return node.Unsupported(absl::StrCat("tensor exceeds 2^31 elements (", ShapesOf(node), ")"));
  }
  if (node.output(0)->numel() > INT32_MAX) return node.Unsupported(absl::StrCat("tensor exceeds 2^31 elements (", ShapesOf(node), ")"));
  if (node.output(0)->numel() == 0 || node.input(0)->numel() == 0 || node.input(1)->numel() == 0) {
    return node.Unsupported(absl::StrCat("zero-sized convolution has no library kernel (", ShapesOf(node), ")"));
  }
  const size_t n = x.size() - 2;
  auto group = node.GetInt("group", 1);
  if (!group.ok()) return group.status();
  // Strides, dilations and padding as the CPU reference resolves them.
  absl::StatusOr<kiln::ops::WindowGeometry> win = kiln::ops::ComputeWindow(
      node, Shape(x.begin() + 2, x.end()), std::vector<int64_t>(wt.begin() + 2, wt.end()), /*use_dilations=*/true,
      /*ceil_mode=*/false);
  if (!win.ok()) return win.status();
  const std::vector<int64_t>& begin = win->pads_begin;
  const std::vector<int64_t>& end = win->pads_end;
  for (size_t i = 0; i < n; ++i) {
    if (begin[i] != end[i]) {
      return node.Unsupported(absl::StrCat("asymmetric padding (begin ", ShapeToString(begin), ", end ",
                                           ShapeToString(end), ") has no cuDNN kernel (", ShapesOf(node), ")"));
    }
    // cuDNN's output size for symmetric pads must match the node's.
    if (win->output[i] != y[2 + i]) {
      return node.Unsupported(absl::StrCat("output size does not match cuDNN's convolution arithmetic (",
                                           ShapesOf(node), ")"));
    }
  }
  ConvPlan p;
  p.nhwc = nhwc;
  p.dtype = node.output(0)->dtype();
  p.tf32 = MarkedTf32(node, p.dtype);
  p.group = static_cast<int>(*group);
  p.batch = static_cast<int>(x[0]);
  p.c = static_cast<int>(x[1]);
  p.m = static_cast<int>(wt[0]);
  p.cg = static_cast<int>(wt[1]);
  if (p.group < 1 || p.cg * p.group != p.c || p.m % p.group != 0 || y[0] != x[0] || y[1] != wt[0]) {
    return node.Unsupported(absl::StrCat("inconsistent channels/groups (", ShapesOf(node), ")"));
  }
  const size_t hd = n == 2 ? 2 : 0;  // index of H in the spatial-2 shapes, 0 = absent (1-D)
  if (hd) {
    p.h = static_cast<int>(x[2]);
    p.kh = static_cast<int>(wt[2]);
    p.oh = static_cast<int>(y[2]);
    p.pad_h = static_cast<int>(begin[0]);
    p.stride_h = static_cast<int>(win->strides[0]);
    p.dil_h = static_cast<int>(win->dilations[0]);
  }
  p.w = static_cast<int>(x.back());
  p.kw = static_cast<int>(wt.back());
  p.ow = static_cast<int>(y.back());
  p.pad_w = static_cast<int>(begin[n - 1]);
  p.stride_w = static_cast<int>(win->strides[n - 1]);
  p.dil_w = static_cast<int>(win->dilations[n - 1]);
  if (node.has_input(2)) {
    if (node.input(2)->shape() != Shape{p.m}) {
      return node.Unsupported(absl::StrCat("bias must be [M] (", ShapesOf(node), ")"));
    }
    p.has_bias = true;
  }
  return p;
}

absl::StatusOr<GemmPlan> PlanFusedMatMul(const Node& group) {
  absl::StatusOr<Chain> chain = ParseChain(group, {"matmul+epilogue", "prologue+matmul+epilogue"}, "MatMul");
  if (!chain.ok()) return chain.status();
  const Graph& body = *chain->body;
  const std::vector<const Node*>& nodes = chain->nodes;
  const Node& mm = *nodes[0];
  absl::StatusOr<GemmPlan> plan = PlanMatMul(mm);
  if (!plan.ok()) return plan.status();
  GemmPlan& p = *plan;
  p.in_a = BodyInput(body, mm.input(0));
  p.in_b = BodyInput(body, mm.input(1));
  if (p.in_a < 0 || p.in_b < 0) return group.Unsupported("MatMul operands must be group inputs");
  // A residual: the other operand of an Add, of the output's shape (one matrix). The
  // first Add's operand is the bias when it has a bias's shape (with one row, the two
  // add the same).
  const Shape& out_shape = mm.output(0)->shape();
  auto residual_of = [&](const Node& add, const Node& prev) -> const Value* {
    const Value* r = OtherOperand(add, prev);
    if (p.batch != 1 || r == nullptr || !r->has_type() || r->dtype() != p.dtype || r->shape() != out_shape ||
        SymbolicShape(*r) != SymbolicShape(*mm.output(0))) {
      return nullptr;
    }
    return BodyInput(body, r) >= 0 ? r : nullptr;
  };
  auto bias_shaped = [&](const Node& add, const Node& prev) {
    const Value* b = OtherOperand(add, prev);
    return b != nullptr && b->has_type() && (b->shape() == Shape{p.n} || b->shape() == Shape{1, p.n});
  };
  size_t i = 1;
  if (i < nodes.size() && nodes[i]->op_type() == "Add" &&
      (bias_shaped(*nodes[i], *nodes[i - 1]) || residual_of(*nodes[i], *nodes[i - 1]) == nullptr)) {
    const Value* bias = OtherOperand(*nodes[i], *nodes[i - 1]);
    // A per-batch bias: the output's batch dims, then [1, N] (fuse-siblings' stacked
    // Q/K/V bias [S, 1, N]); cuBLASLt steps through it with BIAS_BATCH_STRIDE.
    const Shape& y = mm.output(0)->shape();
    Shape per_batch(y.begin(), y.end() - std::min<size_t>(2, y.size()));
    per_batch.insert(per_batch.end(), {1, p.n});
    const bool batched_bias = p.batch > 1 && y.size() >= 3 && bias != nullptr && bias->shape() == per_batch;
    if (bias == nullptr || !bias->has_type() || bias->dtype() != p.dtype ||
        (bias->shape() != Shape{p.n} && bias->shape() != Shape{1, p.n} && !batched_bias)) {
      return group.Unsupported("the Add is not a bias of shape [N], [1, N] or [batch.., 1, N]");
    }
    if (batched_bias) p.bias_batch_stride = p.n;
    p.in_c = BodyInput(body, bias);
    if (p.in_c < 0) return group.Unsupported("the bias must be a group input");
    p.c_kind = CKind::kBias;
    p.beta = 1.f;
    ++i;
  }
  if (i < nodes.size() && nodes[i]->op_type() == "Add") {
    // A transformer's skip connection: cuBLASLt's C, added before the activation.
    if (const Value* residual = residual_of(*nodes[i], *nodes[i - 1]); residual != nullptr) {
      p.in_residual = BodyInput(body, residual);
      ++i;
    }
  }
  if (i < nodes.size() && nodes[i]->op_type() == "Relu") {
    p.act = GemmPlan::Act::kRelu;
    ++i;
  } else if (i < nodes.size() && nodes[i]->op_type() == "Gelu") {
    absl::StatusOr<std::string> approximate = nodes[i]->GetString("approximate", "none");
    if (!approximate.ok()) return approximate.status();
    if (*approximate != "tanh") {
      return group.Unsupported("cuBLASLt's GELU epilogue is the tanh approximation; exact (erf) Gelu is not");
    }
    p.act = GemmPlan::Act::kGeluTanh;
    ++i;
  }
  if (i != nodes.size()) {
    return group.Unsupported(absl::StrCat("epilogue node ", nodes[i]->Describe(), " has no cuBLASLt epilogue"));
  }
  return p;
}

// "conv+epilogue": Conv(X, W[, B]) then Add(residual Z of the output's shape) or
// Add(bias broadcast as [1, C, 1, 1], or [1, 1, 1, C] / [C] for a channels_last Conv,
// when the Conv has no B), then optionally Relu;
// at least one epilogue node. One cudnnConvolutionBiasActivationForward call:
// y = act(conv(x) + z + bias), a zero bias when the body has none.
absl::StatusOr<ConvPlan> PlanFusedConv(const Node& group) {
  absl::StatusOr<Chain> chain = ParseChain(group, {"conv+epilogue"}, "Conv");
  if (!chain.ok()) return chain.status();
  const Graph& body = *chain->body;
  const std::vector<const Node*>& nodes = chain->nodes;
  const Node& conv = *nodes[0];
  absl::StatusOr<ConvPlan> plan = PlanConv(conv);
  if (!plan.ok()) return plan.status();
  ConvPlan& p = *plan;
  p.fused = true;
  p.in_x = BodyInput(body, conv.input(0));
  p.in_w = BodyInput(body, conv.input(1));
  p.in_bias = p.has_bias ? BodyInput(body, conv.input(2)) : -1;
  if (p.in_x < 0 || p.in_w < 0 || (p.has_bias && p.in_bias < 0)) {
    return group.Unsupported("Conv operands must be group inputs");
  }
  if (nodes.size() < 2) return group.Unsupported("no epilogue to fuse");
  size_t i = 1;
  if (i < nodes.size() && nodes[i]->op_type() == "Add") {
    const Value* other = OtherOperand(*nodes[i], *nodes[i - 1]);
    const Shape& y = conv.output(0)->shape();
    if (other == nullptr || !other->has_type() || other->dtype() != p.dtype) {
      return group.Unsupported("the Add's other operand is not a tensor of the Conv's dtype");
    }
    const int index = BodyInput(body, other);
    if (index < 0) return group.Unsupported("the Add's other operand must be a group input");
    Shape padded = other->shape();
    if (padded.size() <= y.size()) padded.insert(padded.begin(), y.size() - padded.size(), 1);
    Shape bias_shape(y.size(), 1);
    bias_shape[p.nhwc ? y.size() - 1 : 1] = p.m;
    if (other->shape() == y) {
      p.in_z = index;  // residual
    } else if (padded == bias_shape && !p.has_bias) {
      p.in_bias = index;
      p.has_bias = true;
    } else {
      return group.Unsupported("the Add is neither a residual of the output's shape nor a per-channel bias");
    }
    ++i;
  }
  if (i < nodes.size() && nodes[i]->op_type() == "Relu") {
    p.relu = true;
    ++i;
  }
  if (i != nodes.size()) {
    return group.Unsupported(absl::StrCat("epilogue node ", nodes[i]->Describe(), " has no cuDNN fused form"));
  }
  return p;
}

}  // namespace kiln::codegen::libplan
