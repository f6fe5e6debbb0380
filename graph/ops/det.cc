// Det: the determinant of each square matrix in the last two dims, by LU
// decomposition with partial pivoting in double precision.
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  const Shape& x = node.input(0)->shape();
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2]) {
    return node.Error(absl::StrCat("input must be [..., M, M], got ", node.input(0)->TypeString()));
  }
  node.output(0)->SetType(node.input(0)->dtype(), Shape(x.begin(), x.end() - 2));
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Shape& x = in[0]->shape();
  const int64_t m = x.back();
  const int64_t mats = m == 0 ? out[0].numel() : in[0]->numel() / (m * m);
  const std::vector<float> v = in[0]->ToFloat();
  std::vector<float> dets(mats);
  std::vector<double> a(m * m);
  for (int64_t t = 0; t < mats; ++t) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = v[t * m * m + i];
    double det = 1.0;
    for (int64_t c = 0; c < m; ++c) {
      int64_t p = c;
      for (int64_t r = c + 1; r < m; ++r) {
        if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
      }
      if (a[p * m + c] == 0.0) {
        det = 0.0;
        break;
      }
      if (p != c) {
        for (int64_t k = 0; k < m; ++k) std::swap(a[p * m + k], a[c * m + k]);
        det = -det;
      }
      det *= a[c * m + c];
      for (int64_t r = c + 1; r < m; ++r) {
        const double f = a[r * m + c] / a[c * m + c];
        for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
      }
    }
    dets[t] = static_cast<float>(det);
  }
  out[0] = Tensor::FromFloat(out[0].dtype(), out[0].shape(), dets);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(det) {
  registry.Register({.name = "Det", .infer = ops::Infer, .eval = ops::Eval});
}
