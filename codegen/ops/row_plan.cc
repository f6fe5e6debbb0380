// Row plans shared by the reduction and row kernels.
#include "codegen/ops/row_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::codegen::ops {

RowPlan PlanRows(int64_t rows, int64_t len, int vec, int cap) {
  RowPlan p;
  p.vec = vec;
  const int64_t vecs = std::max<int64_t>(1, len / vec);
  auto per_thread = [&](int64_t t) { return (vecs + t - 1) / t * vec; };
  if (per_thread(32) <= cap) {
    int64_t t = 1;
    while (t < vecs && t < 32) t *= 2;
    p.threads = static_cast<int>(t);
    p.rows_per_block = static_cast<int>(kRowBlock / t);
    p.block = kRowBlock;
  } else {
    int64_t t = 64;
    while (t < 1024 && per_thread(t) > cap) t *= 2;
    p.threads = static_cast<int>(t);
    p.rows_per_block = 1;
    p.block = static_cast<uint32_t>(t);
    p.cache = per_thread(t) <= cap;
  }
  p.grid = static_cast<uint32_t>(std::clamp<int64_t>((rows + p.rows_per_block - 1) / p.rows_per_block, 1, kMaxGrid));
  return p;
}

std::string RowPlanConstants(const RowPlan& p) {
  return absl::StrCat("constexpr int kThreads = ", p.threads, ";\nconstexpr int kRowsPerBlock = ", p.rows_per_block,
                      ";\nconstexpr int kVec = ", p.vec, ";\nconstexpr bool kCache = ", p.cache ? "true" : "false",
                      ";\n");
}

std::string LoadFn(const std::string& name, DType dtype, Domain domain, const char* idx_t) {
  return absl::StrCat("static __device__ __forceinline__ ", DomainType(domain), " ", name, "(const ",
                      StorageTypeName(dtype), "* p, ", idx_t, " i) { return ", LoadAs(dtype, domain, "p", "i"),
                      "; }\n");
}

std::string StoreFn(const std::string& name, DType dtype, Domain domain, const char* idx_t, const std::string& finish) {
  return absl::StrCat("static __device__ __forceinline__ void ", name, "(", StorageTypeName(dtype), "* p, ", idx_t,
                      " i, ", DomainType(domain), " v) { ", StoreFrom(dtype, domain, "p", "i", finish), " }\n");
}

std::string OffsetFn(const std::string& name, const Shape& shape, const std::vector<int64_t>& strides,
                     const char* idx_t) {
  StridedSpace s;
  s.shape = shape;
  s.strides = {strides};
  s.Collapse();
  return absl::StrCat("static __device__ __forceinline__ ", idx_t, " ", name, "(", idx_t, " i) {\n",
                      s.shape.empty() ? absl::StrCat(idx_t, " o0 = 0;\n") : OffsetCode(s, {0}, "i", idx_t, "o"),
                      "return o0;\n}\n");
}

}  // namespace kiln::codegen::ops
