// Tests for the NN ops MatMul, Gemm and Conv and the internal fp32 GEMM (pooling,
// normalization, softmax and reductions: nn_pool_norm_test.cc).
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/cpu_gemm.h"
#include "graph/ops/data_movement.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

// ---------------------------------------------------------------------------
// Reference implementations for randomized comparisons.

std::vector<float> NaiveMatMul(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                               int64_t k) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
  }
  return c;
}

struct ConvSpec {
  int64_t n, c, h, w, m, kh, kw, group;
  int64_t sh, sw, dh, dw, pt, pl, pb, pr;
};

// Direct 2-D convolution from the definition.
std::vector<float> NaiveConv(const ConvSpec& s, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& bias, int64_t* oh_out, int64_t* ow_out) {
  const int64_t oh = (s.h + s.pt + s.pb - ((s.kh - 1) * s.dh + 1)) / s.sh + 1;
  const int64_t ow = (s.w + s.pl + s.pr - ((s.kw - 1) * s.dw + 1)) / s.sw + 1;
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  std::vector<float> y(s.n * s.m * oh * ow);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t m = 0; m < s.m; ++m) {
      const int64_t g = m / mg;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias.empty() ? 0.0 : bias[m];
          for (int64_t c = 0; c < cg; ++c) {
            for (int64_t u = 0; u < s.kh; ++u) {
              for (int64_t v = 0; v < s.kw; ++v) {
                const int64_t ih = i * s.sh - s.pt + u * s.dh, iw = j * s.sw - s.pl + v * s.dw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += static_cast<double>(x[((n * s.c + g * cg + c) * s.h + ih) * s.w + iw]) *
                       w[((m * cg + c) * s.kh + u) * s.kw + v];
              }
            }
          }
          y[((n * s.m + m) * oh + i) * ow + j] = static_cast<float>(acc);
        }
      }
    }
  }
  *oh_out = oh;
  *ow_out = ow;
  return y;
}

// ---------------------------------------------------------------------------
// Internal GEMM.

// Runs `body` once per micro-kernel this CPU supports, then restores the default.
template <typename Fn>
void ForEachKernel(Fn body) {
  for (const char* name : {"generic", "avx2", "avx512"}) {
    if (!ops::cpu::UseGemmKernel(name)) continue;
    SCOPED_TRACE(name);
    body();
  }
  ASSERT_TRUE(ops::cpu::UseGemmKernel(""));
}

TEST(NnGemmKernelTest, MatchesNaiveOnOddShapesAndLayouts) {
  ForEachKernel([] {
    struct Case {
      int64_t m, n, k;
      bool ta, tb;
      float alpha, beta;
    };
    const std::vector<Case> cases = {
        {1, 1, 1, false, false, 1.f, 0.f},      {7, 13, 5, false, false, 1.f, 0.f},
        {67, 131, 300, false, false, 1.f, 0.f}, {67, 131, 300, true, true, 0.5f, 0.f},
        {150, 33, 530, true, false, 1.f, 1.f},  {40, 600, 17, false, true, -2.f, 0.5f},
        {1, 300, 257, false, false, 1.f, 0.f},  {1, 300, 257, false, true, 1.f, 2.f},
        {2, 70, 9, true, true, 1.f, 0.f},       {300, 1, 64, false, false, 1.f, 0.f},
        {300, 2, 64, true, true, 3.f, -1.f},    {5, 9, 0, false, false, 1.f, 0.5f},
    };
    uint32_t seed = 1;
    for (const Case& t : cases) {
      SCOPED_TRACE(testing::Message() << t.m << "x" << t.n << "x" << t.k << " ta=" << t.ta << " tb=" << t.tb);
      const std::vector<float> a = Random(t.m * t.k, seed++), b = Random(t.k * t.n, seed++);
      const std::vector<float> c0 = Random(t.m * t.n, seed++);
      // Logical row-major copies for the reference.
      std::vector<float> al(t.m * t.k), bl(t.k * t.n);
      for (int64_t i = 0; i < t.m; ++i) {
        for (int64_t p = 0; p < t.k; ++p) al[i * t.k + p] = t.ta ? a[p * t.m + i] : a[i * t.k + p];
      }
      for (int64_t p = 0; p < t.k; ++p) {
        for (int64_t j = 0; j < t.n; ++j) bl[p * t.n + j] = t.tb ? b[j * t.k + p] : b[p * t.n + j];
      }
      const std::vector<float> ab = NaiveMatMul(al, bl, t.m, t.n, t.k);
      ops::cpu::GemmProblem p;
      p.m = t.m;
      p.n = t.n;
      p.k = t.k;
      p.a = t.ta ? ops::cpu::MatrixRef{a.data(), 1, t.m} : ops::cpu::MatrixRef{a.data(), t.k, 1};
      p.b = t.tb ? ops::cpu::MatrixRef{b.data(), 1, t.k} : ops::cpu::MatrixRef{b.data(), t.n, 1};
      std::vector<float> c = c0;
      p.c = c.data();
      p.ldc = t.n;
      p.alpha = t.alpha;
      p.beta = t.beta;
      ops::cpu::Gemm(p);
      for (int64_t i = 0; i < t.m * t.n; ++i) {
        const float want = t.alpha * ab[i] + t.beta * c0[i];
        ASSERT_NEAR(c[i], want, 1e-4f * (1.f + std::sqrt(static_cast<float>(t.k)))) << "element " << i;
      }
    }
  });
}

