// ONNX ModelProto -> kiln Graph.
#include "frontend/onnx_importer.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "frontend/expand_functions.h"
#include "frontend/legacy_ops.h"
#include "frontend/onnx_tensor.h"
#include "frontend/proto_rewrites.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "graph/eliminate_dead_code.h"
#include "graph/infer_shapes.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

namespace kiln {
namespace {

absl::Status Prefixed(const absl::Status& s, const std::string& prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
}

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// kiln computes float64 in float32 (as TensorRT's ONNX parser does): DOUBLE inputs,
// initializers, constants and Cast targets import as FLOAT.
int32_t ComputedElemType(int32_t t) { return t == onnx::TensorProto::DOUBLE ? onnx::TensorProto::FLOAT : t; }

int64_t OnnxLibraryMaxOpset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find("");
  return it == map.end() ? 0 : it->second.second;
}

absl::StatusOr<Attribute> ConvertAttribute(const onnx::AttributeProto& a, const std::string& base_dir,
                                           const std::string& where) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return Attribute(static_cast<int64_t>(a.i()));
    case A::FLOAT: return Attribute(a.f());
    case A::STRING: return Attribute(a.s());
    case A::INTS: return Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::FLOATS: return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case A::STRINGS: return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: {
      auto t = TensorFromProto(a.t(), base_dir, /*double_to_float=*/true);
      if (!t.ok()) return Prefixed(t.status(), absl::StrCat(where, ": attribute '", a.name(), "'"));
      return Attribute(*std::move(t));
    }
    default:
      return absl::UnimplementedError(absl::StrCat(where, ": attribute '", a.name(), "' has type ",
                                                   A::AttributeType_Name(a.type()),
                                                   ", which kiln does not support"));
  }
}

// Applies --input-shape ranges (ImportOptions::input_shape_ranges): fixed sizes are
// set on the input, ranged dims get the symbol their dim_param names (or
// `<input>_<d>`), and each symbol joins *ranges. Errors name the input and the dim.
absl::Status ApplyInputShapeRanges(onnx::ModelProto& model, const std::map<std::string, std::vector<SizeRange>>& specs,
                                   const std::map<std::string, Shape>& fixed, std::vector<DimSymbol>* ranges) {
  for (const auto& [name, dims] : specs) {
    const std::string flag = absl::StrCat("--input-shape ", name);
    if (fixed.count(name)) return absl::InvalidArgumentError(absl::StrCat(flag, " is given twice"));
    onnx::ValueInfoProto* input = nullptr;
    for (auto& in : *model.mutable_graph()->mutable_input()) {
      if (in.name() == name) input = &in;
    }
    if (input == nullptr || !input->type().has_tensor_type()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": the model has no tensor input of that name"));
    }
    auto* shape = input->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() != static_cast<int>(dims.size())) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", dims.size(), " dims, but the input has rank ",
                                                     shape->dim_size()));
    }
    for (int d = 0; d < shape->dim_size(); ++d) {
      auto* dim = shape->mutable_dim(d);
      const auto [lo, hi, opt] = dims[d];
      if (dim->has_dim_value() && dim->dim_value() >= 0) {
        if (lo != dim->dim_value() || hi != dim->dim_value()) {
          return absl::InvalidArgumentError(absl::StrCat(flag, ": dim ", d, " is fixed to ", dim->dim_value(),
                                                         " by the model"));
        }
        continue;
      }
      if (lo == hi) {
        dim->set_dim_value(lo);
        continue;
      }
      std::string symbol = dim->has_dim_param() ? dim->dim_param() : absl::StrCat(name, "_", d);
      for (char& c : symbol) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      if (std::isdigit(static_cast<unsigned char>(symbol[0]))) symbol.insert(0, "_");
      dim->set_dim_param(symbol);
      auto same = std::find_if(ranges->begin(), ranges->end(), [&](const DimSymbol& r) { return r.name == symbol; });
      if (same == ranges->end()) {
        ranges->push_back({symbol, lo, hi, opt});
      } else if (same->min != lo || same->max != hi || (opt > 0 && same->opt > 0 && same->opt != opt)) {
        auto text = [](int64_t min, int64_t max, int64_t o) {
          return absl::StrCat(min, "..", max, o > 0 ? absl::StrCat(":", o) : "");
        };
        return absl::InvalidArgumentError(absl::StrCat(flag, ": dim ", d, " (", symbol, ") is given ",
                                                       text(lo, hi, opt), " here and ",
                                                       text(same->min, same->max, same->opt), " elsewhere"));
      } else if (opt > 0) {
        same->opt = opt;
      }
    }
  }
  return absl::OkStatus();
}

