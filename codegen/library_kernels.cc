// Vendor-library kernels of the unfused baseline: MatMul and Gemm through cuBLASLt,
// Conv through cuDNN (legacy convolution API).
//
// Planning (shapes, strides, what each library call looks like) is a pure function
// of the node, shared by LibraryKernelName (compile time, no GPU) and
// CreateLibraryKernel (session creation, picks the algorithms on the current device).
//
// Row-major data through column-major cuBLASLt: a row-major [r, c] matrix is the
// column-major c x r matrix with ld = c, so Y = op(A) op(B) is computed as
// Y^T = op(B)^T op(A)^T with cuBLASLt's "A" being our B and its "B" our A.
// Math: CUBLAS_COMPUTE_32F (fp32 accumulation, exact fp32 for f32 data: no TF32);
// cuDNN with fp32 compute type, and FMA-only math for f32 data.
#include "codegen/library_kernels.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/fused_group.h"
#include "graph/ops/op_util.h"

// The legacy cuDNN convolution API is deprecated in cuDNN 9 but still the simplest
// way to run one convolution with heuristic algorithm choice.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::codegen {
namespace {

// Largest cuBLASLt workspace a heuristic may ask for (cuBLAS itself uses 32 MiB on Hopper).
constexpr size_t kCublasLtMaxWorkspace = size_t{32} << 20;
// Largest cuDNN workspace an algorithm may need.
constexpr size_t kCudnnMaxWorkspace = size_t{64} << 20;
// Pointer alignment the runtime's arena guarantees (runtime/memory_planner.h).
constexpr uint32_t kAssumedAlignment = 256;

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }
int64_t Prod(const Shape& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}

// "inputs f16[2,3], f16[3,4] -> f16[2,4]".
std::string ShapesOf(const Node& node) {
  std::vector<std::string> ins, outs;
  for (const Value* v : node.inputs()) ins.push_back(v == nullptr ? "(absent)" : v->TypeString());
  for (const Value* v : node.outputs()) outs.push_back(v == nullptr ? "(absent)" : v->TypeString());
  return absl::StrCat("inputs ", absl::StrJoin(ins, ", "), " -> ", absl::StrJoin(outs, ", "));
}

