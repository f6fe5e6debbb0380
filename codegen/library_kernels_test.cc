// Tests of the vendor-library kernels' name decision (no GPU needed): which MatMul,
// Gemm, Conv and fused-group forms cuBLASLt and cuDNN take, and CreateLibraryKernel's
// errors. Numerics on a GPU: library_kernels_gpu_test.cc.
#include "codegen/library_kernels_test_util.h"

namespace kiln::codegen {
namespace {

using namespace library_test;  // NOLINT: the test's vocabulary

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

TEST(LibraryKernelName, MatMulLayoutFlags) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dt), " trans_a=", ta, " trans_b=", tb));
        for (const FlaggedMatMul& f : {
                 Flagged({}, {}, 7, 33, 129, ta, tb),          // 2-D
                 Flagged({2, 3}, {2, 3}, 7, 33, 5, ta, tb),    // strided batch
                 Flagged({2, 3}, {}, 7, 33, 5, ta, tb),        // shared B: folded into M, or B stride 0 when trans_a
                 Flagged({4}, {1}, 7, 33, 5, ta, tb),          // shared B with a unit batch
                 Flagged({}, {2, 3}, 7, 33, 5, ta, tb),        // broadcast A (stride 0)
                 Flagged({1}, {4}, 7, 33, 5, ta, tb),          // broadcast A with a unit batch
             }) {
          EXPECT_EQ(Name("MatMul", dt, f.shapes, f.attrs), "cublaslt:MatMul");
        }
      }
    }
    // A 1-D operand opposite a flagged matrix.
    EXPECT_EQ(Name("MatMul", dt, {Shape{33}, Shape{5, 33}}, {{"trans_b", 1}}), "cublaslt:MatMul");
    EXPECT_EQ(Name("MatMul", dt, {Shape{33, 7}, Shape{33}}, {{"trans_a", 1}}), "cublaslt:MatMul");
  }
  // Batches that broadcast against each other stay unsupported with flags.
  const FlaggedMatMul f = Flagged({2, 1}, {1, 3}, 7, 33, 5, 1, 1);
  EXPECT_EQ(Name("MatMul", kF16, f.shapes, f.attrs), "");
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
  // channels_last: X [N, H, W, C], W [M, KH, KW, C/group] (cuDNN NHWC / KRSC).
  const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  for (DType dt : {kF32, kF16, kBF16}) {
    EXPECT_EQ(Name("Conv", dt, {Shape{1, 9, 9, 3}, Shape{4, 3, 3, 3}, Shape{4}}, nhwc), "cudnn:Conv");
    EXPECT_EQ(Name("Conv", dt, {Shape{2, 7, 5, 8}, Shape{8, 3, 3, 1}},
                   {{"channels_last", 1}, {"group", 8}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
              "cudnn:Conv");
  }
  EXPECT_EQ(Name("Conv", kF16, {Shape{1, 8, 8, 3}, Shape{4, 2, 2, 3}},
                 {{"channels_last", 1}, {"pads", std::vector<int64_t>{0, 1, 1, 1}}}),
            "");  // asymmetric padding
  // Other ops.
  EXPECT_EQ(Name("Relu", kF16, {Shape{4, 4}}), "");
}

TEST(LibraryKernelName, FusedMatMulForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{7, 33}, w{33, 129};
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias1n"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias_first"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "gelu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"gelu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, w, {"bias", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias", "gelu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, x, w, {"bias", "relu"}, "prologue+matmul+epilogue")), "cublaslt:FusedMatMul");
    // Per-batch biases [batch.., 1, N] on strided batches (broadcast A, equal batches).
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, Shape{3, 33, 129}, {"bias_batch"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 7, 33}, Shape{3, 33, 129}, {"bias_batch", "relu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 1, 7, 33}, Shape{3, 1, 33, 129}, {"bias_batch", "gelu"})),
              "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 3, 7, 33}, Shape{2, 3, 33, 129}, {"bias_batch"})),
              "cublaslt:FusedMatMul");
  }
  // A batch folded into M has no per-batch bias.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{2, 3, 7, 33}, Shape{33, 129}, {"bias_batch"})), "");
  // A bias per batch and row ([S, M, N]) is a full addend, not a bias.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {3, 33, 129}}, {"c", {3, 7, 129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "c"}, "y"}}, "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // Exact (erf) GELU: cuBLASLt's GELU epilogue is the tanh approximation.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu_erf"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"gelu_erf"})), "");
  // Epilogue ops / orders without a cuBLASLt form.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "sigmoid"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"relu", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu", "relu"})), "");
  // Other patterns.
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias"}, "siblings")), "");
  // A column [M, 1] addend is neither a bias nor a residual.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"c", {7, 1}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "c"}, "y"}}, "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // A full [M, N] addend is a residual (cuBLASLt's C), after the bias and before the
  // activation; one matrix only (no strided batch), and only one.
  for (DType dt : {kF32, kF16}) {
    const Shape w{33, 129};
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, w, {"residual"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{7, 33}, w, {"bias", "residual_first"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{2, 7, 33}, w, {"bias", "residual", "relu"})), "cublaslt:FusedMatMul");
    EXPECT_EQ(GroupName(MatMulGroup(dt, Shape{1, 33}, w, {"bias1n", "residual"})), "cublaslt:FusedMatMul");
  }
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"residual", "bias"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "residual", "residual"})), "");
  EXPECT_EQ(GroupName(MatMulGroup(kF16, Shape{2, 7, 33}, Shape{2, 33, 129}, {"bias", "residual"})), "");
  // An intermediate value read outside the group (the group has two outputs).
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"b", {129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "b"}, "a"}, {"Relu", {"a"}, "y"}},
                               "matmul+epilogue", {"a"});
    EXPECT_EQ(GroupName(gg), "");
  }
  // A Cast at the end is not an epilogue.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", {7, 33}}, {"w", {33, 129}}, {"b", {129}}},
                               {{"MatMul", {"x", "w"}, "m"}, {"Add", {"m", "b"}, "a"},
                                {"Cast", {"a"}, "y", {{"to", static_cast<int64_t>(1)}}}},
                               "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
  // Integer matmul.
  EXPECT_EQ(GroupName(MatMulGroup(DType::kInt32, Shape{7, 33}, Shape{33, 129}, {"relu"})), "");
}

