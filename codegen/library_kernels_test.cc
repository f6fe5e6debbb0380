// Tests of the vendor-library kernels: the name decision (no GPU needed) and, on a
// machine with a CUDA GPU, numerics of cuBLASLt MatMul/Gemm and cuDNN Conv against
// the CPU reference evaluator on the same f32/f16/bf16 inputs.
#include "codegen/library_kernels.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/ops/op_test_util.h"

namespace kiln::codegen {
namespace {

using op_test::Attrs;

// A graph of one node named "n" whose inputs are runtime values of `dtype` and the
// given shapes (nullopt: absent optional input); shapes inferred.
struct OneNode {
  Graph graph;
  Node* node = nullptr;
};

std::unique_ptr<OneNode> Build(const std::string& op, DType dtype, const std::vector<std::optional<Shape>>& shapes,
                               const Attrs& attrs = {}) {
  auto one = std::make_unique<OneNode>();
  Graph& g = one->graph;
  std::vector<Value*> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) {
      inputs.push_back(nullptr);
      continue;
    }
    Value* v = g.AddValue("in" + std::to_string(i));
    v->SetType(dtype, *shapes[i]);
    g.AddInput(v);
    inputs.push_back(v);
  }
  Value* out = g.AddValue("out");
  one->node = g.AddNode(op, inputs, {out}, "n");
  for (const auto& [k, v] : attrs) one->node->SetAttr(k, v);
  g.AddOutput(out);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return nullptr;
  return one;
}

std::string Name(const std::string& op, DType dtype, const std::vector<std::optional<Shape>>& shapes,
                 const Attrs& attrs = {}) {
  auto one = Build(op, dtype, shapes, attrs);
  return one ? LibraryKernelName(*one->node) : "<build failed>";
}

constexpr DType kF32 = DType::kFloat32, kF16 = DType::kFloat16, kBF16 = DType::kBFloat16;

// ---------------------------------------------------------------------------
// Name decisions (run everywhere).

TEST(LibraryKernelName, MatMulForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{33, 129}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{33, 7}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{33}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{33}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{33, 5}}), "cublaslt:MatMul");        // fold into M
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{1, 1, 33, 5}}), "cublaslt:MatMul");  // fold into M
    EXPECT_EQ(Name("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 5}}), "cublaslt:MatMul");  // strided batch
    EXPECT_EQ(Name("MatMul", dt, {Shape{3, 7, 33}, Shape{1, 3, 33, 5}}), "cublaslt:MatMul");     // leading 1 batch
    EXPECT_EQ(Name("MatMul", dt, {Shape{7, 33}, Shape{2, 3, 33, 5}}), "cublaslt:MatMul");        // broadcast A
    EXPECT_EQ(Name("MatMul", dt, {Shape{1, 7, 33}, Shape{4, 33, 5}}), "cublaslt:MatMul");        // broadcast A
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{4, 33, 5}}), "cublaslt:MatMul");              // 1-D A, batched B
  }
  // Batch dims that broadcast against each other.
  EXPECT_EQ(Name("MatMul", kF16, {Shape{2, 1, 7, 33}, Shape{1, 3, 33, 5}}), "");
  EXPECT_EQ(Name("MatMul", kF16, {Shape{2, 3, 7, 33}, Shape{1, 3, 33, 5}}), "");
  EXPECT_EQ(Name("MatMul", kF16, {Shape{3, 7, 33}, Shape{2, 3, 33, 5}}), "");
  // Integer dtypes have no library kernel.
  EXPECT_EQ(Name("MatMul", DType::kInt32, {Shape{7, 33}, Shape{33, 5}}), "");
  EXPECT_EQ(Name("MatMul", DType::kInt64, {Shape{7, 33}, Shape{33, 5}}), "");
  // Zero-sized products.
  EXPECT_EQ(Name("MatMul", kF16, {Shape{0, 33}, Shape{33, 5}}), "");
}

