// Test nodes for the generated per-node kernels (codegen/op_kernels_test.cc compiles
// them all, codegen/op_kernels_gpu_test.cc runs them against the CPU reference):
// one or more representative nodes per supported op, with odd shapes, broadcasts,
// every storage dtype the op takes. Header-only, for tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_kernel_case_table.h"
#include "codegen/ops/op_kernel_group_cases.h"
#include "graph/fused_group.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

inline void CaseTable::Pointwise() {
  // ---- Pointwise ----
  add("AddBroadcastF32", "Add", {R(f32, {3, 5, 7}), R(f32, {5, 1})});
  add("AddSameF16", "Add", {R(f16, {2, 3, 37}), R(f16, {2, 3, 37})});
  add("AddI64", "Add", {R(i64, {4, 5}), R(i64, {5})});
  add("SubBF16", "Sub", {R(bf16, {2, 1, 6}), R(bf16, {3, 1})});
  add("MulScalarF32", "Mul", {R(f32, {7, 9}), R(f32, {})});
  add("DivF32", "Div", {R(f32, {4, 6}), R(f32, {6}, 0.5f, 2.f)});
  add("DivI32", "Div", {R(i32, {4, 6}), R(i32, {4, 1})});
  add("PowF32", "Pow", {R(f32, {3, 5}, 0.1f, 2.f), R(f32, {5})});
  add("PowI64", "Pow", {R(i64, {3, 5}), K(Tensor::FromInt64(i64, {1}, {3}))});
  add("PowF16IntExp", "Pow", {R(f16, {3, 5}), K(Tensor::FromInt64(i64, {}, {2}))});
  add("MaxVariadicF32", "Max", {R(f32, {2, 3, 4}), R(f32, {3, 1}), R(f32, {4})});
  add("MinI64", "Min", {R(i64, {5, 3}), R(i64, {5, 3})});
  add("SumF16", "Sum", {R(f16, {4, 9}), R(f16, {9}), R(f16, {4, 1})});
  add("SumOneInput", "Sum", {R(f32, {5})});
  add("MeanF32", "Mean", {R(f32, {6, 7}), R(f32, {6, 7})});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "HardSwish", "Softplus"}) {
    add(absl::StrCat(op, "F16"), op, {R(f16, {3, 17})});
    add(absl::StrCat(op, "F32"), op, {R(f32, {129})});
  }
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) {
    add(absl::StrCat(op, "F32"), op, {R(f32, {5, 11}, 0.1f, 4.f)});
    add(absl::StrCat(op, "BF16"), op, {R(bf16, {5, 11}, 0.1f, 4.f)});
  }
  add("ReluI64", "Relu", {R(i64, {13})});
  add("NegI32", "Neg", {R(i32, {13})});
  add("AbsI64", "Abs", {R(i64, {13})});
  add("LeakyReluF32", "LeakyRelu", {R(f32, {4, 33})}, {{"alpha", 0.1f}});
  add("PReluF16", "PRelu", {R(f16, {2, 3, 4, 5}), RK(f16, {3, 1, 1})});
  add("EluBF16", "Elu", {R(bf16, {3, 19})}, {{"alpha", 0.5f}});
  add("SeluF32", "Selu", {R(f32, {3, 19})});
  add("HardSigmoidF16", "HardSigmoid", {R(f16, {3, 19})}, {{"alpha", 0.3f}});
  add("GeluErfF32", "Gelu", {R(f32, {2, 65})});
  add("GeluTanhBF16", "Gelu", {R(bf16, {2, 65})}, {{"approximate", std::string("tanh")}});
  // The 16-bit forms (kiln_gelu_*_fast, kiln_sigmoid_fast) over both tails; the GPU
  // test also checks them element by element (within one ulp of the reference).
  for (DType t : {f16, bf16}) {
    add(absl::StrCat("SigmoidWide", DTypeName(t)), "Sigmoid", {R(t, {64, 257}, -20.f, 20.f)});
    add(absl::StrCat("GeluErfWide", DTypeName(t)), "Gelu", {R(t, {64, 257}, -9.f, 9.f)});
    add(absl::StrCat("GeluTanhWide", DTypeName(t)), "Gelu", {R(t, {64, 257}, -9.f, 9.f)},
        {{"approximate", std::string("tanh")}});
  }
  add("ClipConstF32", "Clip", {R(f32, {4, 9}), K(Tensor::FromFloat(f32, {}, {-0.5f})), K(Tensor::FromFloat(f32, {}, {0.7f}))});
  add("ClipRuntimeMinF16", "Clip", {R(f16, {4, 9}), R(f16, {})});
  add("ClipMaxOnlyI64", "Clip", {R(i64, {4, 9}), Absent(), K(Tensor::FromInt64(i64, {}, {2}))});
  add("WhereF32", "Where", {R(D::kBool, {3, 1}), R(f32, {1, 4}), R(f32, {3, 4})});
  add("WhereI64", "Where", {R(D::kBool, {2, 3}), R(i64, {2, 3}), R(i64, {})});
  add("EqualI64", "Equal", {R(i64, {3, 4}), R(i64, {4})});
  add("LessF32", "Less", {R(f32, {3, 4}), R(f32, {3, 1})});
  add("GreaterF16", "Greater", {R(f16, {3, 4}), R(f16, {3, 4})});
  add("LessOrEqualBF16", "LessOrEqual", {R(bf16, {3, 4}), R(bf16, {4})});
  add("GreaterOrEqualI32", "GreaterOrEqual", {R(i32, {3, 4}), R(i32, {3, 4})});
  add("Not", "Not", {R(D::kBool, {5, 3})});
  add("And", "And", {R(D::kBool, {5, 3}), R(D::kBool, {3})});
  add("Or", "Or", {R(D::kBool, {5, 1}), R(D::kBool, {5, 3})});
  const std::pair<D, D> casts[] = {{f32, f16}, {f16, f32}, {f32, i64}, {i64, f32}, {f32, D::kBool}, {D::kBool, f32},
                                   {i64, i32}, {bf16, f16}, {f32, D::kInt8}, {f16, D::kUInt8}, {i32, bf16}};
  static const std::map<D, int64_t> kOnnx = {{f32, 1}, {D::kUInt8, 2}, {D::kInt8, 3}, {i32, 6}, {i64, 7},
                                             {D::kBool, 9}, {f16, 10}, {bf16, 16}};
  for (const auto& [from, to] : casts) {
    add(absl::StrCat("Cast_", DTypeName(from), "_", DTypeName(to)), "Cast", {R(from, {3, 7}, -300.f, 300.f)},
        {{"to", kOnnx.at(to)}});
  }
  add("IdentityI64", "Identity", {R(i64, {3, 7})});
  add("DropoutMask", "Dropout", {R(f16, {3, 7})}, {}, 2);
  add("BatchNormF16", "BatchNormalization",
      {R(f16, {2, 3, 5, 5}), RK(f16, {3}), RK(f16, {3}), RK(f16, {3}), RK(f16, {3}, 0.5f, 2.f)}, {{"epsilon", 1e-3f}});
  add("BatchNormF32", "BatchNormalization",
      {R(f32, {2, 4, 7}), RK(f32, {4}), RK(f32, {4}), RK(f32, {4}), RK(f32, {4}, 0.5f, 2.f)});
  add("ExpandF16", "Expand", {R(f16, {3, 1}), K(Ints({2, 3, 4}))});
}