// Checks what every library kernel needs: typed values, one float storage dtype.
absl::Status CheckTypes(const Node& node, int min_inputs, int max_inputs) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return node.Unsupported(absl::StrCat("domain '", node.domain(), "' has no library kernel"));
  }
  if (node.num_inputs() < min_inputs || node.num_inputs() > max_inputs || node.num_outputs() != 1) {
    return node.Unsupported(absl::StrCat("unexpected number of inputs/outputs (", ShapesOf(node), ")"));
  }
  if (node.output(0) == nullptr || !node.output(0)->has_type()) {
    return node.Unsupported("output has no inferred type");
  }
  const DType dtype = node.output(0)->dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return node.Unsupported(absl::StrCat("dtype ", DTypeName(dtype), " has no library kernel (f32, f16, bf16)"));
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) {
      if (i < min_inputs) return node.Unsupported(absl::StrCat("input ", i, " is absent"));
      continue;
    }
    if (!v->has_type()) return node.Unsupported(absl::StrCat("input ", i, " has no inferred type"));
    if (v->dtype() != dtype) {
      return node.Unsupported(absl::StrCat("mixed dtypes (", ShapesOf(node), ")"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// MatMul / Gemm plan.

enum class CKind {
  kNone,         // no C (or beta == 0)
  kFull,         // C is [M, N]: passed to cuBLASLt as the C matrix
  kBias,         // C is [N] / [1, N] with beta == 1: bias epilogue
  kMaterialize,  // C is broadcast ([], [1], [1,1], [M,1], or [1,N] with beta != 1):
                 // expanded to [M, N] in the workspace with device copies, then used as C
};

struct GemmPlan {
  DType dtype = DType::kFloat32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 0.f;
  int64_t batch = 1;                              // strided batch count
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements
  CKind c_kind = CKind::kNone;
  int64_t c_rows = 1, c_cols = 1;  // C's shape as a matrix (kMaterialize)
  // Fused groups: which launch inputs hold A, B and C / the bias, and the activation
  // of the epilogue.
  int in_a = 0, in_b = 1, in_c = 2;
  // kBias with a batch: elements between consecutive batches' biases (0: one bias
  // for every batch; N: a per-batch bias [batch.., 1, N], see PlanFusedMatMul).
  int64_t bias_batch_stride = 0;
  enum class Act { kNone, kRelu, kGeluTanh } act = Act::kNone;
};

Shape AsMatrixA(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape AsMatrixB(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }

absl::Status CheckGemmSize(const Node& node, const GemmPlan& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0) {
    return node.Unsupported(absl::StrCat("zero-sized matrix product has no library kernel (", ShapesOf(node), ")"));
  }
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.batch > INT32_MAX) {
    return node.Unsupported(absl::StrCat("matrix dimensions exceed 2^31 (", ShapesOf(node), ")"));
  }
  return absl::OkStatus();
}

// MatMul's layout flags (graph/ops/mat_mul.cc): trans_a / trans_b say that the
// operand is stored with its last two dims swapped (A as [.., K, M], B as [.., N, K]).
// They become cuBLASLt's TRANSB / TRANSA (its operands are ours swapped, see the top).
absl::StatusOr<GemmPlan> PlanMatMul(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 2); !s.ok()) return s;
  const Shape& a = node.input(0)->shape();
  const Shape& b = node.input(1)->shape();
  if (a.empty() || b.empty()) return node.Unsupported(absl::StrCat("scalar operand (", ShapesOf(node), ")"));
  GemmPlan p;
  auto ta = node.GetInt("trans_a", 0);
  auto tb = node.GetInt("trans_b", 0);
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  if ((*ta != 0 && *ta != 1) || (*tb != 0 && *tb != 1)) {
    return node.Unsupported(absl::StrCat("trans_a / trans_b must be 0 or 1 (", ShapesOf(node), ")"));
  }
  p.trans_a = *ta == 1;
  p.trans_b = *tb == 1;
  if ((p.trans_a && a.size() < 2) || (p.trans_b && b.size() < 2)) {
    return node.Unsupported(absl::StrCat("trans_a / trans_b on a 1-D operand (", ShapesOf(node), ")"));
  }
  // The logical (untransposed) shapes: A [.., M, K], B [.., K, N].
  auto swap_last_two = [](Shape s) {
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    return s;
  };
  const Shape sa = p.trans_a ? swap_last_two(a) : AsMatrixA(a);
  const Shape sb = p.trans_b ? swap_last_two(b) : AsMatrixB(b);
  p.dtype = node.output(0)->dtype();
  p.m = sa[sa.size() - 2];
  p.k = sa.back();
  p.n = sb.back();
  if (sb[sb.size() - 2] != p.k) return node.Unsupported(absl::StrCat("inner dimensions differ (", ShapesOf(node), ")"));
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  const int64_t pa = Prod(batch_a), pb = Prod(batch_b);
  if (pb == 1 && (!p.trans_a || pa == 1)) {
    // B is one matrix: A's batch folds into M (A and Y are contiguous). Not for a
    // transposed A: its matrices are [K, M] blocks, not rows of one [batch*M, K].
    p.m *= pa;
  } else if (pb == 1) {
    // B is one matrix shared by a batch of transposed A matrices: strided batch
    // with B's stride 0.
    p.batch = pa;
    p.stride_a = p.m * p.k;
    p.stride_b = 0;
    p.stride_d = p.m * p.n;
  } else if (pa == 1) {
    // A is one matrix broadcast over B's batch.
    p.batch = pb;
    p.stride_a = 0;
    p.stride_b = p.k * p.n;
    p.stride_d = p.m * p.n;
  } else {
    const size_t rank = std::max(batch_a.size(), batch_b.size());
    batch_a.insert(batch_a.begin(), rank - batch_a.size(), 1);
    batch_b.insert(batch_b.begin(), rank - batch_b.size(), 1);
    if (batch_a != batch_b) {
      return node.Unsupported(absl::StrCat(
          "batch dimensions broadcast against each other (only equal batches or a single matrix on one side "
          "have a library kernel; ",
          ShapesOf(node), ")"));
    }
    p.batch = pa;
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
    p.stride_d = p.m * p.n;
  }
  if (node.output(0)->numel() != p.batch * p.m * p.n) {
    return node.Unsupported(absl::StrCat("unexpected output shape (", ShapesOf(node), ")"));
  }
  if (absl::Status s = CheckGemmSize(node, p); !s.ok()) return s;
  return p;
}

absl::StatusOr<GemmPlan> PlanGemm(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 3); !s.ok()) return s;
  const Shape& a = node.input(0)->shape();
  const Shape& b = node.input(1)->shape();
  if (a.size() != 2 || b.size() != 2) return node.Unsupported(absl::StrCat("A and B must be matrices (", ShapesOf(node), ")"));
  GemmPlan p;
  p.dtype = node.output(0)->dtype();
  auto ta = node.GetInt("transA", 0);
  auto tb = node.GetInt("transB", 0);
  auto alpha = node.GetFloat("alpha", 1.f);
  auto beta = node.GetFloat("beta", 1.f);
  if (!ta.ok()) return ta.status();
  if (!tb.ok()) return tb.status();
  if (!alpha.ok()) return alpha.status();
  if (!beta.ok()) return beta.status();
  p.trans_a = *ta != 0;
  p.trans_b = *tb != 0;
  p.alpha = *alpha;
  p.m = p.trans_a ? a[1] : a[0];
  p.k = p.trans_a ? a[0] : a[1];
  p.n = p.trans_b ? b[0] : b[1];
  if ((p.trans_b ? b[1] : b[0]) != p.k) return node.Unsupported(absl::StrCat("inner dimensions differ (", ShapesOf(node), ")"));
  if (node.output(0)->shape() != Shape{p.m, p.n}) {
    return node.Unsupported(absl::StrCat("unexpected output shape (", ShapesOf(node), ")"));
  }
  if (node.has_input(2) && *beta != 0.f) {
    const Shape& c = node.input(2)->shape();
    if (c.size() > 2) return node.Unsupported(absl::StrCat("C has rank > 2 (", ShapesOf(node), ")"));
    Shape c2 = c;
    c2.insert(c2.begin(), 2 - c2.size(), 1);
    if ((c2[0] != 1 && c2[0] != p.m) || (c2[1] != 1 && c2[1] != p.n)) {
      return node.Unsupported(absl::StrCat("C does not broadcast to [M, N] (", ShapesOf(node), ")"));
    }
    p.beta = *beta;
    p.c_rows = c2[0];
    p.c_cols = c2[1];
    if (p.c_rows == p.m && p.c_cols == p.n) {
      p.c_kind = CKind::kFull;
    } else if (p.c_rows == 1 && p.c_cols == p.n && p.beta == 1.f) {
      p.c_kind = CKind::kBias;
    } else {
      p.c_kind = CKind::kMaterialize;
    }
  }
  if (absl::Status s = CheckGemmSize(node, p); !s.ok()) return s;
  return p;
}

