// MatMul and Gemm (and their fused bias / activation epilogues) through cuBLASLt.
#include "codegen/library_plans.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::codegen::libplan {
namespace {

cudaDataType_t CudaType(DType d) {
  switch (d) {
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// Largest power of two (<= 256) dividing every given value.
uint32_t AlignmentOf(std::initializer_list<uintptr_t> values) {
  uintptr_t bits = kAssumedAlignment;
  for (uintptr_t v : values) bits |= v;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

std::string LtStatus(cublasStatus_t s) { return absl::StrCat(cublasLtGetStatusString(s), " (", static_cast<int>(s), ")"); }

// Returns an Internal error naming the node, the call and the cuBLASLt status.
#define KILN_LT(expr, what)                                                                         \
  do {                                                                                              \
    const cublasStatus_t kiln_lt_status = (expr);                                                   \
    if (kiln_lt_status != CUBLAS_STATUS_SUCCESS) {                                                  \
      return absl::InternalError(absl::StrCat(where_, ": ", what, " failed: ", LtStatus(kiln_lt_status))); \
    }                                                                                               \
  } while (0)

class CublasLtKernel : public LibraryKernel {
 public:
  CublasLtKernel(std::string where, GemmPlan plan, cublasLtHandle_t handle)
      : where_(std::move(where)), plan_(plan), handle_(handle) {}

  ~CublasLtKernel() override {
    if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
    for (cublasLtMatrixLayout_t l : {a_, b_, c_, d_}) {
      if (l) cublasLtMatrixLayoutDestroy(l);
    }
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }

  absl::Status Init() {
    const GemmPlan& p = plan_;
    es_ = p.dtype == DType::kFloat32 ? 4 : 2;
    const cudaDataType_t t = CudaType(p.dtype);
    // Batches that cuBLASLt takes as a strided batch; a stride-0 (broadcast) operand
    // falls back to a loop of launches if no algorithm accepts it.
    KILN_LT(cublasLtMatmulDescCreate(&desc_, p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
            "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
    const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our A
    KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "set TRANSA");
    KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "set TRANSB");
    {
      const bool bias = p.c_kind == CKind::kBias;
      cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      if (p.act == GemmPlan::Act::kRelu) epi = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      if (p.act == GemmPlan::Act::kGeluTanh) epi = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
        KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
                "set EPILOGUE");
      }
      if (bias) {
        KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t)),
                "set BIAS_DATA_TYPE");
      }
      if (bias && p.bias_batch_stride != 0) {  // read by cuBLASLt for a batched D only
        const int64_t stride = p.bias_batch_stride;
        KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &stride, sizeof(stride)),
                "set BIAS_BATCH_STRIDE");
      }
    }
    beta_ = p.c_kind == CKind::kNone || p.c_kind == CKind::kBias ? 0.f : p.beta;
    if (p.in_residual >= 0) beta_ = 1.f;  // the residual is C (PlanFusedMatMul: no other C then)
    if (p.c_kind == CKind::kMaterialize) c_bytes_ = AlignUp(static_cast<size_t>(p.m * p.n) * es_, 256);

    absl::Status st = MakeLayouts(/*batched=*/true);
    if (st.ok()) st = Heuristics(&algo_, &fallback_);
    if (!st.ok() && p.batch > 1 && (p.stride_a == 0 || p.stride_b == 0)) {
      // No algorithm for the broadcast batch: run one matmul per batch element.
      loop_ = true;
      st = MakeLayouts(/*batched=*/false);
      if (st.ok()) st = Heuristics(&algo_, &fallback_);
    }
    return st;
  }

  size_t workspace_bytes() const override {
    size_t lt = algo_->workspaceSize;
    if (fallback_) lt = std::max(lt, fallback_->workspaceSize);
    return c_bytes_ + lt;
  }

  absl::Status Launch(const LibraryLaunchArgs& args) const override {
    const GemmPlan& p = plan_;
    const bool has_c = p.c_kind != CKind::kNone;
    const int num_inputs = std::max({p.in_a, p.in_b, has_c ? p.in_c : 0, p.in_residual}) + 1;
    if (args.outputs.size() != 1 || args.outputs[0] == nullptr || static_cast<int>(args.inputs.size()) < num_inputs ||
        args.inputs[p.in_a] == nullptr || args.inputs[p.in_b] == nullptr || (has_c && args.inputs[p.in_c] == nullptr) ||
        (p.in_residual >= 0 && args.inputs[p.in_residual] == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": missing input or output pointers for the cuBLASLt call"));
    }
    if (args.workspace_bytes < workspace_bytes() || (workspace_bytes() > 0 && args.workspace == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": workspace of ", args.workspace_bytes,
                                                     " bytes is smaller than the ", workspace_bytes(), " needed"));
    }
    const char* a = static_cast<const char*>(args.inputs[p.in_a]);
    const char* b = static_cast<const char*>(args.inputs[p.in_b]);
    char* d = static_cast<char*>(args.outputs[0]);
    const void* c = d;
    char* ws = static_cast<char*>(args.workspace);
    if (p.c_kind == CKind::kFull) c = args.inputs[p.in_c];
    if (p.in_residual >= 0) c = args.inputs[p.in_residual];
    if (p.c_kind == CKind::kMaterialize) {
      if (absl::Status s = Materialize(args.inputs[p.in_c], ws, args.stream); !s.ok()) return s;
      c = ws;
    }
    void* lt_ws = ws == nullptr ? nullptr : ws + c_bytes_;
    const size_t lt_ws_bytes = args.workspace_bytes - c_bytes_;

    // Alignment of every pointer cuBLASLt sees (per-batch pointers in loop mode).
    const size_t sa = loop_ ? p.stride_a * es_ : 0, sb = loop_ ? p.stride_b * es_ : 0, sd = loop_ ? p.stride_d * es_ : 0;
    uint32_t align = AlignmentOf({reinterpret_cast<uintptr_t>(a), reinterpret_cast<uintptr_t>(b),
                                  reinterpret_cast<uintptr_t>(c), reinterpret_cast<uintptr_t>(d), sa, sb, sd});
    const size_t sbias = loop_ ? p.bias_batch_stride * es_ : 0;  // per-batch bias pointers in loop mode
    if (p.c_kind == CKind::kBias) {
      align = std::min(align, AlignmentOf({reinterpret_cast<uintptr_t>(args.inputs[p.in_c]), sbias}));
    }
    const cublasLtMatmulHeuristicResult_t* algo = &*algo_;
    if (align < kAssumedAlignment) {
      if (!fallback_) {
        return absl::FailedPreconditionError(
            absl::StrCat(where_, ": operand pointers are only ", align,
                         "-byte aligned and cuBLASLt has no algorithm for that alignment"));
      }
      algo = &*fallback_;
    }

    std::lock_guard<std::mutex> lock(mu_);  // the bias pointer lives in the shared descriptor
    if (p.c_kind == CKind::kBias) {
      const void* bias = args.inputs[p.in_c];
      KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
              "set BIAS_POINTER");
    }
    const int64_t iters = loop_ ? p.batch : 1;
    for (int64_t i = 0; i < iters; ++i) {
      const size_t ci = c == d ? sd * i : 0;
      if (p.c_kind == CKind::kBias && sbias != 0) {
        const void* bias = static_cast<const char*>(args.inputs[p.in_c]) + sbias * i;
        KILN_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                "set BIAS_POINTER");
      }
      KILN_LT(cublasLtMatmul(handle_, desc_, &p.alpha, b + sb * i, a_, a + sa * i, b_, &beta_,
                             static_cast<const char*>(c) + ci, c_, d + sd * i, d_, &algo->algo, lt_ws, lt_ws_bytes,
                             args.stream),
              "cublasLtMatmul");
    }
    return absl::OkStatus();
  }

 private:

  absl::Status MakeLayouts(bool batched) {
    const GemmPlan& p = plan_;
    for (cublasLtMatrixLayout_t* l : {&a_, &b_, &c_, &d_}) {
      if (*l) cublasLtMatrixLayoutDestroy(*l);
      *l = nullptr;
    }
    const cudaDataType_t t = CudaType(p.dtype);
    // cuBLASLt's A = our B (stored [K,N], or [N,K] when transB), column-major view.
    if (!p.trans_b) {
      KILN_LT(cublasLtMatrixLayoutCreate(&a_, t, p.n, p.k, p.n), "cublasLtMatrixLayoutCreate");
    } else {
      KILN_LT(cublasLtMatrixLayoutCreate(&a_, t, p.k, p.n, p.k), "cublasLtMatrixLayoutCreate");
    }
    // cuBLASLt's B = our A (stored [M,K], or [K,M] when transA).
    if (!p.trans_a) {
      KILN_LT(cublasLtMatrixLayoutCreate(&b_, t, p.k, p.m, p.k), "cublasLtMatrixLayoutCreate");
    } else {
      KILN_LT(cublasLtMatrixLayoutCreate(&b_, t, p.m, p.k, p.m), "cublasLtMatrixLayoutCreate");
    }
    KILN_LT(cublasLtMatrixLayoutCreate(&c_, t, p.n, p.m, p.n), "cublasLtMatrixLayoutCreate");
    KILN_LT(cublasLtMatrixLayoutCreate(&d_, t, p.n, p.m, p.n), "cublasLtMatrixLayoutCreate");
    if (batched && p.batch > 1) {
      const int32_t count = static_cast<int32_t>(p.batch);
      const int64_t sa = p.stride_b, sb = p.stride_a, sd = p.stride_d;  // cuBLASLt's A/B are our B/A
      const int64_t sc = p.c_kind == CKind::kNone || p.c_kind == CKind::kBias ? sd : 0;
      const std::pair<cublasLtMatrixLayout_t, int64_t> strides[] = {{a_, sa}, {b_, sb}, {c_, sc}, {d_, sd}};
      for (const auto& [layout, stride] : strides) {
        KILN_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                "set BATCH_COUNT");
        KILN_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof(stride)),
                "set STRIDED_BATCH_OFFSET");
      }
    }
    return absl::OkStatus();
  }

  // Best algorithm for `alignment`-byte aligned pointers, or nullopt when none.
  absl::StatusOr<std::optional<cublasLtMatmulHeuristicResult_t>> Heuristic(uint32_t alignment) {
    if (!pref_) KILN_LT(cublasLtMatmulPreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate");
    const uint64_t max_ws = kCublasLtMaxWorkspace;
    KILN_LT(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                 sizeof(max_ws)),
            "set MAX_WORKSPACE_BYTES");
    for (cublasLtMatmulPreferenceAttributes_t attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      KILN_LT(cublasLtMatmulPreferenceSetAttribute(pref_, attr, &alignment, sizeof(alignment)), "set MIN_ALIGNMENT");
    }
    cublasLtMatmulHeuristicResult_t result[4] = {};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, c_, d_, pref_, 4, result, &found);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) return std::nullopt;
    KILN_LT(s, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < found; ++i) {
      if (result[i].state == CUBLAS_STATUS_SUCCESS) return std::optional(result[i]);
    }
    return std::nullopt;
  }

  absl::Status Heuristics(std::optional<cublasLtMatmulHeuristicResult_t>* main,
                          std::optional<cublasLtMatmulHeuristicResult_t>* fallback) {
    auto m = Heuristic(kAssumedAlignment);
    if (!m.ok()) return m.status();
    if (!m->has_value()) {
      return absl::UnimplementedError(absl::StrCat(where_, ": cuBLASLt has no algorithm for this problem (M=", plan_.m,
                                                   " N=", plan_.n, " K=", plan_.k, " batch=", plan_.batch,
                                                   loop_ ? ", looped" : "", ")"));
    }
    *main = **m;
    // Fallback for operands aligned only to the element size (views into other
    // buffers); its absence is reported by Launch if such pointers ever arrive.
    auto f = Heuristic(static_cast<uint32_t>(es_));
    *fallback = f.ok() ? *f : std::nullopt;
    return absl::OkStatus();
  }

  // Expands the broadcast C ([c_rows, c_cols], rows in {1, M}, cols in {1, N}) to
  // [M, N] at `dst` with device-to-device copies that double the filled region.
  absl::Status Materialize(const void* src, char* dst, cudaStream_t stream) const {
    const GemmPlan& p = plan_;
    const size_t row = static_cast<size_t>(p.n) * es_;
    const size_t rows = static_cast<size_t>(p.c_rows);
    cudaError_t e = cudaSuccess;
    if (p.c_cols == p.n) {
      e = cudaMemcpyAsync(dst, src, rows * row, cudaMemcpyDeviceToDevice, stream);
    } else {
      // Column 0 of every source row, then double along the row.
      e = cudaMemcpy2DAsync(dst, row, src, es_, es_, rows, cudaMemcpyDeviceToDevice, stream);
      for (int64_t w = 1; e == cudaSuccess && w < p.n; w *= 2) {
        const size_t cnt = static_cast<size_t>(std::min(w, p.n - w));
        e = cudaMemcpy2DAsync(dst + w * es_, row, dst, row, cnt * es_, rows, cudaMemcpyDeviceToDevice, stream);
      }
    }
    if (p.c_rows == 1) {
      for (int64_t r = 1; e == cudaSuccess && r < p.m; r *= 2) {
        const size_t cnt = static_cast<size_t>(std::min(r, p.m - r));
        e = cudaMemcpyAsync(dst + r * row, dst, cnt * row, cudaMemcpyDeviceToDevice, stream);
      }
    }
    if (e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat(where_, ": broadcasting C into the workspace failed: ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }
  std::string where_;
  GemmPlan plan_;
  cublasLtHandle_t handle_;
  size_t es_ = 4;
  float beta_ = 0.f;
  size_t c_bytes_ = 0;  // workspace bytes of the materialised C (first in the workspace)
  bool loop_ = false;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  std::optional<cublasLtMatmulHeuristicResult_t> algo_, fallback_;
  mutable std::mutex mu_;
};

#undef KILN_LT

}  // namespace

absl::StatusOr<std::unique_ptr<LibraryKernel>> MakeCublasLtKernel(std::string where, const GemmPlan& plan,
                                                                  cublasLtHandle_t handle) {
  auto kernel = std::make_unique<CublasLtKernel>(std::move(where), plan, handle);
  if (absl::Status s = kernel->Init(); !s.ok()) return s;
  return std::unique_ptr<LibraryKernel>(std::move(kernel));
}

}  // namespace kiln::codegen::libplan