TEST(NnGemmKernelTest, RowSourceAndBatchOfProblems) {
  // B given row by row (as Conv's im2col does), in a batch with a plain problem.
  const int64_t m = 11, n = 53, k = 270;
  const std::vector<float> a = Random(m * k, 7), b = Random(k * n, 8);
  const std::vector<float> want = NaiveMatMul(a, b, m, n, k);
  std::vector<float> c1(m * n, 5.f), c2(m * n, 5.f);
  ops::cpu::GemmProblem p1;
  p1.m = m;
  p1.n = n;
  p1.k = k;
  p1.a = {a.data(), k, 1};
  p1.b_rows = [&](int64_t row, int64_t j0, int64_t len, float* dst) {
    for (int64_t j = 0; j < len; ++j) dst[j] = b[row * n + j0 + j];
  };
  p1.c = c1.data();
  p1.ldc = n;
  ops::cpu::GemmProblem p2 = p1;
  p2.b_rows = nullptr;
  p2.b = {b.data(), n, 1};
  p2.c = c2.data();
  ops::cpu::Gemm({p1, p2});
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_NEAR(c1[i], want[i], 1e-3f) << i;
    ASSERT_NEAR(c2[i], want[i], 1e-3f) << i;
  }
  EXPECT_NE(std::string(ops::cpu::GemmKernelName()), "");
}

// ---------------------------------------------------------------------------
// MatMul and Gemm.

