// Tests for the element-wise ops: arithmetic, math, activations, Clip, comparisons,
// logical ops, IsNaN/IsInf, variadic Sum/Max/Min/Mean, PRelu and Where.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/tensor.h"

namespace kiln {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor F32(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kFloat32, shape, v); }
Tensor F16(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kFloat16, shape, v); }
Tensor BF16(Shape shape, std::vector<float> v) { return Tensor::FromFloat(DType::kBFloat16, shape, v); }
Tensor I64(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kInt64, shape, v); }
Tensor I32(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kInt32, shape, v); }
Tensor I8(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kInt8, shape, v); }
Tensor U8(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kUInt8, shape, v); }
Tensor Bool(Shape shape, std::vector<int64_t> v) { return Tensor::FromInt64(DType::kBool, shape, v); }
Tensor Absent() { return Tensor(); }

// Builds a graph of one node `op` (named "node1") over `inputs` (an undefined
// Tensor is an absent optional input), infers shapes and evaluates it. Inputs at
// index >= first_constant become graph constants; the others are graph inputs.
absl::StatusOr<Tensor> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                             const std::map<std::string, Attribute>& attrs = {},
                             int first_constant = 1 << 20) {
  Graph g;
  std::vector<Value*> ins;
  TensorMap feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    if (static_cast<int>(i) >= first_constant) {
      ins.push_back(g.AddConstant(name, inputs[i]));
      continue;
    }
    Value* v = g.AddValue(name);
    v->SetType(inputs[i].dtype(), inputs[i].shape());
    g.AddInput(v);
    feeds[name] = inputs[i];
    ins.push_back(v);
  }
  Value* y = g.AddValue("y");
  Node* node = g.AddNode(op, ins, {y}, "node1");
  for (const auto& [name, value] : attrs) node->SetAttr(name, value);
  g.AddOutput(y);
  KILN_RETURN_IF_ERROR(InferShapes(g));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateGraph(g, feeds));
  return outs[0];
}

// Expects `r` to be a tensor of `dtype` and `shape` whose values are within `tol`
// of `expected` (NaN matches NaN).
void ExpectFloats(const absl::StatusOr<Tensor>& r, DType dtype, const Shape& shape,
                  const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype(), dtype) << r->TypeString();
  EXPECT_EQ(r->shape(), shape) << r->TypeString();
  const std::vector<float> got = r->ToFloat();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i];
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
    }
  }
}

void ExpectInts(const absl::StatusOr<Tensor>& r, DType dtype, const Shape& shape,
                const std::vector<int64_t>& expected) {
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype(), dtype) << r->TypeString();
  EXPECT_EQ(r->shape(), shape) << r->TypeString();
  EXPECT_EQ(r->ToInt64(), expected);
}

// Expects `r` to have failed with a message containing every one of `parts`.
void ExpectError(const absl::StatusOr<Tensor>& r, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok()) << "expected an error, got " << r->TypeString();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << r.status().message() << "' lacks '" << p << "'";
  }
}

// ---------------------------------------------------------------- arithmetic

TEST(ElementwiseArithmeticTest, SubBroadcastsRowAndScalar) {
  ExpectFloats(RunOp("Sub", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {1, 2, 3})}), DType::kFloat32,
               {2, 3}, {0, 0, 0, 3, 3, 3});
  ExpectInts(RunOp("Sub", {I64({}, {10}), I64({2, 1}, {1, -4})}), DType::kInt64, {2, 1}, {9, 14});
}

TEST(ElementwiseArithmeticTest, SubUint8Wraps) {
  ExpectInts(RunOp("Sub", {U8({2}, {3, 200}), U8({2}, {5, 100})}), DType::kUInt8, {2}, {254, 100});
}

TEST(ElementwiseArithmeticTest, MulFloatAndUint8Wrap) {
  ExpectFloats(RunOp("Mul", {F32({2, 2}, {1, 2, 3, 4}), F32({2, 1}, {-1, 0.5})}), DType::kFloat32,
               {2, 2}, {-1, -2, 1.5, 2});
  ExpectInts(RunOp("Mul", {U8({2}, {200, 3}), U8({2}, {2, 4})}), DType::kUInt8, {2}, {144, 12});
}

