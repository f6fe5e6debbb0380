// Tests of the vendor-library kernels on a machine with a CUDA GPU: numerics of
// cuBLASLt MatMul/Gemm and cuDNN Conv (plain and fused) against the CPU reference
// evaluator on the same f32/f16/bf16 inputs, misaligned pointers and CUDA-graph capture.
#include "codegen/library_kernels_test_util.h"

namespace kiln::codegen {
namespace {

using namespace library_test;  // NOLINT: the test's vocabulary

// ---------------------------------------------------------------------------
// Numerics on the GPU.

struct RunOptions {
  size_t misalign = 0;      // bytes added to every input/output pointer
  bool cuda_graph = false;  // capture Launch into a CUDA graph and replay it twice
};

class LibraryKernelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    if (::kiln::codegen::test::DeviceArch(&why_not).empty()) GTEST_SKIP() << "skipped: " << why_not;
    ASSERT_EQ(cublasLtCreate(&handles_.cublaslt), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreate(&handles_.cudnn), CUDNN_STATUS_SUCCESS);
    KILN_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (handles_.cudnn) cudnnDestroy(handles_.cudnn);
    if (handles_.cublaslt) cublasLtDestroy(handles_.cublaslt);
  }

  static float Tolerance(DType dt) { return dt == kF32 ? 1e-4f : dt == kF16 ? 1e-2f : 5e-2f; }

  // Builds the node, runs it on the GPU and on the CPU reference with the same
  // random inputs, and compares (max error relative to max |reference|).
  void Check(const std::string& op, DType dt, const std::vector<std::optional<Shape>>& shapes, const Attrs& attrs = {},
             RunOptions opts = {}) {
    auto one = Build(op, dt, shapes, attrs);
    ASSERT_NE(one, nullptr);
    CheckNode(*one->node, opts);
  }

  void CheckGroup(const GroupGraph& gg, const std::string& want_name, RunOptions opts = {}) {
    ASSERT_NE(gg.group, nullptr);
    ASSERT_EQ(LibraryKernelName(*gg.group), want_name);
    CheckNode(*gg.group, opts);
  }

  void CheckNode(const Node& node, RunOptions opts = {}) {
    const DType dt = node.output(0)->dtype();
    std::vector<std::optional<Shape>> shapes;
    for (const Value* v : node.inputs()) shapes.push_back(v ? std::optional<Shape>(v->shape()) : std::nullopt);
    SCOPED_TRACE(node.op_type() + " " + std::string(DTypeName(dt)) + " " + [&] {
      std::string s;
      for (const auto& sh : shapes) s += sh ? ShapeToString(*sh) : "(none)";
      return s;
    }());
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
      KILN_CUDA_OK(cudaMemcpy(p + opts.misalign, t->raw_data(), t->nbytes(), cudaMemcpyHostToDevice));
      args.inputs.push_back(p + opts.misalign);
    }
    Tensor got(dt, want.shape());
    char* out = alloc(got.nbytes());
    ASSERT_NE(out, nullptr);
    KILN_CUDA_OK(cudaMemset(out, 0xff, got.nbytes() + 256));  // NaN garbage: every element must be written
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
      KILN_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      absl::Status s = (*kernel)->Launch(args);
      KILN_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
      ASSERT_TRUE(s.ok()) << s;
      KILN_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      KILN_CUDA_OK(cudaGraphLaunch(exec, stream_));
      KILN_CUDA_OK(cudaGraphLaunch(exec, stream_));
      KILN_CUDA_OK(cudaStreamSynchronize(stream_));
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    KILN_CUDA_OK(cudaStreamSynchronize(stream_));
    KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), out + opts.misalign, got.nbytes(), cudaMemcpyDeviceToHost));
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
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}});  // strided batch
    Check("MatMul", dt, {Shape{3, 7, 33}, Shape{1, 3, 33, 129}});     // leading unit batch
    Check("MatMul", dt, {Shape{2, 3, 7, 33}, Shape{33, 129}});        // folded into M
    Check("MatMul", dt, {Shape{4, 7, 33}, Shape{1, 33, 129}});        // folded into M
    Check("MatMul", dt, {Shape{7, 33}, Shape{3, 33, 129}});           // broadcast A (stride 0)
    Check("MatMul", dt, {Shape{1, 1, 7, 33}, Shape{2, 3, 33, 129}});  // broadcast A (stride 0)
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
      Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, c});                                                  // beta 1
      Check("Gemm", dt, {Shape{k, m}, Shape{n, k}, c}, {{"transA", 1}, {"transB", 1}, {"beta", 0.5f}});  // scaled C
    }
    Check("Gemm", dt, {Shape{m, k}, Shape{k, n}, Shape{n}}, {{"beta", 0.f}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulLayoutFlags) {
  // Every flag combination in every MatMul form, against the CPU reference (which
  // reads the operands in their flagged layout).
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat("trans_a=", ta, " trans_b=", tb));
        for (const FlaggedMatMul& f : {
                 Flagged({}, {}, 7, 257, 33, ta, tb),          // 2-D, odd sizes
                 Flagged({}, {}, 129, 64, 72, ta, tb),         // 2-D, aligned K
                 Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb),  // strided batch
                 Flagged({3}, {1, 3}, 7, 33, 129, ta, tb),     // strided batch, leading unit batch
                 Flagged({2, 3}, {}, 7, 33, 129, ta, tb),      // shared B: folded into M, B stride 0 when trans_a
                 Flagged({4}, {1}, 17, 33, 129, ta, tb),       // shared B with a unit batch
                 Flagged({}, {3}, 7, 33, 129, ta, tb),         // broadcast A (stride 0)
                 Flagged({1, 1}, {2, 3}, 7, 33, 129, ta, tb),  // broadcast A with unit batches
             }) {
          Check("MatMul", dt, f.shapes, f.attrs);
        }
      }
    }
    // A 1-D operand opposite a flagged matrix.
    Check("MatMul", dt, {Shape{33}, Shape{7, 33}}, {{"trans_b", 1}});
    Check("MatMul", dt, {Shape{33, 7}, Shape{33}}, {{"trans_a", 1}});
    Check("MatMul", dt, {Shape{33}, Shape{3, 7, 33}}, {{"trans_b", 1}});
  }
}

