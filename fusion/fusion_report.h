// The fusion report: every group the fusion passes formed (pattern, member ONNX node
// names) and every candidate they rejected, with the reason. Printed by
// `kiln compile --report` and kept in the bundle for `kiln inspect`.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct FusionReport {
  struct Group {
    std::string pass;     // "fuse-epilogue", ...
    std::string name;     // the FusedGroup node's name
    std::string pattern;  // its "pattern" attribute
    std::vector<std::string> members;  // original node names, in order
    // Set when the compiler had to expand the group again: why (e.g. no fused GPU
    // kernel for this pattern yet).
    std::string note = {};
  };
  struct Rejection {
    std::string pass;
    std::vector<std::string> nodes;  // the candidate's nodes (the anchor first)
    // Why, in words a user can act on, starting with the category: "shape: ...",
    // "dtype: ...", "other consumers: ...", "unsupported op: ...", "resource: ...",
    // "not convex: ...".
    std::string reason;
  };
  std::vector<Group> groups;
  std::vector<Rejection> rejections;
  // Graph nodes (one kernel each) before fusion, right after fusion (groups count
  // one), and in the bundle (after groups without a fused GPU kernel were expanded).
  int nodes_before = 0;
  int nodes_fused = 0;
  int nodes_after = 0;

  // Human-readable text: one line per group, then one per rejection.
  std::string ToString() const;
};

// The groups as the user should read them, from the groups in the order the passes
// formed them: a group extended later under the same name is listed once, in its
// final form; a group that became a member of a later group (merged siblings taken
// as an epilogue's anchor) is folded into it, members spliced in place and passes
// joined ("fuse-siblings+fuse-epilogue").
std::vector<FusionReport::Group> FinalGroups(const std::vector<FusionReport::Group>& formed);

}  // namespace kiln