TEST(ElementwiseArithmeticTest, DivIntegerTruncatesTowardZero) {
  ExpectInts(RunOp("Div", {I32({5}, {-7, 7, 7, -7, 5}), I32({5}, {2, -2, 2, -2, 0})}), DType::kInt32,
             {5}, {-3, -3, 3, 3, 0});
  ExpectInts(RunOp("Div", {U8({2}, {255, 7}), U8({2}, {2, 3})}), DType::kUInt8, {2}, {127, 2});
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  ExpectInts(RunOp("Div", {I64({2}, {kMin, 9}), I64({}, {-1})}), DType::kInt64, {2}, {kMin, -9});
}

TEST(ElementwiseArithmeticTest, DivFloat16Broadcast) {
  ExpectFloats(RunOp("Div", {F16({2, 2}, {1, 3, -2, 5}), F16({1}, {4})}), DType::kFloat16, {2, 2},
               {0.25, 0.75, -0.5, 1.25}, 1e-3f);
  ExpectFloats(RunOp("Div", {F32({2}, {1, -1}), F32({1}, {0})}), DType::kFloat32, {2}, {kInf, -kInf});
}

TEST(ElementwiseArithmeticTest, PowFloatBaseIntegerExponent) {
  ExpectFloats(RunOp("Pow", {F32({3}, {2, 3, 4}), I64({1}, {2})}), DType::kFloat32, {3}, {4, 9, 16});
  ExpectFloats(RunOp("Pow", {F32({2, 1}, {4, 9}), F32({2}, {0.5, -1})}), DType::kFloat32, {2, 2},
               {2, 0.25, 3, 1.f / 9});
  ExpectFloats(RunOp("Pow", {BF16({2}, {2, 3}), I32({}, {3})}), DType::kBFloat16, {2}, {8, 27}, 0.2f);
}

TEST(ElementwiseArithmeticTest, PowIntegerBase) {
  ExpectInts(RunOp("Pow", {I32({5}, {2, -3, 2, 5, -1}), I32({5}, {10, 3, -1, 0, -3})}), DType::kInt32,
             {5}, {1024, -27, 0, 1, -1});
  // Integer base with a floating exponent: computed in double, truncated.
  ExpectInts(RunOp("Pow", {I64({3}, {4, 9, 2}), F32({3}, {0.5, 1.5, -1})}), DType::kInt64, {3},
             {2, 27, 0});
}

TEST(ElementwiseArithmeticTest, ModIntegerTakesDivisorSign) {
  ExpectInts(RunOp("Mod", {I64({4}, {-7, 7, -7, 4}), I64({4}, {3, -3, -3, 0})}), DType::kInt64, {4},
             {2, -2, -1, 0});
  ExpectInts(RunOp("Mod", {I32({2}, {-7, 7}), I32({1}, {3})}, {{"fmod", 1}}), DType::kInt32, {2},
             {-1, 1});
}

TEST(ElementwiseArithmeticTest, ModFmodFloat) {
  ExpectFloats(RunOp("Mod", {F32({3}, {-7.5, 7.5, 5}), F32({3}, {2, -2, 0})}, {{"fmod", 1}}),
               DType::kFloat32, {3}, {-1.5, 1.5, kNaN});
  ExpectFloats(RunOp("Mod", {F16({2}, {-4.5, 3}), F16({2}, {2, 2})}, {{"fmod", 1}}), DType::kFloat16,
               {2}, {-0.5, 1}, 1e-3f);
}

TEST(ElementwiseArithmeticTest, Errors) {
  ExpectError(RunOp("Sub", {F32({2, 3}, std::vector<float>(6)), F32({4}, std::vector<float>(4))}),
              {"node 'node1' (Sub)", "shapes [2,3] and [4] cannot be broadcast"});
  ExpectError(RunOp("Mul", {F32({1}, {1}), I64({1}, {1})}), {"share a dtype", "f32", "i64"});
  ExpectError(RunOp("Div", {Bool({1}, {1}), Bool({1}, {1})}), {"must be numeric, got bool"});
  ExpectError(RunOp("Mod", {F32({1}, {1}), F32({1}, {1})}), {"fmod=0", "integer", "f32"});
  ExpectError(RunOp("Mod", {I64({1}, {1}), I64({1}, {1})}, {{"fmod", 2}}), {"fmod must be 0 or 1"});
  ExpectError(RunOp("Pow", {F32({1}, {1}), Bool({1}, {1})}), {"input 1 must be numeric"});
}

// ---------------------------------------------------------------- unary math

