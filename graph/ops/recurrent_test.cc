// Tests for the GRU reference against the ONNX formulas written out for one
// batch entry.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

float Sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

// ONNX's GRU equations (no biases), directly: z = f(x Wz + h Rz), r = f(x Wr + h Rr),
// h~ = g(x Wh + (r . h) Rh), or g(x Wh + r . (h Rh)) with linear_before_reset, and
// h' = (1 - z) . h~ + z . h. W is [3H, I], R [3H, H] in z, r, h order.
std::vector<float> NaiveGru(const std::vector<float>& x, int64_t seq, int64_t in, const std::vector<float>& w,
                            const std::vector<float>& r, int64_t hidden, bool linear_before_reset) {
  std::vector<float> h(hidden, 0.f);
  auto dot = [](const float* a, const float* b, int64_t n) {
    float s = 0.f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  };
  for (int64_t t = 0; t < seq; ++t) {
    const float* xt = x.data() + t * in;
    std::vector<float> z(hidden), rr(hidden), hn(hidden);
    for (int64_t j = 0; j < hidden; ++j) {
      z[j] = Sigmoid(dot(xt, &w[j * in], in) + dot(h.data(), &r[j * hidden], hidden));
      rr[j] = Sigmoid(dot(xt, &w[(hidden + j) * in], in) + dot(h.data(), &r[(hidden + j) * hidden], hidden));
    }
    std::vector<float> reset_h(hidden);
    for (int64_t q = 0; q < hidden; ++q) reset_h[q] = rr[q] * h[q];
    for (int64_t j = 0; j < hidden; ++j) {
      const float* rh = &r[(2 * hidden + j) * hidden];
      const float xh = dot(xt, &w[(2 * hidden + j) * in], in);
      const float cand = std::tanh(linear_before_reset ? xh + rr[j] * dot(h.data(), rh, hidden)
                                                       : xh + dot(reset_h.data(), rh, hidden));
      hn[j] = (1.f - z[j]) * cand + z[j] * h[j];
    }
    h = hn;
  }
  return h;
}

TEST(RecurrentTest, GruResetGateAppliesPerUnit) {
  const int64_t seq = 3, in = 2, hidden = 3;
  const std::vector<float> x = Random(seq * in, 1), w = Random(3 * hidden * in, 2), r = Random(3 * hidden * hidden, 3);
  for (int64_t lbr : {0, 1}) {
    auto out = RunOp("GRU", {X(F32({seq, 1, in}, x)), C(F32({1, 3 * hidden, in}, w)), C(F32({1, 3 * hidden, hidden}, r))},
                     {{"hidden_size", hidden}, {"linear_before_reset", lbr}}, 2);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[1], {1, 1, hidden}, NaiveGru(x, seq, in, w, r, hidden, lbr != 0), 1e-5f);
  }
}

}  // namespace
}  // namespace kiln
