// MatMul: numpy matrix product (1-D operands promoted and squeezed, batch dims broadcast).
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/cpu_gemm.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

// Operand shapes as matrices: a 1-D A is [1, K], a 1-D B is [K, 1].
Shape AsMatrixA(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape AsMatrixB(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }
Shape BatchOf(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

absl::Status Infer(Node& node) {
  const Value* a = node.input(0);
  const Value* b = node.input(1);
  if (a->dtype() != b->dtype()) {
    return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(a->dtype()), " and ",
                                   DTypeName(b->dtype())));
  }
  const DType dtype = a->dtype();
  if (!IsFloating(dtype) && dtype != DType::kInt32 && dtype != DType::kInt64) {
    return node.Error(
        absl::StrCat("dtype ", DTypeName(dtype), " is not supported (f32, f16, bf16, i32, i64)"));
  }
  if (a->rank() < 1 || b->rank() < 1) {
    return node.Error(
        absl::StrCat("operands must have rank >= 1, got ", a->TypeString(), " and ", b->TypeString()));
  }
  const Shape sa = AsMatrixA(a->shape());
  const Shape sb = AsMatrixB(b->shape());
  const int64_t ka = sa.back(), kb = sb[sb.size() - 2];
  if (ka != kb) {
    return node.Error(absl::StrCat("inner dimensions differ: A is ", ShapeToString(a->shape()), " (K=", ka,
                                   ") and B is ", ShapeToString(b->shape()), " (K=", kb, ")"));
  }
  KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(node, BatchOf(sa), BatchOf(sb)));
  if (a->rank() > 1) out.push_back(sa[sa.size() - 2]);
  if (b->rank() > 1) out.push_back(sb.back());
  node.output(0)->SetType(dtype, out);
  return absl::OkStatus();
}

// Integer MatMul: plain loops in int64 (wrapping), parallel over output rows.
void MatMulInt(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& y,
               const std::vector<int64_t>& oa, const std::vector<int64_t>& ob, int64_t m, int64_t n,
               int64_t k) {
  const int64_t rows = static_cast<int64_t>(oa.size()) * m;
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      const int64_t t = r / m, i = r % m;
      const int64_t* arow = a.data() + oa[t] * m * k + i * k;
      const int64_t* bmat = b.data() + ob[t] * k * n;
      int64_t* yrow = y.data() + r * n;
      for (int64_t p = 0; p < k; ++p) {
        const uint64_t av = static_cast<uint64_t>(arow[p]);
        for (int64_t j = 0; j < n; ++j) {
          yrow[j] = static_cast<int64_t>(static_cast<uint64_t>(yrow[j]) +
                                         av * static_cast<uint64_t>(bmat[p * n + j]));
        }
      }
    }
  });
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& ta = *in[0];
  const Tensor& tb = *in[1];
  const Shape sa = AsMatrixA(ta.shape());
  const Shape sb = AsMatrixB(tb.shape());
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape batch_a = BatchOf(sa), batch_b = BatchOf(sb);
  KILN_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(node, batch_a, batch_b));
  // Batch index of A and B for each output batch element.
  const std::vector<int64_t> oa = BroadcastOffsets(batch_a, batch);
  const std::vector<int64_t> ob = BroadcastOffsets(batch_b, batch);

  if (!IsFloating(ta.dtype())) {
    std::vector<int64_t> y(out[0].numel(), 0);
    MatMulInt(ta.ToInt64(), tb.ToInt64(), y, oa, ob, m, n, k);
    out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), y);
    return absl::OkStatus();
  }

  const FloatView a(ta), b(tb);
  FloatSink y(out[0]);
  std::vector<cpu::GemmProblem> problems;
  if (NumElements(batch_b) == 1 && batch_a == batch) {
    // One shared B: fold A's batch into its rows.
    cpu::GemmProblem p;
    p.m = NumElements(batch) * m;
    p.n = n;
    p.k = k;
    p.a = {a.data(), k, 1};
    p.b = {b.data(), n, 1};
    p.c = y.data();
    p.ldc = n;
    problems.push_back(p);
  } else {
    problems.reserve(oa.size());
    for (size_t t = 0; t < oa.size(); ++t) {
      cpu::GemmProblem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.a = {a.data() + oa[t] * m * k, k, 1};
      p.b = {b.data() + ob[t] * k * n, n, 1};
      p.c = y.data() + static_cast<int64_t>(t) * m * n;
      p.ldc = n;
      problems.push_back(p);
    }
  }
  cpu::Gemm(problems);
  y.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(mat_mul) {
  registry.Register(
      {.name = "MatMul", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
