// FuseSiblings: shared-input MatMuls -> one (stacked) MatMul + Split; MatMul + Split
// along the last axis -> the stacked form; Add(MatMul, MatMul) -> "dual-matmul" group.
#include "fusion/fuse_siblings.h"

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/pattern_match.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

bool IsMatMulLike(const Node* n) {
  return n != nullptr && (n->op_type() == "MatMul" || n->op_type() == "Gemm");
}

// Concatenates 2-D tensors [K, N_i] of one dtype along axis 1.
Tensor ConcatColumns(const std::vector<const Tensor*>& parts) {
  const int64_t k = parts[0]->shape()[0];
  int64_t total = 0;
  for (const Tensor* t : parts) total += t->shape()[1];
  const size_t es = DTypeSize(parts[0]->dtype());
  Tensor out(parts[0]->dtype(), {k, total});
  auto* dst = static_cast<uint8_t*>(out.mutable_raw_data());
  for (int64_t row = 0; row < k; ++row) {
    for (const Tensor* t : parts) {
      const int64_t n = t->shape()[1];
      std::memcpy(dst, static_cast<const uint8_t*>(t->raw_data()) + row * n * es, n * es);
      dst += n * es;
    }
  }
  return out;
}

// The S column blocks [K, N] of a [K, S*N] matrix.
std::vector<Tensor> SplitColumns(const Tensor& w, int64_t parts) {
  const int64_t n = w.shape()[1] / parts;
  std::vector<Tensor> out;
  for (int64_t p = 0; p < parts; ++p) out.push_back(ColumnBlock(w, p * n, n));
  return out;
}

// Shape [S, 1 x ones, ...tail].
Shape Stacked(int64_t s, int ones, std::initializer_list<int64_t> tail) {
  Shape shape = {s};
  shape.insert(shape.end(), ones, 1);
  shape.insert(shape.end(), tail);
  return shape;
}

// What the stacked rewrite needs: X, S weights [K, N] (and optionally S biases of N
// values), and the S values the pieces become (their producers already removed,
// their types recorded).
struct StackSpec {
  std::string base;  // names: "<base>/<tag>_weight", ...
  std::string tag;   // "siblings" or "stacked"
  Value* x = nullptr;
  std::vector<Tensor> weights;
  std::vector<std::vector<float>> biases;  // empty: no bias
  DType bias_dtype = DType::kFloat32;
  std::vector<Value*> outs;
  std::vector<std::pair<DType, Shape>> types;
  std::vector<std::vector<DimExpr>> dims;  // the outs' dims (empty: static)
};

// Whether every reader of `v` is a Reshape (data input) whose target shape is a
// constant without 0 entries, so that it may read any value of v's size instead.
bool OnlyReshapedByConstantShapes(const Graph& graph, const Value* v) {
  if (graph.IsGraphOutput(v) || v->uses().empty()) return false;
  for (const Use& u : v->uses()) {
    const Node* r = u.node;
    if (r->op_type() != "Reshape" || !r->domain().empty() || u.index != 0) return false;
    const Value* shape = r->input(1);
    if (shape == nullptr || !shape->is_constant()) return false;
    if (r->GetInt("allowzero", 0).value_or(0) != 0) continue;
    for (int64_t d : shape->constant().ToInt64()) {
      if (d == 0) return false;  // 0 copies the input's dim: it depends on the input's shape
    }
  }
  return true;
}

