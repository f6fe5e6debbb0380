// Tests for LowerPrecision: text graph in, expected text out; numerics of lowered
// graphs against their f32 originals on the CPU reference; every op of the model
// zoo evaluated in f16 and bf16 storage.
#include "graph/lower_precision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
#include "graph/pass_test_util.h"
#include "graph/text_format.h"
#include "graph/verifier.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectVerifies;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;

// Parses `in`, lowers it to `storage`, checks it fired and returns the text.
std::string Lower(absl::string_view in, DType storage = DType::kFloat16) {
  std::unique_ptr<Graph> g = MustParse(in);
  auto changed = LowerPrecision(storage).Run(*g);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed.ok() && *changed);
  ExpectVerifies(*g);
  return Print(*g);
}

TEST(LowerPrecisionTest, LowersWeightsAndActivationsKeepsBoundary) {
  const std::string out = Lower(R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[3,2] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
  const %b : f32[2] = splat(0.5)
  %m = MatMul(%x, %w)
  %a = Add(%m, %b)
  %y = Relu(%a)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  const %w : f16[3,2] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
  const %b : f16[2] = splat(0.5)
  %x_f16 : f16[2,3] = Cast(%x) {to = 10}
  %m : f16[2,2] = MatMul(%x_f16, %w)
  %a : f16[2,2] = Add(%m, %b)
  %y_f16 : f16[2,2] = Relu(%a)
  %y : f32[2,2] = Cast(%y_f16) {to = 1}
  output %y
}
)");
}

TEST(LowerPrecisionTest, BFloat16RoundsConstantsToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: it rounds to the even one (1.0);
  // 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  const std::string out = Lower(R"(
graph @main {
  input %x : f32[2]
  const %c : f32[2] = [1.00390625, 1.01171875]
  %y = Mul(%x, %c)
  output %y
}
)",
                                DType::kBFloat16);
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2]
  const %c : bf16[2] = [1.0, 1.016]
  %x_bf16 : bf16[2] = Cast(%x) {to = 16}
  %y_bf16 : bf16[2] = Mul(%x_bf16, %c)
  %y : f32[2] = Cast(%y_bf16) {to = 1}
  output %y
}
)");
}

TEST(LowerPrecisionTest, OutputAlsoReadInsideReadsStorageValue) {
  const std::string out = Lower(R"(
graph @main {
  input %x : f32[4]
  %r = Relu(%x)
  %t = Tanh(%r)
  output %r
  output %t
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[4]
  %x_f16 : f16[4] = Cast(%x) {to = 10}
  %r_f16 : f16[4] = Relu(%x_f16)
  %r : f32[4] = Cast(%r_f16) {to = 1}
  %t_f16 : f16[4] = Tanh(%r_f16)
  %t : f32[4] = Cast(%t_f16) {to = 1}
  output %r
  output %t
}
)");
}

TEST(LowerPrecisionTest, RewritesDtypeAttributes) {
  const std::string out = Lower(R"(
graph @main {
  input %i : i64[3]
  const %shape : i64[1] = [3]
  %f = Cast(%i) {to = 1}
  %z = ConstantOfShape(%shape)
  %o = ConstantOfShape(%shape) {value = tensor<f32[1]> [1.5]}
  %k = Constant() {value_float = 0.25}
  %s = Sum(%f, %z, %o, %k)
  output %s
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %i : i64[3]
  const %shape : i64[1] = [3]
  %f : f16[3] = Cast(%i) {to = 10}
  %z : f16[3] = ConstantOfShape(%shape) {value = tensor<f16[1]> [0.0]}
  %o : f16[3] = ConstantOfShape(%shape) {value = tensor<f16[1]> [1.5]}
  %k : f16[] = Constant() {value = tensor<f16[]> [0.25]}
  %s_f16 : f16[3] = Sum(%f, %z, %o, %k)
  %s : f32[3] = Cast(%s_f16) {to = 1}
  output %s
}
)");
}