TEST(ElementwiseUnaryTest, FloatMath) {
  ExpectFloats(RunOp("Sqrt", {F32({3}, {4, 2, 0})}), DType::kFloat32, {3}, {2, 1.4142135f, 0});
  ExpectFloats(RunOp("Exp", {F32({3}, {0, 1, -1})}), DType::kFloat32, {3}, {1, 2.7182818f, 0.3678794f});
  ExpectFloats(RunOp("Log", {F32({3}, {1, 10, 0})}), DType::kFloat32, {3}, {0, 2.3025851f, -kInf});
  ExpectFloats(RunOp("Reciprocal", {F32({2}, {4, -0.5})}), DType::kFloat32, {2}, {0.25, -2});
  ExpectFloats(RunOp("Erf", {F32({3}, {0, 0.5, -1})}), DType::kFloat32, {3}, {0, 0.5204999f, -0.8427008f});
  ExpectFloats(RunOp("Sqrt", {F16({2, 1}, {9, 0.25})}), DType::kFloat16, {2, 1}, {3, 0.5}, 1e-3f);
  ExpectFloats(RunOp("Exp", {BF16({1}, {2})}), DType::kBFloat16, {1}, {7.389056f}, 0.05f);
}

TEST(ElementwiseUnaryTest, NegAbsSignOnFloatsAndInts) {
  ExpectFloats(RunOp("Neg", {F32({2}, {1.5, -2})}), DType::kFloat32, {2}, {-1.5, 2});
  ExpectInts(RunOp("Neg", {I8({2}, {-5, 7})}), DType::kInt8, {2}, {5, -7});
  ExpectFloats(RunOp("Abs", {F32({3}, {-1.5, 0, 2})}), DType::kFloat32, {3}, {1.5, 0, 2});
  ExpectInts(RunOp("Abs", {I64({3}, {-3, 4, 0})}), DType::kInt64, {3}, {3, 4, 0});
  ExpectFloats(RunOp("Sign", {F32({4}, {-2, 0, 3, kNaN})}), DType::kFloat32, {4}, {-1, 0, 1, kNaN});
  ExpectInts(RunOp("Sign", {I32({3}, {-9, 0, 4})}), DType::kInt32, {3}, {-1, 0, 1});
  ExpectInts(RunOp("Erf", {I32({3}, {0, 1, 10})}), DType::kInt32, {3}, {0, 0, 1});
}

TEST(ElementwiseUnaryTest, FloorCeilRoundHalfToEven) {
  ExpectFloats(RunOp("Floor", {F32({3}, {-1.5, 1.5, 2})}), DType::kFloat32, {3}, {-2, 1, 2});
  ExpectFloats(RunOp("Ceil", {F32({3}, {-1.5, 1.5, 2})}), DType::kFloat32, {3}, {-1, 2, 2});
  ExpectFloats(RunOp("Round", {F32({10}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 3.5, 0.4999})}),
               DType::kFloat32, {10}, {0, 2, 2, 0, -2, -2, 2, -3, 4, 0}, 0.f);
  ExpectFloats(RunOp("Round", {F16({2}, {4.5, 5.5})}), DType::kFloat16, {2}, {4, 6}, 0.f);
}

TEST(ElementwiseUnaryTest, Errors) {
  ExpectError(RunOp("Sqrt", {I64({1}, {4})}), {"node 'node1' (Sqrt)", "must be f32, f16 or bf16", "i64"});
  ExpectError(RunOp("Round", {I32({1}, {4})}), {"must be f32, f16 or bf16", "i32"});
  ExpectError(RunOp("Neg", {U8({1}, {4})}), {"signed", "u8"});
  ExpectError(RunOp("Abs", {Bool({1}, {1})}), {"must be numeric, got bool"});
}

// ---------------------------------------------------------------- activations

TEST(ElementwiseActivationTest, SigmoidTanhSoftplusSoftsign) {
  ExpectFloats(RunOp("Sigmoid", {F32({4}, {0, 2, -2, -100})}), DType::kFloat32, {4},
               {0.5, 0.8807971f, 0.1192029f, 0});
  ExpectFloats(RunOp("Sigmoid", {F16({2}, {0, 2})}), DType::kFloat16, {2}, {0.5, 0.8807971f}, 1e-3f);
  ExpectFloats(RunOp("Tanh", {F32({3}, {0, 0.5, -1})}), DType::kFloat32, {3}, {0, 0.4621172f, -0.7615942f});
  ExpectFloats(RunOp("Softplus", {F32({5}, {0, 1, -1, 100, -100})}), DType::kFloat32, {5},
               {0.6931472f, 1.3132616f, 0.3132617f, 100, 0});
  ExpectFloats(RunOp("Softsign", {F32({3}, {1, -3, 0})}), DType::kFloat32, {3}, {0.5, -0.75, 0});
}

