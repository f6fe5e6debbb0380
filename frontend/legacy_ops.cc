// Older-opset node forms rewritten to the newest op form.
#include "frontend/legacy_ops.h"

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

// Moves an ints attribute into a constant i64 input at `index` (absent inputs
// before it are padded with nullptr). An attribute of another kind is an error
// naming the node.
absl::Status IntsAttrToInput(Graph& graph, Node* node, const std::string& attr, int index) {
  if (!node->has_attr(attr)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> values, node->GetInts(attr));
  node->RemoveAttr(attr);
  Value* c = graph.AddConstant(absl::StrCat(node->name(), "/", attr),
                               Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(values.size())}, values));
  node->SetInput(index, c);
  return absl::OkStatus();
}

absl::Status FloatAttrToInput(Graph& graph, Node* node, const std::string& attr, int index) {
  if (!node->has_attr(attr)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(float v, node->GetFloat(attr));
  node->RemoveAttr(attr);
  node->SetInput(index, graph.AddConstant(absl::StrCat(node->name(), "/", attr),
                                          Tensor::FromFloat(DType::kFloat32, {}, {v})));
  return absl::OkStatus();
}

// Whether inputs 0..n-1 are present (arity is checked later, with its own message,
// by shape inference: a rule leaves a node it cannot read alone).
bool HasInputs(const Node* node, int n) {
  for (int i = 0; i < n; ++i) {
    if (!node->has_input(i)) return false;
  }
  return true;
}

bool IsReduce(const std::string& op) { return op.rfind("Reduce", 0) == 0; }

bool IsLegacyBroadcastOp(const std::string& op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or",
                                             "Xor", "Equal", "Greater", "Less", "Gemm"};
  return kOps.count(op) > 0;
}

// Opset < 7 binary ops broadcast B against A starting at `axis` (default: B's
// dims align with A's trailing dims, which is numpy's rule). Rewrites the
// explicit-axis case into numpy broadcasting by reshaping B with trailing 1s.
absl::Status RewriteLegacyBroadcast(Graph& graph, Node* node) {
  KILN_ASSIGN_OR_RETURN(int64_t broadcast, node->GetInt("broadcast", 0));
  node->RemoveAttr("broadcast");
  if (!node->has_attr("axis") || node->op_type() == "Gemm") return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(int64_t axis, node->GetInt("axis"));
  node->RemoveAttr("axis");
  if (!broadcast || !HasInputs(node, 2)) return absl::OkStatus();
  Value* a = node->input(0);
  Value* b = node->input(1);
  if (!a->has_type() || !b->has_type()) {
    return node->Unsupported("legacy broadcasting with an explicit axis (opset < 7) needs both input shapes "
                             "known at import time");
  }
  if (axis < 0) axis += a->rank();
  const int64_t trailing = a->rank() - axis - b->rank();
  if (axis < 0 || trailing < 0) return node->Error(absl::StrCat("broadcast axis ", axis, " does not fit the inputs"));
  if (trailing == 0) return absl::OkStatus();
  Shape shape = b->shape();
  shape.insert(shape.end(), trailing, 1);
  Value* target = graph.AddConstant(absl::StrCat(node->name(), "/broadcast_shape"),
                                    Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(shape.size())}, shape));
  Value* reshaped = graph.AddValue(absl::StrCat(b->name(), "/aligned"));
  graph.AddNode("Reshape", {b, target}, {reshaped}, absl::StrCat(node->name(), "/align"));
  node->SetInput(1, reshaped);
  return absl::OkStatus();
}

// PRelu before opset 7 applied a 1-D slope along the channel axis (1); since
// opset 7 it broadcasts numpy-style, so the slope becomes [C, 1, ..., 1].
absl::Status RewriteLegacyPRelu(Graph& graph, Node* node) {
  if (!HasInputs(node, 2)) return absl::OkStatus();
  Value* x = node->input(0);
  Value* slope = node->input(1);
  if (!x->has_type() || !slope->has_type() || slope->rank() != 1 || slope->numel() == 1) return absl::OkStatus();
  if (x->rank() < 3 || x->shape()[1] != slope->numel()) return absl::OkStatus();
  Shape shape = {slope->numel()};
  shape.insert(shape.end(), x->rank() - 2, 1);
  Value* target = graph.AddConstant(absl::StrCat(node->name(), "/slope_shape"),
                                    Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(shape.size())}, shape));
  Value* reshaped = graph.AddValue(absl::StrCat(slope->name(), "/per_channel"));
  graph.AddNode("Reshape", {slope, target}, {reshaped}, absl::StrCat(node->name(), "/slope"));
  node->SetInput(1, reshaped);
  return absl::OkStatus();
}

