// After fusion: a bundle must run on the GPU whatever fusion formed, so every fused
// group that no GPU kernel takes (neither a library call nor a generated kernel) is
// expanded back into its members, and the fusion report says why. Where the group
// was anchored on a MatMul, the longest prefix cuBLASLt takes fused (bias, Relu or
// tanh-Gelu) is grouped again, so expansion gives up only what the library cannot do.
#pragma once

#include "absl/status/statusor.h"
#include "codegen/kernel_choice.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

// Expands every fused group without a GPU kernel and notes why in `report`.
// Returns how many it expanded.
absl::StatusOr<int> ExpandGroupsWithoutKernels(Graph& graph, const codegen::KernelOptions& kernel_options,
                                               FusionReport* report);

// Auto mode on sm_90a: notes in `report` why a group the library takes whole is not
// on the Hopper family (the family refused it, or --tune measured cuBLASLt faster);
// clears that note where the group is on the family (after --tune). `choice` is
// codegen::ChooseKernel's for `n`.
void NoteLibraryGroup(const Node& n, const codegen::KernelChoice& choice, FusionReport* report);

}  // namespace kiln
