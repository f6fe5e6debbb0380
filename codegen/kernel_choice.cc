// ChooseKernel: who runs each node on the GPU (codegen/kernel_choice.h).
#include "codegen/kernel_choice.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/library_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/tuning_db.h"
#include "graph/fused_group.h"

namespace kiln::codegen {
namespace {

KernelChoice Choice(KernelKind kind, std::string reason = "") {
  KernelChoice c;
  c.kind = kind;
  c.reason = std::move(reason);
  return c;
}

// kiln's GEMM for a MatMul group, with its config decided here.
KernelChoice GemmKernel(const Node& node, const KernelOptions& options) {
  KernelChoice c = Choice(KernelKind::kGemm);
  c.gemm = ChooseGemmConfig(node, options.TargetArch(), options.tuning_db, options.sm_count);
  return c;
}

// The group's pattern; "?" when the attribute is not a string.
std::string Pattern(const Node& node) { return node.GetString("pattern", "").value_or("?"); }

// In auto mode on sm_90a, for a MatMul group the family takes and cuBLASLt can run
// in one call: the tuning database's entry for it, else nullptr.
const TuningEntry* HopperTuningEntry(const Node& node, const KernelOptions& options) {
  if (options.tuning_db == nullptr || !options.HopperGemmsOnly() || !IsMatMulGroup(node) ||
      LibraryKernelName(node).empty()) {
    return nullptr;
  }
  absl::StatusOr<ops::GemmProblem> problem = ops::DescribeMatMulGroup(node);
  if (!problem.ok()) return nullptr;
  return options.tuning_db->Find(GemmTuningKey(kHopperArch, *problem));
}

// Untuned, in auto mode on sm_90a: why a group cuBLASLt can run in one call goes to it
// instead of the family for its shape, "" when it does not. A narrow output over many
// rows (a CNN's 1x1 projection conv at batch 32: 16 or 24 channels of 100352 or more
// pixels) ran 2.2-2.4x faster on cuBLASLt than on the family's best tile
// (EfficientNet-B0 at batch 32, `kiln compile --tune` on the H200,
// benchmarks/results/zoo_cnn_tune_h200_2026-12-04.txt). Asked only where the tuning
// database has no entry for the group (an entry, either way, decides instead).
std::string NarrowOutputToLibrary(const Node& node, const KernelOptions& options) {
  constexpr int64_t kMaxColumns = 32, kMinRows = 65536;
  if (!options.untuned_library_rules || !options.HopperGemmsOnly() || LibraryKernelName(node).empty()) return "";
  // One product (a batch folded into the rows): what was measured.
  absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(node);
  if (!p.ok() || p->batch != 1 || p->n > kMaxColumns || p->m < kMinRows) return "";
  return absl::StrCat("a narrow output (", p->n, " columns over ", p->m,
                      " rows): cuBLASLt measured faster than the family on such products; kiln compile --tune "
                      "measures this one");
}

// Whether `node` is a MatMul group of fp32 operands without TF32 math (kiln's SIMT
// template takes it; with TF32 math the Hopper family takes what it can).
bool IsSimtGroup(const Node& node) {
  absl::StatusOr<ops::GemmProblem> problem = ops::DescribeMatMulGroup(node);
  return problem.ok() && problem->variant.simt && !problem->variant.tf32;
}

// Auto mode on sm_90a: why a MatMul group gets no generated GEMM (the Hopper family
// refused it, a tf32 group included, or the tuning database measured cuBLASLt faster,
// or, untuned, its output is narrow over many rows, or it is an fp32 group without
// TF32 math, whose SIMT kernel measured slower than cublasSgemm plus a separate
// epilogue kernel); "" otherwise.
std::string HopperRefusal(const Node& node, const KernelOptions& options) {
  if (!options.HopperGemmsOnly() || !IsMatMulGroup(node)) return "";
  if (IsSimtGroup(node)) {
    return "fp32 operands: kiln's SIMT GEMM runs behind cublasSgemm on sm_90a (docs/kernels/gemm_simt.md), so the "
           "group runs on cuBLASLt, or expanded to cuBLASLt and an epilogue kernel; --matmul-groups generated puts "
           "it on the SIMT GEMM";
  }
  absl::Status eligible = ops::Sm90Eligible(node);
  if (!eligible.ok()) return std::string(eligible.message());
  if (const TuningEntry* e = HopperTuningEntry(node, options)) {
    if (!LibraryMeasuredFaster(*e)) return "";
    return absl::StrFormat("%s on %s (%.4f ms against the family's %.4f ms)", kTunedToLibraryReason, e->device,
                           e->library_ms, e->tuned_ms);
  }
  return NarrowOutputToLibrary(node, options);
}

bool GetsGemm(const Node& node, const KernelOptions& options) {
  return options.GeneratesGemms() && IsMatMulGroup(node) && HopperRefusal(node, options).empty();
}

// Whether the options send a Conv or conv group to the generated conv kernels:
// generated mode, or auto and a depthwise conv or a conv group that cuDNN's fused
// call does not take.
bool ConvKernelsTake(const Node& node, const KernelOptions& options) {
  if (node.op_type() != "Conv" && !IsConvGroup(node)) return false;
  if (options.conv_groups == ConvGroups::kGenerated) return true;
  if (options.conv_groups != ConvGroups::kAuto) return false;
  absl::StatusOr<bool> depthwise = ops::ConvKernelIsDepthwise(node);
  if (!depthwise.ok()) return false;
  return *depthwise || (IsConvGroup(node) && LibraryKernelName(node) != "cudnn:FusedConv");
}

std::string NoMatMulGroupKernel(const std::string& pattern, const Node& node, const KernelOptions& options) {
  if (options.GeneratesGemms()) {
    return absl::StrCat("no fused GPU kernel for this '", pattern,
                        "' group with --matmul-groups auto on sm_90a: ", HopperRefusal(node, options),
                        "; cuBLASLt takes matmul+epilogue groups of a bias and Relu/tanh-Gelu only "
                        "(--matmul-groups generated runs it on the sm_80 template)");
  }
  return absl::StrCat("no fused GPU kernel for '", pattern,
                      "' groups with --matmul-groups library (cuBLASLt takes matmul+epilogue groups of a bias and "
                      "Relu/tanh-Gelu only; --matmul-groups generated runs every MatMul group on kiln's tensor-core "
                      "GEMM)");
}

}  // namespace

bool IsMatMulGroup(const Node& node) {
  if (!IsFusedGroup(node)) return false;
  const std::string pattern = Pattern(node);
  for (const char* p : {"matmul", "matmul+epilogue", "prologue+matmul", "prologue+matmul+epilogue", "dual-matmul",
                        "dual-matmul+epilogue", "gated-matmul", "rotary-matmul"}) {
    if (pattern == p) return true;
  }
  return false;
}

bool IsConvGroup(const Node& node) { return IsFusedGroup(node) && Pattern(node) == "conv+epilogue"; }

KernelChoice ChooseGeneratedKernel(const Node& node, const KernelOptions& options) {
  if (!IsFusedGroup(node)) {
    if (node.op_type() == "Conv" && ConvKernelsTake(node, options) && ops::ConvKernelFits(node).ok()) {
      return Choice(KernelKind::kConv);
    }
    return Choice(KernelKind::kGenerated);  // Conv: the direct kernel
  }
  const std::string pattern = Pattern(node);
  if (pattern == "pointwise" || pattern == "softmax" || pattern == "layernorm" || pattern == "rmsnorm" ||
      pattern == "attention" || pattern == "concat" || pattern == "pad" || pattern == "mlp") {
    return Choice(KernelKind::kGenerated);
  }
  if (IsMatMulGroup(node)) {
    if (GetsGemm(node, options)) return GemmKernel(node, options);
    return Choice(KernelKind::kNone, NoMatMulGroupKernel(pattern, node, options));
  }
  if (IsConvGroup(node) && ConvKernelsTake(node, options)) return Choice(KernelKind::kConv);
  if (absl::StartsWith(pattern, "conv")) {
    return Choice(KernelKind::kNone,
                  absl::StrCat("no generated kernel for '", pattern,
                               "' groups without --conv-groups generated (which runs NHWC conv groups on kiln's "
                               "kernels); ",
                               options.CudnnFusedConv() ? "cuDNN's fused conv-bias-activation call takes a bias, a "
                                                          "residual Add and Relu, not this epilogue"
                                                        : "cuDNN's fused conv-bias-activation call is off "
                                                          "(--conv-groups expand)"));
  }
  return Choice(KernelKind::kNone, absl::StrCat("no fused GPU kernel for '", pattern,
                                                "' groups yet (kiln's tensor-core templates come next)"));
}

bool RunsOnRunTimeRowGemm(const Node& node, const KernelOptions& options) {
  return ops::HasDynamicValues(node) && IsMatMulGroup(node) && options.DynamicGemmsOnHopper() &&
         ops::DynamicSm90Eligible(node).ok();
}

KernelChoice ChooseKernel(const Node& node, const KernelOptions& options) {
  // A dynamic graph's node (issue 34): on sm_90a (except with --matmul-groups
  // library), kiln's Hopper GEMM family with the rows read at run time where it takes
  // a MatMul group (measured faster than cuBLASLt planned per run size at most sizes,
  // within 1% slower at the others, docs/dynamic_shapes.md);
  // else the libraries, planned per run size, or the generators that take their sizes
  // at run time; kiln's conv kernels take fixed sizes.
  if (ops::HasDynamicValues(node)) {
    std::string why = "sizes that vary with the dim ranges";
    if (IsMatMulGroup(node) && options.DynamicGemmsOnHopper()) {
      const absl::Status sm90 = ops::DynamicSm90Eligible(node);
      if (sm90.ok()) return Choice(KernelKind::kGenerated, "run-time rows on the sm90 family");
      absl::StrAppend(&why, "; ", sm90.message());
    }
    const std::string library = LibraryKernelName(node);
    if (!library.empty() && (library != "cudnn:FusedConv" || options.CudnnFusedConv())) {
      KernelChoice c = Choice(KernelKind::kLibrary, why);
      c.library = library;
      return c;
    }
    return Choice(KernelKind::kGenerated);
  }
  // kiln's GEMM and conv kernels first where the mode gives them the node; then the
  // library where it takes the node; then the generated kernel, if any.
  std::string refusal = HopperRefusal(node, options);
  if (options.GeneratesGemms() && IsMatMulGroup(node) && refusal.empty()) return GemmKernel(node, options);
  if (ConvKernelsTake(node, options) && ops::ConvKernelFits(node).ok()) return Choice(KernelKind::kConv);
  const std::string library = LibraryKernelName(node);
  if (!library.empty() && (library != "cudnn:FusedConv" || options.CudnnFusedConv())) {
    KernelChoice c = Choice(KernelKind::kLibrary, std::move(refusal));
    c.library = library;
    return c;
  }
  return ChooseGeneratedKernel(node, options);
}

std::string KernelChoice::Describe() const {
  switch (kind) {
    case KernelKind::kLibrary: return absl::StrCat("library ", library, reason.empty() ? "" : ": ", reason);
    case KernelKind::kGemm:
      return gemm.ok() ? absl::StrCat("gemm ", gemm->Describe())
                       : absl::StrCat("gemm, no config: ", gemm.status().message());
    case KernelKind::kConv: return "conv";
    case KernelKind::kGenerated: return "generated";
    case KernelKind::kNone: return absl::StrCat("none: ", reason);
  }
  return "?";
}

}  // namespace kiln::codegen