inline void CaseTable::MovementAndIndexing() {
  // ---- Data movement ----
  add("ReshapeF16", "Reshape", {R(f16, {2, 3, 4}), K(Ints({6, -1}))});
  add("FlattenI64", "Flatten", {R(i64, {2, 3, 4})}, {{"axis", int64_t{2}}});
  add("SqueezeF32", "Squeeze", {R(f32, {2, 1, 4}), K(Ints({1}))});
  add("UnsqueezeBool", "Unsqueeze", {R(D::kBool, {2, 4}), K(Ints({0, 3}))});
  add("TransposeF32", "Transpose", {R(f32, {2, 3, 4, 5})}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  add("TransposeDefaultI64", "Transpose", {R(i64, {3, 7})});
  add("TransposeRank6F16", "Transpose", {R(f16, {2, 3, 1, 2, 3, 2})},
      {{"perm", std::vector<int64_t>{5, 0, 3, 1, 4, 2}}});
  add("ConcatAxis1F16", "Concat", {R(f16, {2, 3, 5}), R(f16, {2, 1, 5}), R(f16, {2, 4, 5})}, {{"axis", int64_t{1}}});
  add("ConcatLastI64", "Concat", {R(i64, {3, 2}), R(i64, {3, 5})}, {{"axis", int64_t{-1}}});
  add("SplitEqualF32", "Split", {R(f32, {4, 6})}, {{"axis", int64_t{1}}}, 3);
  add("SplitSizesBF16", "Split", {R(bf16, {2, 6, 3}), K(Ints({2, 3, 1}))}, {{"axis", int64_t{1}}}, 3);
  // Parts whose widths take 16-byte copies (a GQA QKV product's Q, K and V; fp32 in
  // 4-element vectors), and a Concat of such column blocks.
  add("SplitQkvF16", "Split", {R(f16, {5, 96}), K(Ints({64, 16, 16}))}, {{"axis", int64_t{-1}}}, 3);
  add("SplitRowsF32", "Split", {R(f32, {3, 4, 12}), K(Ints({1, 3}))}, {{"axis", int64_t{1}}}, 2);
  add("ConcatBlocksF16", "Concat", {R(f16, {3, 2, 16}), R(f16, {3, 2, 8})}, {{"axis", int64_t{-1}}});
  // Empty parts first (an empty past-KV Concat, a Split with a zero size).
  add("ConcatEmptyFirstF16", "Concat", {R(f16, {3, 0}), R(f16, {3, 8})}, {{"axis", int64_t{1}}});
  add("SplitZeroFirstF16", "Split", {R(f16, {2, 16}), K(Ints({0, 8, 8}))}, {{"axis", int64_t{1}}}, 3);
  add("SliceNegStepF32", "Slice", {R(f32, {5, 7}), K(Ints({-1, 1})), K(Ints({-100, 6})), K(Ints({0, 1})), K(Ints({-2, 2}))});
  add("SliceAxesI64", "Slice", {R(i64, {4, 6, 5}), K(Ints({1})), K(Ints({INT64_MAX})), K(Ints({2}))});
  add("GatherAxis0I64Idx", "Gather", {R(f16, {5, 4}), K(Tensor::FromInt64(i64, {2, 3}, {0, -1, 3, 2, -5, 1}))});
  add("GatherAxis1I32Idx", "Gather", {R(f32, {3, 6, 2}), X(Tensor::FromInt64(i32, {4}, {5, 0, -2, 1}))},
      {{"axis", int64_t{1}}});
  add("PadConstantF32", "Pad", {R(f32, {3, 4}), K(Ints({1, -1, 2, 3})), K(Tensor::FromFloat(f32, {}, {1.5f}))});
  // Rows of 16 bytes (a thread per row): one cropped and widened, one with a fill value.
  add("PadRowsCropF16", "Pad", {R(f16, {2, 5, 6}), K(Ints({0, 0, -1, 0, 0, 3}))});
  add("PadRowsValueF32", "Pad",
      {R(f32, {3, 5, 2}), K(Ints({0, 1, 1, 0, 0, 1})), K(Tensor::FromFloat(f32, {}, {1.5f}))});
  add("PadReflectF16", "Pad", {R(f16, {1, 2, 4, 5}), K(Ints({0, 0, 2, 3, 0, 0, 3, 1}))}, {{"mode", std::string("reflect")}});
  add("PadEdgeI64", "Pad", {R(i64, {3, 4}), K(Ints({2, 1, 1, 2}))}, {{"mode", std::string("edge")}});
  add("PadWrapF32", "Pad", {R(f32, {3, 4}), K(Ints({2, 5, 1, 2}))}, {{"mode", std::string("wrap")}});
  add("TileF16", "Tile", {R(f16, {2, 3}), K(Ints({3, 2}))});

  // ---- Index-driven ----
  add("GatherElementsAxis1F16", "GatherElements",
      {R(f16, {3, 5}), I64({3, 2}, {0, 4, -1, 2, 3, -5})}, {{"axis", int64_t{1}}});
  add("GatherElementsAxis0I32IdxF32", "GatherElements",
      {R(f32, {4, 3, 2}), X(Tensor::FromInt64(i32, {2, 3, 2}, {0, 1, 2, 3, -1, 0, 1, 1, 2, 2, 3, -4}))});
  add("GatherNdF32", "GatherND", {R(f32, {4, 3, 5}), I64({2, 2, 2}, {0, 1, 3, 2, -1, 0, 2, -3})});
  add("GatherNdBatchI64", "GatherND", {R(i64, {2, 3, 4}), I64({2, 2, 1}, {2, 0, 1, -1})},
      {{"batch_dims", int64_t{1}}});
  add("GatherNdScalarsF16", "GatherND", {R(f16, {3, 4}), I64({5, 2}, {0, 0, 2, 3, 1, -1, -3, 2, 1, 1})});
  add("ScatterNdF32", "ScatterND", {R(f32, {5, 3}), I64({2, 1}, {3, -5}), R(f32, {2, 3})});
  add("ScatterNdAddDupF16", "ScatterND", {R(f16, {4, 3, 2}), I64({3, 2}, {1, 2, 0, 0, 1, 2}), R(f16, {3, 2})},
      {{"reduction", std::string("add")}});
  add("ScatterNdMulF32", "ScatterND", {R(f32, {6}), I64({4, 1}, {5, 0, 5, 2}), R(f32, {4})},
      {{"reduction", std::string("mul")}});
  add("ScatterNdMaxI64", "ScatterND", {R(i64, {3, 4}), I64({2, 2}, {0, 1, 0, 1}), R(i64, {2})},
      {{"reduction", std::string("max")}});
  add("ScatterElementsAxis1F32", "ScatterElements",
      {R(f32, {3, 5}), I64({3, 2}, {0, 4, -1, 2, 3, 1}), R(f32, {3, 2})}, {{"axis", int64_t{1}}});
  add("ScatterElementsAddDupBF16", "ScatterElements",
      {R(bf16, {4, 3}), I64({3, 3}, {1, 0, 2, 1, 0, 2, 3, 3, 3}), R(bf16, {3, 3})},
      {{"reduction", std::string("add")}});
  add("ScatterElementsMinI64", "ScatterElements",
      {R(i64, {2, 6}), I64({2, 4}, {0, 0, 5, 0, 1, 1, 1, 2}), R(i64, {2, 4})},
      {{"axis", int64_t{-1}}, {"reduction", std::string("min")}});
  add("ScatterLegacyF32", "Scatter", {R(f32, {3, 3}), I64({2, 3}, {1, 0, 2, 0, 2, 1}), R(f32, {2, 3})});

  add("OneHotAxis0F32", "OneHot", {I64({2, 3}, {0, 3, -1, 4, -5, 2}), K(Ints({4})), R(f32, {2})},
      {{"axis", int64_t{0}}});
  add("OneHotLastI32Idx", "OneHot", {X(Tensor::FromInt64(i32, {5}, {1, 0, 2, 2, 1})), K(Ints({3})), R(i64, {2})});
  add("TriluUpperF32", "Trilu", {R(f32, {2, 4, 5}), K(Ints({1}))});
  add("TriluLowerRuntimeKF16", "Trilu", {R(f16, {3, 6}), X(Tensor::FromInt64(i64, {}, {-1}))},
      {{"upper", int64_t{0}}});
  add("TriluLowerI64", "Trilu", {R(i64, {5, 3})}, {{"upper", int64_t{0}}});
  add("CompressAxis1F16", "Compress", {R(f16, {2, 5, 3}), K(Tensor::FromInt64(D::kBool, {4}, {1, 0, 1, 1}))},
      {{"axis", int64_t{1}}});
  add("CompressFlatI64", "Compress", {R(i64, {3, 4}), K(Tensor::FromInt64(D::kBool, {7}, {0, 1, 1, 0, 0, 0, 1}))});
  add("RangeI64", "Range",
      {K(Tensor::FromInt64(i64, {}, {3})), K(Tensor::FromInt64(i64, {}, {20})), K(Tensor::FromInt64(i64, {}, {2}))});
  add("RangeF32", "Range",
      {K(Tensor::FromFloat(f32, {}, {0.5f})), K(Tensor::FromFloat(f32, {}, {3.7f})), K(Tensor::FromFloat(f32, {}, {0.25f}))});
  add("ConstantOfShapeF16", "ConstantOfShape", {K(Ints({2, 3, 4}))}, {{"value", Tensor::FromFloat(f16, {1}, {2.5f})}});
  add("ConstantOfShapeDefault", "ConstantOfShape", {K(Ints({5}))});
  add("EyeLikeF32", "EyeLike", {R(f32, {4, 6})}, {{"k", int64_t{2}}});
  add("EyeLikeToI64", "EyeLike", {R(f16, {5, 3})}, {{"k", int64_t{-1}}, {"dtype", int64_t{7}}});
  add("ReverseSequenceTimeF32", "ReverseSequence", {R(f32, {5, 3, 2}), I64({3}, {4, 0, 5})});
  add("ReverseSequenceBatchI64", "ReverseSequence", {R(i64, {3, 4}), I64({3}, {1, 2, 4})},
      {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}});
  add("MaxUnpoolPaddedF16", "MaxUnpool", {R(f16, {1, 2, 2, 2}), I64({1, 2, 2, 2}, {0, 3, 10, 15, 16, 18, 27, 31}),
                                          K(Ints({1, 2, 5, 5}))},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  add("DepthToSpaceDcrF16", "DepthToSpace", {R(f16, {2, 8, 3, 2})}, {{"blocksize", int64_t{2}}});
  add("DepthToSpaceCrdF32", "DepthToSpace", {R(f32, {1, 18, 2, 3})},
      {{"blocksize", int64_t{3}}, {"mode", std::string("CRD")}});
  add("SpaceToDepthI64", "SpaceToDepth", {R(i64, {2, 3, 4, 6})}, {{"blocksize", int64_t{2}}});
}

inline void CaseTable::SpecialOps() {
  // ---- Einsum ----
  add("EinsumBatchMatmulF32", "Einsum", {R(f32, {2, 3, 5}), R(f32, {2, 5, 4})},
      {{"equation", std::string("bij,bjk->bik")}});
  add("EinsumAttentionF16", "Einsum", {R(f16, {2, 3, 7, 8}), R(f16, {2, 3, 9, 8})},
      {{"equation", std::string("bhid,bhjd->bhij")}});
  add("EinsumDiagonalBroadcastF32", "Einsum", {R(f32, {3, 4, 4}), R(f32, {4})},
      {{"equation", std::string("...ii,i->...i")}});
  add("EinsumImplicitSumI64", "Einsum", {R(i64, {3, 4}), R(i64, {4, 2})}, {{"equation", std::string("ij,jk")}});

  // ---- GridSample: every mode x padding, both align_corners; locations past the edges ----
  {
    int g = 0;
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* padding : {"zeros", "border", "reflection"}) {
        add(absl::StrCat("GridSample_", mode, "_", padding), "GridSample",
            {R(g % 2 ? f16 : f32, {2, 3, 4, 5}), R(f32, {2, 3, 6, 2}, -1.6f, 1.6f)},
            {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}, {"align_corners", int64_t{g % 2}}});
        ++g;
      }
    }
  }

  // ---- Quantized ----
  const D u8 = D::kUInt8, i8 = D::kInt8;
  add("QuantizeLinearU8F32", "QuantizeLinear",
      {X(Tensor::FromFloat(f32, {8}, {0.f, 2.5f, 3.5f, -1.f, 300.f, -300.f, 1.49f, kNanF})), R(f32, {}, 0.5f, 1.5f),
       K(Tensor::FromInt64(u8, {}, {128}))});
  add("QuantizeLinearAxisI8F16", "QuantizeLinear",
      {R(f16, {2, 3, 4}, -50.f, 50.f), RK(f32, {3}, 0.2f, 1.f), K(Tensor::FromInt64(i8, {3}, {0, -3, 5}))});
  add("DequantizeLinearAxisU8", "DequantizeLinear",
      {R(u8, {2, 3, 5}), RK(f32, {3}, 0.1f, 1.f), K(Tensor::FromInt64(u8, {3}, {1, 2, 3}))}, {{"axis", int64_t{1}}});
  add("DequantizeLinearI32", "DequantizeLinear", {R(i32, {7}), R(f32, {}, 0.1f, 1.f)});
  add("MatMulIntegerPerRowU8", "MatMulInteger",
      {R(u8, {2, 3, 5}), R(u8, {5, 4}), K(Tensor::FromInt64(u8, {3}, {1, 0, 2})), K(Tensor::FromInt64(u8, {}, {3}))});
  add("QLinearMatMulI8", "QLinearMatMul",
      {R(i8, {3, 6}), K(Tensor::FromFloat(f32, {}, {0.05f})), K(Tensor::FromInt64(i8, {}, {1})), R(i8, {6, 2}),
       K(Tensor::FromFloat(f32, {}, {0.1f})), K(Tensor::FromInt64(i8, {}, {-2})), K(Tensor::FromFloat(f32, {}, {0.02f})),
       K(Tensor::FromInt64(i8, {}, {3}))});
  add("ConvIntegerPaddedU8", "ConvInteger",
      {R(u8, {1, 2, 5, 5}), R(u8, {3, 2, 3, 3}), K(Tensor::FromInt64(u8, {}, {2})), K(Tensor::FromInt64(u8, {3}, {1, 0, 4}))},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  add("QLinearConvBiasU8", "QLinearConv",
      {R(u8, {1, 2, 6, 6}), K(Tensor::FromFloat(f32, {}, {0.1f})), K(Tensor::FromInt64(u8, {}, {3})), R(u8, {4, 1, 2, 2}),
       K(Tensor::FromFloat(f32, {4}, {0.05f, 0.1f, 0.2f, 0.3f})), K(Tensor::FromInt64(u8, {4}, {0, 1, 2, 3})),
       K(Tensor::FromFloat(f32, {}, {0.5f})), K(Tensor::FromInt64(u8, {}, {10})),
       K(Tensor::FromInt64(i32, {4}, {5, -5, 20, 0}))},
      {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 1}}});

  // ---- RoiAlign: regions past the edges, both modes ----
  {
    const Tensor rois = Tensor::FromFloat(f32, {3, 4}, {0.f, 0.f, 5.f, 4.f, 2.5f, 1.f, 9.f, 8.5f, -2.f, 6.f, 3.f, 11.f});
    add("RoiAlignAvgHalfPixelF32", "RoiAlign", {R(f32, {2, 3, 8, 10}), X(rois), I64({3}, {0, 1, 1})},
        {{"output_height", int64_t{3}}, {"output_width", int64_t{2}}, {"spatial_scale", 0.75f}});
    add("RoiAlignMaxOutputHalfPixelF16", "RoiAlign", {R(f16, {2, 2, 7, 6}), X(rois), I64({3}, {1, 0, 1})},
        {{"mode", std::string("max")}, {"coordinate_transformation_mode", std::string("output_half_pixel")},
         {"sampling_ratio", int64_t{2}}, {"output_height", int64_t{2}}, {"output_width", int64_t{3}}});
  }

  // ---- Recurrent ----
  add("RnnReluBidirF32", "RNN", {R(f32, {5, 2, 3}, -1.f, 1.f), RK(f32, {2, 4, 3}, -0.5f, 0.5f), RK(f32, {2, 4, 4}, -0.5f, 0.5f),
                                 RK(f32, {2, 8}, -0.5f, 0.5f), X(Tensor::FromInt64(i32, {2}, {5, 3}))},
      {{"hidden_size", int64_t{4}}, {"direction", std::string("bidirectional")},
       {"activations", std::vector<std::string>{"Relu", "Tanh"}}}, 2);
  add("GruLinearBeforeResetF32", "GRU", {R(f32, {4, 3, 2}, -1.f, 1.f), RK(f32, {1, 15, 2}, -0.5f, 0.5f),
                                         RK(f32, {1, 15, 5}, -0.5f, 0.5f), RK(f32, {1, 30}, -0.5f, 0.5f)},
      {{"hidden_size", int64_t{5}}, {"linear_before_reset", int64_t{1}}}, 2);
  add("GruReverseBatchFirstF16", "GRU", {R(f16, {2, 4, 3}, -1.f, 1.f), RK(f16, {1, 18, 3}, -0.5f, 0.5f),
                                         RK(f16, {1, 18, 6}, -0.5f, 0.5f), Absent(), Absent(), R(f16, {2, 1, 6})},
      {{"hidden_size", int64_t{6}}, {"direction", std::string("reverse")}, {"layout", int64_t{1}}}, 2);
  add("LstmPeepholeSeqLensF32", "LSTM",
      {R(f32, {4, 2, 3}, -1.f, 1.f), RK(f32, {1, 12, 3}, -0.5f, 0.5f), RK(f32, {1, 12, 3}, -0.5f, 0.5f),
       RK(f32, {1, 24}, -0.5f, 0.5f), X(Tensor::FromInt64(i64, {2}, {4, 2})), R(f32, {1, 2, 3}), R(f32, {1, 2, 3}),
       RK(f32, {1, 9}, -0.5f, 0.5f)},
      {{"hidden_size", int64_t{3}}, {"clip", 2.f}}, 3);
  add("LstmBidirBf16", "LSTM", {R(bf16, {3, 1, 4}, -1.f, 1.f), RK(bf16, {2, 20, 4}, -0.5f, 0.5f),
                                RK(bf16, {2, 20, 5}, -0.5f, 0.5f)},
      {{"hidden_size", int64_t{5}}, {"direction", std::string("bidirectional")}, {"input_forget", int64_t{1}}}, 3);

  // ---- Lines along an axis ----
  add("DetF32", "Det", {R(f32, {3, 4, 4})});
  add("DetSingularF16", "Det", {X(Tensor::FromFloat(f16, {2, 2}, {1.f, 2.f, 2.f, 4.f}))});
  add("CumSumAxis1F32", "CumSum", {R(f32, {3, 7, 4}), K(Ints({1}))});
  add("CumSumExclusiveReverseF16", "CumSum", {R(f16, {5, 9}), K(Ints({-1}))},
      {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}});
  add("CumSumI64", "CumSum", {R(i64, {6, 3}), K(Ints({0}))}, {{"exclusive", int64_t{1}}});
  add("HardmaxF32", "Hardmax", {R(f32, {4, 9})});
  add("HardmaxAxis0F16", "Hardmax", {R(f16, {5, 3, 2})}, {{"axis", int64_t{0}}});
  add("TopKTiesF32", "TopK", {X(Tensor::FromFloat(f32, {2, 6}, {3, 1, 3, kNanF, 2, 3, -1, 5, 5, 0, 5, 4})), K(Ints({4}))},
      {}, 2);
  add("TopKSmallestAxis0I64", "TopK", {R(i64, {7, 3}), K(Ints({3}))},
      {{"axis", int64_t{0}}, {"largest", int64_t{0}}}, 2);
  add("TopKF16", "TopK", {R(f16, {3, 40}), K(Ints({5}))}, {}, 2);
  add("ReduceLogSumExpAxis1F32", "ReduceLogSumExp", {R(f32, {3, 5, 4}, -30.f, 30.f), K(Ints({1}))},
      {{"keepdims", int64_t{0}}});
  add("ReduceLogSumExpAllF16", "ReduceLogSumExp", {R(f16, {4, 6})});
  add("InstanceNormF32", "InstanceNormalization", {R(f32, {2, 3, 5, 7}), RK(f32, {3}), RK(f32, {3})});
  add("InstanceNormLongF16", "InstanceNormalization", {R(f16, {1, 4, 300}), RK(f16, {4}), RK(f16, {4})},
      {{"epsilon", 1e-3f}});
  add("CastLikeF32ToF16", "CastLike", {R(f32, {3, 7}), R(f16, {1})});

  // ---- Resize, ConvTranspose ----
  const std::vector<float> kScales2x = {1.f, 1.f, 2.f, 1.5f};
  add("ResizeNearestF16", "Resize", {R(f16, {1, 2, 3, 4}), Absent(), K(Tensor::FromFloat(f32, {4}, kScales2x))});
  add("ResizeLinearAlignF32", "Resize", {R(f32, {2, 3, 4, 5}), Absent(), Absent(), K(Ints({2, 3, 7, 3}))},
      {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}});
  add("ResizeCubicExcludeF32", "Resize", {R(f32, {1, 1, 5, 6}), Absent(), K(Tensor::FromFloat(f32, {4}, {1, 1, 1.6f, 0.5f}))},
      {{"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}});
  add("ResizeCropExtrapolateBF16", "Resize",
      {R(bf16, {1, 1, 4, 4}), K(Tensor::FromFloat(f32, {8}, {0, 0, -0.2f, 0.1f, 1, 1, 1.3f, 0.9f})), Absent(),
       K(Ints({1, 1, 5, 3}))},
      {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
       {"extrapolation_value", 7.f}});
  add("ResizeNearestI64", "Resize", {R(i64, {2, 5}), Absent(), K(Tensor::FromFloat(f32, {2}, {1.f, 0.6f}))},
      {{"nearest_mode", std::string("ceil")}});
  // Conv as the direct kernel (the fallback for convs cuDNN and the conv templates
  // do not take): 3-D, and a grouped dilated 1-D one.
  add("ConvDirect3dF32", "Conv", {R(f32, {2, 4, 3, 5, 4}), RK(f32, {6, 2, 2, 3, 2}), RK(f32, {6})},
      {{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 0, 1, 0, 1, 0}},
       {"strides", std::vector<int64_t>{1, 2, 1}}});
  add("ConvDirect1dF16", "Conv", {R(f16, {1, 4, 11}), RK(f16, {4, 1, 3})},
      {{"group", int64_t{4}}, {"dilations", std::vector<int64_t>{2}}, {"auto_pad", std::string("SAME_UPPER")}});
  add("ConvTransposeF32", "ConvTranspose", {R(f32, {2, 4, 5, 6}), RK(f32, {4, 3, 3, 2}), RK(f32, {3})},
      {{"strides", std::vector<int64_t>{2, 1}}, {"pads", std::vector<int64_t>{1, 0, 0, 1}}});
  add("ConvTransposeGroupDilF16", "ConvTranspose", {R(f16, {1, 4, 7}), RK(f16, {4, 2, 3})},
      {{"group", int64_t{2}}, {"dilations", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{3}},
       {"output_padding", std::vector<int64_t>{1}}});
  add("ConvTransposeSame3dF32", "ConvTranspose", {R(f32, {1, 2, 3, 2, 3}), RK(f32, {2, 1, 2, 2, 2})},
      {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2, 1}}});
}