// The stacked layout (see fuse_siblings.h): X [..., K] (viewed as [M, K] unless its
// leading dims are all 1) times W [S, (1,) K, N] gives P [S, ..., N] (+ bias
// [S, 1.., N]); a Split along axis 0 cuts P into S contiguous pieces, which the
// memory planner makes views of P. Returns the new MatMul.
absl::StatusOr<Node*> BuildStacked(Graph& graph, const StackSpec& spec) {
  const int64_t s = static_cast<int64_t>(spec.weights.size());
  const int64_t k = spec.weights[0].shape()[0], n = spec.weights[0].shape()[1];
  const std::string& base = spec.base;
  const std::string& tag = spec.tag;
  const Shape& xs = spec.x->shape();
  const int rank = static_cast<int>(xs.size());
  // Leading dims all 1 (e.g. batch 1): X broadcasts over the stack as it is and the
  // pieces have exactly the siblings' output shapes.
  bool direct = rank >= 3;
  for (int d = 0; d + 2 < rank; ++d) direct = direct && xs[d] == 1;
  // A dynamic graph (issue 34): the shape constants keep their expressions.
  const std::vector<DimExpr>& x_dims = spec.x->dims();
  Value* a = spec.x;
  Shape w_shape, bias_shape;
  if (direct) {
    w_shape = Stacked(s, rank - 3, {k, n});
    bias_shape = Stacked(s, rank - 2, {n});
  } else {
    const int64_t m = spec.x->numel() / k;
    if (rank != 2) {
      a = graph.AddValue(absl::StrCat(base, "/", tag, "_rows"));
      Value* shape = graph.AddConstant(absl::StrCat(base, "/", tag, "_rows_shape"),
                                       Tensor::FromInt64(DType::kInt64, {2}, std::vector<int64_t>{m, k}));
      if (!x_dims.empty()) {
        KILN_ASSIGN_OR_RETURN(DimExpr rows, DimExpr::Product(absl::MakeConstSpan(x_dims).first(x_dims.size() - 1)));
        shape->SetSymbolicData({rows, DimExpr::Constant(k)});
      }
      Node* flatten = graph.AddNode("Reshape", {spec.x, shape}, {a}, absl::StrCat(base, "/", tag, "_rows"));
      KILN_RETURN_IF_ERROR(InferNode(*flatten));
    }
    w_shape = {s, k, n};
    bias_shape = {s, 1, n};
  }
  Tensor w(spec.weights[0].dtype(), w_shape);
  auto* dst = static_cast<uint8_t*>(w.mutable_raw_data());
  for (const Tensor& t : spec.weights) {
    std::memcpy(dst, t.raw_data(), t.nbytes());
    dst += t.nbytes();
  }
  Value* weight = graph.AddConstant(absl::StrCat(base, "/", tag, "_weight"), std::move(w));
  Value* product = graph.AddValue(absl::StrCat(base, "/", tag, "_out"));
  Node* matmul = graph.AddNode("MatMul", {a, weight}, {product}, absl::StrCat(base, "/", tag));
  KILN_RETURN_IF_ERROR(InferNode(*matmul));
  if (!x_dims.empty()) {
    // The pieces are views of P at the offsets of the largest sizes; a smaller run's
    // product keeps that distance between the stacked matrices.
    matmul->SetAttr("out_batch_stride", Attribute(product->numel() / s));
  }
  Value* split_input = product;
  if (!spec.biases.empty()) {
    std::vector<float> stacked;
    for (const std::vector<float>& b : spec.biases) stacked.insert(stacked.end(), b.begin(), b.end());
    Value* bias = graph.AddConstant(absl::StrCat(base, "/", tag, "_bias"),
                                    Tensor::FromFloat(spec.bias_dtype, bias_shape, stacked));
    split_input = graph.AddValue(absl::StrCat(base, "/", tag, "_biased"));
    Node* add = graph.AddNode("Add", {product, bias}, {split_input}, absl::StrCat(base, "/", tag, "_bias_add"));
    KILN_RETURN_IF_ERROR(InferNode(*add));
  }
  Value* sizes = graph.AddConstant(absl::StrCat(base, "/split_sizes"),
                                   Tensor::FromInt64(DType::kInt64, {s}, std::vector<int64_t>(s, 1)));
  std::vector<Value*> pieces = spec.outs;
  if (!direct) {
    for (int64_t i = 0; i < s; ++i) pieces[i] = graph.AddValue(absl::StrCat(base, "/", tag, "_piece", i));
  }
  Node* split = graph.AddNode("Split", {split_input, sizes}, pieces, absl::StrCat(base, "/split"));
  split->SetAttr("axis", Attribute(int64_t{0}));
  KILN_RETURN_IF_ERROR(InferNode(*split));
  if (!direct) {
    // Each piece [1, M, N] becomes the sibling's output again. Readers that are all
    // Reshapes to a constant shape read the piece directly (no node added: BERT's and
    // GPT-2's head-splitting Reshapes); otherwise a Reshape (a view) writes the value.
    std::map<Shape, Value*> shape_constants;
    for (int64_t i = 0; i < s; ++i) {
      Value* out = spec.outs[i];
      if (OnlyReshapedByConstantShapes(graph, out)) {
        const std::vector<Use> uses = out->uses();
        for (const Use& u : uses) {
          u.node->SetInput(u.index, pieces[i]);
          KILN_RETURN_IF_ERROR(InferNode(*u.node));
        }
        continue;
      }
      const Shape& shape = spec.types[i].second;
      Value*& target = shape_constants[shape];
      if (target == nullptr) {
        target = IntsConstant(graph, absl::StrCat(base, "/", tag, "_piece_shape"), shape);
        if (!spec.dims[i].empty()) target->SetSymbolicData(spec.dims[i]);
      }
      Node* reshape = graph.AddNode("Reshape", {pieces[i], target}, {out}, absl::StrCat(base, "/unstack", i));
      KILN_RETURN_IF_ERROR(InferNode(*reshape));
    }
  }
  for (int64_t i = 0; i < s; ++i) {
    const Value* out = spec.outs[i];
    if (out->producer() == nullptr) continue;  // every reader now reads the piece
    if (out->dtype() != spec.types[i].first || out->shape() != spec.types[i].second) {
      return absl::InternalError(absl::StrCat("fuse-siblings: the stacked rewrite changed the type of ",
                                              Quote(out->name()), " to ", out->TypeString()));
    }
  }
  return matmul;
}

