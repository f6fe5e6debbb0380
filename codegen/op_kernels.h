// Generated CUDA kernels for single graph nodes (the unfused baseline): for each op
// kiln runs with its own kernel, the CUDA C++ source of one or more launches, with
// every shape, stride and attribute baked in as a constant (shapes are static per
// bundle), following the source contract of codegen/kernel_launch.h. The sources
// are compiled by NVRTC into the bundle's module (see codegen/nvrtc_module.h); the
// same generation and compile path serves fused groups.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/kernel_launch.h"
#include "graph/graph.h"

namespace kiln::codegen {

class TuningDb;      // codegen/tuning_db.h
struct TuningEntry;  // codegen/tuning_db.h

// How fused MatMul groups run (`kiln compile --matmul-groups`).
enum class MatMulGroups {
  // cuBLASLt with the fused epilogue it has (bias, Relu / tanh-Gelu); other MatMul
  // groups have no kernel and are expanded (the tail fused again as pointwise work).
  kLibrary,
  // kiln's tensor-core GEMM with the group's prologue and epilogue generated into it:
  // on sm_90a the Hopper family where it takes the group, else the sm_80-class
  // template (codegen/templates/gemm_sm80.cuh); fp32 groups on the SIMT template
  // (gemm_simt.cuh).
  kGenerated,
  // generated, except on sm_90a (with `hopper`): the Hopper family for the groups it
  // takes (ops::Sm90Eligible) and the library for the others, since the sm_80-class
  // template is well behind cuBLASLt there (docs/kernels/gemm_sm80.md); the library
  // where `kiln compile --tune` measured cuBLASLt faster than the family; and the
  // library for fp32 groups too (the SIMT template measured slower than cublasSgemm).
  kAuto,
};
// How convs and "conv+epilogue" groups run (`kiln compile --conv-groups`).
enum class ConvGroups {
  // cuDNN's convolution; a group's epilogue is expanded and fused again as one
  // pointwise kernel.
  kExpand,
  // every group as one cudnnConvolutionBiasActivationForward call (cudnn:FusedConv)
  // where cuDNN takes it (bias, residual Add, Relu).
  kCudnn,
  // NHWC Conv nodes (channels_last = 1) and their groups on kiln's generated conv
  // kernels (codegen/ops/conv.cc): implicit GEMM on the tensor-core template for
  // group == 1, a direct depthwise kernel for group == C == OC, the epilogue
  // generated into either. NCHW and other grouped convs stay on cuDNN
  // (ops::ConvKernelFits says why).
  kGenerated,
  // cuDNN's fused call, except that depthwise convs and the conv groups cuDNN's
  // fused call cannot take (a Clip/ReLU6 or BatchNorm-like epilogue: MobileNetV2,
  // DenseNet) run on the generated kernels; lone Convs stay on cuDNN. The mix that
  // measured fastest on the H100 in NHWC (docs/kernels/conv.md).
  kAuto,
};
// "library", "generated", "auto" (the --matmul-groups spelling) and back; the
// parser's error names the accepted values.
absl::string_view MatMulGroupsName(MatMulGroups mode);
absl::StatusOr<MatMulGroups> ParseMatMulGroups(absl::string_view text);
// "expand", "cudnn", "generated", "auto" (--conv-groups) and back.
absl::string_view ConvGroupsName(ConvGroups mode);
absl::StatusOr<ConvGroups> ParseConvGroups(absl::string_view text);

struct KernelOptions {
  // The defaults generate no GEMM or conv kernels: libraries only.
  MatMulGroups matmul_groups = MatMulGroups::kLibrary;
  ConvGroups conv_groups = ConvGroups::kExpand;
  // The target is sm_90a (IsHopperArch(CompileOptions::arch)): MatMul groups the
  // Hopper family takes (codegen/ops/gemm_sm90.h: TMA-readable fp16/bf16 operands, no
  // prologue or dual mainloop) get it instead of the sm_80 template.
  bool hopper = false;
  // The target arch (CompileOptions::arch): tuning-database entries are keyed by it.
  // "": sm_90a when `hopper`, else sm_80.
  std::string arch;
  // Multiprocessors of the target GPU: the Hopper family's persistent grid size
  // (0: 132, an H100 SXM).
  int sm_count = 0;
  // The tuning database (codegen/tuning_db.h), or nullptr: MatMul groups on the
  // generated GEMM take its tile config for their problem (ChooseGemmConfig),
  // and in auto mode on sm_90a a group cuBLASLt can run in one call goes to cuBLASLt
  // where `kiln compile --tune` measured cuBLASLt faster than the family
  // (LibraryMeasuredFaster).
  const TuningDb* tuning_db = nullptr;
  // Auto mode on sm_90a: untuned, a narrow output over many rows goes to cuBLASLt
  // (kernel_choice.cc, NarrowOutputToLibrary). --tune turns it off to choose the groups
  // it measures, so that it measures those too.
  bool untuned_library_rules = true;
  // Dynamic graphs (issue 34): per MatMul group on the run-time-row Hopper GEMM (node
  // name), the tile config the tuning database holds for its problem at the dims' opt
  // sizes (graph/dim_expr.h OptValues; compiler.cc fills it), and the rows those sizes
  // give: the window of rows that holds them takes it instead of the heuristic's
  // (ops::GenerateDynamicMatMulGroupSm90).
  struct TunedRows {
    int64_t rows = 0;
    std::string config;  // ops::Sm90GemmConfigString
  };
  std::map<std::string, TunedRows> tuned_dynamic_gemms;

  std::string TargetArch() const { return !arch.empty() ? arch : hopper ? "sm_90a" : "sm_80"; }
  // MatMul groups may get kiln's GEMM (any mode but library).
  bool GeneratesGemms() const { return matmul_groups != MatMulGroups::kLibrary; }
  // Auto on sm_90a: only the groups the Hopper family takes get kiln's GEMM.
  bool HopperGemmsOnly() const { return matmul_groups == MatMulGroups::kAuto && hopper; }
  // MatMul groups of a dynamic graph on kiln's Hopper GEMM with the rows read at run
  // time (on sm_90a, except with --matmul-groups library); else cuBLASLt, planned per
  // run size.
  bool DynamicGemmsOnHopper() const { return GeneratesGemms() && hopper; }
  // Conv groups may run as cuDNN's fused conv-bias-activation call.
  bool CudnnFusedConv() const { return conv_groups == ConvGroups::kCudnn || conv_groups == ConvGroups::kAuto; }
};
// The arch that runs the Hopper GEMM family (KernelOptions::hopper), and the test.
inline constexpr absl::string_view kHopperArch = "sm_90a";
inline bool IsHopperArch(absl::string_view arch) { return arch == kHopperArch; }

// The launches that compute `node`'s outputs from its inputs, in order. `node` has
// static shapes and the dtypes it will run in (after precision lowering). An empty
// vector means the node needs no work (never the case today; views that the memory
// planner aliases are skipped by the caller). Unimplemented, naming the op and the
// form, when kiln has no generated kernel for it. This is the generated kernel
// whatever a library could do: who runs a step is ChooseKernel's decision
// (codegen/kernel_choice.h).
absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node, const KernelOptions& options = {});

// The C type name of a storage dtype in generated code: "float", "kiln_f16",
// "kiln_bf16", "kiln_i64", "kiln_i32", "kiln_i8", "kiln_u8", "kiln_bool".
const char* StorageTypeName(DType dtype);

}  // namespace kiln::codegen