TEST(LibraryKernelName, GemmForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}}), "cublaslt:Gemm");
    EXPECT_EQ(Name("Gemm", dt, {Shape{33, 7}, Shape{5, 33}}, {{"transA", 1}, {"transB", 1}}), "cublaslt:Gemm");
    for (const Shape& c : {Shape{5}, Shape{1, 5}, Shape{7, 5}, Shape{}, Shape{1}, Shape{1, 1}, Shape{7, 1}}) {
      EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}, c}, {{"beta", 0.5f}}), "cublaslt:Gemm")
          << ShapeToString(c);
      EXPECT_EQ(Name("Gemm", dt, {Shape{7, 33}, Shape{33, 5}, c}), "cublaslt:Gemm") << ShapeToString(c);
    }
  }
  EXPECT_EQ(Name("Gemm", DType::kInt32, {Shape{7, 33}, Shape{33, 5}}), "");
}

TEST(LibraryKernelName, ConvForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}), "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}, Shape{4}}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
              "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{2, 4, 33}, Shape{6, 2, 5}, Shape{6}},
                   {{"group", 2}, {"pads", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2}}}),
              "cudnn:Conv");
  }
  // auto_pad: SAME with an even total pad is symmetric; odd total is not.
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "SAME_UPPER"}}), "cudnn:Conv");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "VALID"}}), "cudnn:Conv");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 8, 8}, Shape{4, 3, 2, 2}}, {{"auto_pad", "SAME_LOWER"}}), "");
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"pads", std::vector<int64_t>{0, 1, 1, 1}}}),
            "");
  // 3-D convolution.
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 3, 5, 5, 5}, Shape{4, 3, 3, 3, 3}}), "");
  // Other ops.
  EXPECT_EQ(Name("Relu", kF16, {Shape{4, 4}}), "");
}

TEST(CreateLibraryKernel, UnsupportedNamesTheNode) {
  auto one = Build("MatMul", kF16, {Shape{2, 1, 7, 33}, Shape{1, 3, 33, 5}});
  ASSERT_NE(one, nullptr);
  auto k = CreateLibraryKernel(*one->node, {});
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("node 'n' (MatMul)"), std::string::npos) << k.status();
  EXPECT_NE(k.status().message().find("f16[2,1,7,33]"), std::string::npos) << k.status();
}