inline void CaseTable::ElementwiseReductionsWindows() {
  // ---- More element-wise ops ----
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"}) {
    add(absl::StrCat(op, "F32"), op, {R(f32, {3, 11}, -0.9f, 0.9f)});
  }
  add("AcoshF16", "Acosh", {R(f16, {3, 11}, 1.1f, 3.f)});
  add("SinBF16", "Sin", {R(bf16, {40}, -6.f, 6.f)});
  add("SignF32", "Sign", {X(Tensor::FromFloat(f32, {6}, {-2.5f, 0.f, 3.f, -0.f, 1e-20f, -7.f}))});
  add("SignI64", "Sign", {R(i64, {4, 5})});
  add("RoundHalfEvenF32", "Round", {X(Tensor::FromFloat(f32, {8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 7.f}))});
  add("SoftsignF16", "Softsign", {R(f16, {5, 7}, -5.f, 5.f)});
  add("ModFloatF32", "Mod", {R(f32, {4, 6}, -9.f, 9.f), R(f32, {6}, 0.5f, 3.f)}, {{"fmod", int64_t{1}}});
  add("ModI64", "Mod", {I64({6}, {7, -7, 7, -7, 5, 0}), I64({6}, {3, 3, -3, -3, 0, 4})});
  add("ModFmodI32", "Mod", {X(Tensor::FromInt64(i32, {4}, {7, -7, 7, -7})), X(Tensor::FromInt64(i32, {4}, {3, 3, -3, -1}))},
      {{"fmod", int64_t{1}}});
  add("BitShiftLeftU8", "BitShift", {X(Tensor::FromInt64(D::kUInt8, {5}, {1, 3, 200, 7, 255})),
                                     X(Tensor::FromInt64(D::kUInt8, {5}, {1, 4, 1, 9, 0}))},
      {{"direction", std::string("LEFT")}});
  add("BitShiftRightU8", "BitShift", {X(Tensor::FromInt64(D::kUInt8, {2, 3}, {16, 4, 255, 1, 128, 9})),
                                      X(Tensor::FromInt64(D::kUInt8, {3}, {2, 1, 8}))},
      {{"direction", std::string("RIGHT")}});
  add("Xor", "Xor", {R(D::kBool, {4, 3}), R(D::kBool, {3})});
  add("ShrinkF32", "Shrink", {R(f32, {3, 9})}, {{"lambd", 0.7f}, {"bias", 0.2f}});
  add("ShrinkI64", "Shrink", {R(i64, {3, 9})}, {{"lambd", 1.5f}, {"bias", 1.f}});
  add("ThresholdedReluBF16", "ThresholdedRelu", {R(bf16, {3, 9})}, {{"alpha", 0.4f}});
  add("IsNaNF32", "IsNaN", {X(Tensor::FromFloat(f32, {6}, {1.f, kNan, -kInf, kInf, 0.f, -2.f}))});
  add("IsNaNF16", "IsNaN", {X(Tensor::FromFloat(f16, {2, 3}, {kNan, 1.f, kInf, -0.f, kNan, 3.f}))});
  add("IsInfF32", "IsInf", {X(Tensor::FromFloat(f32, {6}, {1.f, kNan, -kInf, kInf, 0.f, -2.f}))});
  add("IsInfPositiveBF16", "IsInf", {X(Tensor::FromFloat(bf16, {6}, {1.f, kNan, -kInf, kInf, 0.f, -2.f}))},
      {{"detect_negative", int64_t{0}}});

  // ---- Reductions ----
  add("ReduceMeanAxis1F32", "ReduceMean", {R(f32, {2, 5, 7}), K(Ints({1}))});
  add("ReduceSumLastF16", "ReduceSum", {R(f16, {6, 300}), K(Ints({-1}))}, {{"keepdims", int64_t{0}}});
  add("ReduceMaxAllF32", "ReduceMax", {R(f32, {3, 4, 5})});
  add("ReduceMinAxes02BF16", "ReduceMin", {R(bf16, {3, 4, 5}), K(Ints({0, 2}))});
  add("ReduceProdF32", "ReduceProd", {R(f32, {4, 6}, 0.5f, 1.5f), K(Ints({1}))});
  add("ReduceL2F16", "ReduceL2", {R(f16, {4, 6, 3}), K(Ints({1, 2}))});
  add("ReduceSumSquareF32", "ReduceSumSquare", {R(f32, {4, 6}), K(Ints({0}))});
  add("ReduceSumI64", "ReduceSum", {R(i64, {4, 6}), K(Ints({1}))});
  add("ReduceL1F16", "ReduceL1", {R(f16, {3, 5, 4}), K(Ints({0, 2}))});
  add("ReduceLogSumF32", "ReduceLogSum", {R(f32, {4, 7}, 0.1f, 2.f), K(Ints({1}))}, {{"keepdims", int64_t{0}}});
  add("ReduceMeanNoopF32", "ReduceMean", {R(f32, {4, 6})}, {{"noop_with_empty_axes", int64_t{1}}});
  add("SoftmaxLastF16", "Softmax", {R(f16, {4, 37})});
  add("SoftmaxMiddleF32", "Softmax", {R(f32, {2, 5, 3})}, {{"axis", int64_t{1}}});
  add("LogSoftmaxBF16", "LogSoftmax", {R(bf16, {3, 300})});
  add("SoftmaxLongF32", "Softmax", {R(f32, {2, 1030}, -8.f, 8.f)});
  add("LayerNormBiasF32", "LayerNormalization", {R(f32, {2, 3, 64}), RK(f32, {64}), RK(f32, {64})});
  add("LayerNormNoBiasF16", "LayerNormalization", {R(f16, {5, 33}), RK(f16, {33})});
  add("LayerNormStatsF32", "LayerNormalization", {R(f32, {2, 3, 4, 5}), RK(f32, {4, 1}), RK(f32, {5})},
      {{"axis", int64_t{2}}, {"epsilon", 1e-3f}}, 3);
  add("GlobalAveragePoolF16", "GlobalAveragePool", {R(f16, {2, 3, 7, 7})});
  add("GlobalMaxPoolF32", "GlobalMaxPool", {R(f32, {2, 3, 5, 4})});
  // channels_last=1 (NHWC [N, H, W, C]): C % 8 == 0, and an odd C.
  add("GlobalAveragePoolNhwcF16", "GlobalAveragePool", {R(f16, {2, 7, 7, 16})}, {{"channels_last", int64_t{1}}});
  add("GlobalAveragePoolNhwcOddF32", "GlobalAveragePool", {R(f32, {3, 5, 4, 7})}, {{"channels_last", int64_t{1}}});
  // A squeeze-excitation pool over an early feature map (few channels, many pixels) and
  // a final pool (many channels, few pixels).
  add("GlobalAveragePoolNhwcLargeF16", "GlobalAveragePool", {R(f16, {2, 112, 112, 32})},
      {{"channels_last", int64_t{1}}});
  add("GlobalAveragePoolNhwcWideF16", "GlobalAveragePool", {R(f16, {3, 7, 7, 1280})}, {{"channels_last", int64_t{1}}});
  // Channel tiles of 18 groups (not a power of two) with pixel slices, two images.
  add("GlobalAveragePoolNhwcTilesF16", "GlobalAveragePool", {R(f16, {2, 56, 56, 144})},
      {{"channels_last", int64_t{1}}});
  add("GlobalAveragePoolNhwcSlicesF32", "GlobalAveragePool", {R(f32, {1, 37, 41, 24})}, {{"channels_last", int64_t{1}}});
  add("GlobalAveragePoolNhwcEmptyF16", "GlobalAveragePool", {R(f16, {0, 9, 9, 16})}, {{"channels_last", int64_t{1}}});
  add("ArgMaxF32", "ArgMax", {R(f32, {3, 7, 4})}, {{"axis", int64_t{1}}});
  add("ArgMinLastI64", "ArgMin", {R(i64, {3, 7})}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}},
                                                   {"select_last_index", int64_t{1}}});

  // ---- Windows ----
  add("MaxPool3x3s2F16", "MaxPool", {R(f16, {1, 2, 9, 9})},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  add("MaxPoolCeilDilF32", "MaxPool", {R(f32, {2, 3, 10, 8})},
      {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"strides", std::vector<int64_t>{3, 2}},
       {"dilations", std::vector<int64_t>{2, 1}}, {"ceil_mode", int64_t{1}}, {"pads", std::vector<int64_t>{0, 1, 1, 0}}});
  add("MaxPoolIndicesPadF32", "MaxPool", {R(f32, {2, 3, 7, 6})},
      {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 0, 1, 1}}, {"ceil_mode", int64_t{1}}}, 2);
  add("MaxPoolIndicesColMajorF16", "MaxPool", {R(f16, {1, 2, 6, 9})},
      {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"dilations", std::vector<int64_t>{2, 1}},
       {"storage_order", int64_t{1}}}, 2);
  add("MaxPoolIndices3DI8", "MaxPool", {R(D::kInt8, {1, 2, 4, 5, 3}, -100.f, 100.f)},
      {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}, 2);
  add("MaxPool1DBF16", "MaxPool", {R(bf16, {2, 3, 11})},
      {{"kernel_shape", std::vector<int64_t>{3}}, {"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2}}});
  add("AvgPoolExclPadF32", "AveragePool", {R(f32, {1, 3, 7, 7})},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 0, 2, 1}}, {"ceil_mode", int64_t{1}}});
  add("AvgPoolInclPadF16", "AveragePool", {R(f16, {2, 2, 6, 5})},
      {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
       {"count_include_pad", int64_t{1}}});
  // channels_last=1 (NHWC [N, H, W, C]).
  add("MaxPoolNhwc3x3s2F16", "MaxPool", {R(f16, {2, 9, 9, 16})},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"channels_last", int64_t{1}}});
  add("MaxPoolNhwcCeilDilBF16", "MaxPool", {R(bf16, {1, 10, 8, 3})},
      {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"strides", std::vector<int64_t>{3, 2}},
       {"dilations", std::vector<int64_t>{2, 1}}, {"ceil_mode", int64_t{1}}, {"pads", std::vector<int64_t>{0, 1, 1, 0}},
       {"channels_last", int64_t{1}}});
  add("AvgPoolNhwcExclPadF32", "AveragePool", {R(f32, {2, 7, 7, 5})},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 0, 2, 1}}, {"ceil_mode", int64_t{1}}, {"channels_last", int64_t{1}}});
  add("AvgPoolNhwcInclPadF16", "AveragePool", {R(f16, {2, 6, 5, 8})},
      {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
       {"count_include_pad", int64_t{1}}, {"channels_last", int64_t{1}}});
  // Vectorised over channels (8 x 16-bit, 4 x f32 per thread).
  add("MaxPoolNhwcVecBF16", "MaxPool", {R(bf16, {2, 7, 6, 24})},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"channels_last", int64_t{1}}});
  add("AvgPoolNhwcVecF32", "AveragePool", {R(f32, {1, 5, 7, 12})},
      {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"pads", std::vector<int64_t>{0, 1, 1, 0}},
       {"count_include_pad", int64_t{1}}, {"channels_last", int64_t{1}}});
  add("LrnF32", "LRN", {R(f32, {1, 7, 3, 3})}, {{"size", int64_t{5}}, {"alpha", 1e-2f}, {"beta", 0.75f}, {"bias", 2.f}});
  add("LrnF16", "LRN", {R(f16, {2, 4, 5})}, {{"size", int64_t{2}}});
  // A fused pointwise group (graph/fused_group.h): a broadcast bias, a scalar, a
  // shared intermediate and two outputs.
  for (DType t : {f32, f16, bf16}) {
    const std::string ty(DTypeName(t));
    const std::string body = absl::StrCat(
        "graph @g {\n  input %x : ", ty, "[3,5,7]\n  input %b : ", ty, "[7]\n  const %k : ", ty,
        "[] = [0.5]\n  %a = Add(%x, %b) @a\n  %m = Mul(%a, %k) @m\n  %r = Relu(%m) @r\n  %t = Tanh(%a) @t\n"
        "  %y = Add(%r, %t) @y\n  output %y\n  output %a\n}\n");
    Case g{absl::StrCat("PointwiseGroup", ty), "FusedGroup", {R(t, {3, 5, 7}), R(t, {7})},
           {{"body", body}, {"pattern", std::string("pointwise")}, {"anchor", std::string()},
            {"members", std::vector<std::string>{"a", "m", "r", "t", "y"}}}};
    g.num_outputs = 2;
    c.push_back(std::move(g));
  }
}

