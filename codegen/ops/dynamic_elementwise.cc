// Element-wise kernels with run-time sizes (issue 34): the loops of
// EmitElementwiseKernel (codegen/ops/kernel_util.cc) over a space whose extents and
// strides are expressions over the dim symbols, evaluated from the kernel's kiln_dims
// parameter. Dims are merged and vectors used only where that holds for every size in
// the ranges, which the expressions decide: two strides are contiguous when one equals
// the other times the extent between them as polynomials, and a width divides an
// extent when it divides every coefficient.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/dim_view.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/templates.h"

namespace kiln::codegen::ops {
namespace {

DimExpr Times(const DimExpr& a, const DimExpr& b) {
  absl::StatusOr<DimExpr> p = DimExpr::Mul(a, b);
  return p.ok() ? *p : DimExpr();  // sizes are bounded by the largest case's
}

// The space after dropping fixed unit dims and merging neighbours contiguous for
// every operand (operand 0: the dense outputs).
struct DynSpace {
  std::vector<DimExpr> dims;
  std::vector<std::vector<DimExpr>> strides;  // [operand][dim]

  void Collapse() {
    std::vector<DimExpr> d;
    std::vector<std::vector<DimExpr>> s(strides.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i].constant() == 1) continue;
      bool merge = !d.empty();
      for (size_t k = 0; k < strides.size() && merge; ++k) merge = s[k].back() == Times(strides[k][i], dims[i]);
      if (merge) {
        d.back() = Times(d.back(), dims[i]);
        for (size_t k = 0; k < strides.size(); ++k) s[k].back() = strides[k][i];
        continue;
      }
      d.push_back(dims[i]);
      for (size_t k = 0; k < strides.size(); ++k) s[k].push_back(strides[k][i]);
    }
    dims = std::move(d);
    strides = std::move(s);
  }
};

// The vector width: every operand contiguous or broadcast along the innermost dim,
// its extent and each contiguous operand's outer strides multiples of it; or one flat
// dim (a tail loop takes the rest).
int VectorWidth(const DynSpace& space, int max_width, bool* flat) {
  const size_t rank = space.dims.size();
  *flat = rank == 1;
  if (rank == 0) return 1;
  for (int v = max_width; v > 1; v /= 2) {
    bool ok = *flat || DividesAll(space.dims.back(), v);
    for (size_t k = 1; k < space.strides.size() && ok; ++k) {
      const std::vector<DimExpr>& s = space.strides[k];
      const bool contiguous = s.back().constant() == 1;
      ok = contiguous || s.back().constant() == 0;
      for (size_t d = 0; d + 1 < rank && ok && contiguous; ++d) ok = DividesAll(s[d], v);
    }
    if (ok) return v;
  }
  return 1;
}

// Declares o<k> for each operand k >= 1: `i` itself when its strides are the dense
// ones, i * c when c times them, else decomposed over the extents kD<d>.
std::string Offsets(const DynSpace& space, const std::string& i, const char* it) {
  const std::vector<DimExpr> dense = DenseDimStrides(space.dims);
  std::string code, decomposed;
  for (size_t k = 1; k < space.strides.size(); ++k) {
    const std::vector<DimExpr>& s = space.strides[k];
    bool scaled = !s.empty() && s.back().IsConstant();
    const int64_t c = scaled ? *s.back().constant() : 0;
    for (size_t d = 0; d < s.size() && scaled; ++d) scaled = s[d] == Times(dense[d], DimExpr::Constant(c));
    if (scaled || s.empty()) {
      absl::StrAppend(&code, "const ", it, " o", k, " = ", s.empty() || c == 0 ? "0" : c == 1 ? i : absl::StrCat(i, " * ", c),
                      ";\n");
      continue;
    }
    if (decomposed.empty()) {
      absl::StrAppend(&decomposed, it, " r_ = ", i, ";\n");
      for (int d = static_cast<int>(space.dims.size()) - 1; d >= 0; --d) {
        absl::StrAppend(&decomposed, "const ", it, " x", d, "_ = ", d > 0 ? absl::StrCat("r_ % kD", d, ";\nr_ /= kD", d, ";\n") : "r_;\n");
      }
      code = decomposed + code;
    }
    std::string sum;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d].constant() == 0) continue;
      absl::StrAppend(&sum, sum.empty() ? "" : " + ", "x", d, "_ * kS", k, "_", d);
    }
    absl::StrAppend(&code, "const ", it, " o", k, " = ", sum.empty() ? "0" : sum, ";\n");
  }
  return code;
}

}  // namespace