TEST(LowerPrecisionTest, KeepsFloat32WhereTheSpecTypesInputsApart) {
  // Resize scales and the Pow exponent stay f32; a constant also read as data gets
  // a lowered twin; a computed value read by a kept input is cast back to f32; a
  // Cast to FLOAT read only by kept inputs stays FLOAT.
  const std::string out = Lower(R"(
graph @main {
  input %x : f32[1,1,2,2]
  input %i : i64[]
  const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]
  const %e : f32[] = [2.0]
  %r = Resize(%x, _, %scales) {mode = "nearest"}
  %p = Pow(%r, %e)
  %q = Add(%p, %e)
  %n = Neg(%x)
  %p2 = Pow(%x, %n)
  %fs = Cast(%i) {to = 1}
  %p3 = Pow(%x, %fs)
  output %q, %p2, %p3
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[1,1,2,2]
  input %i : i64[]
  const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]
  const %e : f32[] = [2.0]
  const %e_f16 : f16[] = [2.0]
  %x_f16 : f16[1,1,2,2] = Cast(%x) {to = 10}
  %r : f16[1,1,4,4] = Resize(%x_f16, _, %scales) {mode = "nearest"}
  %p : f16[1,1,4,4] = Pow(%r, %e)
  %q_f16 : f16[1,1,4,4] = Add(%p, %e_f16)
  %q : f32[1,1,4,4] = Cast(%q_f16) {to = 1}
  %n : f16[1,1,2,2] = Neg(%x_f16)
  %n_f32 : f32[1,1,2,2] = Cast(%n) {to = 1}
  %p2_f16 : f16[1,1,2,2] = Pow(%x_f16, %n_f32)
  %p2 : f32[1,1,2,2] = Cast(%p2_f16) {to = 1}
  %fs : f32[] = Cast(%i) {to = 1}
  %p3_f16 : f16[1,1,2,2] = Pow(%x_f16, %fs)
  %p3 : f32[1,1,2,2] = Cast(%p3_f16) {to = 1}
  output %q
  output %p2
  output %p3
}
)");
}

TEST(LowerPrecisionTest, DoesNotFireWithoutFloat32OrWithFloat32Storage) {
  const char* kInts = R"(
graph @main {
  input %i : i64[3]
  const %c : i64[3] = [1, 2, 3]
  %s = Add(%i, %c)
  %h = Cast(%s) {to = 10}
  %r = Relu(%h)
  output %r
}
)";
  std::unique_ptr<Graph> g = MustParse(kInts);
  const std::string before = Print(*g);
  for (DType storage : {DType::kFloat16, DType::kBFloat16}) {
    auto changed = LowerPrecision(storage).Run(*g);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_FALSE(*changed);
    EXPECT_EQ(Print(*g), before);
  }
  std::unique_ptr<Graph> f = MustParse(R"(
graph @main {
  input %x : f32[2]
  %y = Relu(%x)
  output %y
}
)");
  const std::string f_before = Print(*f);
  auto changed = LowerPrecision(DType::kFloat32).Run(*f);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*f), f_before);
  EXPECT_FALSE(LowerPrecision(DType::kInt64).Run(*f).ok());
}

