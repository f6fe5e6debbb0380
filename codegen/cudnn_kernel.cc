// Conv (and the fused conv-bias-residual-activation call) through cuDNN's legacy
// convolution API: deprecated in cuDNN 9 but still the simplest way to run one
// convolution with heuristic algorithm choice.
#include "codegen/library_plans.h"

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

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::codegen::libplan {
namespace {

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
    // f32: FMA kernels only (no TF32) unless marked tf32; f16/bf16 (and tf32): tensor
    // cores with fp32 accumulation.
    const bool fma_only = p.dtype == DType::kFloat32 && !p.tf32;
    KILN_DNN(cudnnSetConvolutionMathType(conv_, fma_only ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
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
      if (!p.has_bias) zero_bias_bytes_ = AlignUp(static_cast<size_t>(p.m) * DTypeSize(p.dtype), 256);
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
      perf[0].mathType = fma_only ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    }
    std::string tried;
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      const cudnnMathType_t math = fma_only ? CUDNN_FMA_MATH : perf[i].mathType;
      if (fma_only && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
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

}  // namespace

absl::StatusOr<std::unique_ptr<LibraryKernel>> MakeCudnnConvKernel(std::string where, const ConvPlan& plan,
                                                                   cudnnHandle_t handle) {
  auto kernel = std::make_unique<CudnnConvKernel>(std::move(where), plan, handle);
  if (absl::Status s = kernel->Init(); !s.ok()) return s;
  return std::unique_ptr<LibraryKernel>(std::move(kernel));
}

}  // namespace kiln::codegen::libplan