std::string DimCode(const DimExpr& e) {
  static const auto* symbols = [] {
    auto* s = new std::vector<DimSymbol>();
    for (int k = 0; k < kMaxKernelDims; ++k) s->push_back({absl::StrCat("KILN_DIM(", k, ")"), 0, 0});
    return s;
  }();
  return absl::StrCat("(", e.ToString(*symbols), ")");
}

std::vector<DimExpr> DenseDimStrides(const std::vector<DimExpr>& dims) {
  std::vector<DimExpr> s(dims.size(), DimExpr::Constant(1));
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = Times(s[d + 1], dims[d + 1]);
  return s;
}

DimExpr DimsProduct(const std::vector<DimExpr>& dims) {
  return DimExpr::Product(dims).value_or(DimExpr());  // sizes are bounded by the largest case's
}

std::vector<DimExpr> ValueDims(const Value& v) {
  if (v.is_dynamic()) return v.dims();
  std::vector<DimExpr> d;
  for (int64_t x : v.shape()) d.push_back(DimExpr::Constant(x));
  return d;
}

bool HasDynamicValues(const Node& node) {
  for (const Value* v : node.inputs()) {
    if (v != nullptr && v->is_dynamic()) return true;
  }
  for (const Value* v : node.outputs()) {
    if (v != nullptr && v->is_dynamic()) return true;
  }
  return false;
}

absl::StatusOr<std::optional<DimExpr>> VaryingOutermostDim(const Node& node, const Value& v) {
  if (!HasDynamicValues(node)) return std::optional<DimExpr>();
  const std::vector<DimExpr> dims = ValueDims(v);
  for (size_t d = 1; d < dims.size(); ++d) {
    if (!dims[d].IsConstant()) return NoKernel(node, "a varying dim other than the outermost (the batch)");
  }
  if (dims.empty()) return NoKernel(node, "a varying scalar");
  return std::optional<DimExpr>(dims[0]);
}

bool DynamicBroadcastStrides(const std::vector<DimExpr>& view, const std::vector<DimExpr>& shape,
                             std::vector<DimExpr>* strides) {
  if (view.size() > shape.size()) return false;
  const std::vector<DimExpr> dense = DenseDimStrides(view);
  strides->assign(shape.size(), DimExpr());
  const size_t lead = shape.size() - view.size();
  for (size_t d = 0; d < view.size(); ++d) {
    if (view[d] == shape[lead + d]) {
      (*strides)[lead + d] = dense[d];
    } else if (view[d].constant() != 1) {
      return false;
    }
  }
  return true;
}

void SetDynamicGrid1D(KernelLaunch& launch, const DimExpr& n, int64_t per_block) {
  launch.dim_param = true;
  launch.grid_extents[0] = n;
  launch.grid_per_block[0] = per_block;
}

KernelLaunch EmitDynamicStridedCopy(DType dtype, const std::vector<DimExpr>& dims, const std::vector<DimExpr>& out_strides,
                                    int64_t out_base, int64_t max_n, const std::string& comment) {
  DynSpace space;
  space.dims = dims;
  space.strides = {DenseDimStrides(dims), out_strides};
  space.Collapse();
  const DimExpr n = DimsProduct(space.dims);
  const char* it = IndexType(max_n);
  std::string src = absl::StrCat("// ", comment, " (sizes at run time)\nextern \"C\" __global__ void KILN_KERNEL(",
                                 Param(dtype, false, "out"), ", ", Param(dtype, true, "in"),
                                 ", const kiln_dims kiln_dims_) {\nconst ", it, " kN = (", it, ")", DimCode(n), ";\n");
  for (size_t d = 0; d < space.dims.size(); ++d) {
    absl::StrAppend(&src, "const ", it, " kD", d, " = (", it, ")", DimCode(space.dims[d]), ";\n");
    if (space.strides[1][d].constant() != 0) {
      absl::StrAppend(&src, "const ", it, " kS1_", d, " = (", it, ")", DimCode(space.strides[1][d]), ";\n");
    }
  }
  absl::StrAppend(&src, GridStrideLoop("kN", it), Offsets(space, "i", it), "out[", out_base, " + o1] = in[i];\n}\n}\n");
  KernelLaunch launch;
  launch.source = std::move(src);
  SetGrid1D(launch, max_n);
  SetDynamicGrid1D(launch, n, kBlock);
  return launch;
}

