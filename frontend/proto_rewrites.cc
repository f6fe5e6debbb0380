// Model-level rewrites before import: Upsample -> Resize, If on a constant -> branch.
#include "frontend/proto_rewrites.h"

#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "frontend/onnx_tensor.h"

namespace kiln {
namespace {

bool IsDefault(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t ModelOpset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (IsDefault(op.domain())) return op.version();
  }
  return 1;
}

std::string NodeName(const onnx::NodeProto& n, int index) {
  return n.name().empty() ? absl::StrCat(n.op_type(), "_", index) : n.name();
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

void SetStringAttr(onnx::NodeProto& n, const std::string& name, const std::string& value) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

// Upsample(X, scales) or Upsample(X){scales} -> Resize(X, "", scales).
absl::Status UpsampleToResize(onnx::GraphProto& g, int index) {
  onnx::NodeProto& n = *g.mutable_node(index);
  const std::string where = absl::StrCat("node '", NodeName(n, index), "' (Upsample)");
  std::string mode = "nearest";
  if (const auto* m = FindAttr(n, "mode")) mode = m->s();
  if (mode != "nearest" && mode != "linear" && mode != "bilinear") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": unknown mode '", mode, "'"));
  }
  std::string scales;
  if (n.input_size() >= 2) {
    scales = n.input(1);
  } else if (const auto* s = FindAttr(n, "scales")) {
    scales = absl::StrCat(NodeName(n, index), "/scales");
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(scales);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(s->floats_size());
    for (float f : s->floats()) t->add_float_data(f);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no scales (input or attribute)"));
  }
  onnx::NodeProto r;
  r.set_name(n.name());
  r.set_op_type("Resize");
  r.add_input(n.input(0));
  r.add_input("");
  r.add_input(scales);
  for (const auto& o : n.output()) r.add_output(o);
  SetStringAttr(r, "mode", mode == "nearest" ? "nearest" : "linear");
  SetStringAttr(r, "coordinate_transformation_mode", "asymmetric");
  SetStringAttr(r, "nearest_mode", "floor");
  n = std::move(r);
  return absl::OkStatus();
}

// The value of `name` when it is a compile-time constant of the graph, else nullopt.
absl::StatusOr<std::optional<bool>> ConstantCondition(const onnx::GraphProto& g, int before, const std::string& name,
                                                      const std::map<std::string, Tensor>& bound) {
  if (auto it = bound.find(name); it != bound.end()) return it->second.numel() > 0 && it->second.ScalarInt64() != 0;
  for (const auto& init : g.initializer()) {
    if (init.name() != name) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(init, "."));
    return t.numel() > 0 && t.ScalarInt64() != 0;
  }
  for (int i = 0; i < before; ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "Constant" || n.output_size() != 1 || n.output(0) != name) continue;
    const auto* v = FindAttr(n, "value");
    if (v == nullptr || !v->has_t()) return std::optional<bool>();
    KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(v->t(), "."));
    return t.numel() > 0 && t.ScalarInt64() != 0;
  }
  return std::optional<bool>();
}

// Renames every input of `g`'s nodes (and of their nested graphs) found in `renames`.
void RenameInputs(onnx::GraphProto& g, const std::map<std::string, std::string>& renames) {
  for (onnx::NodeProto& n : *g.mutable_node()) {
    for (std::string& in : *n.mutable_input()) {
      if (auto it = renames.find(in); it != renames.end()) in = it->second;
    }
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) RenameInputs(*a.mutable_g(), renames);
      for (onnx::GraphProto& sub : *a.mutable_graphs()) RenameInputs(sub, renames);
    }
  }
  for (onnx::ValueInfoProto& out : *g.mutable_output()) {
    if (auto it = renames.find(out.name()); it != renames.end()) out.set_name(it->second);
  }
}

// The nodes replacing If node `index` by its `branch` (values it defines get the
// node's name as a prefix; its outputs feed the If's through Identity nodes).
absl::StatusOr<std::vector<onnx::NodeProto>> InlineBranch(onnx::GraphProto& g, int index, bool take_then) {
  const onnx::NodeProto& n = g.node(index);
  const std::string name = NodeName(n, index);
  const auto* attr = FindAttr(n, take_then ? "then_branch" : "else_branch");
  if (attr == nullptr || !attr->has_g()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", name, "' (If): no ", take_then ? "then" : "else",
                                                   "_branch graph"));
  }
  onnx::GraphProto branch = attr->g();
  if (branch.output_size() != n.output_size()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", name, "' (If): the branch has ", branch.output_size(),
                                                   " outputs, the node ", n.output_size()));
  }
  std::map<std::string, std::string> renames;
  for (const auto& init : branch.initializer()) renames[init.name()] = absl::StrCat(name, "/", init.name());
  for (const auto& bn : branch.node()) {
    for (const auto& o : bn.output()) {
      if (!o.empty()) renames[o] = absl::StrCat(name, "/", o);
    }
  }
  RenameInputs(branch, renames);
  for (onnx::TensorProto init : branch.initializer()) {
    init.set_name(renames[init.name()]);
    *g.add_initializer() = std::move(init);
  }
  std::vector<onnx::NodeProto> nodes;
  for (onnx::NodeProto bn : branch.node()) {
    for (std::string& o : *bn.mutable_output()) {
      if (!o.empty()) o = renames[o];
    }
    if (!bn.name().empty()) bn.set_name(absl::StrCat(name, "/", bn.name()));
    nodes.push_back(std::move(bn));
  }
  for (int o = 0; o < n.output_size(); ++o) {
    onnx::NodeProto id;
    id.set_op_type("Identity");
    id.set_name(absl::StrCat(name, "/output_", o));
    id.add_input(branch.output(o).name());
    id.add_output(n.output(o));
    nodes.push_back(std::move(id));
  }
  return nodes;
}

}  // namespace

absl::Status RewriteOnnxModel(onnx::ModelProto& model, const std::map<std::string, Tensor>& bound) {
  const int64_t opset = ModelOpset(model);
  onnx::GraphProto& g = *model.mutable_graph();
  // Ifs may nest: each pass inlines the top-level ones.
  for (int pass = 0; pass < 16; ++pass) {
    bool changed = false;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      if (!IsDefault(n.domain())) {
        *nodes.Add() = n;
        continue;
      }
      if (n.op_type() == "Upsample" && opset < 10) {
        KILN_RETURN_IF_ERROR(UpsampleToResize(g, i));
        *nodes.Add() = g.node(i);
        changed = true;
        continue;
      }
      if (n.op_type() != "If" || n.input_size() < 1) {
        *nodes.Add() = n;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::optional<bool> cond, ConstantCondition(g, i, n.input(0), bound));
      if (!cond.has_value()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "node '", NodeName(n, i), "' (If): its condition '", n.input(0),
            "' must be a compile-time constant: kiln compiles one static graph, so it takes one branch (bind the "
            "input with --bind)"));
      }
      KILN_ASSIGN_OR_RETURN(std::vector<onnx::NodeProto> inlined, InlineBranch(g, i, *cond));
      for (onnx::NodeProto& bn : inlined) *nodes.Add() = std::move(bn);
      changed = true;
    }
    g.mutable_node()->Swap(&nodes);
    if (!changed) break;
  }
  return absl::OkStatus();
}

}  // namespace kiln