// The MatMuls among `candidates` (readers of one A) whose weights can be
// concatenated with the first one's; reports why each other one cannot.
std::vector<Node*> MergeableSiblings(const std::vector<Node*>& candidates, FusionReport* report,
                                     absl::string_view pass) {
  std::vector<Node*> siblings;
  for (Node* m : candidates) {
    const Value* w = m->input(1);
    auto reject = [&](std::string reason) {
      ReportRejection(report, pass, {candidates[0]->name(), m->name()}, std::move(reason));
    };
    // Layout flags: the merged MatMul reads A and the concatenated W row-major.
    if (const std::string t = TransposedOperands(*m); !t.empty()) {
      reject(absl::StrCat("shape: ", Quote(m->name()), " reads ", t,
                          " transposed; siblings share a row-major A and concatenate row-major [K, N] weights"));
      continue;
    }
    if (!w->is_constant()) {
      reject(absl::StrCat("unsupported op: the weight ", Quote(w->name()), " of ", Quote(m->name()),
                          " is computed; siblings concatenate constant weights"));
      continue;
    }
    if (w->rank() != 2) {
      reject(absl::StrCat("shape: the weight ", Quote(w->name()), " is ", ShapeToString(w->shape()),
                          "; siblings concatenate 2-D [K, N] weights"));
      continue;
    }
    if (!IsFloating(w->dtype())) {
      reject(absl::StrCat("dtype: the weight ", Quote(w->name()), " is ", DTypeName(w->dtype())));
      continue;
    }
    if (!siblings.empty()) {
      const Value* w0 = siblings[0]->input(1);
      if (w->dtype() != w0->dtype()) {
        reject(absl::StrCat("dtype: the weight ", Quote(w->name()), " is ", DTypeName(w->dtype()), " but ",
                            Quote(w0->name()), " is ", DTypeName(w0->dtype())));
        continue;
      }
      if (w->shape()[0] != w0->shape()[0]) {
        reject(absl::StrCat("shape: the weight ", Quote(w->name()), " has K = ", w->shape()[0], " but ",
                            Quote(w0->name()), " has K = ", w0->shape()[0]));
        continue;
      }
    }
    siblings.push_back(m);
  }
  return siblings;
}