TEST(CreateLibraryKernel, MissingHandleIsAnError) {
  auto mm = Build("MatMul", kF16, {Shape{7, 33}, Shape{33, 5}});
  auto conv = Build("Conv", kF16, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}});
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(CreateLibraryKernel(*mm->node, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CreateLibraryKernel(*conv->node, {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------------------
// Numerics on the GPU.

#define CUDA_OK(expr)                                                               \
  do {                                                                              \
    const cudaError_t e_ = (expr);                                                  \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);          \
  } while (0)

struct RunOptions {
  size_t misalign = 0;      // bytes added to every input/output pointer
  bool cuda_graph = false;  // capture Launch into a CUDA graph and replay it twice
};

class LibraryKernelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA GPU: " << (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    ASSERT_EQ(cublasLtCreate(&handles_.cublaslt), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreate(&handles_.cudnn), CUDNN_STATUS_SUCCESS);
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (handles_.cudnn) cudnnDestroy(handles_.cudnn);
    if (handles_.cublaslt) cublasLtDestroy(handles_.cublaslt);
  }

  static float Tolerance(DType dt) { return dt == kF32 ? 1e-4f : dt == kF16 ? 1e-2f : 5e-2f; }

  // Builds the node, runs it on the GPU and on the CPU reference with the same
  // random inputs, and compares (max error relative to max |reference|).
  void Check(const std::string& op, DType dt, const std::vector<std::optional<Shape>>& shapes,
             const Attrs& attrs = {}, RunOptions opts = {}) {
    SCOPED_TRACE(op + " " + std::string(DTypeName(dt)) + " " + [&] {
      std::string s;
      for (const auto& sh : shapes) s += sh ? ShapeToString(*sh) : "(none)";
      return s;
    }());
    auto one = Build(op, dt, shapes, attrs);
    ASSERT_NE(one, nullptr);
    const Node& node = *one->node;
    ASSERT_FALSE(LibraryKernelName(node).empty());
    std::vector<Tensor> inputs;
    std::vector<const Tensor*> ptrs;
    inputs.reserve(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!shapes[i]) {
        inputs.emplace_back();
        ptrs.push_back(nullptr);
        continue;
      }
      inputs.push_back(Tensor::FromFloat(dt, *shapes[i], op_test::Random(NumElements(*shapes[i]), 17 + 31 * i)));
      ptrs.push_back(&inputs.back());
    }
    auto ref = EvaluateNode(node, ptrs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const Tensor& want = (*ref)[0];

    auto kernel = CreateLibraryKernel(node, handles_);
    ASSERT_TRUE(kernel.ok()) << kernel.status();

    std::vector<void*> allocations;
    auto alloc = [&](size_t bytes) -> char* {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes + 256) != cudaSuccess) return nullptr;
      allocations.push_back(p);
      return static_cast<char*>(p);
    };
    LibraryLaunchArgs args;
    for (const Tensor* t : ptrs) {
      if (t == nullptr) {
        args.inputs.push_back(nullptr);
        continue;
      }
      char* p = alloc(t->nbytes());
      ASSERT_NE(p, nullptr);
      CUDA_OK(cudaMemcpy(p + opts.misalign, t->raw_data(), t->nbytes(), cudaMemcpyHostToDevice));
      args.inputs.push_back(p + opts.misalign);
    }
    Tensor got(dt, want.shape());
    char* out = alloc(got.nbytes());
    ASSERT_NE(out, nullptr);
    CUDA_OK(cudaMemset(out, 0xff, got.nbytes() + 256));  // NaN garbage: every element must be written
    args.outputs.push_back(out + opts.misalign);
    args.workspace_bytes = (*kernel)->workspace_bytes();
    if (args.workspace_bytes > 0) {
      args.workspace = alloc(args.workspace_bytes);
      ASSERT_NE(args.workspace, nullptr);
    }
    args.stream = stream_;
    if (!opts.cuda_graph) {
      absl::Status s = (*kernel)->Launch(args);
      ASSERT_TRUE(s.ok()) << s;
    } else {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      absl::Status s = (*kernel)->Launch(args);
      CUDA_OK(cudaStreamEndCapture(stream_, &graph));
      ASSERT_TRUE(s.ok()) << s;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphLaunch(exec, stream_));
      CUDA_OK(cudaGraphLaunch(exec, stream_));
      CUDA_OK(cudaStreamSynchronize(stream_));
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    CUDA_OK(cudaStreamSynchronize(stream_));
    CUDA_OK(cudaMemcpy(got.mutable_raw_data(), out + opts.misalign, got.nbytes(), cudaMemcpyDeviceToHost));
    for (void* p : allocations) cudaFree(p);

    const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
    float max_ref = 0.f, max_err = 0.f;
    size_t worst = 0;
    for (size_t i = 0; i < w.size(); ++i) max_ref = std::max(max_ref, std::fabs(w[i]));
    for (size_t i = 0; i < w.size(); ++i) {
      const float err = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]);
      if (err > max_err) max_err = err, worst = i;
    }
    EXPECT_LE(max_err, Tolerance(dt) * std::max(max_ref, 1e-6f))
        << "worst element " << worst << ": got " << g[worst] << ", want " << w[worst] << " (max |ref| " << max_ref
        << ", " << w.size() << " elements)";
  }

  LibraryHandles handles_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(LibraryKernelGpuTest, MatMul2D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {7, 33, 129}, {129, 257, 7}, {33, 7, 1}, {257, 129, 33}, {1, 257, 129}, {64, 64, 64}}) {
      Check("MatMul", dt, {Shape{m, k}, Shape{k, n}});
    }
  }
}