TEST(NnMatMulTest, BatchedWithBroadcasting) {
  // A [2,1,2,2] against B [3,2,2]: every A matrix times every B matrix.
  Tensor a = F32({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor b = F32({3, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0});
  ExpectNear(Run1("MatMul", {X(a), X(b)}), {2, 3, 2, 2},
             {1, 2, 3, 4, 2, 4, 6, 8, 2, 1, 4, 3, 5, 6, 7, 8, 10, 12, 14, 16, 6, 5, 8, 7});
}

TEST(NnMatMulTest, OneDimensionalOperands) {
  ExpectNear(Run1("MatMul", {X(F32({3}, {1, 2, 3})), X(F32({3, 2}, {1, 0, 0, 1, 1, 1}))}), {2}, {4, 5});
  ExpectNear(Run1("MatMul", {X(F32({2, 3}, {1, 2, 3, 4, 5, 6})), X(F32({3}, {1, 0, -1}))}), {2}, {-2, -2});
  ExpectNear(Run1("MatMul", {X(F32({3}, {1, 2, 3})), X(F32({3}, {4, 5, 6}))}), {}, {32});
  // A 1-D vector against a batch of matrices: [3] x [2,3,2] -> [2,2].
  ExpectNear(Run1("MatMul", {X(F32({3}, {1, 1, 1})), X(F32({2, 3, 2}, Iota(12)))}), {2, 2}, {6, 9, 24, 27});
}

TEST(NnMatMulTest, LargerShapesMatchNaive) {
  // Shared B (batch folded into rows) and broadcast batches.
  const std::vector<float> a = Random(5 * 37 * 29, 1), b = Random(29 * 41, 2);
  Tensor y = Run1("MatMul", {X(F32({5, 37, 29}, a)), C(F32({29, 41}, b))});
  ExpectNear(y, {5, 37, 41}, NaiveMatMul(a, b, 5 * 37, 41, 29), 1e-4f);

  const std::vector<float> a2 = Random(3 * 17 * 19, 3), b2 = Random(4 * 19 * 23, 4);
  Tensor y2 = Run1("MatMul", {X(F32({3, 1, 17, 19}, a2)), X(F32({4, 19, 23}, b2))});
  ASSERT_EQ(y2.shape(), (Shape{3, 4, 17, 23}));
  const std::vector<float> got = y2.ToFloat();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      const std::vector<float> ai(a2.begin() + i * 17 * 19, a2.begin() + (i + 1) * 17 * 19);
      const std::vector<float> bj(b2.begin() + j * 19 * 23, b2.begin() + (j + 1) * 19 * 23);
      const std::vector<float> want = NaiveMatMul(ai, bj, 17, 23, 19);
      for (int e = 0; e < 17 * 23; ++e) ASSERT_NEAR(got[(i * 4 + j) * 17 * 23 + e], want[e], 1e-4f);
    }
  }
}

TEST(NnMatMulTest, LayoutFlagsReadTransposedOperands) {
  // trans_a / trans_b: A stored [.., K, M], B stored [.., N, K]; every combination,
  // batched with broadcasting and with B shared (the folded path), against the
  // product of explicitly transposed operands.
  auto transpose = [](const std::vector<float>& x, int64_t mats, int64_t r, int64_t c) {
    std::vector<float> y(x.size());
    for (int64_t t = 0; t < mats; ++t)
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) y[t * r * c + j * r + i] = x[t * r * c + i * c + j];
    return y;
  };
  const int64_t m = 13, n = 11, k = 7;
  for (int64_t b_batch : {1, 3}) {
    const std::vector<float> a = Random(3 * m * k, 5), b = Random(b_batch * k * n, 6);
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const std::vector<float> as = ta ? transpose(a, 3, m, k) : a;   // stored [3,k,m]
        const std::vector<float> bs = tb ? transpose(b, b_batch, k, n) : b;
        const Shape sa = ta ? Shape{3, k, m} : Shape{3, m, k};
        const Shape sb = b_batch == 1 ? (tb ? Shape{n, k} : Shape{k, n}) : (tb ? Shape{3, n, k} : Shape{3, k, n});
        Tensor y = Run1("MatMul", {X(F32(sa, as)), X(F32(sb, bs))}, {{"trans_a", ta}, {"trans_b", tb}});
        ASSERT_EQ(y.shape(), (Shape{3, m, n})) << ta << tb;
        const std::vector<float> got = y.ToFloat();
        for (int64_t t = 0; t < 3; ++t) {
          const std::vector<float> at(a.begin() + t * m * k, a.begin() + (t + 1) * m * k);
          const int64_t bt = b_batch == 1 ? 0 : t;
          const std::vector<float> btm(b.begin() + bt * k * n, b.begin() + (bt + 1) * k * n);
          const std::vector<float> want = NaiveMatMul(at, btm, m, n, k);
          for (int64_t e = 0; e < m * n; ++e) ASSERT_NEAR(got[t * m * n + e], want[e], 1e-4f) << ta << tb << t;
        }
      }
    }
  }
  // Integers take the same flags.
  Tensor yi = Run1("MatMul", {X(I64({2, 2}, {1, 3, 2, 4})), X(I64({2, 2}, {5, 7, 6, 8}))},
                   {{"trans_a", 1}, {"trans_b", 1}});
  EXPECT_EQ(yi.ToInt64(), (std::vector<int64_t>{19, 22, 43, 50}));
  // The flag names the stored layout in shape errors; a 1-D operand cannot be transposed.
  EXPECT_NE(ErrorOf("MatMul", {X(F32({2, 3}, Iota(6))), X(F32({3, 3}, Iota(9)))}, {{"trans_a", 1}}).find("trans_a"),
            std::string::npos);
  EXPECT_NE(ErrorOf("MatMul", {X(F32({3}, Iota(3))), X(F32({3, 2}, Iota(6)))}, {{"trans_a", 1}}).find("rank >= 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf("MatMul", {X(F32({2, 2}, Iota(4))), X(F32({2, 2}, Iota(4)))}, {{"trans_b", 2}}).find("0 or 1"),
            std::string::npos);
}

