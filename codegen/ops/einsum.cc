// Einsum on the GPU: one thread per output element sums the products of its operands
// over the contracted letters (graph/ops/einsum.h's plan, strides baked in); fp32 sums
// for floats, int64 for integers. A generic kernel for every equation; contractions
// that are batched matrix products would run faster as MatMul.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/einsum.h"

namespace kiln::codegen::ops {
namespace {

// Statements adding, for each operand k, the offset of index `var` over `shape`
// (strides[k]) to `off<k>`.
std::string AddOffsets(const std::string& var, const Shape& shape, const std::vector<std::vector<int64_t>>& strides) {
  std::string s = absl::StrCat("{\nkiln_index q_ = ", var, ";\n");
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    absl::StrAppend(&s, "{\nconst kiln_index c_ = q_ % ", shape[d], ";\nq_ /= ", shape[d], ";\n");
    for (size_t k = 0; k < strides.size(); ++k) {
      if (strides[k][d] != 0) absl::StrAppend(&s, "off", k, " += c_ * ", strides[k][d], ";\n");
    }
    absl::StrAppend(&s, "}\n");
  }
  return s + "}\n";
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateEinsum(const Node& node) {
  absl::StatusOr<kiln::ops::EinsumPlan> p = kiln::ops::PlanEinsum(node);
  if (!p.ok()) return p.status();
  const DType dt = node.input(0)->dtype();
  const Domain d = IsFloating(dt) ? Domain::kFloat : Domain::kInt;
  const std::string t = DomainType(d);
  const int k_count = node.num_inputs();
  std::string params = Param(node.output(0)->dtype(), false, "out");
  KernelLaunch l;
  l.args = {0};
  std::string base_decl, sum_decl, product = absl::StrCat("(", t, ")1");
  for (int k = 0; k < k_count; ++k) {
    absl::StrAppend(&params, ", ", Param(dt, true, absl::StrCat("in", k)));
    l.args.push_back(InputArg(node, k));
    absl::StrAppend(&base_decl, "kiln_index off", k, " = 0;\n");
    absl::StrAppend(&sum_decl, "kiln_index off", k, " = base", k, ";\n");
    absl::StrAppend(&product, " * ", LoadAs(dt, d, absl::StrCat("in", k), absl::StrCat("off", k)));
  }
  std::string keep;
  for (int k = 0; k < k_count; ++k) absl::StrAppend(&keep, "const kiln_index base", k, " = off", k, ";\n");
  const int64_t n = NumElements(p->out), m = NumElements(p->contracted);
  const std::string body = absl::StrCat(
      "{\n", base_decl, AddOffsets("w", p->out, p->out_strides),
      keep, t, " acc = 0;\nfor (kiln_index c = 0; c < ", m, "; ++c) {\n", sum_decl,
      AddOffsets("c", p->contracted, p->sum_strides), "acc += ", product, ";\n}\n",
      StoreFrom(node.output(0)->dtype(), d, "out", "w", "acc"), "\n}\n");
  l.source = absl::StrCat("// Einsum ", node.output(0)->TypeString(), ", ", m, " terms per element\n",
                          "extern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", GridStrideLoop(n, "w"), body,
                          "}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