// Applies --input-shape overrides to the model's declared inputs and checks that
// every dim ends up known.
// Dims named in `ranges` (--dim seq=1..512) take their largest value, and
// *symbol_axes records, per input, the symbol id of each such axis (-1 elsewhere).
absl::Status FixInputShapes(onnx::ModelProto& model, const std::map<std::string, Shape>& overrides,
                            const std::map<std::string, int64_t>& dims, const std::vector<DimSymbol>& ranges,
                            const std::set<std::string>& initializer_names,
                            std::map<std::string, std::vector<int>>* symbol_axes) {
  std::set<std::string> used, used_dims;
  std::vector<std::string> input_names;
  // Dims still unknown: by name ("" for unnamed ones), where each appears.
  std::map<std::string, std::vector<std::string>> unknown;
  std::set<std::string> unnamed_inputs;  // inputs with an unnamed unknown dim
  for (auto& input : *model.mutable_graph()->mutable_input()) {
    if (initializer_names.count(input.name())) continue;
    input_names.push_back(input.name());
    if (!input.type().has_tensor_type()) {
      return absl::UnimplementedError(
          absl::StrCat("input '", input.name(), "' is not a tensor (sequences, maps and optionals are not supported)"));
    }
    auto* tensor_type = input.mutable_type()->mutable_tensor_type();
    auto it = overrides.find(input.name());
    if (it != overrides.end()) {
      used.insert(input.name());
      const Shape& shape = it->second;
      if (tensor_type->has_shape() && tensor_type->shape().dim_size() != static_cast<int>(shape.size())) {
        return absl::InvalidArgumentError(absl::StrCat("--input-shape ", input.name(), "=", absl::StrJoin(shape, "x"),
                                                       " has rank ", shape.size(), " but the model's input has rank ",
                                                       tensor_type->shape().dim_size()));
      }
      auto* s = tensor_type->mutable_shape();
      for (size_t d = 0; d < shape.size(); ++d) {
        if (d < static_cast<size_t>(s->dim_size()) && s->dim(d).has_dim_value() && s->dim(d).dim_value() != shape[d]) {
          return absl::InvalidArgumentError(absl::StrCat("--input-shape ", input.name(), ": dim ", d, " is fixed to ",
                                                         s->dim(d).dim_value(), " by the model, not ", shape[d]));
        }
      }
      s->clear_dim();
      for (int64_t d : shape) s->add_dim()->set_dim_value(d);
    }
    if (!tensor_type->has_shape()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name(),
                                                     "' has no shape in the model; give it one with --input-shape ",
                                                     input.name(), "=DxDx..."));
    }
    std::vector<int>& axes = (*symbol_axes)[input.name()];
    axes.assign(tensor_type->shape().dim_size(), -1);
    for (int d = 0; d < tensor_type->shape().dim_size(); ++d) {
      auto* dim = tensor_type->mutable_shape()->mutable_dim(d);
      if (dim->has_dim_value() && dim->dim_value() >= 0) continue;
      if (dim->has_dim_param()) {
        if (auto named = dims.find(dim->dim_param()); named != dims.end()) {
          used_dims.insert(named->first);
          dim->set_dim_value(named->second);
          continue;
        }
        auto range = std::find_if(ranges.begin(), ranges.end(),
                                  [&](const DimSymbol& r) { return r.name == dim->dim_param(); });
        if (range != ranges.end()) {
          used_dims.insert(range->name);
          axes[d] = static_cast<int>(range - ranges.begin());
          dim->set_dim_value(range->max);
          continue;
        }
      }
      unknown[dim->has_dim_param() ? dim->dim_param() : ""].push_back(absl::StrCat("input '", input.name(), "' dim ", d));
      if (!dim->has_dim_param()) unnamed_inputs.insert(input.name());
    }
  }
  for (const auto& [name, shape] : overrides) {
    if (!used.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--input-shape names '", name, "', which is not a model input (inputs: ",
                                                     absl::StrJoin(input_names, ", "), ")"));
    }
  }
  std::map<std::string, int64_t> all_dims = dims;
  for (const DimSymbol& r : ranges) {
    if (!all_dims.emplace(r.name, r.max).second) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", r.name, " is given both a value and a range"));
    }
    if (r.min < 1 || r.max < r.min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim ", r.name, "=", r.min, "..", r.max, ": a range needs 1 <= LO <= HI"));
    }
  }
  for (const auto& [name, value] : all_dims) {
    if (value < 0) return absl::InvalidArgumentError(absl::StrCat("--dim ", name, "=", value, ": a dim must be >= 0"));
    if (!used_dims.count(name)) {
      std::vector<std::string> named;
      for (const auto& [n, where] : unknown) {
        if (!n.empty()) named.push_back(n);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "--dim ", name, ": no dynamic input dim has that name",
          named.empty() ? std::string(" (the model's inputs have no other named dynamic dims)")
                        : absl::StrCat(" (dynamic dims left: ", absl::StrJoin(named, ", "), ")")));
    }
  }
  if (!unknown.empty()) {
    std::vector<std::string> parts, fixes;
    for (const auto& [name, where] : unknown) {
      parts.push_back(absl::StrCat(name.empty() ? "unnamed" : absl::StrCat("'", name, "'"), " (",
                                   absl::StrJoin(where, ", "), ")"));
      if (!name.empty()) fixes.push_back(absl::StrCat("--dim ", name, "=N"));
    }
    for (const std::string& input : unnamed_inputs) fixes.push_back(absl::StrCat("--input-shape ", input, "=DxD..."));
    return absl::InvalidArgumentError(absl::StrCat("the model's inputs have dynamic dims: ", absl::StrJoin(parts, "; "),
                                                   "; fix them with ", absl::StrJoin(fixes, " "),
                                                   " (or give whole shapes with --input-shape NAME=DxD...); "
                                                   "kiln compile also takes a named dim as a range, --dim NAME=LO..HI "
                                                   "(one bundle for every size in the range)"));
  }
  return absl::OkStatus();
}

