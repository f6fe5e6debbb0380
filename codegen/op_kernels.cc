// Per-node kernel generation: dispatches each op to its family's generator
// (codegen/ops/*.cc).
#include "codegen/op_kernels.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/kernel_choice.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "common/status_macros.h"
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

namespace {

template <typename Mode, size_t N>
absl::StatusOr<Mode> ParseMode(absl::string_view flag, absl::string_view text,
                               const std::pair<absl::string_view, Mode> (&modes)[N]) {
  std::vector<std::string> names;
  for (const auto& [name, mode] : modes) {
    if (name == text) return mode;
    names.push_back(std::string(name));
  }
  const std::string last = names.back();
  names.pop_back();
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported ", flag, " '", text, "': choose ", absl::StrJoin(names, ", "), " or ", last));
}

template <typename Mode, size_t N>
absl::string_view ModeName(Mode mode, const std::pair<absl::string_view, Mode> (&modes)[N]) {
  for (const auto& [name, m] : modes) {
    if (m == mode) return name;
  }
  return "?";
}

constexpr std::pair<absl::string_view, MatMulGroups> kMatMulGroups[] = {
    {"auto", MatMulGroups::kAuto}, {"library", MatMulGroups::kLibrary}, {"generated", MatMulGroups::kGenerated}};
constexpr std::pair<absl::string_view, ConvGroups> kConvGroups[] = {{"auto", ConvGroups::kAuto},
                                                                    {"expand", ConvGroups::kExpand},
                                                                    {"cudnn", ConvGroups::kCudnn},
                                                                    {"generated", ConvGroups::kGenerated}};

}  // namespace

absl::string_view MatMulGroupsName(MatMulGroups mode) { return ModeName(mode, kMatMulGroups); }

absl::StatusOr<MatMulGroups> ParseMatMulGroups(absl::string_view text) {
  return ParseMode("--matmul-groups", text, kMatMulGroups);
}

absl::string_view ConvGroupsName(ConvGroups mode) { return ModeName(mode, kConvGroups); }

absl::StatusOr<ConvGroups> ParseConvGroups(absl::string_view text) {
  return ParseMode("--conv-groups", text, kConvGroups);
}