TEST_F(LibraryKernelGpuTest, MatMulVectors) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("MatMul", dt, {Shape{33}, Shape{33, 7}});
    Check("MatMul", dt, {Shape{7, 33}, Shape{33}});
    Check("MatMul", dt, {Shape{129}, Shape{129}});
    Check("MatMul", dt, {Shape{33}, Shape{3, 33, 7}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulBatched) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}});      // strided batch
    Check("MatMul", dt, {Shape{3, 7, 33}, Shape{1, 3, 33, 129}});         // leading unit batch
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{33, 129}});            // folded into M
    Check("MatMul", dt, {Shape{4, 7, 33}, Shape{1, 33, 129}});            // folded into M
    Check("MatMul", dt, {Shape{7, 33}, Shape{3, 33, 129}});               // broadcast A (stride 0)
    Check("MatMul", dt, {Shape{1, 1, 7, 33}, Shape{2, 3, 33, 129}});      // broadcast A (stride 0)
  }
}

TEST_F(LibraryKernelGpuTest, MatMulMisalignedPointers) {
  // Pointers aligned only to the element size take the fallback algorithm.
  Check("MatMul", kF16, {Shape{7, 33}, Shape{33, 129}}, {}, {.misalign = 2});
  Check("MatMul", kBF16, {Shape{64, 64}, Shape{64, 64}}, {}, {.misalign = 2});
  Check("MatMul", kF32, {Shape{64, 64}, Shape{64, 64}}, {}, {.misalign = 4});
  Check("MatMul", kF16, {Shape{7, 33}, Shape{3, 33, 129}}, {}, {.misalign = 2});
}

TEST_F(LibraryKernelGpuTest, GemmTransposes) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        const int64_t m = 7, k = 257, n = 33;
        Check("Gemm", dt, {ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}},
              {{"transA", ta}, {"transB", tb}, {"alpha", 0.75f}});
      }
    }
  }
}

TEST_F(LibraryKernelGpuTest, GemmBiasForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const int64_t m = 129, k = 33, n = 7;
    for (const Shape& c : {Shape{n}, Shape{1, n}, Shape{m, n}, Shape{}, Shape{1}, Shape{1, 1}, Shape{m, 1}}) {
      Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, c});                                              // beta 1
      Check("Gemm", dt, {Shape{k, m}, Shape{n, k}, c}, {{"transA", 1}, {"transB", 1}, {"beta", 0.5f}});  // scaled C
    }
    Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, Shape{n}}, {{"beta", 0.f}});
  }
}

TEST_F(LibraryKernelGpuTest, Conv2D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{1, 3, 13, 13}, Shape{5, 3, 5, 5}, Shape{5}},
          {{"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"strides", std::vector<int64_t>{2, 1}}});
    Check("Conv", dt, {Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, Shape{4}},
          {{"group", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"dilations", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 8, 7, 7}, Shape{8, 1, 3, 3}, Shape{8}},  // depthwise
          {{"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Check("Conv", dt, {Shape{2, 16, 7, 9}, Shape{33, 16, 1, 1}});  // pointwise, no bias
    Check("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}}, {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}});
  }
}

TEST_F(LibraryKernelGpuTest, Conv1D) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{2, 4, 33}, Shape{6, 4, 5}, Shape{6}},
          {{"pads", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2}}});
    Check("Conv", dt, {Shape{1, 4, 40}, Shape{6, 2, 3}},
          {{"group", 2}, {"dilations", std::vector<int64_t>{3}}, {"pads", std::vector<int64_t>{3, 3}}});
  }
}

TEST_F(LibraryKernelGpuTest, CudaGraphCapture) {
  const RunOptions graph{.cuda_graph = true};
  Check("MatMul", kF16, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}}, {}, graph);
  Check("MatMul", kF16, {Shape{7, 33}, Shape{3, 33, 129}}, {}, graph);
  Check("Gemm", kF16, {Shape{129, 33}, Shape{33, 7}, Shape{7}}, {}, graph);
  Check("Gemm", kBF16, {Shape{129, 33}, Shape{33, 7}, Shape{129, 1}}, {{"beta", 0.5f}}, graph);
  Check("Conv", kF16, {Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, Shape{4}}, {{"group", 2}}, graph);
}

}  // namespace
}  // namespace kiln::codegen
