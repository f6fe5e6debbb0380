// Expansion of ONNX function ops into their bodies (ONNX's schemas and expander).
#include "frontend/expand_functions.h"

#include <exception>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "onnx/defs/function.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace kiln {
namespace {

bool IsDefault(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t ModelOpset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (IsDefault(op.domain())) return op.version();
  }
  return 1;
}

// The schema of `node` at `opset` when it defines a function body, else nullptr.
const onnx::OpSchema* FunctionSchema(const onnx::NodeProto& node, int64_t opset) {
  if (!IsDefault(node.domain())) return nullptr;
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), "");
  if (schema == nullptr || !(schema->HasFunction() || schema->HasContextDependentFunction())) return nullptr;
  return schema;
}

// Value name -> type, from the graph's inputs, initializers and (when ONNX's shape
// inference accepts the model) its intermediate values.
std::map<std::string, onnx::TypeProto> KnownTypes(const onnx::ModelProto& model) {
  std::map<std::string, onnx::TypeProto> types;
  onnx::ModelProto copy = model;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    // Types of intermediates stay unknown; bodies that need them fail to build below.
  }
  for (const auto& v : copy.graph().input()) types[v.name()] = v.type();
  for (const auto& v : copy.graph().value_info()) types[v.name()] = v.type();
  for (const auto& t : copy.graph().initializer()) {
    onnx::TypeProto type;
    type.mutable_tensor_type()->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    types[t.name()] = type;
  }
  return types;
}

absl::StatusOr<onnx::FunctionProto> BuildBody(const onnx::NodeProto& node, const onnx::OpSchema& schema,
                                              const std::map<std::string, onnx::TypeProto>& types,
                                              const std::set<std::string>& defined, const std::string& where) {
  if (schema.HasFunction()) return *schema.GetFunction();
  std::vector<onnx::TypeProto> input_types;
  for (const std::string& in : node.input()) {
    // An input nothing defines is an invalid model, and ONNX's builders assume it is
    // not one (SequenceMap's dereferenced a null pointer).
    if (!in.empty() && defined.count(in) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": input '", in, "' is not a graph input, an initializer or any node's output"));
    }
    auto it = types.find(in);
    input_types.push_back(it == types.end() ? onnx::TypeProto() : it->second);
  }
  onnx::FunctionProto body;
  try {
    onnx::FunctionBodyBuildContextImpl ctx(node, input_types);
    if (schema.BuildContextDependentFunction(ctx, body)) return body;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ONNX cannot build its function body: ", e.what()));
  }
  return absl::UnimplementedError(absl::StrCat(
      where, ": ONNX could not build its function body for these inputs (kiln has no definition of ", node.op_type(),
      ")"));
}

// Attributes of body nodes that refer to the calling node's (ref_attr_name) take its
// value, else the schema's default for it, else are dropped (the body op's own
// default then applies). ONNX 1.12's expander keeps the reference's placeholder
// value where the call leaves the attribute unset.
void ResolveAttributeRefs(const onnx::NodeProto& call, const onnx::OpSchema& schema, onnx::FunctionProto& body) {
  std::map<std::string, const onnx::AttributeProto*> given;
  for (const auto& [name, attr] : schema.attributes()) {
    if (attr.default_value.type() != onnx::AttributeProto::UNDEFINED) given[name] = &attr.default_value;
  }
  for (const auto& a : call.attribute()) given[a.name()] = &a;
  for (onnx::NodeProto& n : *body.mutable_node()) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> kept;
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.ref_attr_name().empty()) {
        *kept.Add() = a;
        continue;
      }
      auto it = given.find(a.ref_attr_name());
      if (it == given.end()) continue;
      onnx::AttributeProto* v = kept.Add();
      *v = *it->second;
      v->set_name(a.name());
    }
    n.mutable_attribute()->Swap(&kept);
  }
}

}  // namespace

absl::Status ExpandFunctionOps(onnx::ModelProto& model, const std::function<bool(const std::string&)>& supported,
                               std::map<int, int64_t>* node_opsets) {
  const int64_t model_opset = ModelOpset(model);
  onnx::GraphProto& graph = *model.mutable_graph();
  std::vector<int64_t> opsets(graph.node_size(), 0);  // 0: the model's
  for (int depth = 0; depth < kMaxFunctionDepth; ++depth) {
    bool any = false;
    bool needs_types = false;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& n = graph.node(i);
      if (supported(n.op_type())) continue;
      const onnx::OpSchema* s = FunctionSchema(n, opsets[i] ? opsets[i] : model_opset);
      any |= s != nullptr;
      needs_types |= s != nullptr && !s->HasFunction();
    }
    if (!any) break;
    const std::map<std::string, onnx::TypeProto> types =
        needs_types ? KnownTypes(model) : std::map<std::string, onnx::TypeProto>();
    std::set<std::string> defined;  // graph inputs, initializers, node outputs
    for (const auto& v : graph.input()) defined.insert(v.name());
    for (const auto& t : graph.initializer()) defined.insert(t.name());
    for (const auto& n : graph.node()) defined.insert(n.output().begin(), n.output().end());
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    std::vector<int64_t> new_opsets;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& n = graph.node(i);
      const int64_t opset = opsets[i] ? opsets[i] : model_opset;
      const onnx::OpSchema* schema = supported(n.op_type()) ? nullptr : FunctionSchema(n, opset);
      if (schema == nullptr) {
        *nodes.Add() = n;
        new_opsets.push_back(opsets[i]);
        continue;
      }
      const std::string name = n.name().empty() ? absl::StrCat(n.op_type(), "_", i) : n.name();
      const std::string where = absl::StrCat("node '", name, "' (", n.op_type(), ")");
      absl::StatusOr<onnx::FunctionProto> body = BuildBody(n, *schema, types, defined, where);
      if (!body.ok()) return body.status();
      ResolveAttributeRefs(n, *schema, *body);
      int64_t body_opset = schema->since_version();
      for (const auto& op : body->opset_import()) {
        if (IsDefault(op.domain())) body_opset = op.version();
      }
      onnx::GraphProto expanded;
      try {
        onnx::FunctionExpandHelper(n, *body, expanded, name + "/");
      } catch (const std::exception& e) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expanding its ONNX function body failed: ", e.what()));
      }
      for (int k = 0; k < expanded.node_size(); ++k) {
        onnx::NodeProto* added = nodes.Add();
        *added = expanded.node(k);
        if (added->name().empty()) added->set_name(absl::StrCat(name, "/", added->op_type(), "_", k));
        new_opsets.push_back(body_opset);
      }
    }
    graph.mutable_node()->Swap(&nodes);
    opsets = std::move(new_opsets);
  }
  if (node_opsets != nullptr) {
    node_opsets->clear();
    for (size_t i = 0; i < opsets.size(); ++i) {
      if (opsets[i] != 0) (*node_opsets)[static_cast<int>(i)] = opsets[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
