// Expanding fused groups that have no GPU kernel (compiler/expand_groups.h).
#include "compiler/expand_groups.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

Node* FindNodeNamed(Graph& graph, const std::string& name) {
  for (Node* n : graph.nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

// After a MatMul group was expanded: the longest chain from the MatMul through
// members (each the only reader of the previous one's output) that a library call
// takes fused (cuBLASLt: the bias add, a residual add and a Relu / tanh-Gelu) becomes a
// group again, so the expansion gives up only what the library cannot do. Returns
// what it kept, for the report ("" when nothing).
absl::StatusOr<std::string> RegroupLibraryPrefix(Graph& graph, const std::string& anchor,
                                                 const std::vector<std::string>& members,
                                                 const codegen::KernelOptions& kernel_options) {
  Node* matmul = FindNodeNamed(graph, anchor);
  if (matmul == nullptr || matmul->op_type() != "MatMul") return std::string();
  std::vector<Node*> chain = {matmul};
  while (chain.size() < 4) {
    const Value* out = chain.back()->output(0);
    if (out == nullptr || out->uses().size() != 1 || graph.IsGraphOutput(out)) break;
    Node* next = out->uses()[0].node;
    if (std::find(members.begin(), members.end(), next->name()) == members.end()) break;
    chain.push_back(next);
  }
  std::vector<std::string> names;
  for (const Node* m : chain) names.push_back(m->name());
  for (size_t len = names.size(); len >= 2; --len) {
    std::vector<Node*> part;
    for (size_t i = 0; i < len; ++i) part.push_back(FindNodeNamed(graph, names[i]));
    if (std::find(part.begin(), part.end(), nullptr) != part.end()) break;
    absl::StatusOr<Node*> group = FormFusedGroup(graph, part, "matmul+epilogue", part[0]);
    if (!group.ok()) continue;
    if (codegen::KernelChoice c = codegen::ChooseKernel(**group, kernel_options);
        c.kind == codegen::KernelKind::kLibrary) {
      return absl::StrCat("kept [", absl::StrJoin(names.begin(), names.begin() + len, ", "), "] as one ", c.library,
                          " call");
    }
    KILN_RETURN_IF_ERROR(InlineFusedGroup(graph, *group));
  }
  return std::string();
}

// Sets the report note of the fused group named `group`.
void NoteGroup(FusionReport* report, const std::string& group, const std::string& text) {
  for (FusionReport::Group& g : report->groups) {
    if (g.name == group) g.note = text;
  }
}

}  // namespace

void NoteLibraryGroup(const Node& n, const codegen::KernelChoice& c, FusionReport* report) {
  // A group expanded and its library prefix re-formed under the same name: the
  // expansion's note already says what the library call kept.
  for (const FusionReport::Group& g : report->groups) {
    if (g.name == n.name() && absl::StartsWith(g.note, "expanded")) return;
  }
  if (c.kind == codegen::KernelKind::kGemm) NoteGroup(report, n.name(), "");
  if (c.kind == codegen::KernelKind::kLibrary && !c.reason.empty()) {
    NoteGroup(report, n.name(), absl::StrCat("on ", c.library, " (--matmul-groups auto on sm_90a): ", c.reason));
  }
}

absl::StatusOr<int> ExpandGroupsWithoutKernels(Graph& graph, const codegen::KernelOptions& kernel_options,
                                               FusionReport* report) {
  int expanded = 0;
  for (Node* n : graph.nodes()) {
    if (!IsFusedGroup(*n)) continue;
    if (const codegen::KernelChoice c = codegen::ChooseKernel(*n, kernel_options);
        c.kind == codegen::KernelKind::kLibrary) {
      NoteLibraryGroup(*n, c, report);
      continue;
    }
    absl::StatusOr<std::vector<codegen::KernelLaunch>> kernels = codegen::GenerateNodeKernels(*n, kernel_options);
    if (kernels.ok()) continue;
    if (kernels.status().code() != absl::StatusCode::kUnimplemented) return kernels.status();
    const std::string name = n->name();
    const std::string anchor = n->GetString("anchor", "").value_or("");
    const std::vector<std::string> members = FusedGroupMembers(*n);
    KILN_RETURN_IF_ERROR(InlineFusedGroup(graph, n));
    ++expanded;
    std::string kept;
    if (!anchor.empty()) {
      KILN_ASSIGN_OR_RETURN(kept, RegroupLibraryPrefix(graph, anchor, members, kernel_options));
    }
    NoteGroup(report, name, absl::StrCat("expanded: ", kernels.status().message(), kept.empty() ? "" : "; ", kept));
  }
  return expanded;
}


}  // namespace kiln