// ---------------------------------------------------------------------------
// Conv plan (1-D convs run as 2-D with H = 1).

struct ConvPlan {
  DType dtype = DType::kFloat32;
  int batch = 0, c = 0, h = 1, w = 0;       // X [N, C, H, W]
  int m = 0, cg = 0, kh = 1, kw = 0;       // W [M, C/group, KH, KW]
  int oh = 1, ow = 0;                      // Y [N, M, OH, OW]
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int group = 1;
  bool has_bias = false;
  // channels_last=1 (graph/ops/op_util.h): X, Y and the bias are NHWC tensors and W
  // is KRSC ([M, KH, KW, C/group]); the fields above keep their NCHW meaning.
  bool nhwc = false;
  // Fused groups (cudnnConvolutionBiasActivationForward): launch inputs of X, W, the
  // bias (-1: none, a zero bias in the workspace is used) and the residual Z (-1: none).
  bool fused = false;
  bool relu = false;
  int in_x = 0, in_w = 1, in_bias = 2, in_z = -1;
};

absl::StatusOr<ConvPlan> PlanConv(const Node& node) {
  if (absl::Status s = CheckTypes(node, 2, 3); !s.ok()) return s;
  absl::StatusOr<int64_t> channels_last = node.GetInt("channels_last", 0);
  if (!channels_last.ok()) return channels_last.status();
  const bool nhwc = *channels_last == 1;
  if (nhwc && node.input(0)->rank() != 4) {
    return node.Unsupported(absl::StrCat("channels_last=1 needs a 2-D convolution (", ShapesOf(node), ")"));
  }
  // The shapes in NCHW order ([N, C, H, W], [M, C/g, KH, KW], [N, M, OH, OW]).
  auto nchw = [&](const Shape& s) { return nhwc && s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; };
  const Shape x = nchw(node.input(0)->shape());
  const Shape wt = nchw(node.input(1)->shape());
  const Shape y = nchw(node.output(0)->shape());
  if (x.size() != 3 && x.size() != 4) {
    return node.Unsupported(absl::StrCat("only 1-D and 2-D convolutions have a library kernel (", ShapesOf(node), ")"));
  }
  if (wt.size() != x.size() || y.size() != x.size()) return node.Unsupported(absl::StrCat("rank mismatch (", ShapesOf(node), ")"));
  for (const Value* v : node.inputs()) {
    if (v != nullptr && v->numel() > INT32_MAX) return node.Unsupported(absl::StrCat("tensor exceeds 2^31 elements (", ShapesOf(node), ")"));
  }
  if (node.output(0)->numel() > INT32_MAX) return node.Unsupported(absl::StrCat("tensor exceeds 2^31 elements (", ShapesOf(node), ")"));
  if (node.output(0)->numel() == 0 || node.input(0)->numel() == 0 || node.input(1)->numel() == 0) {
    return node.Unsupported(absl::StrCat("zero-sized convolution has no library kernel (", ShapesOf(node), ")"));
  }
  const size_t n = x.size() - 2;
  auto group = node.GetInt("group", 1);
  if (!group.ok()) return group.status();
  // Strides, dilations and padding as the CPU reference resolves them.
  absl::StatusOr<kiln::ops::WindowGeometry> win = kiln::ops::ComputeWindow(
      node, Shape(x.begin() + 2, x.end()), std::vector<int64_t>(wt.begin() + 2, wt.end()), /*use_dilations=*/true,
      /*ceil_mode=*/false);
  if (!win.ok()) return win.status();
  const std::vector<int64_t>& begin = win->pads_begin;
  const std::vector<int64_t>& end = win->pads_end;
  for (size_t i = 0; i < n; ++i) {
    if (begin[i] != end[i]) {
      return node.Unsupported(absl::StrCat("asymmetric padding (begin ", ShapeToString(begin), ", end ",
                                           ShapeToString(end), ") has no cuDNN kernel (", ShapesOf(node), ")"));
    }
    // cuDNN's output size for symmetric pads must match the node's.
    if (win->output[i] != y[2 + i]) {
      return node.Unsupported(absl::StrCat("output size does not match cuDNN's convolution arithmetic (",
                                           ShapesOf(node), ")"));
    }
  }
  ConvPlan p;
  p.nhwc = nhwc;
  p.dtype = node.output(0)->dtype();
  p.group = static_cast<int>(*group);
  p.batch = static_cast<int>(x[0]);
  p.c = static_cast<int>(x[1]);
  p.m = static_cast<int>(wt[0]);
  p.cg = static_cast<int>(wt[1]);
  if (p.group < 1 || p.cg * p.group != p.c || p.m % p.group != 0 || y[0] != x[0] || y[1] != wt[0]) {
    return node.Unsupported(absl::StrCat("inconsistent channels/groups (", ShapesOf(node), ")"));
  }
  const size_t hd = n == 2 ? 2 : 0;  // index of H in the spatial-2 shapes, 0 = absent (1-D)
  if (hd) {
    p.h = static_cast<int>(x[2]);
    p.kh = static_cast<int>(wt[2]);
    p.oh = static_cast<int>(y[2]);
    p.pad_h = static_cast<int>(begin[0]);
    p.stride_h = static_cast<int>(win->strides[0]);
    p.dil_h = static_cast<int>(win->dilations[0]);
  }
  p.w = static_cast<int>(x.back());
  p.kw = static_cast<int>(wt.back());
  p.ow = static_cast<int>(y.back());
  p.pad_w = static_cast<int>(begin[n - 1]);
  p.stride_w = static_cast<int>(win->strides[n - 1]);
  p.dil_w = static_cast<int>(win->dilations[n - 1]);
  if (node.has_input(2)) {
    if (node.input(2)->shape() != Shape{p.m}) {
      return node.Unsupported(absl::StrCat("bias must be [M] (", ShapesOf(node), ")"));
    }
    p.has_bias = true;
  }
  return p;
}

