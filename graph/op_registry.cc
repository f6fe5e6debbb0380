// The global op registry and arity-checked inference.
#include "graph/op_registry.h"

#include "common/status_macros.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln {

void RegisterAllOpFiles(OpRegistry& registry);  // generated: graph/op_list.cc in the build dir

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterAllOpFiles(*r);
    return r;
  }();
  return *registry;
}

void OpRegistry::Register(OpDef def) {
  std::string name = def.name;
  ops_[name] = std::move(def);
}

const OpDef* OpRegistry::Find(absl::string_view op_type) const {
  auto it = ops_.find(op_type);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(&def);
  std::sort(out.begin(), out.end(), [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return out;
}

absl::Status InferNode(Node& node) {
  const OpDef* def = OpRegistry::Global().Find(node.op_type());
  if (def == nullptr) return node.Error("unsupported op type");
  // Trailing absent optional inputs do not count.
  int present = node.num_inputs();
  while (present > 0 && !node.has_input(present - 1)) --present;
  if (present < def->min_inputs || present > def->max_inputs) {
    return node.Error(absl::StrCat("takes ", def->min_inputs,
                                   def->max_inputs == def->min_inputs ? ""
                                   : def->max_inputs >= OpDef::kVariadic
                                       ? " or more"
                                       : absl::StrCat(" to ", def->max_inputs),
                                   " inputs, got ", present));
  }
  for (int i = 0; i < def->min_inputs; ++i) {
    if (!node.has_input(i)) return node.Error(absl::StrCat("required input ", i, " is missing"));
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (node.has_input(i) && !node.input(i)->has_type()) {
      return node.Error(absl::StrCat("input ", i, " ('", node.input(i)->name(), "') has no known type"));
    }
  }
  if (node.num_outputs() < def->min_outputs || node.num_outputs() > def->max_outputs) {
    return node.Error(absl::StrCat("has ", node.num_outputs(), " outputs; expected ", def->min_outputs,
                                   def->max_outputs == def->min_outputs ? ""
                                                                        : absl::StrCat(" to ", def->max_outputs)));
  }
  KILN_RETURN_IF_ERROR(def->infer(node));
  // Every inferred type is checked here, once: later arithmetic on shapes (element
  // counts, byte sizes, offsets) relies on it.
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Value* out = node.output(i);
    if (out == nullptr || !out->has_type()) continue;
    absl::Status size =
        CheckedTensorBytes(out->dtype(), out->shape(), absl::StrCat("output ", i, " ('", out->name(), "')")).status();
    if (!size.ok()) return node.Error(size.message());
  }
  return absl::OkStatus();
}

}  // namespace kiln
