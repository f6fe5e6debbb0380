// FuseSiblings: shared-input MatMuls -> one MatMul + Split; Add(MatMul, MatMul) ->
// "dual-matmul" group.
#include "fusion/fuse_siblings.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
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

}  // namespace

absl::StatusOr<bool> FuseSiblings::Run(Graph& graph) {
  KILN_ASSIGN_OR_RETURN(bool merged, MergeSharedInput(graph));
  KILN_ASSIGN_OR_RETURN(bool dual, FuseDualMatMuls(graph));
  return merged || dual;
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
    std::vector<Node*> siblings;
    for (Node* m : candidates) {
      const Value* w = m->input(1);
      auto reject = [&](std::string reason) {
        ReportRejection(report_, name(), {candidates[0]->name(), m->name()}, std::move(reason));
      };
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
    if (siblings.size() < 2) continue;

    // Biases: when every sibling's product is read only by an Add of a constant bias
    // [N_i] or [1, N_i], the biases are concatenated too and added before the Split,
    // so the merged MatMul gets one bias epilogue instead of one Add per sibling.
    std::vector<Node*> bias_adds;
    std::vector<const Tensor*> biases;
    for (Node* m : siblings) {
      const Value* y = m->output(0);
      if (y->uses().size() != 1 || graph.IsGraphOutput(y)) break;
      Node* add = y->uses()[0].node;
      if (add->op_type() != "Add" || add->num_inputs() != 2) break;
      const Value* b = add->input(1 - y->uses()[0].index);
      const int64_t n = m->input(1)->shape()[1];
      if (b == nullptr || !b->is_constant() || b->dtype() != y->dtype() ||
          !(b->shape() == Shape{n} || b->shape() == Shape{1, n}) || add->output(0)->shape() != y->shape()) {
        break;
      }
      bias_adds.push_back(add);
      biases.push_back(&b->constant());
    }
    if (bias_adds.size() != siblings.size()) bias_adds.clear();

    Node* first = siblings[0];
    const std::string base = first->name();
    std::vector<const Tensor*> weights;
    std::vector<int64_t> sizes;
    for (const Node* m : siblings) {
      weights.push_back(&m->input(1)->constant());
      sizes.push_back(m->input(1)->shape()[1]);
    }
    Value* w = graph.AddConstant(absl::StrCat(base, "/siblings_weight"), ConcatColumns(weights));
    Value* product = graph.AddValue(absl::StrCat(base, "/siblings_out"));
    Node* matmul = graph.AddNode("MatMul", {a, w}, {product}, absl::StrCat(base, "/siblings"));
    KILN_RETURN_IF_ERROR(InferNode(*matmul));
    Value* split_input = product;
    if (!bias_adds.empty()) {
      std::vector<float> concat;
      for (const Tensor* b : biases) {
        const std::vector<float> v = b->ToFloat();
        concat.insert(concat.end(), v.begin(), v.end());
      }
      Value* bias = graph.AddConstant(absl::StrCat(base, "/siblings_bias"),
                                      Tensor::FromFloat(biases[0]->dtype(), {static_cast<int64_t>(concat.size())}, concat));
      split_input = graph.AddValue(absl::StrCat(base, "/siblings_biased"));
      Node* add = graph.AddNode("Add", {product, bias}, {split_input}, absl::StrCat(base, "/siblings_bias_add"));
      KILN_RETURN_IF_ERROR(InferNode(*add));
    }
    Value* split_sizes = graph.AddConstant(absl::StrCat(base, "/split_sizes"),
                                           Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(sizes.size())}, sizes));
    std::vector<Value*> outs;
    std::vector<std::string> names;
    std::vector<std::pair<DType, Shape>> types;
    for (size_t i = 0; i < siblings.size(); ++i) {
      Node* m = siblings[i];
      Node* replaced = bias_adds.empty() ? m : bias_adds[i];  // the node whose output the Split writes
      outs.push_back(replaced->output(0));
      types.push_back({replaced->output(0)->dtype(), replaced->output(0)->shape()});
      names.push_back(m->name());
      if (!bias_adds.empty()) {
        names.push_back(bias_adds[i]->name());
        graph.RemoveNode(bias_adds[i]);
      }
      graph.RemoveNode(m);
    }
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