TEST(NnMatMulTest, Float16AndIntegers) {
  Tensor y = Run1("MatMul", {X(F16({2, 2}, {1, 2, 3, 4})), X(F16({2, 2}, {0.5f, 0, 0, 2}))});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  ExpectNear(y, {2, 2}, {0.5f, 4, 1.5f, 8});
  Tensor yi = Run1("MatMul", {X(I64({2, 2}, {1, 2, 3, 4})), X(I64({2, 2}, {5, 6, 7, 8}))});
  EXPECT_EQ(yi.dtype(), DType::kInt64);
  EXPECT_EQ(yi.ToInt64(), (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(NnMatMulTest, Errors) {
  std::string e = ErrorOf("MatMul", {X(F32({2, 3}, Iota(6))), X(F32({4, 2}, Iota(8)))});
  EXPECT_NE(e.find("inner dimensions differ"), std::string::npos) << e;
  EXPECT_NE(e.find("K=3"), std::string::npos) << e;
  e = ErrorOf("MatMul", {X(F32({2, 2, 3}, Iota(12))), X(F32({3, 3, 2}, Iota(18)))});
  EXPECT_NE(e.find("cannot be broadcast"), std::string::npos) << e;
  e = ErrorOf("MatMul", {X(F32({2, 2}, Iota(4))), X(F16({2, 2}, Iota(4)))});
  EXPECT_NE(e.find("share a dtype"), std::string::npos) << e;
}

TEST(NnGemmTest, TransposesAlphaBetaAndBroadcastC) {
  // op(A) = A^T = [[1,3],[2,4]], op(B) = B^T = [[1,0,1],[0,1,1]]; product [[1,3,4],[2,4,6]].
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({3, 2}, {1, 0, 0, 1, 1, 1});
  Attrs attrs = {{"transA", 1}, {"transB", 1}, {"alpha", 0.5f}, {"beta", 2.f}};
  ExpectNear(Run1("Gemm", {X(a), X(b), C(F32({3}, {1, 2, 3}))}, attrs), {2, 3}, {2.5f, 5.5f, 8, 3, 6, 9});
  // Column-broadcast C and a scalar C.
  ExpectNear(Run1("Gemm", {X(a), X(b), C(F32({2, 1}, {10, 20}))}, attrs), {2, 3},
             {20.5f, 21.5f, 22, 41, 42, 43});
  ExpectNear(Run1("Gemm", {X(a), X(b), C(F32({}, {1}))}, attrs), {2, 3}, {2.5f, 3.5f, 4, 3, 4, 5});
  // No C; plain layouts.
  ExpectNear(Run1("Gemm", {X(F32({2, 2}, {1, 3, 2, 4})), X(F32({2, 3}, {1, 0, 1, 0, 1, 1}))}), {2, 3},
             {1, 3, 4, 2, 4, 6});
}

TEST(NnGemmTest, LargerWithFullC) {
  const int64_t m = 33, n = 70, k = 300;
  const std::vector<float> a = Random(k * m, 11), b = Random(n * k, 12), c = Random(m * n, 13);
  Tensor y = Run1("Gemm", {X(F32({k, m}, a)), C(F32({n, k}, b)), C(F32({m, n}, c))},
                  {{"transA", 1}, {"transB", 1}, {"beta", 0.5f}});
  std::vector<float> al(m * k), bl(k * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) al[i * k + p] = a[p * m + i];
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) bl[p * n + j] = b[j * k + p];
  }
  std::vector<float> want = NaiveMatMul(al, bl, m, n, k);
  for (int64_t i = 0; i < m * n; ++i) want[i] += 0.5f * c[i];
  ExpectNear(y, {m, n}, want, 1e-3f);
}

TEST(NnGemmTest, Integers) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; alpha 2, beta 1, C row [1, -1].
  Tensor y = Run1("Gemm", {X(I64({2, 2}, {1, 2, 3, 4})), X(I64({2, 2}, {5, 6, 7, 8})), C(I64({2}, {1, -1}))},
                  {{"alpha", 2.f}});
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{39, 43, 87, 99}));
}