// Biases: when at least one sibling's product is read only by an Add of a constant
// bias [N_i] or [1, N_i], the biases are concatenated too and added before the Split,
// so the merged MatMul gets one bias epilogue instead of one Add per sibling; a
// sibling without such an Add (Whisper's k_proj, which has no bias) gets zeros.
// Fills `bias_adds` and `biases` per sibling (nullptr: no bias) then, else leaves
// them empty.
void SharedBiasAdds(const Graph& graph, const std::vector<Node*>& siblings, std::vector<Node*>& bias_adds,
                    std::vector<const Tensor*>& biases) {
  bool any = false;
  for (Node* m : siblings) {
    bias_adds.push_back(nullptr);
    biases.push_back(nullptr);
    const Value* y = m->output(0);
    if (y->uses().size() != 1 || graph.IsGraphOutput(y)) continue;
    Node* add = y->uses()[0].node;
    if (add->op_type() != "Add" || add->num_inputs() != 2) continue;
    const Value* b = add->input(1 - y->uses()[0].index);
    const int64_t n = m->input(1)->shape()[1];
    if (b == nullptr || !b->is_constant() || b->dtype() != y->dtype() ||
        !(b->shape() == Shape{n} || b->shape() == Shape{1, n}) || add->output(0)->shape() != y->shape()) {
      continue;
    }
    bias_adds.back() = add;
    biases.back() = &b->constant();
    any = true;
  }
  if (!any) {
    bias_adds.clear();
    biases.clear();
  }
}

// The siblings' biases (SharedBiasAdds), zeros of the sibling's width `widths[i]`
// where it has none.
std::vector<std::vector<float>> BiasValues(const std::vector<int64_t>& widths, const std::vector<const Tensor*>& biases) {
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < biases.size(); ++i) {
    values.push_back(biases[i] != nullptr ? biases[i]->ToFloat() : std::vector<float>(widths[i], 0.f));
  }
  return values;
}

// The dtype of the first bias there is (the products' dtype: SharedBiasAdds checks).
DType BiasDType(const std::vector<const Tensor*>& biases) {
  for (const Tensor* b : biases) {
    if (b != nullptr) return b->dtype();
  }
  return DType::kFloat32;
}

}  // namespace

absl::StatusOr<bool> FuseSiblings::Run(Graph& graph) {
  KILN_ASSIGN_OR_RETURN(bool merged, MergeSharedInput(graph));
  KILN_ASSIGN_OR_RETURN(bool stacked, StackSplitMatMuls(graph));
  KILN_ASSIGN_OR_RETURN(bool dual, FuseDualMatMuls(graph));
  return merged || stacked || dual;
}