inline void CaseTable::VectorAndRowForms() {
  // ---- Vectorised element-wise kernels (EmitElementwiseKernel): innermost extents
  // that are and are not multiples of the vector width, broadcasts along and across
  // the last dim, flat spaces with a tail, mixed element sizes ----
  add("AddVecBiasF16", "Add", {R(f16, {6, 64}), R(f16, {64})});
  add("AddVecColumnF32", "Add", {R(f32, {6, 16}), R(f32, {6, 1})});
  add("AddVecMiddleBF16", "Add", {R(bf16, {3, 4, 16}), R(bf16, {3, 1, 16})});
  add("AddFlatTailF16", "Add", {R(f16, {1003}), R(f16, {1003})});
  add("MulFlatScalarBF16", "Mul", {R(bf16, {1000}), R(bf16, {})});
  add("MulHalfVecF16", "Mul", {R(f16, {5, 12}), R(f16, {12})});
  add("SubVecLongF32", "Sub", {R(f32, {3, 4100}), R(f32, {4100})});
  add("CastVecF16ToF32", "Cast", {R(f16, {8, 24})}, {{"to", int64_t{1}}});
  add("WhereVecF16", "Where", {R(D::kBool, {4, 1, 16}), R(f16, {4, 8, 16}), R(f16, {16})});
  add("AddVecI64", "Add", {R(i64, {4, 8}), R(i64, {8})});
  add("GreaterVecF16", "Greater", {R(f16, {4, 32}), R(f16, {32})});

  // ---- Row kernels over the last axis: row lengths around the vector width and the
  // warp, warp-per-row and block-per-row forms, rows held in registers and (longest)
  // streamed ----
  for (int64_t len : {1, 7, 31, 32, 33, 768, 1000, 4096, 5000}) {
    const int64_t rows = len < 64 ? 37 : 3;
    add(absl::StrCat("SoftmaxRow", len, "F16"), "Softmax", {R(f16, {rows, len}, -4.f, 4.f)});
    add(absl::StrCat("LayerNormRow", len, "F16"), "LayerNormalization", {R(f16, {rows, len}), RK(f16, {len}), RK(f16, {len})});
    if (len == 7 || len == 33 || len == 1000 || len == 5000) {
      add(absl::StrCat("ReduceMeanRow", len, "F16"), "ReduceMean", {R(f16, {rows, len}), K(Ints({-1}))});
    }
  }
  add("SoftmaxRow768F32", "Softmax", {R(f32, {5, 768}, -4.f, 4.f)});
  add("LogSoftmaxRow1000BF16", "LogSoftmax", {R(bf16, {4, 1000})});
  add("SoftmaxStreamF32", "Softmax", {R(f32, {2, 40000}, -8.f, 8.f)});
  add("LogSoftmaxStreamF16", "LogSoftmax", {R(f16, {2, 65536})});
  add("LayerNormRow4096BF16", "LayerNormalization", {R(bf16, {3, 4096}), RK(bf16, {4096}), RK(bf16, {4096})});
  add("LayerNormRow33F32", "LayerNormalization", {R(f32, {9, 33}), RK(f32, {33}), RK(f32, {33})});
  add("LayerNormStreamBF16", "LayerNormalization", {R(bf16, {2, 40000}), RK(bf16, {40000}), RK(bf16, {40000})});
  add("LayerNormF32ScaleF16X", "LayerNormalization", {R(f16, {4, 64}), RK(f32, {64}), RK(f32, {64})});
  add("LayerNormScalarScaleF16", "LayerNormalization", {R(f16, {4, 64}), RK(f16, {1})});
  add("LayerNormAxis1StatsF16", "LayerNormalization", {R(f16, {3, 4, 16}), RK(f16, {4, 16}), RK(f16, {16})},
      {{"axis", int64_t{1}}}, 3);
  // RMSNormalization (Llama's 2048 and 4096 widths), the streamed form, a scalar scale.
  add("RmsNormRow2048F16", "RMSNormalization", {R(f16, {5, 2048}), RK(f16, {2048})}, {{"epsilon", 1e-6f}});
  add("RmsNormRow4096BF16", "RMSNormalization", {R(bf16, {3, 4096}), RK(bf16, {4096})});
  add("RmsNormRow33F32", "RMSNormalization", {R(f32, {9, 33}), RK(f32, {33})});
  add("RmsNormStreamBF16", "RMSNormalization", {R(bf16, {2, 40000}), RK(bf16, {40000})});
  add("RmsNormAxis1ScalarF16", "RMSNormalization", {R(f16, {3, 4, 16}), RK(f16, {1})}, {{"axis", int64_t{1}}});
  add("ReduceSumRow5000F32", "ReduceSum", {R(f32, {3, 5000}), K(Ints({-1}))});
  add("ReduceMaxRow768BF16", "ReduceMax", {R(bf16, {7, 768}), K(Ints({-1}))}, {{"keepdims", int64_t{0}}});
  add("ReduceSumTrailingF32", "ReduceSum", {R(f32, {3, 4, 5}), K(Ints({1, 2}))});
  add("ReduceL2RowF16", "ReduceL2", {R(f16, {4, 24}), K(Ints({-1}))});
  add("ReduceSumRowI64", "ReduceSum", {R(i64, {5, 40}), K(Ints({-1}))});
  add("ReduceMinLongRowF16", "ReduceMin", {R(f16, {2, 70000}), K(Ints({-1}))});
}