// Calls fn(location) for the "location" entry of every external tensor that the
// ONNX checker inspects (initializers and tensor attributes of top-level nodes).
template <typename Fn>
void ForEachExternalLocation(onnx::ModelProto& model, Fn fn) {
  auto visit = [&](onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (auto& kv : *t.mutable_external_data()) {
      if (kv.key() == "location") fn(*kv.mutable_value());
    }
  };
  for (auto& t : *model.mutable_graph()->mutable_initializer()) visit(t);
  for (auto& n : *model.mutable_graph()->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) visit(*a.mutable_t());
    }
  }
}

absl::Status RunOnnxChecks(onnx::ModelProto& model, const std::string& base_dir) {
  // Given a ModelProto, ONNX's checker looks for external data relative to the
  // working directory; point it at the model's folder for the check, then restore.
  std::vector<std::string> original;
  ForEachExternalLocation(model, [&](std::string& loc) {
    original.push_back(loc);
    if (!loc.empty() && loc[0] != '/') loc = (std::filesystem::path(base_dir) / loc).string();
  });
  struct Restore {
    onnx::ModelProto& model;
    std::vector<std::string>& original;
    ~Restore() {
      size_t i = 0;
      ForEachExternalLocation(model, [&](std::string& loc) { loc = original[i++]; });
    }
  } restore{model, original};
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX checker: ", e.what()));
  }
  return absl::OkStatus();
}

