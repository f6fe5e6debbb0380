// Fusion report formatting, and the groups as the user reads them.
#include "fusion/fusion_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln {

std::string FusionReport::ToString() const {
  std::string out = absl::StrFormat(
      "fusion: %d group%s, %d rejected candidate%s; kernels per inference: %d unfused, %d fused, %d in the bundle\n",
      groups.size(), groups.size() == 1 ? "" : "s", rejections.size(), rejections.size() == 1 ? "" : "s", nodes_before,
      nodes_fused, nodes_after);
  for (const Group& g : groups) {
    absl::StrAppendFormat(&out, "  group %-28s %-18s %-16s [%s]%s\n", g.name, g.pattern, g.pass,
                          absl::StrJoin(g.members, ", "), g.note.empty() ? "" : absl::StrCat("\n      ", g.note));
  }
  for (const Rejection& r : rejections) {
    absl::StrAppendFormat(&out, "  rejected %-16s [%s]: %s\n", r.pass, absl::StrJoin(r.nodes, ", "), r.reason);
  }
  return out;
}

std::vector<FusionReport::Group> FinalGroups(const std::vector<FusionReport::Group>& formed) {
  // A group that a later pass extended under the same name (prologue, then
  // epilogue) is listed once, in its final form.
  std::vector<FusionReport::Group> groups;
  for (auto it = formed.rbegin(); it != formed.rend(); ++it) {
    bool later = false;
    for (const FusionReport::Group& g : groups) later |= g.name == it->name;
    if (!later) groups.push_back(*it);
  }
  std::reverse(groups.begin(), groups.end());
  // A group whose member is an earlier group's node (the merged sibling MatMul that
  // FuseEpilogue then took as its anchor) absorbs it: the user sees one group with
  // the original ONNX node names and every pass that shaped it.
  std::vector<bool> absorbed(groups.size(), false);
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<std::string> members;
    for (const std::string& m : groups[i].members) {
      size_t j = 0;
      while (j < i && (absorbed[j] || groups[j].name != m)) ++j;
      if (j == i) {
        members.push_back(m);
        continue;
      }
      absorbed[j] = true;
      members.insert(members.end(), groups[j].members.begin(), groups[j].members.end());
      groups[i].pass = absl::StrCat(groups[j].pass, "+", groups[i].pass);
    }
    groups[i].members = std::move(members);
  }
  std::vector<FusionReport::Group> result;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!absorbed[i]) result.push_back(std::move(groups[i]));
  }
  return result;
}

}  // namespace kiln