// T5's relative-position buckets as the legacy exporter writes them (cut from
// t5_encoder.legacy in the zoo): |i - j| cast to float, divided by max_exact, its log
// divided by log(max_distance / max_exact), scaled by the bucket count and cast back to
// an index. That chain stays f32 (rounded to f16 at each step the bucket of a
// distance can move by one); the float chain that is not cast to an index (the scores'
// scale) is lowered.
TEST(LowerPrecisionTest, IndexArithmeticStaysF32) {
  constexpr char kText[] = R"(
graph @main {
  input %dist : i64[8,16]
  input %scores : f32[8,8]
  const %max_exact : f32[] = [8.0]
  const %log_ratio : f32[] = [2.7725887]
  const %buckets : f32[] = [8.0]
  const %scale : f32[] = [0.125]
  %f = Cast(%dist) {to = 1} @Cast_3
  %d = Div(%f, %max_exact) @Div
  %l = Log(%d) @Log
  %d1 = Div(%l, %log_ratio) @Div_1
  %m = Mul(%d1, %buckets) @Mul_1
  %bucket = Cast(%m) {to = 7} @Cast_4
  %s = Mul(%scores, %scale) @scale
  %r = Relu(%s) @relu
  output %bucket
  output %r
}
)";
  std::unique_ptr<Graph> g = MustParse(kText);
  const absl::flat_hash_set<std::string> index = IndexArithmeticNodes(*g);
  EXPECT_EQ(index, (absl::flat_hash_set<std::string>{"Cast_3", "Div", "Log", "Div_1", "Mul_1"}));
  auto changed = LowerPrecision(DType::kFloat16).Run(*g);
  ASSERT_TRUE(changed.ok() && *changed) << changed.status();
  ExpectVerifies(*g);
  for (const char* v : {"f", "d", "l", "d1", "m"}) EXPECT_EQ(g->FindValue(v)->dtype(), DType::kFloat32) << v;
  EXPECT_EQ(g->FindValue("s")->dtype(), DType::kFloat16);

  // Every distance gets the bucket the f32 graph gives it.
  std::unique_ptr<Graph> reference = MustParse(kText);
  std::vector<int64_t> dist(128);
  for (size_t i = 0; i < dist.size(); ++i) dist[i] = static_cast<int64_t>(i + 1);  // T5's distances 1..128
  TensorMap feeds{{"dist", Tensor::FromInt64(DType::kInt64, {8, 16}, dist)},
                  {"scores", Tensor::FromFloat(DType::kFloat32, {8, 8}, std::vector<float>(64, 1.f))}};
  auto want = EvaluateGraph(*reference, feeds);
  auto got = EvaluateGraph(*g, feeds);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  EXPECT_EQ((*got)[0].ToInt64(), (*want)[0].ToInt64());
}

TEST(LowerPrecisionTest, InputPassedThroughToOutputStaysF32) {
  const std::string out = Lower(R"(
graph @main {
  input %x : f32[2]
  %y = Sqrt(%x)
  output %x
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2]
  %x_f16 : f16[2] = Cast(%x) {to = 10}
  %y_f16 : f16[2] = Sqrt(%x_f16)
  %y : f32[2] = Cast(%y_f16) {to = 1}
  output %x
  output %y
}
)");
}

// ---- Numerics ----------------------------------------------------------------

struct Tolerance {
  float atol, rtol;
};
// fp16 keeps 11 significant bits (unit roundoff 2^-11 ~ 4.9e-4), bf16 8 (2^-8 ~
// 3.9e-3); each stored intermediate adds about one rounding, so a handful of
// chained ops stays within ~10 roundings.
Tolerance ToleranceFor(DType storage) {
  return storage == DType::kFloat16 ? Tolerance{5e-3f, 5e-3f} : Tolerance{4e-2f, 4e-2f};
}

// Fills every f32 splat constant with more than one element with uniform values in
// [lo, hi) (seeded by its name): text graphs write splat(0.0) for random weights.
void RandomizeConstants(Graph& g, float lo, float hi) {
  for (Value* c : g.constants()) {
    if (c->dtype() != DType::kFloat32 || c->numel() <= 1) continue;
    const std::vector<float> old = c->constant().ToFloat();
    if (std::any_of(old.begin(), old.end(), [&](float v) { return v != old[0]; })) continue;
    std::mt19937 gen(static_cast<uint32_t>(std::hash<std::string>()(c->name())));
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(c->numel());
    for (float& x : v) x = dist(gen);
    g.SetConstant(c, Tensor::FromFloat(DType::kFloat32, c->shape(), v));
  }
}