TEST(ElementwiseActivationTest, LeakyReluEluSelu) {
  ExpectFloats(RunOp("LeakyRelu", {F32({3}, {-10, 0, 3})}), DType::kFloat32, {3}, {-0.1f, 0, 3});
  ExpectFloats(RunOp("LeakyRelu", {F32({2}, {-2, 1})}, {{"alpha", 0.5f}}), DType::kFloat32, {2}, {-1, 1});
  ExpectFloats(RunOp("Elu", {F32({3}, {-1, 0, 3})}, {{"alpha", 2.f}}), DType::kFloat32, {3},
               {-1.2642411f, 0, 3});
  ExpectFloats(RunOp("Elu", {F32({1}, {-1})}), DType::kFloat32, {1}, {-0.6321206f});
  ExpectFloats(RunOp("Selu", {F32({3}, {-1, 0, 2})}), DType::kFloat32, {3}, {-1.1113307f, 0, 2.1014020f});
  ExpectFloats(RunOp("Selu", {F32({2}, {-1, 2})}, {{"alpha", 2.f}, {"gamma", 3.f}}), DType::kFloat32, {2},
               {-3.7927234f, 6});
}

TEST(ElementwiseActivationTest, HardSigmoidHardSwish) {
  ExpectFloats(RunOp("HardSigmoid", {F32({4}, {-3, 0, 1, 3})}), DType::kFloat32, {4}, {0, 0.5, 0.7f, 1});
  ExpectFloats(RunOp("HardSigmoid", {F32({1}, {0.5})}, {{"alpha", 0.5f}, {"beta", 0.6f}}),
               DType::kFloat32, {1}, {0.85f});
  ExpectFloats(RunOp("HardSwish", {F32({5}, {-4, -1, 0, 1, 4})}), DType::kFloat32, {5},
               {0, -0.3333333f, 0, 0.6666667f, 4});
}

TEST(ElementwiseActivationTest, GeluExactAndTanh) {
  ExpectFloats(RunOp("Gelu", {F32({4}, {1, -1, 2, 0})}), DType::kFloat32, {4},
               {0.8413447f, -0.1586553f, 1.9544997f, 0});
  ExpectFloats(RunOp("Gelu", {F32({3}, {1, -1, 2})}, {{"approximate", "tanh"}}), DType::kFloat32, {3},
               {0.8411920f, -0.1588080f, 1.9545977f});
  ExpectFloats(RunOp("Gelu", {BF16({2}, {1, -1})}), DType::kBFloat16, {2}, {0.8413447f, -0.1586553f}, 1e-2f);
}

TEST(ElementwiseActivationTest, PReluSlopeBroadcasts) {
  ExpectFloats(RunOp("PRelu", {F32({2, 3}, {-1, 2, -3, -4, 5, -6}), F32({3}, {0.1f, 0.2f, 0.3f})}),
               DType::kFloat32, {2, 3}, {-0.1f, 2, -0.9f, -0.4f, 5, -1.8f});
  // Per-channel slope [C,1,1] on NCHW.
  ExpectFloats(RunOp("PRelu", {F32({1, 2, 1, 2}, {-1, 1, -2, 2}), F32({2, 1, 1}, {0.5, 0.25})}, {}, 1),
               DType::kFloat32, {1, 2, 1, 2}, {-0.5, 1, -0.5, 2});
  ExpectInts(RunOp("PRelu", {I32({2}, {-4, 4}), I32({1}, {3})}), DType::kInt32, {2}, {-12, 4});
}

TEST(ElementwiseActivationTest, Errors) {
  ExpectError(RunOp("Gelu", {F32({1}, {1})}, {{"approximate", "fast"}}),
              {"node 'node1' (Gelu)", "approximate", "\"fast\""});
  ExpectError(RunOp("LeakyRelu", {F32({1}, {1})}, {{"alpha", "big"}}), {"alpha", "float"});
  ExpectError(RunOp("Sigmoid", {I32({1}, {1})}), {"must be f32, f16 or bf16", "i32"});
  ExpectError(RunOp("PRelu", {F32({3}, {1, 2, 3}), F32({2, 3}, std::vector<float>(6))}),
              {"slope of shape [2,3]", "input's shape [3]"});
  ExpectError(RunOp("PRelu", {F32({3}, {1, 2, 3}), F32({2}, {1, 2})}), {"cannot be broadcast"});
}

