// MatMul: numpy matrix product (1-D operands promoted and squeezed, batch dims broadcast).
//
// Layout flags (a kiln extension, never in imported ONNX): int attributes `trans_a`
// and `trans_b` (default 0). When set, the operand (rank >= 2) is stored with its
// last two dims swapped: the product reads A as [..., K, M] or B as [..., N, K].
// Canonicalisation sets them instead of materialising a Transpose (graph/
// gemm_to_matmul.h), and every backend reads the operand in that layout.
#include <algorithm>
#include <utility>
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

// Operand shapes as matrices: a 1-D A is [1, K], a 1-D B is [K, 1].
Shape AsMatrixA(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape AsMatrixB(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }
Shape BatchOf(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
Shape SwapLastTwo(Shape s) {
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

struct LayoutFlags {
  bool trans_a = false, trans_b = false;
};

absl::StatusOr<LayoutFlags> GetLayoutFlags(const Node& node) {
  LayoutFlags f;
  KILN_ASSIGN_OR_RETURN(int64_t ta, node.GetInt("trans_a", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, node.GetInt("trans_b", 0));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
    return node.Error(absl::StrCat("trans_a and trans_b must be 0 or 1, got ", ta, " and ", tb));
  }
  f.trans_a = ta == 1;
  f.trans_b = tb == 1;
  return f;
}

// The logical (untransposed) matrix shapes of the operands.
absl::StatusOr<std::pair<Shape, Shape>> LogicalShapes(const Node& node, const Shape& a, const Shape& b,
                                                      const LayoutFlags& f) {
  if ((f.trans_a && a.size() < 2) || (f.trans_b && b.size() < 2)) {
    return node.Error("trans_a / trans_b need an operand of rank >= 2");
  }
  return std::make_pair(f.trans_a ? SwapLastTwo(a) : AsMatrixA(a), f.trans_b ? SwapLastTwo(b) : AsMatrixB(b));
}

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
  KILN_ASSIGN_OR_RETURN(const LayoutFlags flags, GetLayoutFlags(node));
  KILN_ASSIGN_OR_RETURN(auto shapes, LogicalShapes(node, a->shape(), b->shape(), flags));
  const Shape& sa = shapes.first;
  const Shape& sb = shapes.second;
  const int64_t ka = sa.back(), kb = sb[sb.size() - 2];
  if (ka != kb) {
    return node.Error(absl::StrCat("inner dimensions differ: A is ", ShapeToString(a->shape()),
                                   flags.trans_a ? " (trans_a)" : "", " (K=", ka, ") and B is ",
                                   ShapeToString(b->shape()), flags.trans_b ? " (trans_b)" : "", " (K=", kb, ")"));
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

// Transposes the last two dims of a row-major int64 tensor of shape `s`.
std::vector<int64_t> TransposeLastTwo(const std::vector<int64_t>& x, const Shape& s) {
  const int64_t r = s[s.size() - 2], c = s.back(), mats = NumElements(s) / std::max<int64_t>(r * c, 1);
  std::vector<int64_t> y(x.size());
  for (int64_t t = 0; t < mats; ++t) {
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j) y[t * r * c + j * r + i] = x[t * r * c + i * c + j];
    }
  }
  return y;
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& ta = *in[0];
  const Tensor& tb = *in[1];
  KILN_ASSIGN_OR_RETURN(const LayoutFlags flags, GetLayoutFlags(node));
  KILN_ASSIGN_OR_RETURN(auto shapes, LogicalShapes(node, ta.shape(), tb.shape(), flags));
  const Shape& sa = shapes.first;
  const Shape& sb = shapes.second;
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape batch_a = BatchOf(sa), batch_b = BatchOf(sb);
  KILN_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(node, batch_a, batch_b));
  // Batch index of A and B for each output batch element.
  const std::vector<int64_t> oa = BroadcastOffsets(batch_a, batch);
  const std::vector<int64_t> ob = BroadcastOffsets(batch_b, batch);

  if (!IsFloating(ta.dtype())) {
    std::vector<int64_t> y(out[0].numel(), 0);
    std::vector<int64_t> ia = ta.ToInt64(), ib = tb.ToInt64();
    if (flags.trans_a) ia = TransposeLastTwo(ia, ta.shape());
    if (flags.trans_b) ib = TransposeLastTwo(ib, tb.shape());
    MatMulInt(ia, ib, y, oa, ob, m, n, k);
    out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), y);
    return absl::OkStatus();
  }

  const FloatView a(ta), b(tb);
  FloatSink y(out[0]);
  // Element (r, c) of the logical A is at r * a_rs + c * a_cs within one matrix.
  const int64_t a_rs = flags.trans_a ? 1 : k, a_cs = flags.trans_a ? m : 1;
  const int64_t b_rs = flags.trans_b ? 1 : n, b_cs = flags.trans_b ? k : 1;
  std::vector<cpu::GemmProblem> problems;
  if (NumElements(batch_b) == 1 && batch_a == batch && !flags.trans_a) {
    // One shared B: fold A's batch into its rows.
    cpu::GemmProblem p;
    p.m = NumElements(batch) * m;
    p.n = n;
    p.k = k;
    p.a = {a.data(), k, 1};
    p.b = {b.data(), b_rs, b_cs};
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
      p.a = {a.data() + oa[t] * m * k, a_rs, a_cs};
      p.b = {b.data() + ob[t] * k * n, b_rs, b_cs};
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