TensorMap RandomFeeds(const Graph& g, float lo, float hi) {
  TensorMap feeds;
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (const Value* x : g.inputs()) {
    std::vector<float> v(x->numel());
    for (float& e : v) e = dist(gen);
    feeds[x->name()] = Tensor::FromFloat(x->dtype(), x->shape(), v);
  }
  return feeds;
}

// Evaluates `text` in f32 and lowered to `storage`, and compares the outputs.
void ExpectLoweredMatches(const std::string& text, DType storage, float input_lo = -1.f, float input_hi = 1.f,
                          float const_lo = -1.f, float const_hi = 1.f) {
  SCOPED_TRACE(absl::StrCat(DTypeName(storage), "\n", text));
  std::unique_ptr<Graph> g = MustParse(text);
  RandomizeConstants(*g, const_lo, const_hi);
  const TensorMap feeds = RandomFeeds(*g, input_lo, input_hi);
  auto ref = EvaluateGraph(*g, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto changed = LowerPrecision(storage).Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  auto got = EvaluateGraph(*g, feeds);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), ref->size());
  const Tolerance tol = ToleranceFor(storage);
  for (size_t o = 0; o < ref->size(); ++o) {
    const Tensor& r = (*ref)[o];
    const Tensor& l = (*got)[o];
    ASSERT_EQ(l.dtype(), r.dtype()) << "output " << o << " must keep its dtype at the boundary";
    ASSERT_EQ(l.shape(), r.shape());
    if (!IsFloating(r.dtype())) {
      EXPECT_EQ(l.ToInt64(), r.ToInt64());
      continue;
    }
    const std::vector<float> rv = r.ToFloat(), lv = l.ToFloat();
    float max_err = 0.f;
    int bad = 0;
    for (size_t i = 0; i < rv.size(); ++i) {
      if (std::isnan(rv[i]) && std::isnan(lv[i])) continue;
      const float err = std::fabs(rv[i] - lv[i]);
      max_err = std::max(max_err, err);
      if (!(err <= tol.atol + tol.rtol * std::fabs(rv[i]))) ++bad;
    }
    EXPECT_EQ(bad, 0) << "output " << o << ": max abs error " << max_err;
  }
}

class LowerPrecisionNumericTest : public ::testing::TestWithParam<DType> {};

TEST_P(LowerPrecisionNumericTest, MatMulAddReluSoftmax) {
  ExpectLoweredMatches(R"(
graph @main {
  input %x : f32[4,16]
  const %w : f32[16,8] = splat(0.0)
  const %b : f32[8] = splat(0.0)
  %m = MatMul(%x, %w)
  %a = Add(%m, %b)
  %r = Relu(%a)
  %y = Softmax(%r) {axis = -1}
  output %y
}
)",
                       GetParam(), -1.f, 1.f, -0.5f, 0.5f);
}

TEST_P(LowerPrecisionNumericTest, ConvBatchNorm) {
  ExpectLoweredMatches(R"(
graph @main {
  input %x : f32[1,3,8,8]
  const %w : f32[4,3,3,3] = splat(0.0)
  const %cb : f32[4] = splat(0.0)
  const %scale : f32[4] = [1.0, 0.5, 2.0, 1.5]
  const %bias : f32[4] = [0.1, -0.2, 0.3, 0.0]
  const %mean : f32[4] = [0.0, 0.1, -0.1, 0.2]
  const %var : f32[4] = [1.0, 0.5, 2.0, 0.25]
  %c = Conv(%x, %w, %cb) {pads = [1, 1, 1, 1]}
  %y = BatchNormalization(%c, %scale, %bias, %mean, %var) {epsilon = 1e-05}
  output %y
}
)",
                       GetParam(), -1.f, 1.f, -0.3f, 0.3f);
}

// Every op of the models kiln is tested on, run in f16 and bf16 storage (the CPU
// reference must accept them: fp32 math, result rounded to the storage type).
struct OpCase {
  const char* name;
  const char* text;
  float lo = -1.f, hi = 1.f;  // input range
};