TEST(NnGemmTest, Errors) {
  std::string e = ErrorOf("Gemm", {X(F32({2, 3}, Iota(6))), X(F32({2, 3}, Iota(6)))});
  EXPECT_NE(e.find("inner dimensions differ"), std::string::npos) << e;
  e = ErrorOf("Gemm", {X(F32({2, 2}, Iota(4))), X(F32({2, 3}, Iota(6))), X(F32({3, 2}, Iota(6)))});
  EXPECT_NE(e.find("cannot be broadcast to the output [2,3]"), std::string::npos) << e;
  e = ErrorOf("Gemm", {X(F32({2, 2, 1}, Iota(4))), X(F32({2, 3}, Iota(6)))});
  EXPECT_NE(e.find("must be matrices"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------
// Conv.

TEST(NnConvTest, BasicPaddedAndStrided) {
  Tensor x = F32({1, 1, 5, 5}, Iota(25));
  Tensor w = F32({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  ExpectNear(Run1("Conv", {X(x), C(w)}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}), {1, 1, 5, 5},
             {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
              117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  ExpectNear(Run1("Conv", {X(x), C(w)},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                   {"strides", std::vector<int64_t>{2, 2}},
                   {"kernel_shape", std::vector<int64_t>{3, 3}}}),
             {1, 1, 3, 3}, {12, 27, 24, 63, 108, 81, 72, 117, 84});
  // Asymmetric padding, strides: pads [1,0,1,0] (top, left, bottom, right).
  ExpectNear(Run1("Conv", {X(x), C(w)},
                  {{"pads", std::vector<int64_t>{1, 0, 1, 0}}, {"strides", std::vector<int64_t>{2, 2}}}),
             {1, 1, 3, 2}, {21, 33, 99, 117, 111, 123});
}

TEST(NnConvTest, OddShapesStridesDilationsPadsMatchNaive) {
  const std::vector<ConvSpec> specs = {
      {2, 3, 7, 6, 4, 3, 2, 1, 2, 1, 1, 2, 1, 0, 2, 1},      // strided, dilated, asymmetric pads
      {1, 6, 9, 11, 4, 3, 3, 2, 1, 2, 2, 1, 2, 2, 1, 0},     // grouped
      {1, 5, 4, 4, 7, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},      // pointwise (no im2col)
      {1, 4, 13, 13, 4, 3, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1},    // depthwise, strided
      {2, 4, 6, 5, 8, 3, 2, 4, 1, 1, 1, 1, 0, 1, 1, 0},      // depthwise with multiplier 2
      {1, 16, 10, 10, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  // K = 144 spread over tiles
  };
  uint32_t seed = 100;
  for (const ConvSpec& s : specs) {
    SCOPED_TRACE(testing::Message() << "c=" << s.c << " m=" << s.m << " group=" << s.group);
    const std::vector<float> x = Random(s.n * s.c * s.h * s.w, seed++);
    const std::vector<float> w = Random(s.m * (s.c / s.group) * s.kh * s.kw, seed++);
    const std::vector<float> bias = Random(s.m, seed++);
    int64_t oh, ow;
    const std::vector<float> want = NaiveConv(s, x, w, bias, &oh, &ow);
    Tensor y = Run1(
        "Conv",
        {X(F32({s.n, s.c, s.h, s.w}, x)), C(F32({s.m, s.c / s.group, s.kh, s.kw}, w)), C(F32({s.m}, bias))},
        {{"group", s.group},
         {"strides", std::vector<int64_t>{s.sh, s.sw}},
         {"dilations", std::vector<int64_t>{s.dh, s.dw}},
         {"pads", std::vector<int64_t>{s.pt, s.pl, s.pb, s.pr}}});
    ExpectNear(y, {s.n, s.m, oh, ow}, want, 1e-4f);
  }
}

TEST(NnConvTest, GroupedAndDepthwiseByHand) {
  // Group 2 pointwise: out0 = x0 + x1 = 1 + 2, out1 = x2 - x3 = 3 - 4.
  Tensor x = F32({1, 4, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4});
  ExpectNear(Run1("Conv", {X(x), C(F32({2, 2, 1, 1}, {1, 1, 1, -1}))}, {{"group", 2}}), {1, 2, 2, 2},
             {3, 3, 3, 3, -1, -1, -1, -1});
  // Depthwise 2x2 box filter with bias.
  Tensor xd = F32({1, 2, 3, 3}, Iota(18));
  ExpectNear(Run1("Conv", {X(xd), C(F32({2, 1, 2, 2}, std::vector<float>(8, 1.f))), C(F32({2}, {1, -1}))},
                  {{"group", 2}}),
             {1, 2, 2, 2}, {9, 13, 21, 25, 43, 47, 55, 59});
}

TEST(NnConvTest, AutoPad) {
  Tensor x = F32({1, 1, 4, 4}, Iota(16));
  Tensor w = F32({1, 1, 2, 2}, {1, 1, 1, 1});
  // Total padding 1 per axis: at the end for SAME_UPPER, at the start for SAME_LOWER.
  ExpectNear(Run1("Conv", {X(x), C(w)}, {{"auto_pad", "SAME_UPPER"}}), {1, 1, 4, 4},
             {10, 14, 18, 10, 26, 30, 34, 18, 42, 46, 50, 26, 25, 27, 29, 15});
  ExpectNear(Run1("Conv", {X(x), C(w)}, {{"auto_pad", "SAME_LOWER"}}), {1, 1, 4, 4},
             {0, 1, 3, 5, 4, 10, 14, 18, 12, 26, 30, 34, 20, 42, 46, 50});
  ExpectNear(Run1("Conv", {X(x), C(w)}, {{"auto_pad", "VALID"}, {"strides", std::vector<int64_t>{2, 2}}}),
             {1, 1, 2, 2}, {10, 18, 42, 50});
  // SAME with stride 2 on 5x5: output ceil(5/2) = 3, total pad 2 split evenly.
  Tensor x5 = F32({1, 1, 5, 5}, Iota(25));
  ExpectNear(Run1("Conv", {X(x5), C(F32({1, 1, 3, 3}, std::vector<float>(9, 1.f)))},
                  {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}}),
             {1, 1, 3, 3}, {12, 27, 24, 63, 108, 81, 72, 117, 84});
}

TEST(NnConvTest, OneAndThreeDimensional) {
  // 1-D with dilation 2: y[i] = x[i] - x[i + 2].
  ExpectNear(Run1("Conv", {X(F32({1, 1, 5}, {1, 2, 4, 8, 16})), C(F32({1, 1, 2}, {1, -1}))},
                  {{"dilations", std::vector<int64_t>{2}}}),
             {1, 1, 3}, {-3, -6, -12});
  // 3-D: a 2x2x2 box over 0..7 sums to 28; with pads 1 the corners see one voxel.
  Tensor x = F32({1, 1, 2, 2, 2}, Iota(8));
  Tensor w = F32({1, 1, 2, 2, 2}, std::vector<float>(8, 1.f));
  ExpectNear(Run1("Conv", {X(x), C(w)}), {1, 1, 1, 1, 1}, {28});
  Tensor y = Run1("Conv", {X(x), C(w)}, {{"pads", std::vector<int64_t>{1, 1, 1, 1, 1, 1}}});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3, 3}));
  const std::vector<float> v = y.ToFloat();
  EXPECT_FLOAT_EQ(v[0], 0);    // only x[0,0,0]
  EXPECT_FLOAT_EQ(v[13], 28);  // centre sees everything
  EXPECT_FLOAT_EQ(v[26], 7);   // only x[1,1,1]
}

TEST(NnConvTest, Float16) {
  const ConvSpec s = {1, 4, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<float> x = Random(4 * 36, 5), w = Random(3 * 4 * 9, 6);
  // Round inputs to f16 so the reference sees the same values.
  x = F16({4 * 36}, x).ToFloat();
  w = F16({3 * 4 * 9}, w).ToFloat();
  int64_t oh, ow;
  const std::vector<float> want = NaiveConv(s, x, w, {}, &oh, &ow);
  Tensor y = Run1("Conv", {X(F16({1, 4, 6, 6}, x)), C(F16({3, 4, 3, 3}, w))},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  ExpectNear(y, {1, 3, oh, ow}, want, 4e-3f);
}

TEST(NnConvTest, Errors) {
  Tensor x = F32({1, 3, 4, 4}, Iota(48));
  std::string e = ErrorOf("Conv", {X(x), C(F32({2, 2, 3, 3}, Iota(36)))});
  EXPECT_NE(e.find("X has 3 channels"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(F32({2, 3, 3, 3}, Iota(54)))}, {{"kernel_shape", std::vector<int64_t>{2, 2}}});
  EXPECT_NE(e.find("kernel_shape [2,2] does not match"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(F32({2, 3, 5, 5}, Iota(150)))});
  EXPECT_NE(e.find("larger than the padded input"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(F32({2, 3, 3, 3}, Iota(54)))}, {{"auto_pad", "SAME"}});
  EXPECT_NE(e.find("auto_pad 'SAME'"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(F32({2, 3, 3, 3}, Iota(54))), C(F32({3}, Iota(3)))});
  EXPECT_NE(e.find("bias B must be [2]"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(F32({2, 3, 3, 3}, Iota(54)))}, {{"strides", std::vector<int64_t>{1}}});
  EXPECT_NE(e.find("strides [1] must have 2 entries"), std::string::npos) << e;
}


// channels_last=1: X [N, H, W, C], W [OC, KH, KW, C/group], Y [N, OH, OW, OC]; the
// result must equal the NCHW conv permuted to NHWC (against the definition too).
TEST(NnConvTest, ChannelsLastMatchesNaive) {
  const std::vector<ConvSpec> specs = {
      {2, 3, 7, 6, 4, 3, 2, 1, 2, 1, 1, 2, 1, 0, 2, 1},      // strided, dilated, asymmetric pads
      {1, 6, 9, 11, 4, 3, 3, 2, 1, 2, 2, 1, 2, 2, 1, 0},     // grouped
      {1, 5, 4, 4, 7, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},      // pointwise
      {1, 4, 13, 13, 4, 3, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1},    // depthwise, strided
      {2, 4, 6, 5, 8, 3, 2, 4, 1, 1, 1, 1, 0, 1, 1, 0},      // depthwise with multiplier 2
      {3, 16, 5, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    // K = 144, odd spatial dims
      {1, 3, 11, 9, 5, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3},     // stem-like 7x7 stride 2
  };
  uint32_t seed = 300;
  for (const ConvSpec& s : specs) {
    SCOPED_TRACE(testing::Message() << "c=" << s.c << " m=" << s.m << " group=" << s.group);
    const std::vector<float> x = Random(s.n * s.c * s.h * s.w, seed++);
    const std::vector<float> w = Random(s.m * (s.c / s.group) * s.kh * s.kw, seed++);
    const std::vector<float> bias = Random(s.m, seed++);
    int64_t oh, ow;
    const std::vector<float> y_nchw = NaiveConv(s, x, w, bias, &oh, &ow);
    const Tensor y_nhwc = ops::PermuteAxes(F32({s.n, s.m, oh, ow}, y_nchw), ops::kNchwToNhwc);
    const Tensor x_nhwc = ops::PermuteAxes(F32({s.n, s.c, s.h, s.w}, x), ops::kNchwToNhwc);
    const Tensor w_krsc = ops::PermuteAxes(F32({s.m, s.c / s.group, s.kh, s.kw}, w), ops::kNchwToNhwc);
    EXPECT_EQ(w_krsc.shape(), (Shape{s.m, s.kh, s.kw, s.c / s.group}));
    Attrs attrs = {{"group", s.group},
                   {"strides", std::vector<int64_t>{s.sh, s.sw}},
                   {"dilations", std::vector<int64_t>{s.dh, s.dw}},
                   {"pads", std::vector<int64_t>{s.pt, s.pl, s.pb, s.pr}},
                   {"kernel_shape", std::vector<int64_t>{s.kh, s.kw}},
                   {"channels_last", 1}};
    Tensor y = Run1("Conv", {X(x_nhwc), C(w_krsc), C(F32({s.m}, bias))}, attrs);
    ExpectNear(y, {s.n, oh, ow, s.m}, y_nhwc.ToFloat(), 1e-4f);
    // Without bias, in f16 (stored rounded, so compare with a looser tolerance).
    Tensor h = Run1("Conv", {X(F16(x_nhwc.shape(), x_nhwc.ToFloat())), C(F16(w_krsc.shape(), w_krsc.ToFloat()))},
                    attrs);
    EXPECT_EQ(h.dtype(), DType::kFloat16);
    std::vector<float> no_bias = y_nhwc.ToFloat();
    for (size_t i = 0; i < no_bias.size(); ++i) no_bias[i] -= bias[i % s.m];
    ExpectNear(h, {s.n, oh, ow, s.m}, no_bias, 2e-2f);
  }
}

TEST(NnConvTest, ChannelsLastAutoPadAndErrors) {
  // SAME_UPPER on a 4x4 single-channel image: layout does not matter with C = 1.
  Tensor x = F32({1, 4, 4, 1}, Iota(16));
  Tensor w = F32({1, 2, 2, 1}, {1, 1, 1, 1});
  ExpectNear(Run1("Conv", {X(x), C(w)}, {{"auto_pad", "SAME_UPPER"}, {"channels_last", 1}}), {1, 4, 4, 1},
             {10, 14, 18, 10, 26, 30, 34, 18, 42, 46, 50, 26, 25, 27, 29, 15});
  std::string e = ErrorOf("Conv", {X(F32({1, 2, 5}, Iota(10))), C(F32({1, 2, 1}, {1, 1}))}, {{"channels_last", 1}});
  EXPECT_NE(e.find("channels_last=1 needs a 4-D input X [N, H, W, C]"), std::string::npos) << e;
  e = ErrorOf("Conv", {X(x), C(w)}, {{"channels_last", 2}});
  EXPECT_NE(e.find("channels_last must be 0 or 1, got 2"), std::string::npos) << e;
  // An NCHW-shaped weight under channels_last: C/group is W's last dim.
  e = ErrorOf("Conv", {X(F32({1, 4, 4, 3}, Iota(48))), C(F32({2, 3, 2, 2}, Iota(24)))}, {{"channels_last", 1}});
  EXPECT_NE(e.find("X has 3 channels but W [2,3,2,2] with group 1 expects 2"), std::string::npos) << e;
  EXPECT_NE(e.find("W [OC, KH, KW, C/group]"), std::string::npos) << e;
  auto r = RunOp("Conv", {X(F32({1, 4, 4, 4}, Iota(64))), C(F32({2, 1, 1, 4}, Iota(8)))},
                 {{"channels_last", 1}, {"kernel_shape", std::vector<int64_t>{1, 2}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("does not match the weights"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace kiln