// ONNX's own shape inference, as a cross-check. It runs only after kiln's
// inference has accepted the graph: ONNX 1.12's Conv/ConvTranspose inference
// dereferences past the input rank on malformed models and crashes the process
// (found by frontend/fuzz), while kiln's reports them. It works on a copy, so
// the caller's model is unchanged.
absl::Status RunOnnxShapeInference(const onnx::ModelProto& model) {
  onnx::ModelProto copy = model;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX shape inference: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ModelDir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

int64_t DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (IsDefaultDomain(op.domain())) return op.version();
  }
  return 1;
}

namespace {

bool KilnDefinesOp(const std::string& op) { return OpRegistry::Global().Find(op) != nullptr; }

// The ops of `model` kiln has no definition of, as they stand (no function expansion).
std::vector<UnsupportedOp> ScanUnsupportedOps(const onnx::ModelProto& model) {
  std::map<std::pair<std::string, std::string>, UnsupportedOp> found;
  const int64_t opset = DefaultOpset(model);
  int index = 0;
  for (const auto& node : model.graph().node()) {
    const std::string name = node.name().empty() ? absl::StrCat("#", index) : node.name();
    ++index;
    const bool supported = IsDefaultDomain(node.domain()) && KilnDefinesOp(node.op_type());
    if (supported) continue;
    auto& entry = found[{node.domain(), node.op_type()}];
    entry.domain = node.domain();
    entry.op_type = node.op_type();
    entry.opset = opset;
    for (const auto& op : model.opset_import()) {
      if (op.domain() == node.domain()) entry.opset = op.version();
    }
    entry.node_names.push_back(name);
  }
  std::vector<UnsupportedOp> out;
  for (auto& [key, value] : found) out.push_back(std::move(value));
  return out;
}

}  // namespace

std::vector<UnsupportedOp> FindUnsupportedOps(const onnx::ModelProto& model) {
  onnx::ModelProto expanded = model;
  if (!RewriteOnnxModel(expanded, {}).ok() || !ExpandFunctionOps(expanded, KilnDefinesOp, nullptr).ok()) {
    return ScanUnsupportedOps(model);
  }
  return ScanUnsupportedOps(expanded);
}

std::string FormatUnsupportedOps(const std::vector<UnsupportedOp>& ops) {
  if (ops.empty()) return "";
  int64_t total = 0;
  for (const auto& op : ops) total += op.node_names.size();
  std::string out = absl::StrCat(ops.size(), " unsupported op type", ops.size() == 1 ? "" : "s", " (", total,
                                 " node", total == 1 ? "" : "s", "):");
  for (const auto& op : ops) {
    std::vector<std::string> names(op.node_names.begin(),
                                   op.node_names.begin() + std::min<size_t>(op.node_names.size(), 5));
    absl::StrAppend(&out, "\n  ", op.domain.empty() ? "" : absl::StrCat(op.domain, "::"), op.op_type, " (opset ",
                    op.opset, ") x", op.node_names.size(), ": ", absl::StrJoin(names, ", "),
                    op.node_names.size() > 5 ? ", ..." : "");
  }
  return out;
}

absl::StatusOr<Shape> ParseShapeSpec(const std::string& text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad shape '", text, "': expected dims like 1x3x224x224"));
    }
    shape.push_back(d);
  }
  return shape;
}