absl::StatusOr<bool> FuseSiblings::MergeSharedInput(Graph& graph) {
  std::vector<Value*> inputs;  // first-seen order
  absl::flat_hash_map<Value*, std::vector<Node*>> by_input;
  for (Node* n : graph.nodes()) {
    if (n->op_type() != "MatMul" || n->num_inputs() != 2 || !n->has_input(0) || !n->has_input(1)) continue;
    auto& list = by_input[n->input(0)];
    if (list.empty()) inputs.push_back(n->input(0));
    list.push_back(n);
  }
  bool changed = false;
  for (Value* a : inputs) {
    const std::vector<Node*>& candidates = by_input[a];
    if (candidates.size() < 2) continue;
    std::vector<Node*> siblings = MergeableSiblings(candidates, report_, name());
    if (siblings.size() < 2) continue;

    std::vector<Node*> bias_adds;
    std::vector<const Tensor*> biases;
    SharedBiasAdds(graph, siblings, bias_adds, biases);

    // The values the rewrite writes (the siblings' outputs, or their bias Adds'),
    // with their types, and the report's member names; the old nodes go.
    Node* first = siblings[0];
    const std::string base = first->name();
    std::vector<const Tensor*> weights;
    std::vector<int64_t> sizes;
    for (const Node* m : siblings) {
      weights.push_back(&m->input(1)->constant());
      sizes.push_back(m->input(1)->shape()[1]);
    }
    std::vector<Value*> outs;
    std::vector<std::string> names;
    std::vector<std::pair<DType, Shape>> types;
    std::vector<std::vector<DimExpr>> dims;
    for (size_t i = 0; i < siblings.size(); ++i) {
      Node* m = siblings[i];
      // The node whose output the Split writes.
      Node* replaced = bias_adds.empty() || bias_adds[i] == nullptr ? m : bias_adds[i];
      outs.push_back(replaced->output(0));
      types.push_back({replaced->output(0)->dtype(), replaced->output(0)->shape()});
      dims.push_back(replaced->output(0)->dims());
      names.push_back(m->name());
      if (replaced != m) names.push_back(replaced->name());
    }
    bool equal_n = sizes[0] > 0 && a->numel() > 0;
    for (int64_t n : sizes) equal_n = equal_n && n == sizes[0];
    if (equal_n) {
      // Stacked layout: the Split along axis 0 is a view (fuse_siblings.h).
      StackSpec spec;
      spec.base = base;
      spec.tag = "siblings";
      spec.x = a;
      for (const Tensor* t : weights) spec.weights.push_back(*t);
      spec.biases = BiasValues(sizes, biases);
      spec.bias_dtype = BiasDType(biases);
      spec.outs = outs;
      spec.types = types;
      spec.dims = dims;
      for (size_t i = 0; i < siblings.size(); ++i) {
        if (!bias_adds.empty() && bias_adds[i] != nullptr) graph.RemoveNode(bias_adds[i]);
        graph.RemoveNode(siblings[i]);
      }
      KILN_ASSIGN_OR_RETURN(Node* matmul, BuildStacked(graph, spec));
      if (report_ != nullptr) report_->groups.push_back({std::string(name()), matmul->name(), "siblings", names});
      changed = true;
      continue;
    }

    // Siblings of different widths: W concatenated along N, a Split along the last
    // axis (a strided copy). The merged bias is built before the siblings go. Not on
    // a dynamic graph, where that Split has no kernel with run-time sizes.
    if (a->is_dynamic()) {
      if (report_ != nullptr) {
        report_->rejections.push_back({std::string(name()), names,
                                       "shape: siblings of different widths are merged by a Split along the last axis, "
                                       "which has no GPU kernel with run-time sizes"});
      }
      continue;
    }
    std::vector<float> concat;
    for (const std::vector<float>& v : BiasValues(sizes, biases)) concat.insert(concat.end(), v.begin(), v.end());
    Value* w = graph.AddConstant(absl::StrCat(base, "/siblings_weight"), ConcatColumns(weights));
    Value* product = graph.AddValue(absl::StrCat(base, "/siblings_out"));
    for (size_t i = 0; i < siblings.size(); ++i) {
      if (!bias_adds.empty() && bias_adds[i] != nullptr) graph.RemoveNode(bias_adds[i]);
      graph.RemoveNode(siblings[i]);
    }
    Node* matmul = graph.AddNode("MatMul", {a, w}, {product}, absl::StrCat(base, "/siblings"));
    KILN_RETURN_IF_ERROR(InferNode(*matmul));
    Value* split_input = product;
    if (!bias_adds.empty()) {
      Value* bias = graph.AddConstant(absl::StrCat(base, "/siblings_bias"),
                                      Tensor::FromFloat(BiasDType(biases), {static_cast<int64_t>(concat.size())}, concat));
      split_input = graph.AddValue(absl::StrCat(base, "/siblings_biased"));
      Node* add = graph.AddNode("Add", {product, bias}, {split_input}, absl::StrCat(base, "/siblings_bias_add"));
      KILN_RETURN_IF_ERROR(InferNode(*add));
    }
    Value* split_sizes = IntsConstant(graph, absl::StrCat(base, "/split_sizes"), sizes);
    Node* split = graph.AddNode("Split", {split_input, split_sizes}, outs, absl::StrCat(base, "/split"));
    split->SetAttr("axis", Attribute(int64_t{-1}));
    KILN_RETURN_IF_ERROR(InferNode(*split));
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i]->dtype() != types[i].first || outs[i]->shape() != types[i].second) {
        return absl::InternalError(absl::StrCat("fuse-siblings: the split of ", Quote(outs[i]->name()),
                                                " changed its type to ", outs[i]->TypeString()));
      }
    }
    if (report_ != nullptr) report_->groups.push_back({std::string(name()), matmul->name(), "siblings", names});
    changed = true;
  }
  if (changed) {
    graph.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  }
  return changed;
}