// ---------------------------------------------------------------- Clip

TEST(ElementwiseClipTest, BoundsAsComputedInputs) {
  // min/max are graph inputs, not constants.
  ExpectFloats(RunOp("Clip", {F32({5}, {-2, -0.5, 0, 0.5, 2}), F32({}, {-1}), F32({}, {1})}),
               DType::kFloat32, {5}, {-1, -0.5, 0, 0.5, 1});
  // Constant bounds of shape [1].
  ExpectFloats(RunOp("Clip", {F32({2, 2}, {-2, 0, 3, 6}), F32({1}, {0}), F32({1}, {5})}, {}, 1),
               DType::kFloat32, {2, 2}, {0, 0, 3, 5});
}

TEST(ElementwiseClipTest, AbsentBoundsDoNotClip) {
  ExpectFloats(RunOp("Clip", {F32({2}, {-5, 5}), Absent(), F32({}, {0})}), DType::kFloat32, {2}, {-5, 0});
  ExpectFloats(RunOp("Clip", {F32({2}, {-5, 5}), F32({}, {0})}), DType::kFloat32, {2}, {0, 5});
  ExpectFloats(RunOp("Clip", {F32({3}, {-1e30f, kNaN, 1e30f})}), DType::kFloat32, {3}, {-1e30f, kNaN, 1e30f},
               0.f);
}

TEST(ElementwiseClipTest, IntegersFloat16AndMinAboveMax) {
  ExpectInts(RunOp("Clip", {I8({5}, {-128, -5, 0, 5, 127}), I8({}, {-10}), I8({}, {10})}), DType::kInt8, {5},
             {-10, -5, 0, 5, 10});
  ExpectInts(RunOp("Clip", {I64({2}, {-7, 7}), Absent(), I64({}, {3})}), DType::kInt64, {2}, {-7, 3});
  ExpectFloats(RunOp("Clip", {F16({3}, {-3, 0.25, 3}), F16({}, {0}), F16({}, {1})}), DType::kFloat16, {3},
               {0, 0.25, 1}, 1e-3f);
  // min > max: everything becomes max.
  ExpectFloats(RunOp("Clip", {F32({3}, {-1, 1.5, 9}), F32({}, {2}), F32({}, {1})}), DType::kFloat32, {3},
               {1, 1, 1});
}

TEST(ElementwiseClipTest, Errors) {
  ExpectError(RunOp("Clip", {F32({2}, {1, 2}), F32({2}, {0, 0})}),
              {"node 'node1' (Clip)", "'min' must be a scalar", "[2]"});
  ExpectError(RunOp("Clip", {F32({2}, {1, 2}), Absent(), I64({}, {1})}), {"'max'", "f32", "i64"});
  ExpectError(RunOp("Clip", {Bool({1}, {1})}), {"must be numeric"});
}

// ---------------------------------------------------------------- comparisons

TEST(ElementwiseCompareTest, FloatBroadcast) {
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor y = F32({3}, {2, 5, 1});
  ExpectInts(RunOp("Equal", {x, y}), DType::kBool, {2, 3}, {0, 0, 0, 0, 1, 0});
  ExpectInts(RunOp("Greater", {x, y}), DType::kBool, {2, 3}, {0, 0, 1, 1, 0, 1});
  ExpectInts(RunOp("Less", {x, y}), DType::kBool, {2, 3}, {1, 1, 0, 0, 0, 0});
  ExpectInts(RunOp("GreaterOrEqual", {x, y}), DType::kBool, {2, 3}, {0, 0, 1, 1, 1, 1});
  ExpectInts(RunOp("LessOrEqual", {x, y}), DType::kBool, {2, 3}, {1, 1, 0, 0, 1, 0});
  ExpectInts(RunOp("Equal", {F32({2}, {kNaN, 1}), F32({2}, {kNaN, 1})}), DType::kBool, {2}, {0, 1});
}