KernelLaunch EmitDynamicElementwiseKernel(const EwKernel& k) {
  const int64_t max_n = NumElements(k.shape);
  DynSpace space;
  space.dims = k.dims;
  space.strides.push_back(DenseDimStrides(k.dims));
  std::vector<DType> dtypes;
  for (const EwOutput& o : k.outputs) dtypes.push_back(o.dtype);
  for (const EwOperand& in : k.operands) {
    space.strides.push_back(in.dim_strides);
    dtypes.push_back(in.dtype);
  }
  space.Collapse();
  const char* it = IndexType(max_n);
  bool flat = false;
  int vec = VectorWidth(space, MaxVectorWidth(dtypes), &flat);
  const DimExpr n = DimsProduct(space.dims);
  std::optional<DimExpr> vecs = DimExpr::DivideExactly(n, DimExpr::Constant(vec));
  if (vec > 1 && !flat && !vecs.has_value()) vec = 1;
  const uint32_t block = kBlock;

  std::string params;
  for (const EwOutput& o : k.outputs) absl::StrAppend(&params, params.empty() ? "" : ", ", Param(o.dtype, false, o.param));
  for (const EwOperand& in : k.operands) absl::StrAppend(&params, ", ", Param(in.dtype, true, in.param));
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), TemplateSource("vector.cuh"), "\n// ", k.comment,
                                 " (sizes at run time", vec > 1 ? absl::StrCat(", ", vec, " elements per vector") : "",
                                 ")\nextern \"C\" __global__ void __launch_bounds__(", block, ") KILN_KERNEL(", params,
                                 ", const kiln_dims kiln_dims_) {\nconst ", it, " kN = (", it, ")", DimCode(n), ";\n");
  for (size_t d = 0; d < space.dims.size(); ++d) {
    absl::StrAppend(&src, "const ", it, " kD", d, " = (", it, ")", DimCode(space.dims[d]), ";\n");
  }
  for (size_t op = 1; op < space.strides.size(); ++op) {
    for (size_t d = 0; d < space.dims.size(); ++d) {
      const DimExpr& s = space.strides[op][d];
      if (s.constant() == 0) continue;
      absl::StrAppend(&src, "const ", it, " kS", op, "_", d, " = (", it, ")", DimCode(s), ";\n");
    }
  }
  for (const EwOperand& in : k.operands) {
    if (in.offset != 0) absl::StrAppend(&src, in.param, " += ", in.offset, ";\n");
  }
  std::vector<bool> contiguous;
  for (size_t l = 0; l < k.operands.size(); ++l) {
    contiguous.push_back(vec > 1 && space.strides[l + 1].back().constant() == 1);
  }
  absl::StrAppend(&src, ElementwiseLoops(k, it, vec, contiguous, absl::StrCat("const ", it, " kVecs = kN / ", vec, ";\n"),
                                         flat, "kN", [&](const std::string& i) { return Offsets(space, i, it); }));
  KernelLaunch launch;
  launch.source = std::move(src);
  if (vec > 1) {
    SetGrid1D(launch, max_n / vec, block);
    // A flat space whose count the width does not divide: ceil(n / vec) covers it.
    SetDynamicGrid1D(launch, vecs.has_value() ? *vecs : n, vecs.has_value() ? block : int64_t{block} * vec);
  } else {
    SetGrid1D(launch, (max_n + kScalarUnroll - 1) / kScalarUnroll, block);
    SetDynamicGrid1D(launch, n, int64_t{block} * kScalarUnroll);
  }
  return launch;
}

}  // namespace kiln::codegen::ops