TEST_F(LibraryKernelGpuTest, MatMulLayoutFlagsMisalignedAndCaptured) {
  const FlaggedMatMul f2 = Flagged({}, {}, 7, 33, 129, 1, 1);
  const FlaggedMatMul fb = Flagged({2, 3}, {}, 7, 33, 129, 1, 0);  // B stride 0
  Check("MatMul", kF16, f2.shapes, f2.attrs, {.misalign = 2});
  Check("MatMul", kBF16, fb.shapes, fb.attrs, {.misalign = 2});
  Check("MatMul", kF16, fb.shapes, fb.attrs, {.cuda_graph = true});
}

TEST_F(LibraryKernelGpuTest, FusedMatMulLayoutFlags) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat("trans_a=", ta, " trans_b=", tb));
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({}, {}, 7, 257, 33, ta, tb), 33), name);
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({2, 3}, {}, 7, 33, 129, ta, tb), 129, "gelu"), name);
        CheckGroup(FlaggedMatMulGroup(dt, Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb), 129), name);
      }
    }
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
    Check("Conv", dt, {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}},
          {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}});
  }
}

// channels_last=1: NHWC activations, KRSC filters; the reference is the CPU NHWC Conv.
TEST_F(LibraryKernelGpuTest, Conv2DChannelsLast) {
  for (DType dt : {kF32, kF16, kBF16}) {
    Check("Conv", dt, {Shape{1, 13, 13, 3}, Shape{5, 5, 5, 3}, Shape{5}},  // stem-like, C = 3
          {{"channels_last", 1}, {"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"strides", std::vector<int64_t>{2, 1}}});
    Check("Conv", dt, {Shape{2, 9, 11, 6}, Shape{4, 3, 3, 3}, Shape{4}},
          {{"channels_last", 1},
           {"group", 2},
           {"pads", std::vector<int64_t>{1, 1, 1, 1}},
           {"dilations", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 7, 7, 8}, Shape{8, 3, 3, 1}, Shape{8}},  // depthwise
          {{"channels_last", 1}, {"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Check("Conv", dt, {Shape{2, 7, 9, 16}, Shape{32, 1, 1, 16}}, {{"channels_last", 1}});  // pointwise, no bias
    Check("Conv", dt, {Shape{3, 10, 6, 24}, Shape{40, 3, 3, 24}, Shape{40}},
          {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}});
    Check("Conv", dt, {Shape{1, 9, 9, 3}, Shape{4, 3, 3, 3}},
          {{"channels_last", 1}, {"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}});
  }
  Check("Conv", kF16, {Shape{2, 9, 11, 8}, Shape{8, 3, 3, 8}, Shape{8}},
        {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, {.cuda_graph = true});
}

TEST_F(LibraryKernelGpuTest, FusedConvChannelsLast) {
  const std::string name = "cudnn:FusedConv";
  const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 9, 11, 8}, w{16, 3, 3, 8};
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"bias_nhwc", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"bias_c", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, true, nhwc, {"res", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, false, nhwc, {"relu"}), name);
    CheckGroup(ConvGroup(dt, Shape{1, 7, 9, 16}, Shape{32, 1, 1, 16}, true, {{"channels_last", 1}}, {"res"}), name);
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
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu"}), "cublaslt:FusedMatMul", graph);
  CheckGroup(ConvGroup(kF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, false, kPad1, {"relu"}), "cudnn:FusedConv", graph);
  CheckGroup(ConvGroup(kBF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, true, kPad1, {"res", "relu"}), "cudnn:FusedConv",
             graph);
}

TEST_F(LibraryKernelGpuTest, FusedMatMul) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{7, 33, 129}, {129, 257, 7}, {1, 33, 5}, {64, 64, 64}}) {
      SCOPED_TRACE(absl::StrCat("m=", m, " k=", k, " n=", n));
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias1n", "relu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"bias_first", "gelu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"relu"}), name);
      CheckGroup(MatMulGroup(dt, Shape{m, k}, Shape{k, n}, {"gelu"}), name);
    }
    // A residual as cuBLASLt's C, alone, after the bias, before the activation.
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{33, 129}, {"residual"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 9, 64}, Shape{64, 48}, {"bias", "residual_first"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 33}, Shape{33, 5}, {"bias1n", "residual", "relu"}), name);
    // Batches: folded into M, strided, broadcast A.
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{33, 129}, {"bias", "relu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias", "gelu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias", "relu"}), name);
  }
  // Misaligned pointers (fallback algorithm) with the bias epilogue.
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu"}), name, {.misalign = 2});
}