inline std::vector<Case> AllCases() {
  CaseTable t;
  t.Pointwise();
  t.MovementAndIndexing();
  t.SpecialOps();
  t.ElementwiseReductionsWindows();
  t.VectorAndRowForms();
  t.FusedGroups();
  t.ViewGroups();
  return std::move(t.c);
}

// A one-node graph for `c`, shapes inferred without folding.
struct BuiltCase {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;
  std::vector<Tensor> inputs;  // per node input; undefined when absent
};

inline absl::StatusOr<BuiltCase> Build(const Case& c) {
  BuiltCase b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = absl::StrCat("in", i);
    const CaseInput& in = c.inputs[i];
    b.inputs.push_back(in.t);
    if (in.absent) {
      ins.push_back(nullptr);
    } else if (in.constant) {
      ins.push_back(g.AddConstant(name, in.t));
    } else {
      Value* v = g.AddValue(name);
      v->SetType(in.t.dtype(), in.t.shape());
      g.AddInput(v);
      ins.push_back(v);
    }
  }
  std::vector<Value*> outs;
  for (int i = 0; i < c.num_outputs; ++i) outs.push_back(g.AddValue(absl::StrCat("out", i)));
  b.node = g.AddNode(c.op, ins, outs, c.name);
  for (const auto& [k, v] : c.attrs) b.node->SetAttr(k, v);
  // A group case writes its body as text, as the text format does.
  if (absl::Status st = ReadFusedGroupBody(*b.node); !st.ok()) return st;
  for (Value* v : outs) g.AddOutput(v);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  if (!s.ok()) return s;
  return b;
}

}  // namespace kiln::codegen::test