TEST(ElementwiseCompareTest, IntegersExactBoolAndHalf) {
  const int64_t big = (int64_t{1} << 53) + 1;
  ExpectInts(RunOp("Equal", {I64({2}, {big, 3}), I64({2}, {big - 1, 3})}), DType::kBool, {2}, {0, 1});
  ExpectInts(RunOp("Greater", {I64({1}, {big}), I64({1}, {big - 1})}), DType::kBool, {1}, {1});
  ExpectInts(RunOp("Equal", {Bool({2, 2}, {1, 0, 1, 0}), Bool({2}, {1, 1})}), DType::kBool, {2, 2},
             {1, 0, 1, 0});
  ExpectInts(RunOp("LessOrEqual", {F16({3}, {0.5, 1, 2}), F16({}, {1})}), DType::kBool, {3}, {1, 1, 0});
}

TEST(ElementwiseCompareTest, Errors) {
  ExpectError(RunOp("Greater", {Bool({1}, {1}), Bool({1}, {0})}), {"node 'node1' (Greater)", "numeric"});
  ExpectError(RunOp("Equal", {F32({1}, {1}), F16({1}, {1})}), {"share a dtype", "f32", "f16"});
  ExpectError(RunOp("Less", {F32({3}, {1, 2, 3}), F32({2}, {1, 2})}), {"[3] and [2]"});
}

// ---------------------------------------------------------------- logical

TEST(ElementwiseLogicTest, AndOrXorNotBroadcast) {
  const Tensor a = Bool({2, 2}, {1, 1, 0, 0});
  const Tensor b = Bool({2}, {1, 0});
  ExpectInts(RunOp("And", {a, b}), DType::kBool, {2, 2}, {1, 0, 0, 0});
  ExpectInts(RunOp("Or", {a, b}), DType::kBool, {2, 2}, {1, 1, 1, 0});
  ExpectInts(RunOp("Xor", {a, b}), DType::kBool, {2, 2}, {0, 1, 1, 0});
  ExpectInts(RunOp("Not", {Bool({3}, {1, 0, 1})}), DType::kBool, {3}, {0, 1, 0});
  ExpectInts(RunOp("Xor", {Bool({2, 1}, {1, 0}), Bool({1, 3}, {1, 0, 1})}), DType::kBool, {2, 3},
             {0, 1, 0, 1, 0, 1});
}

TEST(ElementwiseLogicTest, Errors) {
  ExpectError(RunOp("And", {F32({1}, {1}), Bool({1}, {1})}), {"node 'node1' (And)", "input 0 must be bool", "f32"});
  ExpectError(RunOp("Or", {Bool({1}, {1}), I64({1}, {1})}), {"input 1 must be bool", "i64"});
  ExpectError(RunOp("Not", {U8({1}, {1})}), {"must be bool", "u8"});
}

// ---------------------------------------------------------------- IsNaN / IsInf

TEST(ElementwiseIsNaNIsInfTest, Values) {
  const Tensor x = F32({5}, {1, kNaN, kInf, -kInf, 0});
  ExpectInts(RunOp("IsNaN", {x}), DType::kBool, {5}, {0, 1, 0, 0, 0});
  ExpectInts(RunOp("IsInf", {x}), DType::kBool, {5}, {0, 0, 1, 1, 0});
  ExpectInts(RunOp("IsInf", {x}, {{"detect_negative", 0}}), DType::kBool, {5}, {0, 0, 1, 0, 0});
  ExpectInts(RunOp("IsInf", {x}, {{"detect_positive", 0}}), DType::kBool, {5}, {0, 0, 0, 1, 0});
  ExpectInts(RunOp("IsNaN", {F16({2}, {kNaN, 65504})}), DType::kBool, {2}, {1, 0});
  ExpectInts(RunOp("IsInf", {BF16({2}, {kInf, 1e38f})}), DType::kBool, {2}, {1, 0});
}

TEST(ElementwiseIsNaNIsInfTest, Errors) {
  ExpectError(RunOp("IsNaN", {I32({1}, {1})}), {"node 'node1' (IsNaN)", "must be f32, f16 or bf16"});
  ExpectError(RunOp("IsInf", {F32({1}, {1})}, {{"detect_negative", 0.5f}}), {"detect_negative", "int"});
}

// ---------------------------------------------------------------- variadic