// Cast before opset 6 named its target type as a string ("FLOAT").
absl::Status RewriteLegacyCast(Node* node) {
  auto it = node->attributes().find("to");
  if (it == node->attributes().end() || it->second.kind() != AttrKind::kString) return absl::OkStatus();
  onnx::TensorProto::DataType type;
  if (!onnx::TensorProto::DataType_Parse(it->second.s(), &type)) {
    return node->Error(absl::StrCat("unknown Cast target type '", it->second.s(), "'"));
  }
  node->SetAttr("to", static_cast<int64_t>(type));
  return absl::OkStatus();
}

absl::Status RewriteCoercedSoftmax(Graph& graph, Node* node) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node->GetInt("axis", 1));
  if (!HasInputs(node, 1) || node->num_outputs() < 1) return absl::OkStatus();
  Value* x = node->input(0);
  Value* y = node->output(0);
  const std::string base = node->name();
  const std::string op_type = node->op_type();
  auto attributes = node->attributes();
  graph.RemoveNode(node);  // y keeps its name and uses; the Reshape below produces it

  Value* flat = graph.AddValue(absl::StrCat(base, "/flat"));
  graph.AddNode("Flatten", {x}, {flat}, absl::StrCat(base, "/flatten"))->SetAttr("axis", axis);
  Value* out2d = graph.AddValue(absl::StrCat(base, "/2d"));
  Node* op = graph.AddNode(op_type, {flat}, {out2d}, base);
  for (const auto& [k, v] : attributes) op->SetAttr(k, v);
  op->SetAttr("axis", int64_t{-1});
  Value* shape = graph.AddValue(absl::StrCat(base, "/shape"));
  graph.AddNode("Shape", {x}, {shape}, absl::StrCat(base, "/shape"));
  graph.AddNode("Reshape", {out2d, shape}, {y}, absl::StrCat(base, "/reshape"));
  return absl::OkStatus();
}

}  // namespace

absl::Status UpgradeLegacyNodes(Graph& graph, int64_t model_opset,
                                const absl::flat_hash_map<const Node*, int64_t>& node_opsets) {
  for (Node* node : graph.nodes()) {
    const std::string& op = node->op_type();
    const auto own = node_opsets.find(node);
    const int64_t opset = own == node_opsets.end() ? model_opset : own->second;
    node->RemoveAttr("consumed_inputs");
    if ((op == "Squeeze" || op == "Unsqueeze") && opset < 13) {
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "axes", 1));
    }
    if (IsReduce(op) && opset < (op == "ReduceSum" ? 13 : 18)) {
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "axes", 1));
    }
    if (op == "Split" && opset < 13) KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "split", 1));
    if (op == "Clip" && opset < 11) {
      // Absent bounds stay absent: the op treats them as -inf/+inf.
      const bool has_min = node->has_attr("min");
      KILN_RETURN_IF_ERROR(FloatAttrToInput(graph, node, "min", 1));
      if (node->has_attr("max")) {
        if (!has_min) node->SetInput(1, nullptr);
        KILN_RETURN_IF_ERROR(FloatAttrToInput(graph, node, "max", 2));
      }
    }
    if (op == "Pad" && opset < 11) {
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "pads", 1));
      KILN_RETURN_IF_ERROR(FloatAttrToInput(graph, node, "value", 2));
    }
    if (op == "Slice" && opset < 10) {
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "starts", 1));
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "ends", 2));
      KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "axes", 3));
    }
    if (op == "Reshape" && opset < 5) KILN_RETURN_IF_ERROR(IntsAttrToInput(graph, node, "shape", 1));
    if (op == "BatchNormalization") {
      KILN_ASSIGN_OR_RETURN(int64_t spatial, node->GetInt("spatial", 1));
      if (spatial != 1) {
        return node->Error("spatial=0 (per-activation batch normalization, opset < 9) is not supported");
      }
      node->RemoveAttr("spatial");
      node->RemoveAttr("is_test");
    }
    if (op == "Dropout") node->RemoveAttr("is_test");
    if (opset < 7 && IsLegacyBroadcastOp(op)) KILN_RETURN_IF_ERROR(RewriteLegacyBroadcast(graph, node));
    if (op == "PRelu" && opset < 7) KILN_RETURN_IF_ERROR(RewriteLegacyPRelu(graph, node));
    if (op == "Cast" && opset < 6) KILN_RETURN_IF_ERROR(RewriteLegacyCast(node));
    if (op == "Concat" && opset < 4 && !node->has_attr("axis")) node->SetAttr("axis", int64_t{1});
    if (op == "Tile" && opset < 6) return node->Unsupported("Tile before opset 6 (tiles/axis inputs) is not supported");
    if ((op == "Softmax" || op == "LogSoftmax") && opset < 13) {
      KILN_RETURN_IF_ERROR(RewriteCoercedSoftmax(graph, node));
    }
  }
  return graph.TopologicalSort();
}

}  // namespace kiln
