// Fusion report formatting.
#include "fusion/fusion_report.h"

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

}  // namespace kiln