namespace {

// A dynamic graph's MatMul group on the run-time-row Hopper GEMM, with the tuned
// config of its opt sizes where the compiler found one.
absl::StatusOr<std::vector<KernelLaunch>> DynamicGemm(const Node& node, const KernelOptions& options) {
  auto it = options.tuned_dynamic_gemms.find(node.name());
  if (it == options.tuned_dynamic_gemms.end()) return ops::GenerateDynamicMatMulGroupSm90(node, options.sm_count);
  KILN_ASSIGN_OR_RETURN(const ops::Sm90GemmConfig config, ops::ParseSm90GemmConfig(it->second.config));
  const ops::Sm90TunedRows tuned{it->second.rows, config};
  return ops::GenerateDynamicMatMulGroupSm90(node, options.sm_count, &tuned);
}

// A node of a dynamic graph (issue 34) whose sizes vary: the generators that take their
// sizes at run time (element-wise ops, Softmax and the norms, reductions and pools
// whose varying dim is the outermost, movement and indexing ops, CumSum, the pointwise,
// softmax, norm and attention groups, and MatMul groups whose rows vary on sm_90a
// except with --matmul-groups library);
// Unimplemented for the others, and for a node that reads a shape constant's values
// (they hold the largest case's).
absl::StatusOr<std::vector<KernelLaunch>> GenerateDynamicNodeKernels(const Node& node, const KernelOptions& options) {
  const std::string& op = node.op_type();
  auto none = [&](const std::string& why) {
    return absl::UnimplementedError(absl::StrCat("no GPU kernel with run-time sizes for ", op, " (node '",
                                                 node.name(), "'", why.empty() ? "" : ": ", why,
                                                 ") yet; compile with fixed sizes (--dim NAME=N) for the GPU"));
  };
  if (IsFusedGroup(node)) {
    const std::string pattern = node.GetString("pattern", "").value_or("");
    if (pattern == "pointwise") return ops::GeneratePointwiseGroup(node);
    if (pattern == "softmax" || pattern == "layernorm" || pattern == "rmsnorm") return ops::GenerateRowGroup(node);
    if (pattern == "attention") return ops::GenerateAttentionGroup(node, nullptr, options.hopper);
    if (IsMatMulGroup(node) && options.DynamicGemmsOnHopper()) return DynamicGemm(node, options);
    // The expansion runs the members instead (and keeps what cuBLASLt / cuDNN take).
    return absl::UnimplementedError(
        absl::StrCat("no fused GPU kernel with run-time sizes for a '", pattern, "' group yet"));
  }
  // Inputs computed from the sizes hold the largest case's values in the bundle: only
  // the ops that take the output's dims instead (the shape of Expand, Reshape and
  // ConstantOfShape, Range's limit, Slice's ends) or inline a scalar's expression
  // (element-wise ops) read them.
  const bool reads_shape = op != "Expand" && op != "Reshape" && op != "Range" && op != "Slice" &&
                           op != "ConstantOfShape" && !ops::IsPointwiseOp(op);
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (reads_shape && node.has_input(i) && node.input(i)->has_symbolic_data()) {
      return none("it reads a shape computed from the sizes");
    }
  }
  if (ops::IsPointwiseOp(op)) return ops::GeneratePointwise(node);
  if (ops::IsRowOp(op)) return ops::GenerateRowOp(node);
  if (ops::IsReduceOp(op)) return ops::GenerateReduce(node);
  if (ops::IsPoolOp(op)) return ops::GeneratePool(node);
  if (op == "Range" || op == "GatherElements" || op == "GatherND" || op == "ConstantOfShape") {
    return ops::GenerateIndexing(node);
  }
  if (op == "CumSum") return ops::GenerateLine(node);
  if (op == "Transpose" || op == "Expand" || op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze" || op == "Identity" || op == "Slice" || op == "Gather" || op == "Concat" || op == "Pad") {
    return ops::GenerateMovement(node);
  }
  return none("");
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node, const KernelOptions& options) {
  const std::string& op = node.op_type();
  if (ops::HasDynamicValues(node)) return GenerateDynamicNodeKernels(node, options);
  const KernelChoice choice = ChooseGeneratedKernel(node, options);
  if (IsFusedGroup(node)) {
    switch (choice.kind) {
      case KernelKind::kNone:
        return absl::UnimplementedError(choice.reason);
      case KernelKind::kGemm:
        return ops::GenerateGemm(node, options);
      case KernelKind::kConv:
        return ops::GenerateConv(node, nullptr, options.sm_count);
      default:
        break;
    }
    const std::string pattern = node.GetString("pattern", "").value_or("");
    if (pattern == "pointwise") return ops::GeneratePointwiseGroup(node);
    if (pattern == "attention") return ops::GenerateAttentionGroup(node, nullptr, options.hopper);
    if (IsMatMulGroup(node) && options.DynamicGemmsOnHopper()) return DynamicGemm(node, options);  // every mode
    if (pattern == "concat") return ops::GenerateConcatGroup(node);
    if (pattern == "pad") return ops::GeneratePadGroup(node);
    if (pattern == "mlp") return ops::GenerateMlpGroup(node);
    return ops::GenerateRowGroup(node);  // softmax, layernorm
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
    // The generated conv kernels where the options give them the conv, else a direct
    // kernel (ChooseKernel gives the library the convs it takes first).
    if (choice.kind == KernelKind::kConv) return ops::GenerateConv(node, nullptr, options.sm_count);
    return ops::GenerateDirectConv(node);
  }
  return ops::NoKernel(node, "");
}

}  // namespace kiln::codegen
