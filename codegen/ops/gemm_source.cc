// Source pieces shared by the generators of the tensor-core GEMM template
// (codegen/ops/gemm_source.h).
#include "codegen/ops/gemm_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/templates.h"

namespace kiln::codegen::ops {

int GemmLoadMode(GemmLoad load) {
  switch (load) {
    case GemmLoad::kAsync: return 0;
    case GemmLoad::kStagedVector: return 1;
    case GemmLoad::kStagedScalar: return 2;
    case GemmLoad::kIm2colAsync: return 3;
    case GemmLoad::kIm2colScalar: return 4;
  }
  return 0;
}

absl::Status AppendGemmEpilogueLoads(const Node& node, const std::vector<ElementwiseLoad>& loads,
                                     const GemmLoadOffset& offset, GemmEpilogueSource& out, KernelLaunch& launch) {
  for (size_t l = 0; l < loads.size(); ++l) {
    const Value* v = node.input(loads[l].input);
    absl::StrAppend(&out.params, ", ", Param(v->dtype(), true, absl::StrCat("e", l)));
    absl::StrAppend(&out.args, ", e", l);
    absl::StatusOr<std::string> off = offset(loads[l].view);
    if (!off.ok()) return off.status();
    out.offset.push_back(*off);
    out.load.push_back(absl::StrCat("  const ", DomainType(loads[l].domain), " g", l, " = ",
                                    LoadAs(v->dtype(), loads[l].domain, absl::StrCat("e", l), *off), ";\n"));
    absl::StrAppend(&out.loads, out.load.back());
    launch.args.push_back(InputArg(node, loads[l].input));
  }
  return absl::OkStatus();
}

std::string GemmEpilogueFunction(const GemmEpilogueSource& epilogue, const std::string& code,
                                 const std::string& result) {
  return absl::StrCat(
      "static __device__ __forceinline__ float kiln_epilogue(float acc, int row, int col, int batch "
      "KILN_EPILOGUE_PARAMS) {\n",
      epilogue.loads, code, "  return ", result, ";\n}\n");
}

absl::Status SetGemmGridAndWorkspace(const GemmConfig& cfg, int64_t tiles, int64_t batch, KernelLaunch& launch) {
  const int64_t split = std::max(cfg.split_k, 1);
  launch.grid = {static_cast<uint32_t>(tiles), static_cast<uint32_t>(split), static_cast<uint32_t>(batch)};
  launch.semaphores = 0;
  launch.scratch_bytes = 0;
  if (split == 1) return absl::OkStatus();
  const int64_t counters = tiles * batch;
  const uint64_t scratch = static_cast<uint64_t>(counters) * static_cast<uint64_t>(split) *
                           static_cast<uint64_t>(cfg.bm) * static_cast<uint64_t>(cfg.bn) * sizeof(float);
  if (counters >= (int64_t{1} << 31) || scratch > kGemmMaxScratchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM tile config ", GemmConfigString(cfg), ": split-K over ",
                                                   counters, " output tiles needs ", scratch,
                                                   " bytes of scratch (more than ", kGemmMaxScratchBytes,
                                                   "); use fewer splits or larger tiles"));
  }
  launch.semaphores = static_cast<uint32_t>(counters);
  launch.scratch_bytes = scratch;
  return absl::OkStatus();
}

std::string GemmSourceTail(const GemmConfig& cfg, DType out_dtype, const std::string& prologue_params,
                           const std::string& functors, const GemmEpilogueSource& epilogue,
                           const std::string& epilogue_code, const std::string& result, bool simt) {
  return absl::StrCat("#define BM ", cfg.bm, "\n#define BN ", cfg.bn, "\n#define BK ", cfg.bk, "\n#define WARPS_M ",
                      cfg.warps_m, "\n#define WARPS_N ", cfg.warps_n, "\n#define STAGES ", cfg.stages,
                      cfg.split_k > 1 ? absl::StrCat("\n#define GEMM_SPLIT_K ", cfg.split_k) : std::string(),
                      cfg.min_ctas > 1 ? absl::StrCat("\n#define SIMT_MIN_CTAS ", cfg.min_ctas) : std::string(),
                      cfg.kmajor ? "\n#define SIMT_KMAJOR 1" : "", "\n#define GEMM_OUT_T ", StorageTypeName(out_dtype),
                      "\n#define GEMM_STORE(p, i, v) KILN_STORE_", FloatSuffix(out_dtype), "(p, i, v)",
                      "\n#define KILN_PROLOGUE_PARAMS ", prologue_params, "\n#define KILN_EPILOGUE_PARAMS ",
                      epilogue.params, "\n#define KILN_EPILOGUE_ARGS ", epilogue.args, "\n", functors,
                      GemmEpilogueFunction(epilogue, epilogue_code, result),
                      cfg.split_k > 1 ? TemplateSource("gemm_split.cuh") : absl::string_view(),
                      TemplateSource("mma_sm80.cuh"),  // cp.async (both); ldmatrix, mma.sync (sm_80)
                      TemplateSource(simt ? "gemm_simt.cuh" : "gemm_sm80.cuh"), TemplateSource("gemm_undef.cuh"));
}

}  // namespace kiln::codegen::ops