absl::StatusOr<bool> FuseSiblings::StackSplitMatMuls(Graph& graph) {
  std::vector<Node*> splits;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Split" && n->domain().empty()) splits.push_back(n);
  }
  bool changed = false;
  for (Node* split : splits) {
    // Split along the last axis into S >= 2 equal parts...
    Value* v = split->input(0);
    const int s = split->num_outputs();
    if (v == nullptr || !v->has_type() || v->rank() < 1 || s < 2 || graph.IsGraphOutput(v) ||
        v->uses().size() != 1) {
      continue;
    }
    absl::StatusOr<int64_t> axis = split->GetInt("axis", 0);
    if (!axis.ok() || (*axis != -1 && *axis != v->rank() - 1)) continue;
    bool equal = true;
    for (const Value* o : split->outputs()) {
      equal = equal && o != nullptr && o->has_type() && o->shape() == split->output(0)->shape();
    }
    const int64_t n = v->shape().back() / s;
    if (!equal || n <= 0 || split->output(0)->shape().back() != n) continue;
    // ... possibly through a Reshape that keeps the last dim (GPT-2's Conv1D export:
    // Gemm on [B*T, K], then Reshape to [B, T, S*N]), ...
    Node* reshape = nullptr;
    if (Node* r = v->producer(); r != nullptr && r->op_type() == "Reshape" && r->domain().empty() &&
                                 r->input(0) != nullptr && r->input(0)->has_type() && r->input(0)->rank() >= 1 &&
                                 r->input(0)->shape().back() == v->shape().back() &&
                                 r->input(0)->uses().size() == 1 && !graph.IsGraphOutput(r->input(0))) {
      reshape = r;
      v = r->input(0);
    }
    // ... of MatMul(X, W [K, S*N] constant) or of its Add with a constant bias.
    Node* producer = v->producer();
    Node* add = nullptr;
    Node* mm = producer;
    const Value* bias = nullptr;
    if (producer != nullptr && producer->op_type() == "Add" && producer->num_inputs() == 2) {
      add = producer;
      mm = nullptr;
      for (int i = 0; i < 2 && mm == nullptr; ++i) {
        const Value* p = add->input(i);
        const Value* b = add->input(1 - i);
        if (p == nullptr || b == nullptr || p->producer() == nullptr || p->producer()->op_type() != "MatMul") continue;
        if (!b->is_constant() || b->dtype() != v->dtype() ||
            !(b->shape() == Shape{s * n} || b->shape() == Shape{1, s * n})) {
          continue;
        }
        if (p->uses().size() != 1 || graph.IsGraphOutput(p) || p->shape() != v->shape()) continue;
        mm = p->producer();
        bias = b;
      }
    }
    if (mm == nullptr || mm->op_type() != "MatMul" || !mm->domain().empty() || mm->num_inputs() != 2 ||
        !mm->has_input(0) || !mm->has_input(1)) {
      continue;
    }
    if (!TransposedOperands(*mm).empty()) continue;  // layout flags: the stacked form rebuilds X and W row-major
    Value* x = mm->input(0);
    const Value* w = mm->input(1);
    if (!w->is_constant() || w->rank() != 2 || !IsFloating(w->dtype()) || w->shape()[1] != s * n ||
        x->numel() <= 0 || mm->output(0)->shape() != v->shape()) {
      continue;
    }

    StackSpec spec;
    spec.base = mm->name();
    spec.tag = "stacked";
    spec.x = x;
    spec.weights = SplitColumns(w->constant(), s);
    if (bias != nullptr) {
      const std::vector<float> b = bias->constant().ToFloat();
      for (int i = 0; i < s; ++i) spec.biases.emplace_back(b.begin() + i * n, b.begin() + (i + 1) * n);
      spec.bias_dtype = bias->dtype();
    }
    for (Value* o : split->outputs()) {
      spec.outs.push_back(o);
      spec.types.push_back({o->dtype(), o->shape()});
      spec.dims.push_back(o->dims());
    }
    std::vector<std::string> names = {mm->name()};
    if (add != nullptr) names.push_back(add->name());
    if (reshape != nullptr) names.push_back(reshape->name());
    names.push_back(split->name());
    graph.RemoveNode(split);
    if (reshape != nullptr) graph.RemoveNode(reshape);
    if (add != nullptr) graph.RemoveNode(add);
    graph.RemoveNode(mm);
    KILN_ASSIGN_OR_RETURN(Node* matmul, BuildStacked(graph, spec));
    if (report_ != nullptr) report_->groups.push_back({std::string(name()), matmul->name(), "split-matmul", names});
    changed = true;
  }
  if (changed) {
    graph.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  }
  return changed;
}

