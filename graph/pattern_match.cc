// Matching helpers of the recognize-* passes.
#include "graph/pattern_match.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/reduce_eval.h"
#include "graph/ops/slice.h"

namespace kiln {

bool IsOp(const Node* node, absl::string_view op, int num_inputs) {
  return node != nullptr && node->domain().empty() && node->op_type() == op && node->num_outputs() == 1 &&
         node->num_inputs() == num_inputs && node->has_input(0) && node->has_input(num_inputs - 1);
}

Node* InternalProducer(const Graph& graph, const Value* v, absl::string_view op, int num_inputs) {
  if (v == nullptr || v->uses().size() != 1 || graph.IsGraphOutput(v)) return nullptr;
  Node* node = v->producer();
  return IsOp(node, op, num_inputs) ? node : nullptr;
}

bool SwapsHalves(const Node* slice) {
  if (!IsOp(slice, "Slice", slice == nullptr ? 0 : slice->num_inputs())) return false;
  const absl::StatusOr<std::vector<ops::AxisSlice>> plan = ops::ConstantSlicePlan(*slice);
  const Shape& xs = slice->input(0)->shape();
  if (!plan.ok() || plan->size() != xs.size() || xs.size() < 2) return false;
  for (size_t d = 0; d < xs.size(); ++d) {
    const ops::AxisSlice& a = (*plan)[d];
    const bool half_axis = d + 2 == xs.size();
    if (half_axis ? (a.start != 1 || a.step != -1 || a.count != 2)
                  : (a.start != 0 || a.step != 1 || a.count != xs[d])) {
      return false;
    }
  }
  return true;
}

Node* OnlyReader(const Graph& graph, const Value* v) {
  if (v->uses().size() != 1 || graph.IsGraphOutput(v)) return nullptr;
  return v->uses()[0].node;
}

Value* OtherOperand(const Node* node, const Value* v) {
  if (node->input(0) == v) return node->input(1);
  if (node->input(1) == v) return node->input(0);
  return nullptr;
}

Node* InternalConsumer(const Graph& graph, const Value* v, absl::string_view op, int num_inputs) {
  Node* node = OnlyReader(graph, v);
  return IsOp(node, op, num_inputs) ? node : nullptr;
}

std::vector<int64_t> PermOf(const Node& t) {
  if (!t.input(0)->has_type()) return {};
  const int64_t r = t.input(0)->rank();
  std::vector<int64_t> reversed;
  for (int64_t i = r - 1; i >= 0; --i) reversed.push_back(i);
  absl::StatusOr<std::vector<int64_t>> perm = t.GetInts("perm", reversed);
  if (!perm.ok() || static_cast<int64_t>(perm->size()) != r) return {};
  for (int64_t& p : *perm) p = p < 0 ? p + r : p;
  return *perm;
}

std::optional<float> ScalarConstant(const Value* v) {
  if (v == nullptr || !v->is_constant() || v->numel() != 1 || !IsFloating(v->dtype())) return std::nullopt;
  return v->constant().ScalarFloat();
}

bool IsLastAxisMean(const Node* node) {
  if (node == nullptr || node->op_type() != "ReduceMean" || !node->domain().empty()) return false;
  if (node->num_outputs() != 1 || !node->has_input(0)) return false;
  const Value* x = node->input(0);
  if (!x->has_type() || x->rank() < 1) return false;
  const absl::StatusOr<int64_t> keepdims = node->GetInt("keepdims", 1);
  if (!keepdims.ok() || *keepdims != 1) return false;
  if (node->has_input(1) && !node->input(1)->is_constant()) return false;
  if (!node->has_input(1) && !node->has_attr("axes")) return false;  // all axes
  const absl::StatusOr<std::vector<bool>> mask = ops::ReducedAxes(*node, x->rank());
  if (!mask.ok()) return false;
  for (int i = 0; i < x->rank(); ++i) {
    if ((*mask)[i] != (i == x->rank() - 1)) return false;
  }
  return true;
}

bool IsLastAxisVector(const Value* v, int64_t h, int rank) {
  if (v == nullptr || !v->is_constant() || !IsFloating(v->dtype())) return false;
  if (v->rank() < 1 || v->rank() > rank || v->shape().back() != h || v->numel() != h) return false;
  return true;
}

Value* VectorOperand(const Node* node, const Value* operand, int64_t h, int rank) {
  if (node->input(0) == operand && IsLastAxisVector(node->input(1), h, rank)) return node->input(1);
  if (node->input(1) == operand && IsLastAxisVector(node->input(0), h, rank)) return node->input(0);
  return nullptr;
}

Value* IntsConstant(Graph& graph, const std::string& name, const std::vector<int64_t>& v) {
  return graph.AddConstant(name, Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
}

Value* AsVector(Graph& graph, Value* v, DType dtype, int64_t h, float fill, const std::string& name) {
  if (v != nullptr && v->dtype() == dtype && v->shape() == Shape{h}) return v;
  std::vector<float> data = v != nullptr ? v->constant().ToFloat() : std::vector<float>(h, fill);
  return graph.AddConstant(v != nullptr ? absl::StrCat(v->name(), "/vector") : name,
                           Tensor::FromFloat(dtype, {h}, data));
}

}  // namespace kiln