TEST(ElementwiseVariadicTest, SumOneAndThreeInputs) {
  ExpectFloats(RunOp("Sum", {F32({3}, {1, 2, 3})}), DType::kFloat32, {3}, {1, 2, 3});
  ExpectFloats(RunOp("Sum", {F32({2, 1}, {1, 2}), F32({3}, {10, 20, 30}), F32({}, {100})}), DType::kFloat32,
               {2, 3}, {111, 121, 131, 112, 122, 132});
  ExpectInts(RunOp("Sum", {I32({2}, {1, 2}), I32({2}, {3, 4}), I32({1}, {-10})}), DType::kInt32, {2}, {-6, -4});
}

TEST(ElementwiseVariadicTest, MaxMinPropagateNaN) {
  ExpectFloats(RunOp("Max", {F32({3}, {1, kNaN, 5}), F32({3}, {2, 2, kNaN})}), DType::kFloat32, {3},
               {2, kNaN, kNaN});
  ExpectFloats(RunOp("Min", {F32({3}, {1, kNaN, 5}), F32({3}, {2, 2, kNaN})}), DType::kFloat32, {3},
               {1, kNaN, kNaN});
  ExpectInts(RunOp("Min", {I32({3}, {3, -1, 7}), I32({3}, {0, 0, 0}), I32({1}, {5})}), DType::kInt32, {3},
             {0, -1, 0});
  ExpectInts(RunOp("Max", {U8({2, 1}, {3, 250}), U8({2}, {7, 1})}), DType::kUInt8, {2, 2}, {7, 3, 250, 250});
  ExpectFloats(RunOp("Max", {F16({2}, {-1, 0.5})}), DType::kFloat16, {2}, {-1, 0.5}, 0.f);
}

TEST(ElementwiseVariadicTest, MeanFloat16) {
  ExpectFloats(RunOp("Mean", {F16({2}, {1, 2}), F16({2}, {3, 4}), F16({2}, {5, 9})}), DType::kFloat16, {2},
               {3, 5}, 1e-3f);
  ExpectFloats(RunOp("Mean", {F32({2, 2}, {1, 2, 3, 4}), F32({2}, {3, 4})}), DType::kFloat32, {2, 2},
               {2, 3, 3, 4});
  ExpectFloats(RunOp("Mean", {F32({1}, {7})}), DType::kFloat32, {1}, {7});
}

TEST(ElementwiseVariadicTest, Errors) {
  ExpectError(RunOp("Mean", {I64({1}, {1}), I64({1}, {2})}), {"node 'node1' (Mean)", "must be f32, f16 or bf16"});
  ExpectError(RunOp("Sum", {F32({1}, {1}), F32({1}, {1}), F16({1}, {1})}), {"share a dtype", "f16"});
  ExpectError(RunOp("Max", {F32({2}, {1, 1}), F32({1}, {1}), F32({3}, {1, 1, 1})}), {"cannot be broadcast"});
  ExpectError(RunOp("Min", {Bool({1}, {1})}), {"must be numeric"});
}

// ---------------------------------------------------------------- Where

TEST(ElementwiseWhereTest, ThreeWayBroadcastKeepsInt64Exact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  ExpectInts(RunOp("Where", {Bool({2, 1}, {1, 0}), I64({1, 3}, {big, 5, 6}), I64({}, {-1})}), DType::kInt64,
             {2, 3}, {big, 5, 6, -1, -1, -1});
  ExpectFloats(RunOp("Where", {Bool({3}, {1, 0, 1}), F32({2, 1}, {1, 2}), F32({2, 3}, {7, 8, 9, 10, 11, 12})}),
               DType::kFloat32, {2, 3}, {1, 8, 1, 2, 11, 2});
  ExpectFloats(RunOp("Where", {Bool({2}, {0, 1}), F16({2}, {0.5, 1.5}), F16({2}, {-2, -3})}), DType::kFloat16,
               {2}, {-2, 1.5}, 0.f);
  ExpectInts(RunOp("Where", {Bool({2}, {0, 1}), Bool({2}, {1, 0}), Bool({}, {1})}), DType::kBool, {2}, {1, 0});
}

TEST(ElementwiseWhereTest, Errors) {
  ExpectError(RunOp("Where", {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})}),
              {"node 'node1' (Where)", "condition must be bool, got f32"});
  ExpectError(RunOp("Where", {Bool({1}, {1}), F32({1}, {1}), I64({1}, {1})}), {"X and Y", "f32", "i64"});
  ExpectError(RunOp("Where", {Bool({2}, {1, 1}), F32({3}, {1, 1, 1}), F32({1}, {1})}), {"cannot be broadcast"});
}

}  // namespace
}  // namespace kiln