// The stacked Q/K/V projection of fuse-siblings: X [M, K] (or [1, M, K]) shared by S
// weight matrices [S, K, N] (a stride-0 batch) with a per-batch bias [S, 1, N]
// (BIAS_BATCH_STRIDE), as one cuBLASLt call.
TEST_F(LibraryKernelGpuTest, FusedMatMulPerBatchBias) {
  const std::string name = "cublaslt:FusedMatMul";
  for (DType dt : {kF32, kF16, kBF16}) {
    CheckGroup(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 24, 64}, Shape{3, 64, 64}, {"bias_batch", "relu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{1, 1, 9, 40}, Shape{2, 1, 40, 24}, {"bias_batch", "gelu"}), name);
    CheckGroup(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias_batch"}), name);  // equal batches
  }
  // BERT-base's QKV shape, in a CUDA graph, and with misaligned pointers.
  CheckGroup(MatMulGroup(kF16, Shape{1, 128, 768}, Shape{3, 768, 768}, {"bias_batch"}), name);
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"}), name, {.cuda_graph = true});
  CheckGroup(MatMulGroup(kF16, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch", "relu"}), name, {.misalign = 2});
}

TEST_F(LibraryKernelGpuTest, FusedConv) {
  const std::string name = "cudnn:FusedConv";
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias", "relu"}), name);  // conv + bias + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias3", "relu"}), name);
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"res", "relu"}), name);         // conv(B) + residual + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"res_first", "relu"}), name);  // conv + residual + relu
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"relu"}), name);               // conv + relu (zero bias)
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"relu"}), name);                // conv(B) + relu
    CheckGroup(ConvGroup(dt, x, w, true, kPad1, {"res"}), name);                 // identity activation
    CheckGroup(ConvGroup(dt, x, w, false, kPad1, {"bias"}), name);               // identity activation
    CheckGroup(ConvGroup(dt, Shape{1, 16, 7, 9}, Shape{33, 16, 1, 1}, false, {}, {"bias", "relu"}), name);
    CheckGroup(
        ConvGroup(dt, Shape{2, 6, 9, 11}, Shape{4, 3, 3, 3}, true,
                  {{"group", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 1}}},
                  {"res", "relu"}),
        name);
    CheckGroup(
        ConvGroup(dt, Shape{2, 4, 33}, Shape{6, 4, 5}, false, {{"pads", std::vector<int64_t>{2, 2}}}, {"bias", "relu"}),
        name);  // 1-D
  }
}

}  // namespace
}  // namespace kiln::codegen
