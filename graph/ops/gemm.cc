// Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, C broadcast to [M, N].
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/cpu_gemm.h"
#include "graph/ops/float_access.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const Value* a = node.input(0);
  const Value* b = node.input(1);
  if (!IsFloating(a->dtype()) && a->dtype() != DType::kInt32 && a->dtype() != DType::kInt64) {
    return node.Error(
        absl::StrCat("dtype ", DTypeName(a->dtype()), " is not supported (f32, f16, bf16, i32, i64)"));
  }
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (node.has_input(i) && node.input(i)->dtype() != a->dtype()) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(a->dtype()), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
  }
  if (a->rank() != 2 || b->rank() != 2) {
    return node.Error(
        absl::StrCat("A and B must be matrices, got ", a->TypeString(), " and ", b->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, node.GetInt("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, node.GetInt("transB", 0));
  KILN_RETURN_IF_ERROR(node.GetFloat("alpha", 1.f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("beta", 1.f).status());
  const int64_t m = trans_a ? a->shape()[1] : a->shape()[0];
  const int64_t ka = trans_a ? a->shape()[0] : a->shape()[1];
  const int64_t kb = trans_b ? b->shape()[1] : b->shape()[0];
  const int64_t n = trans_b ? b->shape()[0] : b->shape()[1];
  if (ka != kb) {
    return node.Error(absl::StrCat("inner dimensions differ: op(A) is [", m, ",", ka, "] and op(B) is [", kb,
                                   ",", n, "] (transA=", trans_a, ", transB=", trans_b, ")"));
  }
  if (node.has_input(2)) {
    const Shape& c = node.input(2)->shape();
    const Shape target = {m, n};
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      const int64_t t = target[2 - c.size() + i];
      ok = c[i] == 1 || c[i] == t;
    }
    if (!ok) {
      return node.Error(absl::StrCat("C of shape ", ShapeToString(c), " cannot be broadcast to the output [",
                                     m, ",", n, "]"));
    }
  }
  node.output(0)->SetType(a->dtype(), {m, n});
  return absl::OkStatus();
}

// Integer Gemm: exact int64 dot products, then alpha and beta applied in double
// and truncated back (numpy's alpha * A @ B + beta * C, cast to the input type).
void IntGemm(const Tensor& ta, const Tensor& tb, const Tensor* tc, bool trans_a, bool trans_b, float alpha,
             float beta, Tensor& out) {
  const int64_t m = out.shape()[0], n = out.shape()[1];
  const int64_t k = trans_a ? ta.shape()[0] : ta.shape()[1];
  const std::vector<int64_t> a = ta.ToInt64(), b = tb.ToInt64();
  std::vector<int64_t> c, offsets;
  if (tc != nullptr) {
    c = tc->ToInt64();
    offsets = BroadcastOffsets(tc->shape(), out.shape());
  }
  std::vector<int64_t> y(m * n);
  ParallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)), [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        uint64_t acc = 0;  // wraps like the fixed-width integer product
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<uint64_t>(trans_a ? a[p * m + i] : a[i * k + p]) *
                 static_cast<uint64_t>(trans_b ? b[j * k + p] : b[p * n + j]);
        }
        double v = static_cast<double>(alpha) * static_cast<double>(static_cast<int64_t>(acc));
        if (tc != nullptr) v += static_cast<double>(beta) * static_cast<double>(c[offsets[i * n + j]]);
        y[i * n + j] = static_cast<int64_t>(v);
      }
    }
  });
  out = Tensor::FromInt64(out.dtype(), out.shape(), y);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, node.GetInt("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, node.GetInt("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, node.GetFloat("alpha", 1.f));
  KILN_ASSIGN_OR_RETURN(float beta, node.GetFloat("beta", 1.f));
  const Tensor& ta = *in[0];
  const Tensor& tb = *in[1];
  const int64_t m = out[0].shape()[0], n = out[0].shape()[1];
  const int64_t k = trans_a ? ta.shape()[0] : ta.shape()[1];
  const Tensor* tc = in.size() > 2 ? in[2] : nullptr;
  if (!IsFloating(ta.dtype())) {
    IntGemm(ta, tb, tc, trans_a, trans_b, alpha, beta, out[0]);
    return absl::OkStatus();
  }
  const FloatView a(ta), b(tb);
  FloatSink y(out[0]);
  cpu::GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = trans_a ? cpu::MatrixRef{a.data(), 1, m} : cpu::MatrixRef{a.data(), k, 1};
  p.b = trans_b ? cpu::MatrixRef{b.data(), 1, k} : cpu::MatrixRef{b.data(), n, 1};
  p.c = y.data();
  p.ldc = n;
  p.alpha = alpha;
  p.beta = 0.f;
  if (tc != nullptr && beta != 0.f) {
    // Y starts as broadcast C; the GEMM adds alpha * A * B on top of beta * Y.
    const FloatView c(*tc);
    const std::vector<int64_t> offsets = BroadcastOffsets(tc->shape(), out[0].shape());
    for (int64_t i = 0; i < m * n; ++i) y.data()[i] = c.data()[offsets[i]];
    p.beta = beta;
  }
  cpu::Gemm(p);
  y.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(gemm) {
  registry.Register(
      {.name = "Gemm", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
