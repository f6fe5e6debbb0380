// Who runs a node on the GPU: the one place that decides, from the node and the
// kernel options, whether a step is a library call (cuBLASLt, cuDNN), kiln's GEMM,
// kiln's conv kernels, another generated kernel, or nothing. Compile time, no GPU.
// The compiler asks it while expanding fused groups (a group nothing takes is
// expanded), when choosing what --tune measures, and once per step when assigning
// kernels; the fusion report and the kernel dumps show its answer.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"
#include "codegen/tuning_db.h"
#include "graph/graph.h"

namespace kiln::codegen {

enum class KernelKind {
  kLibrary,    // a cuBLASLt / cuDNN call: KernelChoice::library names it
  kGemm,       // kiln's GEMM for a MatMul group (the Hopper family or sm_80 template)
  kConv,       // kiln's conv kernels (implicit GEMM, depthwise) for a Conv or conv group
  kGenerated,  // the op's or group's own generated kernel (GenerateNodeKernels)
  kNone,       // a fused group no kernel takes: KernelChoice::reason says why
};

struct KernelChoice {
  KernelKind kind = KernelKind::kGenerated;
  std::string library;  // kLibrary: "cublaslt:MatMul", "cudnn:FusedConv", ...
  // kNone: why no kernel takes the group. kLibrary in auto mode on sm_90a: why a
  // MatMul group is not on the Hopper family (its refusal, --tune measured cuBLASLt
  // faster: starts with kTunedToLibraryReason, or, untuned, a narrow output over many
  // rows). Otherwise "".
  std::string reason;
  // kGemm: the family, tile config and its source (ChooseGemmConfig: the tuning
  // database's entry or the heuristic), which generation takes as it is; or why no
  // config fits (Unimplemented: the step has no GPU kernel). Other kinds: unset.
  absl::StatusOr<GemmChoice> gemm = absl::FailedPreconditionError("not a GEMM step");
  // "gemm sm90 128x128 p2x2 s5 (heuristic, epilogue work: light)", "library
  // cublaslt:MatMul: <reason>", "generated", "none: <reason>": the decision in a line
  // (kernel dumps, the fusion report's notes).
  std::string Describe() const;
};

// The decision for `node` (static shapes, storage dtypes, after fusion).
KernelChoice ChooseKernel(const Node& node, const KernelOptions& options);

// Whether ChooseKernel gives `node`, a dynamic graph's MatMul group, to kiln's Hopper
// GEMM with its rows read at run time (ops::GenerateDynamicMatMulGroupSm90).
bool RunsOnRunTimeRowGemm(const Node& node, const KernelOptions& options);

// The same with the libraries left out: the generated kernel kiln has for `node`
// (kGemm, kConv, kGenerated) or kNone. GenerateNodeKernels follows it.
KernelChoice ChooseGeneratedKernel(const Node& node, const KernelOptions& options);

// How KernelChoice::reason starts when the tuning database sent a MatMul group to
// cuBLASLt (so that reports can count such groups).
inline constexpr absl::string_view kTunedToLibraryReason = "kiln compile --tune measured cuBLASLt faster";

// Whether `node` is a FusedGroup anchored on a MatMul ("matmul+epilogue", ...).
bool IsMatMulGroup(const Node& node);
// Whether `node` is a "conv+epilogue" FusedGroup (a Conv anchor).
bool IsConvGroup(const Node& node);

}  // namespace kiln::codegen