absl::StatusOr<onnx::ModelProto> ReadOnnxModel(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes.size(),
                                                   " bytes: an ONNX file over 2 GiB must keep its weights as "
                                                   "external data (protobuf's limit)"));
  }
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a valid ONNX model (protobuf parsing failed: truncated or corrupt file?)"));
  }
  if (!model.has_graph()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid ONNX model (no graph)"));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxModel(onnx::ModelProto model, const std::string& base_dir,
                                                       const ImportOptions& options) {
  const int64_t opset = DefaultOpset(model);
  if (opset < kMinOpset || opset > kMaxOpset) {
    return absl::UnimplementedError(absl::StrCat("model uses opset ", opset, "; kiln imports opsets ", kMinOpset,
                                                 " to ", kMaxOpset));
  }
  std::set<std::string> initializer_names;
  for (const auto& init : model.graph().initializer()) initializer_names.insert(init.name());
  std::map<std::string, std::vector<int>> symbol_axes;
  std::vector<DimSymbol> ranges = options.dim_ranges;
  KILN_RETURN_IF_ERROR(ApplyInputShapeRanges(model, options.input_shape_ranges, options.input_shapes, &ranges));
  for (const DimSymbol& r : ranges) {
    if (r.opt != 0 && (r.opt < r.min || r.opt > r.max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim ", r.name, "=", r.min, "..", r.max, ":", r.opt, ": the opt size must lie in the range"));
    }
  }
  // A range of one value (`--dim batch=1..1`) is that fixed size: as a symbol, shape
  // rules would treat it as varying (batch 1..1 broadcast against 3 is not provably
  // valid for every size of a range).
  std::map<std::string, int64_t> dims = options.dims;
  for (auto it = ranges.begin(); it != ranges.end();) {
    if (it->min != it->max) {
      ++it;
      continue;
    }
    dims[it->name] = it->min;
    it = ranges.erase(it);
  }
  KILN_RETURN_IF_ERROR(FixInputShapes(model, options.input_shapes, dims, ranges, initializer_names, &symbol_axes));

  // Deprecated ops and Ifs on constants are rewritten (frontend/proto_rewrites.h), and
  // ops kiln lacks that ONNX defines as functions of other ops become their bodies;
  // the checks below read the model as given.
  onnx::ModelProto expanded = model;
  KILN_RETURN_IF_ERROR(RewriteOnnxModel(expanded, options.constant_inputs));
  std::map<int, int64_t> body_opsets;  // node position -> its function's opset
  KILN_RETURN_IF_ERROR(ExpandFunctionOps(expanded, KilnDefinesOp, &body_opsets));
  if (auto unsupported = ScanUnsupportedOps(expanded); !unsupported.empty()) {
    return absl::UnimplementedError(FormatUnsupportedOps(unsupported));
  }
  // The installed ONNX library may predate the model's opset; then kiln's own
  // inference and verification stand alone.
  const bool run_onnx_checks = options.run_onnx_checker && opset <= OnnxLibraryMaxOpset();
  if (run_onnx_checks) KILN_RETURN_IF_ERROR(RunOnnxChecks(model, base_dir));

  const onnx::GraphProto& gp = expanded.graph();
  auto graph = std::make_unique<Graph>();
  graph->set_name(gp.name().empty() ? "main" : gp.name());
  graph->set_dim_symbols(ranges);

  for (const auto& init : gp.initializer()) {
    auto t = TensorFromProto(init, base_dir, /*double_to_float=*/true);
    if (!t.ok()) return Prefixed(t.status(), "initializer");
    if (graph->FindValue(init.name())) {
      return absl::InvalidArgumentError(absl::StrCat("initializer '", init.name(), "' is defined twice"));
    }
    graph->AddConstant(init.name(), *std::move(t));
  }
  for (const auto& input : gp.input()) {
    if (initializer_names.count(input.name())) continue;  // a weight listed as input (IR < 4)
    const auto& tt = input.type().tensor_type();
    auto dtype = DTypeFromOnnx(ComputedElemType(tt.elem_type()));
    if (!dtype.ok()) return Prefixed(dtype.status(), absl::StrCat("input '", input.name(), "'"));
    Shape shape;
    for (const auto& d : tt.shape().dim()) shape.push_back(d.dim_value());
    KILN_RETURN_IF_ERROR(CheckedTensorBytes(*dtype, shape, absl::StrCat("input '", input.name(), "'")).status());
    Value* v = graph->AddValue(input.name());
    if (v->name() != input.name()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name(), "' is declared twice"));
    }
    v->SetType(*dtype, shape);
    if (auto axes = symbol_axes.find(input.name()); axes != symbol_axes.end()) {
      std::vector<DimExpr> dims;
      for (size_t d = 0; d < shape.size(); ++d) {
        const int id = d < axes->second.size() ? axes->second[d] : -1;
        dims.push_back(id >= 0 ? DimExpr::Symbol(id) : DimExpr::Constant(shape[d]));
      }
      v->SetDims(std::move(dims));
    }
    if (auto it = options.constant_inputs.find(input.name()); it != options.constant_inputs.end()) {
      if (it->second.dtype() != *dtype || it->second.shape() != shape) {
        return absl::InvalidArgumentError(absl::StrCat("value bound to input '", input.name(), "' is ",
                                                       it->second.TypeString(), ", expected ", v->TypeString()));
      }
      graph->SetConstant(v, it->second);
      continue;
    }
    graph->AddInput(v);
  }
  auto value_for = [&](const std::string& name) -> Value* {
    if (Value* v = graph->FindValue(name)) return v;
    return nullptr;
  };
  absl::flat_hash_map<const Node*, int64_t> node_opsets;
  int index = 0;
  for (const auto& np : gp.node()) {
    const std::string node_name = np.name().empty() ? absl::StrCat(np.op_type(), "_", index) : np.name();
    ++index;
    const std::string where = absl::StrCat("node '", node_name, "' (", np.op_type(), ")");
    std::vector<Value*> inputs;
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* v = value_for(in);
      if (v == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": input '", in,
                                                       "' is not a graph input, initializer or earlier node output"));
      }
      inputs.push_back(v);
    }
    std::vector<Value*> outputs;
    for (const std::string& out : np.output()) {
      // Absent optional outputs still get a (dead) value so arity is preserved.
      if (!out.empty() && graph->FindValue(out)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": output '", out, "' is already defined"));
      }
      outputs.push_back(graph->AddValue(out.empty() ? absl::StrCat(node_name, "/unused") : out));
    }
    Node* node = graph->AddNode(np.op_type(), inputs, outputs, node_name);
    const bool cast = np.op_type() == "Cast" && IsDefaultDomain(np.domain());
    if (auto it = body_opsets.find(index - 1); it != body_opsets.end()) node_opsets[node] = it->second;
    for (const auto& a : np.attribute()) {
      KILN_ASSIGN_OR_RETURN(Attribute attr, ConvertAttribute(a, base_dir, where));
      if (cast && a.name() == "to" && a.i() == onnx::TensorProto::DOUBLE) attr = int64_t{onnx::TensorProto::FLOAT};
      node->SetAttr(a.name(), std::move(attr));
    }
  }
  for (const auto& out : gp.output()) {
    Value* v = value_for(out.name());
    if (v == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("graph output '", out.name(), "' is not produced by any node"));
    }
    graph->AddOutput(v);
  }
  KILN_RETURN_IF_ERROR(UpgradeLegacyNodes(*graph, opset, node_opsets));
  KILN_RETURN_IF_ERROR(InferShapes(*graph));
  if (run_onnx_checks) KILN_RETURN_IF_ERROR(RunOnnxShapeInference(model));
  KILN_RETURN_IF_ERROR(EliminateDeadCode().Run(*graph).status());
  // The importer's own consistency check: a failure here is a kiln bug.
  if (absl::Status s = VerifyGraph(*graph, {.require_types = true, .require_known_ops = true}); !s.ok()) {
    return absl::InternalError(absl::StrCat("imported graph fails verification (a kiln bug): ", s.message()));
  }
  return graph;
}

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ReadOnnxModel(path));
  auto graph = ImportOnnxModel(std::move(model), ModelDir(path), options);
  if (!graph.ok()) return Prefixed(graph.status(), path);
  return graph;
}

}  // namespace kiln