absl::StatusOr<bool> FuseSiblings::FuseDualMatMuls(Graph& graph) {
  std::vector<Node*> adds;
  absl::flat_hash_map<const Node*, int> position;
  for (Node* n : graph.nodes()) {
    position[n] = static_cast<int>(position.size());
    if (n->op_type() == "Add" && n->num_inputs() == 2) adds.push_back(n);
  }
  bool changed = false;
  for (Node* add : adds) {
    Value* pv = add->input(0);
    Value* qv = add->input(1);
    Node* p = pv->producer();
    Node* q = qv->producer();
    if (!IsMatMulLike(p) || !IsMatMulLike(q) || p == q) continue;
    if (position[q] < position[p]) std::swap(p, q), std::swap(pv, qv);
    auto reject = [&](std::string reason) {
      ReportRejection(report_, name(), {p->name(), q->name(), add->name()}, std::move(reason));
    };
    if (pv->shape() != qv->shape() || pv->shape() != add->output(0)->shape()) {
      reject(absl::StrCat("shape: the products are ", ShapeToString(pv->shape()), " and ", ShapeToString(qv->shape()),
                          " and the sum ", ShapeToString(add->output(0)->shape()),
                          "; two mainloops share one accumulator tile only for equal shapes"));
      continue;
    }
    if (pv->dtype() != qv->dtype() || !IsFloating(pv->dtype())) {
      reject(absl::StrCat("dtype: the products are ", DTypeName(pv->dtype()), " and ", DTypeName(qv->dtype())));
      continue;
    }
    bool read_elsewhere = false;
    for (const Value* v : {pv, qv}) {
      if (graph.IsGraphOutput(v)) read_elsewhere = true;
      for (const Use& u : v->uses()) read_elsewhere |= u.node != add;
    }
    if (read_elsewhere) {
      reject(
          "other consumers: a product is read outside the Add; a dual-mainloop kernel never holds the products "
          "separately");
      continue;
    }
    absl::StatusOr<Node*> group = FormFusedGroup(graph, {p, q, add}, "dual-matmul", p);
    if (!group.ok()) {
      reject(absl::StrCat("not convex: ", group.status().message()));
      continue;
    }
    ReportGroup(report_, name(), **group);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