// ---------------------------------------------------------------------------
// cuBLASLt kernel.

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
    KILN_LT(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
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
    const int num_inputs = std::max({p.in_a, p.in_b, has_c ? p.in_c : 0}) + 1;
    if (args.outputs.size() != 1 || args.outputs[0] == nullptr || static_cast<int>(args.inputs.size()) < num_inputs ||
        args.inputs[p.in_a] == nullptr || args.inputs[p.in_b] == nullptr || (has_c && args.inputs[p.in_c] == nullptr)) {
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

// ---------------------------------------------------------------------------
// cuDNN kernel.

cudnnDataType_t CudnnType(DType d) {
  switch (d) {
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

std::string DnnStatus(cudnnStatus_t s) {
  std::string msg = absl::StrCat(cudnnGetErrorString(s), " (", static_cast<int>(s), ")");
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));
  if (last[0] != '\0') absl::StrAppend(&msg, ": ", last);
  return msg;
}

#define KILN_DNN(expr, what)                                                                         \
  do {                                                                                               \
    const cudnnStatus_t kiln_dnn_status = (expr);                                                    \
    if (kiln_dnn_status != CUDNN_STATUS_SUCCESS) {                                                   \
      return absl::InternalError(absl::StrCat(where_, ": ", what, " failed: ", DnnStatus(kiln_dnn_status))); \
    }                                                                                                \
  } while (0)

class CudnnConvKernel : public LibraryKernel {
 public:
  CudnnConvKernel(std::string where, ConvPlan plan, cudnnHandle_t handle)
      : where_(std::move(where)), plan_(plan), handle_(handle) {}

  ~CudnnConvKernel() override {
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    for (cudnnTensorDescriptor_t t : {x_, y_, bias_}) {
      if (t) cudnnDestroyTensorDescriptor(t);
    }
  }

  absl::Status Init() {
    const ConvPlan& p = plan_;
    const cudnnDataType_t t = CudnnType(p.dtype);
    KILN_DNN(cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
    KILN_DNN(cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
    KILN_DNN(cudnnCreateFilterDescriptor(&w_), "cudnnCreateFilterDescriptor");
    KILN_DNN(cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    // NHWC activations and KRSC filters (channels_last) are cuDNN's fast tensor-core path.
    const cudnnTensorFormat_t format = p.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    KILN_DNN(cudnnSetTensor4dDescriptor(x_, format, t, p.batch, p.c, p.h, p.w), "set X descriptor");
    KILN_DNN(cudnnSetFilter4dDescriptor(w_, t, format, p.m, p.cg, p.kh, p.kw), "set W descriptor");
    KILN_DNN(cudnnSetConvolution2dDescriptor(conv_, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             "cudnnSetConvolution2dDescriptor");
    KILN_DNN(cudnnSetConvolutionGroupCount(conv_, p.group), "cudnnSetConvolutionGroupCount");
    const bool f32 = p.dtype == DType::kFloat32;
    // f32: FMA kernels only (no TF32); f16/bf16: tensor cores with fp32 accumulation.
    KILN_DNN(cudnnSetConvolutionMathType(conv_, f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
             "cudnnSetConvolutionMathType");
    int n = 0, c = 0, h = 0, w = 0;
    KILN_DNN(cudnnGetConvolution2dForwardOutputDim(conv_, x_, w_, &n, &c, &h, &w),
             "cudnnGetConvolution2dForwardOutputDim");
    if (n != p.batch || c != p.m || h != p.oh || w != p.ow) {
      return absl::InternalError(absl::StrCat(where_, ": cuDNN computes output [", n, ",", c, ",", h, ",", w,
                                              "], the graph says [", p.batch, ",", p.m, ",", p.oh, ",", p.ow, "]"));
    }
    KILN_DNN(cudnnSetTensor4dDescriptor(y_, format, t, p.batch, p.m, p.oh, p.ow), "set Y descriptor");
    if (p.has_bias || p.fused) {
      // [1, M, 1, 1]: the same bytes in either format.
      KILN_DNN(cudnnCreateTensorDescriptor(&bias_), "cudnnCreateTensorDescriptor");
      KILN_DNN(cudnnSetTensor4dDescriptor(bias_, format, t, 1, p.m, 1, 1), "set bias descriptor");
    }
    if (p.fused) {
      KILN_DNN(cudnnCreateActivationDescriptor(&act_), "cudnnCreateActivationDescriptor");
      KILN_DNN(cudnnSetActivationDescriptor(act_, p.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                            CUDNN_NOT_PROPAGATE_NAN, 0.0),
               "cudnnSetActivationDescriptor");
      // The fused call needs a bias: a zeroed one at the start of the workspace.
      if (!p.has_bias) zero_bias_bytes_ = AlignUp(static_cast<size_t>(p.m) * (f32 ? 4 : 2), 256);
    }

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
    int found = 0;
    KILN_DNN(cudnnGetConvolutionForwardAlgorithm_v7(handle_, x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                    &found, perf),
             "cudnnGetConvolutionForwardAlgorithm_v7");
    if (p.fused && !p.relu) {
      // CUDNN_ACTIVATION_IDENTITY works only with IMPLICIT_PRECOMP_GEMM.
      found = 1;
      perf[0] = {};
      perf[0].algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      perf[0].status = CUDNN_STATUS_SUCCESS;
      perf[0].mathType = f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    }
    std::string tried;
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      const cudnnMathType_t math = f32 ? CUDNN_FMA_MATH : perf[i].mathType;
      if (f32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
      if (cudnnSetConvolutionMathType(conv_, math) != CUDNN_STATUS_SUCCESS) continue;
      size_t bytes = 0;
      const cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(handle_, x_, w_, conv_, y_, perf[i].algo, &bytes);
      if (s != CUDNN_STATUS_SUCCESS) {
        absl::StrAppend(&tried, " algo ", static_cast<int>(perf[i].algo), ": ", cudnnGetErrorString(s), ";");
        continue;
      }
      if (bytes > kCudnnMaxWorkspace) {
        absl::StrAppend(&tried, " algo ", static_cast<int>(perf[i].algo), ": needs ", bytes, " bytes;");
        continue;
      }
      if (p.fused) {
        // The fused call has constraints the heuristics do not know: try it once.
        const cudnnStatus_t ts = TryFused(perf[i].algo, bytes);
        if (ts != CUDNN_STATUS_SUCCESS) {
          absl::StrAppend(&tried, " algo ", static_cast<int>(perf[i].algo), ": ", DnnStatus(ts), ";");
          continue;
        }
      }
      algo_ = perf[i].algo;
      workspace_ = bytes;
      return absl::OkStatus();
    }
    return absl::UnimplementedError(absl::StrCat(where_, ": cuDNN has no usable ",
                                                 p.fused ? "fused convolution-bias-activation" : "forward",
                                                 " algorithm (", found, " candidates;", tried, ")"));
  }

  size_t workspace_bytes() const override { return zero_bias_bytes_ + workspace_; }

  absl::Status Launch(const LibraryLaunchArgs& args) const override {
    if (plan_.fused) return LaunchFused(args);
    if (args.outputs.size() != 1 || args.outputs[0] == nullptr || args.inputs.size() < (plan_.has_bias ? 3u : 2u) ||
        args.inputs[0] == nullptr || args.inputs[1] == nullptr || (plan_.has_bias && args.inputs[2] == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": missing input or output pointers for the cuDNN call"));
    }
    if (args.workspace_bytes < workspace_ || (workspace_ > 0 && args.workspace == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": workspace of ", args.workspace_bytes,
                                                     " bytes is smaller than the ", workspace_, " needed"));
    }
    const float one = 1.f, zero = 0.f;
    KILN_DNN(cudnnSetStream(handle_, args.stream), "cudnnSetStream");
    KILN_DNN(cudnnConvolutionForward(handle_, &one, x_, args.inputs[0], w_, args.inputs[1], conv_, algo_,
                                     args.workspace, workspace_, &zero, y_, args.outputs[0]),
             "cudnnConvolutionForward");
    if (plan_.has_bias) {
      KILN_DNN(cudnnAddTensor(handle_, &one, bias_, args.inputs[2], &one, y_, args.outputs[0]), "cudnnAddTensor (bias)");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status LaunchFused(const LibraryLaunchArgs& args) const {
    const ConvPlan& p = plan_;
    const int n = static_cast<int>(args.inputs.size());
    auto present = [&](int i) { return i >= 0 && i < n && args.inputs[i] != nullptr; };
    if (args.outputs.size() != 1 || args.outputs[0] == nullptr || !present(p.in_x) || !present(p.in_w) ||
        (p.has_bias && !present(p.in_bias)) || (p.in_z >= 0 && !present(p.in_z))) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": missing input or output pointers for the cuDNN call"));
    }
    if (args.workspace_bytes < workspace_bytes() || (workspace_bytes() > 0 && args.workspace == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": workspace of ", args.workspace_bytes,
                                                     " bytes is smaller than the ", workspace_bytes(), " needed"));
    }
    char* ws = static_cast<char*>(args.workspace);
    const void* bias = p.has_bias ? args.inputs[p.in_bias] : ws;
    if (!p.has_bias) {
      const cudaError_t e = cudaMemsetAsync(ws, 0, zero_bias_bytes_, args.stream);
      if (e != cudaSuccess) {
        return absl::InternalError(absl::StrCat(where_, ": zeroing the bias failed: ", cudaGetErrorString(e)));
      }
    }
    const float one = 1.f, alpha2 = p.in_z >= 0 ? 1.f : 0.f;
    const void* z = p.in_z >= 0 ? args.inputs[p.in_z] : args.outputs[0];
    KILN_DNN(cudnnSetStream(handle_, args.stream), "cudnnSetStream");
    KILN_DNN(cudnnConvolutionBiasActivationForward(handle_, &one, x_, args.inputs[p.in_x], w_, args.inputs[p.in_w],
                                                   conv_, algo_, workspace_ > 0 ? ws + zero_bias_bytes_ : nullptr,
                                                   workspace_, &alpha2, y_, z, bias_, bias, act_, y_, args.outputs[0]),
             "cudnnConvolutionBiasActivationForward");
    return absl::OkStatus();
  }

  // Runs the fused call once on scratch buffers (plan time only: allocates and
  // synchronises) and returns its status.
  cudnnStatus_t TryFused(cudnnConvolutionFwdAlgo_t algo, size_t ws_bytes) {
    const ConvPlan& p = plan_;
    const size_t es = p.dtype == DType::kFloat32 ? 4 : 2;
    const size_t sizes[] = {es * p.batch * p.c * p.h * p.w, es * p.m * p.cg * p.kh * p.kw,
                            es * p.batch * p.m * p.oh * p.ow, es * p.m, std::max<size_t>(ws_bytes, 1)};
    void* buf[5] = {};
    cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;
    bool ok = true;
    for (int i = 0; i < 5 && ok; ++i) {
      ok = cudaMalloc(&buf[i], sizes[i]) == cudaSuccess && cudaMemset(buf[i], 0, sizes[i]) == cudaSuccess;
    }
    if (ok) {
      const float one = 1.f, alpha2 = p.in_z >= 0 ? 1.f : 0.f;
      st = cudnnSetStream(handle_, nullptr);
      if (st == CUDNN_STATUS_SUCCESS) {
        st = cudnnConvolutionBiasActivationForward(handle_, &one, x_, buf[0], w_, buf[1], conv_, algo, buf[4],
                                                   ws_bytes, &alpha2, y_, buf[2], bias_, buf[3], act_, y_, buf[2]);
      }
      if (st == CUDNN_STATUS_SUCCESS && cudaDeviceSynchronize() != cudaSuccess) st = CUDNN_STATUS_EXECUTION_FAILED;
    }
    cudaGetLastError();
    for (void* b : buf) {
      if (b) cudaFree(b);
    }
    return st;
  }

  std::string where_;
  ConvPlan plan_;
  cudnnHandle_t handle_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_ = 0;
  size_t zero_bias_bytes_ = 0;
};
#undef KILN_DNN

// ---------------------------------------------------------------------------
// Fused groups whose body one library call runs.

// A group body that is a chain: the anchor, then epilogue nodes each reading the
// previous node's output, the last writing the group's only output. Intermediate
// values are read by the next node only (not by another member, not outside).
struct Chain {
  std::unique_ptr<Graph> body;
  std::vector<const Node*> nodes;  // anchor first
};

absl::StatusOr<Chain> ParseChain(const Node& group, std::initializer_list<absl::string_view> patterns,
                                 const std::string& anchor_op) {
  absl::StatusOr<std::string> pattern = group.GetString("pattern", "");
  if (!pattern.ok()) return pattern.status();
  if (std::find(patterns.begin(), patterns.end(), *pattern) == patterns.end()) {
    return group.Unsupported(absl::StrCat("pattern '", *pattern, "' has no library kernel"));
  }
  if (group.num_outputs() != 1 || group.output(0) == nullptr || !group.output(0)->has_type()) {
    return group.Unsupported("a library kernel writes exactly one typed output");
  }
  absl::StatusOr<std::unique_ptr<Graph>> body = FusedGroupBody(group);
  if (!body.ok()) return body.status();
  Chain chain;
  chain.body = std::move(*body);
  const Graph& g = *chain.body;
  if (g.outputs().size() != 1 || static_cast<int>(g.inputs().size()) != group.num_inputs()) {
    return group.Unsupported("body inputs/outputs do not match the group's");
  }
  const Node* anchor = nullptr;
  for (const Node* n : g.nodes()) {
    if (n->op_type() != anchor_op) continue;
    if (anchor != nullptr) return group.Unsupported(absl::StrCat("body has more than one ", anchor_op));
    anchor = n;
  }
  if (anchor == nullptr) return group.Unsupported(absl::StrCat("body has no ", anchor_op));
  for (const Node* cur = anchor;;) {
    chain.nodes.push_back(cur);
    if (!cur->domain().empty() && cur->domain() != "ai.onnx") {
      return group.Unsupported(absl::StrCat("body node ", cur->Describe(), " is not an ONNX op"));
    }
    if (cur->num_outputs() != 1 || cur->output(0) == nullptr || !cur->output(0)->has_type()) {
      return group.Unsupported(absl::StrCat("body node ", cur->Describe(), " does not have one typed output"));
    }
    const Value* v = cur->output(0);
    if (v == g.outputs()[0]) break;
    if (g.IsGraphOutput(v) || v->uses().size() != 1) {
      return group.Unsupported(absl::StrCat("intermediate value '", v->name(), "' is read outside the epilogue chain"));
    }
    cur = v->uses()[0].node;
  }
  if (static_cast<int>(chain.nodes.size()) != g.num_nodes()) {
    return group.Unsupported("body nodes outside the anchor's epilogue chain (a prologue?)");
  }
  const Value* out = g.outputs()[0];
  const Value* anchored = anchor->output(0);
  if (out->dtype() != anchored->dtype() || out->shape() != anchored->shape() ||
      group.output(0)->dtype() != out->dtype() || group.output(0)->shape() != out->shape()) {
    return group.Unsupported("the epilogue changes the anchor's dtype or shape");
  }
  for (const Node* n : chain.nodes) {
    if (n->output(0)->dtype() != out->dtype() || n->output(0)->shape() != out->shape()) {
      return group.Unsupported(absl::StrCat("body node ", n->Describe(), " changes the dtype or shape"));
    }
  }
  return chain;
}

// Position of `v` among the body's inputs (= the group node's inputs), -1 if none.
int BodyInput(const Graph& body, const Value* v) {
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    if (body.inputs()[i] == v && v != nullptr) return static_cast<int>(i);
  }
  return -1;
}

// For an Add in the chain: the operand that is not the previous node's output
// (nullptr when both are, or the Add is malformed).
const Value* OtherOperand(const Node& add, const Node& prev) {
  if (add.num_inputs() != 2 || add.input(0) == nullptr || add.input(1) == nullptr) return nullptr;
  if (add.input(0) == prev.output(0) && add.input(1) != prev.output(0)) return add.input(1);
  if (add.input(1) == prev.output(0) && add.input(0) != prev.output(0)) return add.input(0);
  return nullptr;
}

// "matmul+epilogue": MatMul(A, W) [+ Add(bias [N] or [1,N], or a per-batch bias
// [batch.., 1, N] when the MatMul is a strided batch)] [+ Relu | Gelu(tanh)], one
// cuBLASLt call with a BIAS / RELU / GELU epilogue. A, W and the bias are group
// inputs. cuBLASLt's GELU epilogue is the tanh approximation, so erf Gelu is refused.
absl::StatusOr<GemmPlan> PlanFusedMatMul(const Node& group) {
  absl::StatusOr<Chain> chain = ParseChain(group, {"matmul+epilogue", "prologue+matmul+epilogue"}, "MatMul");
  if (!chain.ok()) return chain.status();
  const Graph& body = *chain->body;
  const std::vector<const Node*>& nodes = chain->nodes;
  const Node& mm = *nodes[0];
  absl::StatusOr<GemmPlan> plan = PlanMatMul(mm);
  if (!plan.ok()) return plan.status();
  GemmPlan& p = *plan;
  p.in_a = BodyInput(body, mm.input(0));
  p.in_b = BodyInput(body, mm.input(1));
  if (p.in_a < 0 || p.in_b < 0) return group.Unsupported("MatMul operands must be group inputs");
  size_t i = 1;
  if (i < nodes.size() && nodes[i]->op_type() == "Add") {
    const Value* bias = OtherOperand(*nodes[i], *nodes[i - 1]);
    // A per-batch bias: the output's batch dims, then [1, N] (fuse-siblings' stacked
    // Q/K/V bias [S, 1, N]); cuBLASLt steps through it with BIAS_BATCH_STRIDE.
    const Shape& y = mm.output(0)->shape();
    Shape per_batch(y.begin(), y.end() - std::min<size_t>(2, y.size()));
    per_batch.insert(per_batch.end(), {1, p.n});
    const bool batched_bias = p.batch > 1 && y.size() >= 3 && bias != nullptr && bias->shape() == per_batch;
    if (bias == nullptr || !bias->has_type() || bias->dtype() != p.dtype ||
        (bias->shape() != Shape{p.n} && bias->shape() != Shape{1, p.n} && !batched_bias)) {
      return group.Unsupported("the Add is not a bias of shape [N], [1, N] or [batch.., 1, N]");
    }
    if (batched_bias) p.bias_batch_stride = p.n;
    p.in_c = BodyInput(body, bias);
    if (p.in_c < 0) return group.Unsupported("the bias must be a group input");
    p.c_kind = CKind::kBias;
    p.beta = 1.f;
    ++i;
  }
  if (i < nodes.size() && nodes[i]->op_type() == "Relu") {
    p.act = GemmPlan::Act::kRelu;
    ++i;
  } else if (i < nodes.size() && nodes[i]->op_type() == "Gelu") {
    absl::StatusOr<std::string> approximate = nodes[i]->GetString("approximate", "none");
    if (!approximate.ok()) return approximate.status();
    if (*approximate != "tanh") {
      return group.Unsupported("cuBLASLt's GELU epilogue is the tanh approximation; exact (erf) Gelu is not");
    }
    p.act = GemmPlan::Act::kGeluTanh;
    ++i;
  }
  if (i != nodes.size()) {
    return group.Unsupported(absl::StrCat("epilogue node ", nodes[i]->Describe(), " has no cuBLASLt epilogue"));
  }
  return p;
}

// "conv+epilogue": Conv(X, W[, B]) then Add(residual Z of the output's shape) or
// Add(bias broadcast as [1, C, 1, 1], or [1, 1, 1, C] / [C] for a channels_last Conv,
// when the Conv has no B), then optionally Relu;
// at least one epilogue node. One cudnnConvolutionBiasActivationForward call:
// y = act(conv(x) + z + bias), a zero bias when the body has none.
absl::StatusOr<ConvPlan> PlanFusedConv(const Node& group) {
  absl::StatusOr<Chain> chain = ParseChain(group, {"conv+epilogue"}, "Conv");
  if (!chain.ok()) return chain.status();
  const Graph& body = *chain->body;
  const std::vector<const Node*>& nodes = chain->nodes;
  const Node& conv = *nodes[0];
  absl::StatusOr<ConvPlan> plan = PlanConv(conv);
  if (!plan.ok()) return plan.status();
  ConvPlan& p = *plan;
  p.fused = true;
  p.in_x = BodyInput(body, conv.input(0));
  p.in_w = BodyInput(body, conv.input(1));
  p.in_bias = p.has_bias ? BodyInput(body, conv.input(2)) : -1;
  if (p.in_x < 0 || p.in_w < 0 || (p.has_bias && p.in_bias < 0)) {
    return group.Unsupported("Conv operands must be group inputs");
  }
  if (nodes.size() < 2) return group.Unsupported("no epilogue to fuse");
  size_t i = 1;
  if (i < nodes.size() && nodes[i]->op_type() == "Add") {
    const Value* other = OtherOperand(*nodes[i], *nodes[i - 1]);
    const Shape& y = conv.output(0)->shape();
    if (other == nullptr || !other->has_type() || other->dtype() != p.dtype) {
      return group.Unsupported("the Add's other operand is not a tensor of the Conv's dtype");
    }
    const int index = BodyInput(body, other);
    if (index < 0) return group.Unsupported("the Add's other operand must be a group input");
    Shape padded = other->shape();
    if (padded.size() <= y.size()) padded.insert(padded.begin(), y.size() - padded.size(), 1);
    Shape bias_shape(y.size(), 1);
    bias_shape[p.nhwc ? y.size() - 1 : 1] = p.m;
    if (other->shape() == y) {
      p.in_z = index;  // residual
    } else if (padded == bias_shape && !p.has_bias) {
      p.in_bias = index;
      p.has_bias = true;
    } else {
      return group.Unsupported("the Add is neither a residual of the output's shape nor a per-channel bias");
    }
    ++i;
  }
  if (i < nodes.size() && nodes[i]->op_type() == "Relu") {
    p.relu = true;
    ++i;
  }
  if (i != nodes.size()) {
    return group.Unsupported(absl::StrCat("epilogue node ", nodes[i]->Describe(), " has no cuDNN fused form"));
  }
  return p;
}

}  // namespace

std::string LibraryKernelName(const Node& node) {
  if (IsFusedGroup(node)) {
    if (PlanFusedMatMul(node).ok()) return "cublaslt:FusedMatMul";
    if (PlanFusedConv(node).ok()) return "cudnn:FusedConv";
    return "";
  }
  if (node.op_type() == "MatMul") return PlanMatMul(node).ok() ? "cublaslt:MatMul" : "";
  if (node.op_type() == "Gemm") return PlanGemm(node).ok() ? "cublaslt:Gemm" : "";
  if (node.op_type() == "Conv") return PlanConv(node).ok() ? "cudnn:Conv" : "";
  return "";
}

absl::StatusOr<std::unique_ptr<LibraryKernel>> CreateLibraryKernel(const Node& node, const LibraryHandles& handles) {
  const std::string where = absl::StrCat(node.Describe(), " [", ShapesOf(node), "]");
  if (IsFusedGroup(node)) {
    absl::StatusOr<GemmPlan> gemm = PlanFusedMatMul(node);
    if (gemm.ok()) {
      if (handles.cublaslt == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuBLASLt handle"));
      auto kernel = std::make_unique<CublasLtKernel>(where, *gemm, handles.cublaslt);
      if (absl::Status s = kernel->Init(); !s.ok()) return s;
      return std::unique_ptr<LibraryKernel>(std::move(kernel));
    }
    absl::StatusOr<ConvPlan> conv = PlanFusedConv(node);
    if (conv.ok()) {
      if (handles.cudnn == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuDNN handle"));
      auto kernel = std::make_unique<CudnnConvKernel>(where, *conv, handles.cudnn);
      if (absl::Status s = kernel->Init(); !s.ok()) {
        if (s.code() == absl::StatusCode::kUnimplemented) return s;
        return absl::UnimplementedError(s.message());
      }
      return std::unique_ptr<LibraryKernel>(std::move(kernel));
    }
    absl::StatusOr<std::string> pattern = node.GetString("pattern", "");
    return pattern.ok() && *pattern == "conv+epilogue" ? conv.status() : gemm.status();
  }
  if (node.op_type() == "MatMul" || node.op_type() == "Gemm") {
    absl::StatusOr<GemmPlan> plan = node.op_type() == "MatMul" ? PlanMatMul(node) : PlanGemm(node);
    if (!plan.ok()) return plan.status();
    if (handles.cublaslt == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": no cuBLASLt handle"));
    }
    auto kernel = std::make_unique<CublasLtKernel>(where, *plan, handles.cublaslt);
    if (absl::Status s = kernel->Init(); !s.ok()) return s;
    return std::unique_ptr<LibraryKernel>(std::move(kernel));
  }
  if (node.op_type() == "Conv") {
    absl::StatusOr<ConvPlan> plan = PlanConv(node);
    if (!plan.ok()) return plan.status();
    if (handles.cudnn == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuDNN handle"));
    auto kernel = std::make_unique<CudnnConvKernel>(where, *plan, handles.cudnn);
    if (absl::Status s = kernel->Init(); !s.ok()) return s;
    return std::unique_ptr<LibraryKernel>(std::move(kernel));
  }
  return node.Unsupported("no library kernel for this op");
}

}  // namespace kiln::codegen