const OpCase kOpCases[] = {
    {"Conv", R"(graph {
  input %x : f32[1,2,5,5]
  const %w : f32[3,2,3,3] = splat(0.0)
  const %b : f32[3] = splat(0.0)
  %y = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2]}
  output %y })"},
    {"ReluAddMulSubDiv", R"(graph {
  input %x : f32[2,3]
  input %z : f32[3]
  const %c : f32[3] = [2.0, 3.0, 4.0]
  %r = Relu(%x)
  %a = Add(%r, %z)
  %m = Mul(%a, %x)
  %s = Sub(%m, %z)
  %y = Div(%s, %c)
  output %y })"},
    {"BatchNormalization", R"(graph {
  input %x : f32[2,3,2,2]
  const %s : f32[3] = [1.0, 2.0, 0.5]
  const %b : f32[3] = [0.0, 0.5, -0.5]
  const %m : f32[3] = [0.1, 0.0, -0.1]
  const %v : f32[3] = [1.0, 0.5, 2.0]
  %y = BatchNormalization(%x, %s, %b, %m, %v)
  output %y })"},
    {"ConcatReshapeTransposeFlatten", R"(graph {
  input %a : f32[2,3]
  input %b : f32[2,1]
  const %shape : i64[2] = [4, 2]
  %c = Concat(%a, %b) {axis = 1}
  %r = Reshape(%c, %shape)
  %t = Transpose(%r) {perm = [1, 0]}
  %y = Flatten(%t) {axis = 1}
  output %y })"},
    {"MaxPoolAveragePoolGlobalAveragePool", R"(graph {
  input %x : f32[1,2,6,6]
  %m = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}
  %a = AveragePool(%x) {kernel_shape = [2, 2], strides = [2, 2]}
  %g = GlobalAveragePool(%x)
  output %m, %a, %g })"},
    {"MatMulGemmSum", R"(graph {
  input %x : f32[3,4]
  const %w : f32[4,5] = splat(0.0)
  const %wt : f32[5,4] = splat(0.0)
  const %c : f32[5] = splat(0.0)
  %m = MatMul(%x, %w)
  %g = Gemm(%x, %wt, %c) {alpha = 0.5, beta = 2.0, transB = 1}
  %y = Sum(%m, %g, %c)
  output %y })"},
    {"SoftmaxLayerNormalization", R"(graph {
  input %x : f32[2,3,8]
  const %s : f32[8] = splat(0.0)
  const %b : f32[8] = splat(0.0)
  %sm = Softmax(%x) {axis = -1}
  %ln = LayerNormalization(%x, %s, %b) {axis = -1, epsilon = 1e-05}
  output %sm, %ln })"},
    {"LayerNormalizationWithStats", R"(graph {
  input %x : f32[2,8]
  const %s : f32[8] = splat(0.0)
  %ln, %mean, %inv = LayerNormalization(%x, %s) {axis = 1}
  output %ln, %mean, %inv })"},
    {"LRNDropout", R"(graph {
  input %x : f32[1,5,3,3]
  %l = LRN(%x) {size = 3, alpha = 0.0001, beta = 0.75, bias = 1.0}
  %d = Dropout(%l)
  output %d })"},
    {"DropoutWithRatio", R"(graph {
  input %x : f32[2,3]
  const %ratio : f32[] = [0.1]
  %d = Dropout(%x, %ratio)
  output %d })"},
    {"ErfTanhWhere", R"(graph {
  input %x : f32[2,4]
  input %z : f32[2,4]
  const %zero : f32[] = [0.0]
  %e = Erf(%x)
  %t = Tanh(%z)
  %cond = Greater(%x, %zero)
  %y = Where(%cond, %e, %t)
  output %y })"},
    {"SplitGather", R"(graph {
  input %x : f32[4,6]
  const %idx : i64[3] = [2, 0, 3]
  const %sizes : i64[2] = [2, 4]
  %a, %b = Split(%x, %sizes) {axis = 1}
  %g = Gather(%b, %idx) {axis = 0}
  output %a, %g })"},
    {"PowSqrtReduceMean", R"(graph {
  input %x : f32[2,3,4]
  const %two : f32[] = [2.0]
  %p = Pow(%x, %two)
  %m = ReduceMean(%p) {axes = [-1], keepdims = 1}
  %s = Sqrt(%m)
  output %s })",
     0.1f, 2.f},
    {"CastRoundTrip", R"(graph {
  input %x : f32[5]
  %i = Cast(%x) {to = 7}
  %f = Cast(%i) {to = 1}
  %h = Cast(%x) {to = 10}
  %g = Cast(%h) {to = 1}
  %y = Add(%f, %g)
  output %y })",
     2.1f, 2.9f},
};