TEST(LibraryKernelName, FusedMatMulLayoutFlags) {
  for (DType dt : {kF32, kF16, kBF16}) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(dt), " trans_a=", ta, " trans_b=", tb));
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({}, {}, 7, 33, 129, ta, tb), 129)), "cublaslt:FusedMatMul");
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({2, 3}, {}, 7, 33, 129, ta, tb), 129, "gelu")),
                  "cublaslt:FusedMatMul");
        EXPECT_EQ(GroupName(FlaggedMatMulGroup(dt, Flagged({2, 3}, {2, 3}, 7, 33, 129, ta, tb), 129)),
                  "cublaslt:FusedMatMul");
      }
    }
  }
}

TEST(LibraryKernelName, FusedConvForms) {
  for (DType dt : {kF32, kF16, kBF16}) {
    const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"bias", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"bias3", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"res", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"res_first", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, false, kPad1, {"relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, x, w, true, kPad1, {"res"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(dt, Shape{2, 4, 33}, Shape{6, 4, 5}, false, {{"pads", std::vector<int64_t>{2, 2}}},
                                  {"bias", "relu"})),
              "cudnn:FusedConv");
  }
  const Shape x{2, 3, 9, 11}, w{5, 3, 3, 3};
  // channels_last groups: the per-channel bias is [1,1,1,C] or [C].
  {
    const Attrs nhwc = {{"channels_last", 1}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    const Shape xn{2, 9, 11, 3}, wn{5, 3, 3, 3};
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, false, nhwc, {"bias_nhwc", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, false, nhwc, {"bias_c", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, true, nhwc, {"res", "relu"})), "cudnn:FusedConv");
    EXPECT_EQ(GroupName(ConvGroup(kF16, xn, wn, true, nhwc, {"bias_nhwc", "relu"})), "");  // two biases
  }
  // Two biases (the Conv's and an Add's), a spatial addend, other epilogue ops.
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, true, kPad1, {"bias", "relu"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"spatial", "relu"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"sigmoid"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"relu", "res"})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {"res", "res"})), "");
  // A lone Conv (nothing to fuse) and asymmetric padding.
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, kPad1, {})), "");
  EXPECT_EQ(GroupName(ConvGroup(kF16, x, w, false, {{"pads", std::vector<int64_t>{0, 1, 1, 1}}}, {"relu"})), "");
  // A conv body under the matmul pattern.
  {
    GroupGraph gg = BuildGroup(kF16, {{"x", x}, {"w", w}}, {{"Conv", {"x", "w"}, "c"}, {"Relu", {"c"}, "y"}},
                               "matmul+epilogue");
    EXPECT_EQ(GroupName(gg), "");
  }
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
  GroupGraph fmm = MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "relu"});
  GroupGraph fconv = ConvGroup(kF16, Shape{2, 3, 9, 11}, Shape{5, 3, 3, 3}, false, kPad1, {"relu"});
  ASSERT_NE(fmm.group, nullptr);
  ASSERT_NE(fconv.group, nullptr);
  EXPECT_EQ(CreateLibraryKernel(*fmm.group, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CreateLibraryKernel(*fconv.group, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  // A refused group names the reason.
  GroupGraph erf = MatMulGroup(kF16, Shape{7, 33}, Shape{33, 129}, {"bias", "gelu_erf"});
  ASSERT_NE(erf.group, nullptr);
  auto k = CreateLibraryKernel(*erf.group, {});
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("tanh"), std::string::npos) << k.status();
}

}  // namespace
}  // namespace kiln::codegen
