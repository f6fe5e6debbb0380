// Per-node kernel generation: dispatches each op to its family's generator
// (codegen/ops/*.cc).
#include "codegen/op_kernels.h"

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

const char* StorageTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float";
    case DType::kFloat16: return "kiln_f16";
    case DType::kBFloat16: return "kiln_bf16";
    case DType::kInt64: return "kiln_i64";
    case DType::kInt32: return "kiln_i32";
    case DType::kInt8: return "kiln_i8";
    case DType::kUInt8: return "kiln_u8";
    case DType::kBool: return "kiln_bool";
  }
  return "void";
}

bool IsMatMulGroup(const Node& node) {
  if (!IsFusedGroup(node)) return false;
  auto pattern = node.GetString("pattern", "");
  if (!pattern.ok()) return false;
  for (const char* p : {"matmul", "matmul+epilogue", "prologue+matmul", "prologue+matmul+epilogue", "dual-matmul",
                        "dual-matmul+epilogue"}) {
    if (*pattern == p) return true;
  }
  return false;
}

std::string Sm90OnlyRefusal(const Node& node, const KernelOptions& options) {
  if (!options.gemm_template || !options.gemm_template_sm90_only || !IsMatMulGroup(node)) return "";
  if (!options.hopper) return "not a Hopper target";
  absl::Status eligible = ops::Sm90Eligible(node);
  if (!eligible.ok()) return std::string(eligible.message());
  if (const TuningEntry* e = LibraryTuningEntry(node, options)) {
    return absl::StrFormat("%s on %s (%.4f ms against the family's %.4f ms)", kTunedToLibraryReason, e->device,
                           e->library_ms, e->tuned_ms);
  }
  return "";
}

const TuningEntry* LibraryTuningEntry(const Node& node, const KernelOptions& options) {
  if (options.tuning_db == nullptr || !options.gemm_template || !options.gemm_template_sm90_only ||
      !options.hopper || !IsMatMulGroup(node) || LibraryKernelName(node).empty()) {
    return nullptr;
  }
  absl::StatusOr<ops::GemmProblem> problem = ops::DescribeMatMulGroup(node);
  if (!problem.ok()) return nullptr;
  const TuningEntry* e = options.tuning_db->Find(GemmTuningKey(kHopperArch, *problem));
  return e != nullptr && LibraryMeasuredFaster(*e) ? e : nullptr;
}

bool GeneratesMatMulGroup(const Node& node, const KernelOptions& options) {
  return options.gemm_template && IsMatMulGroup(node) && Sm90OnlyRefusal(node, options).empty();
}

bool IsConvGroup(const Node& node) {
  if (!IsFusedGroup(node)) return false;
  auto pattern = node.GetString("pattern", "");
  return pattern.ok() && *pattern == "conv+epilogue";
}

absl::Status ConvKernelFits(const Node& node) { return ops::ConvKernelFits(node); }

bool ConvTemplateTakes(const Node& node, const KernelOptions& options) {
  if (node.op_type() != "Conv" && !IsConvGroup(node)) return false;
  if (options.conv_template) return true;
  if (!options.conv_template_auto) return false;
  absl::StatusOr<bool> depthwise = ops::ConvKernelIsDepthwise(node);
  if (!depthwise.ok()) return false;
  return *depthwise || (IsConvGroup(node) && LibraryKernelName(node) != "cudnn:FusedConv");
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node, const KernelOptions& options) {
  const std::string& op = node.op_type();
  if (IsFusedGroup(node)) {
    auto pattern = node.GetString("pattern", "");
    if (pattern.ok() && *pattern == "pointwise") return ops::GeneratePointwiseGroup(node);
    if (pattern.ok() && (*pattern == "softmax" || *pattern == "layernorm")) return ops::GenerateRowGroup(node);
    if (pattern.ok() && *pattern == "attention") return ops::GenerateAttentionGroup(node);  // every mode
    if (IsMatMulGroup(node)) {
      if (GeneratesMatMulGroup(node, options)) return ops::GenerateGemm(node, options);
      if (options.gemm_template) {
        return absl::UnimplementedError(absl::StrCat(
            "no fused GPU kernel for this '", *pattern, "' group with --matmul-groups auto on sm_90a: ",
            Sm90OnlyRefusal(node, options),
            "; cuBLASLt takes matmul+epilogue groups of a bias and Relu/tanh-Gelu only (--matmul-groups generated "
            "runs it on the sm_80 template)"));
      }
      return absl::UnimplementedError(absl::StrCat(
          "no fused GPU kernel for '", *pattern, "' groups with --matmul-groups library (cuBLASLt takes ",
          "matmul+epilogue groups of a bias and Relu/tanh-Gelu only; --matmul-groups generated runs every ",
          "MatMul group on kiln's tensor-core GEMM)"));
    }
    if (IsConvGroup(node) && ConvTemplateTakes(node, options)) {
      return ops::GenerateConv(node, nullptr, options.sm_count);
    }
    if (pattern.ok() && absl::StartsWith(*pattern, "conv")) {
      return absl::UnimplementedError(absl::StrCat(
          "no generated kernel for '", *pattern, "' groups without --conv-groups generated (which runs NHWC ",
          "conv groups on kiln's kernels); ",
          options.cudnn_fused_conv
              ? "cuDNN's fused conv-bias-activation call takes a bias, a residual Add and Relu, not this epilogue"
              : "cuDNN's fused conv-bias-activation call is off (--conv-groups expand)"));
    }
    return absl::UnimplementedError(absl::StrCat("no fused GPU kernel for '", pattern.ok() ? *pattern : "?",
                                                 "' groups yet (kiln's tensor-core templates come next)"));
  }
  if (!node.domain().empty() && node.domain() != "ai.onnx") return ops::NoKernel(node, absl::StrCat("domain ", node.domain()));
  for (const Value* v : node.outputs()) {
    if (v != nullptr && !v->has_type()) return ops::NoKernel(node, "untyped output");
  }
  if (ops::IsPointwiseOp(op)) return ops::GeneratePointwise(node);
  if (ops::IsMovementOp(op)) return ops::GenerateMovement(node);
  if (ops::IsReduceOp(op)) return ops::GenerateReduce(node);
  if (ops::IsPoolOp(op)) return ops::GeneratePool(node);
  if (ops::IsIndexingOp(op)) return ops::GenerateIndexing(node);
  if (ops::IsLineOp(op)) return ops::GenerateLine(node);
  if (op == "Resize") return ops::GenerateResize(node);
  if (op == "ConvTranspose") return ops::GenerateConvTranspose(node);
  if (op == "Einsum") return ops::GenerateEinsum(node);
  if (op == "GridSample") return ops::GenerateGridSample(node);
  if (op == "RNN" || op == "GRU" || op == "LSTM") return ops::GenerateRecurrent(node);
  if (op == "RoiAlign") return ops::GenerateRoiAlign(node);
  if (ops::IsQuantizedOp(op)) return ops::GenerateQuantized(node);
  if (op == "Conv") {
    // The library takes the convs it can (runtime/assign_kernels.h); of the rest, the
    // generated conv kernels take theirs and a direct kernel the others.
    if (ConvTemplateTakes(node, options) && ConvKernelFits(node).ok()) {
      return ops::GenerateConv(node, nullptr, options.sm_count);
    }
    return ops::GenerateDirectConv(node);
  }
  return ops::NoKernel(node, "");
}

}  // namespace kiln::codegen