TEST_P(LowerPrecisionNumericTest, OpsOfTheModelZoo) {
  for (const OpCase& c : kOpCases) {
    SCOPED_TRACE(c.name);
    ExpectLoweredMatches(c.text, GetParam(), c.lo, c.hi, 0.5f, 1.5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Storage, LowerPrecisionNumericTest,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Values beyond fp16's range on the calibration input put their readers and writers
// in f32 islands; the lowered graph then computes what the f32 graph does.
TEST(LowerPrecisionTest, Float32IslandsFromCalibration) {
  const char* kText = R"(
graph @main {
  input %x : f32[4]
  const %big : f32[] = [1000.0]
  const %w : f32[4] = splat(0.5)
  %a = Mul(%x, %w)
  %m = Mul(%a, %big)
  %r = Relu(%m)
  %y = Div(%r, %big)
  %z = Add(%y, %a)
  output %z
}
)";
  std::unique_ptr<Graph> g = MustParse(kText);
  std::unique_ptr<Graph> original = MustParse(kText);
  TensorMap feeds{{"x", Tensor::FromFloat(DType::kFloat32, {4}, {-300.f, 100.f, 200.f, 300.f})}};
  auto islands = NodesOutsideRange(*g, feeds, 16384.f);
  ASSERT_TRUE(islands.ok()) << islands.status();
  EXPECT_EQ(islands->size(), 3u);  // the second Mul writes 1.5e5; Relu; Div reads it
  auto changed = LowerPrecision(DType::kFloat16, *islands).Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ExpectVerifies(*g);
  EXPECT_EQ(Print(*g), R"(graph @main {
  input %x : f32[4]
  const %big : f32[] = [1000.0]
  const %w : f16[4] = splat(0.5)
  %x_f16 : f16[4] = Cast(%x) {to = 10}
  %a : f16[4] = Mul(%x_f16, %w)
  %a_f32 : f32[4] = Cast(%a) {to = 1}
  %m : f32[4] = Mul(%a_f32, %big)
  %r : f32[4] = Relu(%m)
  %y : f32[4] = Div(%r, %big)
  %y_f16 : f16[4] = Cast(%y) {to = 10}
  %z_f16 : f16[4] = Add(%y_f16, %a)
  %z : f32[4] = Cast(%z_f16) {to = 1}
  output %z
}
)");
  auto lowered = EvaluateGraph(*g, feeds);
  auto reference = EvaluateGraph(*original, feeds);
  ASSERT_TRUE(lowered.ok() && reference.ok());
  const std::vector<float> a = (*lowered)[0].ToFloat(), b = (*reference)[0].ToFloat();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3 * std::fabs(b[i]) + 1e-3) << i;
  // Without the islands the same graph overflows fp16.
  std::unique_ptr<Graph> plain = MustParse(kText);
  ASSERT_TRUE(LowerPrecision(DType::kFloat16).Run(*plain).ok());
  auto overflowed = EvaluateGraph(*plain, feeds);
  ASSERT_TRUE(overflowed.ok());
  EXPECT_FALSE(std::isfinite((*overflowed)[0].ToFloat()[3]));
}

}  // namespace
}  // namespace kiln
