// Reduction kernels: the Reduce* family over any axes set, global pools (row
// reductions over planes) and ArgMax/ArgMin; Softmax/LogSoftmax and the norms go to
// the row kernels (codegen/ops/row.cc). Instantiates codegen/templates/reduce.cuh
// (after vector.cuh) with a generated prefix of types, constants and load/store
// functions (codegen/ops/row_plan.h).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/row_plan.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/ops/axes.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/reduce_eval.h"

namespace kiln::codegen::ops {
namespace {

constexpr int kReduceElements = 64;  // reductions: elements one thread combines

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum };

// A reduction of a dynamic graph (issue 34) whose only varying dim is the input's
// outermost, kept: its row count as an expression (the rows' offsets are those of the
// largest case). nullopt for a node whose sizes are fixed; Unimplemented for other
// forms.
absl::StatusOr<std::optional<DimExpr>> DynamicReduceRows(const Node& node, const std::vector<bool>& mask) {
  if (!HasDynamicValues(node)) return std::optional<DimExpr>();
  const std::vector<DimExpr> dims = ValueDims(*node.input(0));
  if (dims.empty() || mask[0]) return NoKernel(node, "a reduced dim whose size varies with the dim ranges");
  DimExpr rows = dims[0];
  for (size_t d = 1; d < dims.size(); ++d) {
    if (!dims[d].IsConstant()) return NoKernel(node, "a varying dim other than the outermost");
    if (!mask[d]) rows = *DimExpr::Mul(rows, dims[d]);
  }
  return std::optional<DimExpr>(rows);
}

absl::StatusOr<std::vector<KernelLaunch>> EmitReduce(const Node& node, Kind kind, const std::vector<bool>& mask) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  KILN_ASSIGN_OR_RETURN(const std::optional<DimExpr> dynamic_rows, DynamicReduceRows(node, mask));
  const Shape& shape = x->shape();
  const std::vector<int64_t> strides = DenseStrides(shape);
  Shape kept, red;
  std::vector<int64_t> kept_s, red_s;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) {
      red.push_back(shape[d]);
      red_s.push_back(strides[d]);
      count *= shape[d];
    } else {
      kept.push_back(shape[d]);
      kept_s.push_back(strides[d]);
    }
  }
  // Innermost non-unit input dim reduced: rows of contiguous-ish elements.
  bool inner_reduced = false;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] != 1) {
      inner_reduced = mask[d];
      break;
    }
  }
  const int64_t rows = NumElements(kept);
  const char* it = IndexType(std::max(x->numel(), rows));
  const bool fl = IsFloating(x->dtype());
  const Domain dom = fl ? Domain::kFloat : Domain::kInt;
  std::string identity, map = "x", combine, finish = "v";
  const bool block_per_row = inner_reduced && count > 1;
  switch (kind) {
    case Kind::kSum: case Kind::kMean: case Kind::kLogSum: case Kind::kL1: case Kind::kL2: case Kind::kSumSquare:
      identity = fl ? "0.f" : "0";
      combine = fl ? "a + b" : "(kiln_i64)((unsigned long long)a + (unsigned long long)b)";
      break;
    case Kind::kProd:
      identity = fl ? "1.f" : "1";
      combine = fl ? "a * b" : "(kiln_i64)((unsigned long long)a * (unsigned long long)b)";
      break;
    case Kind::kMax:
      identity = fl ? "-__int_as_float(0x7f800000)" : IntLit(INT64_MIN);
      combine = "(b > a || b != b) ? b : a";
      break;
    case Kind::kMin:
      identity = fl ? "__int_as_float(0x7f800000)" : IntLit(INT64_MAX);
      combine = "(b < a || b != b) ? b : a";
      break;
  }
  if (kind == Kind::kL1) map = fl ? "fabsf(x)" : "(x < 0 ? (kiln_i64)(0ULL - (unsigned long long)x) : x)";
  if (kind == Kind::kL2 || kind == Kind::kSumSquare) map = fl ? "x * x" : "(kiln_i64)((unsigned long long)x * (unsigned long long)x)";
  if (kind == Kind::kMean) {
    if (fl) {
      finish = count == 0 ? "__int_as_float(0x7fc00000)" : absl::StrCat("v * ", FloatLit(1.f / static_cast<float>(count)));
      if (node.op_type() == "GlobalAveragePool") finish = absl::StrCat("v / ", FloatLit(static_cast<float>(count)));
    } else {
      finish = count == 0 ? "(kiln_i64)0" : absl::StrCat("v / ", IntLit(count));
    }
  }
  if (kind == Kind::kL2) finish = fl ? "sqrtf(v)" : "(kiln_i64)sqrt((double)v)";
  if (kind == Kind::kLogSum) finish = fl ? "logf(v)" : "(kiln_i64)log((double)v)";
  const char* acc = DomainType(dom);
  // Row mode: contiguous reduced elements (one trailing run, kiln_elem(j) == j) load
  // vectors; every row then starts at a multiple of `count`.
  int vec = 1;
  if (block_per_row) {
    StridedSpace r;
    r.shape = red;
    r.strides = {red_s};
    r.Collapse();
    if (r.shape.size() == 1 && r.strides[0][0] == 1) {
      vec = MaxVectorWidth({x->dtype()});
      while (vec > 1 && count % vec != 0) vec /= 2;
    }
  }
  const RowPlan plan = PlanRows(rows, count, vec, kReduceElements);
  std::string src = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " -> ", y->TypeString(), "\n", TemplateSource("vector.cuh"),
      "typedef ", StorageTypeName(x->dtype()), " kiln_in_t;\ntypedef ", StorageTypeName(y->dtype()),
      " kiln_out_t;\ntypedef ", acc, " kiln_acc_t;\ntypedef ", it, " kiln_idx_t;\nconstexpr kiln_idx_t kRows = ", rows,
      ";\nconstexpr kiln_idx_t kLen = ", count, ";\nconstexpr bool kRowMode = ", block_per_row ? "true" : "false",
      ";\n", RowPlanConstants(plan),
      OffsetFn("kiln_row_base", kept, kept_s, it), OffsetFn("kiln_elem", red, red_s, it),
      LoadFn("kiln_load", x->dtype(), dom, it), "static __device__ __forceinline__ ", acc,
      " kiln_identity() { return ", identity, "; }\nstatic __device__ __forceinline__ ", acc, " kiln_map(", acc,
      " x) { return ", map, "; }\nstatic __device__ __forceinline__ ", acc, " kiln_combine(", acc, " a, ", acc,
      " b) { return ", combine, "; }\n", StoreFn("kiln_store", y->dtype(), dom, it, finish),
      TemplateSource("reduce.cuh"), "\nextern \"C\" __global__ void __launch_bounds__(",
      block_per_row ? plan.block : kBlock, ") KILN_KERNEL(", Param(y->dtype(), false, "out"),
      ", ", Param(x->dtype(), true, "in"), dynamic_rows ? ", const kiln_dims kiln_dims_" : "",
      ") { kiln_reduce(out, in, ", dynamic_rows ? absl::StrCat("(kiln_idx_t)", DimCode(*dynamic_rows)) : "kRows",
      "); }\n");
  KernelLaunch l;
  l.source = std::move(src);
  l.args = {0, InputArg(node, 0)};
  if (block_per_row) {
    l.block = {plan.block, 1, 1};
    l.grid = {plan.grid, 1, 1};
    if (dynamic_rows) SetDynamicGrid1D(l, *dynamic_rows, plan.rows_per_block);
  } else {
    SetGrid1D(l, rows);
    if (dynamic_rows) SetDynamicGrid1D(l, *dynamic_rows, kBlock);
  }
  return std::vector<KernelLaunch>{std::move(l)};
}

// GlobalAveragePool with channels_last=1: X [N, H, W, C] -> [N, 1, 1, C], on
// codegen/templates/pool_nhwc.cuh. A CTA per (image, tile of channel groups, share of
// the pixels), at most 512 threads: threadIdx.x walks adjacent groups of 8 channels
// (16-byte loads), threadIdx.y the pixels, kPix loads each in flight at once. A
// squeeze-excitation pool reads a feature map its producer has just left in L2 and is
// bound by latency and by how many SMs pull from L2; its pixels are shared by up to
// 8 CTAs (a cluster on sm_90), and a large map at batch 1 gets narrower channel tiles.
absl::StatusOr<std::vector<KernelLaunch>> GlobalAveragePoolNhwc(const Node& node) {
  constexpr int kMaxThreads = 512, kPixTarget = 4, kMaxPix = 8;
  constexpr int64_t kMaxSplits = 8;  // the portable cluster size
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!IsFloating(x->dtype())) return NoKernel(node, absl::StrCat("dtype ", DTypeName(x->dtype())));
  const Shape& xs = x->shape();
  if (xs[0] > 65535) return NoKernel(node, absl::StrCat("batch ", xs[0], " > 65535 (grid.y)"));
  // A dynamic graph's pool (issue 34): the batch, grid.y, may vary, read from kiln_dims.
  KILN_ASSIGN_OR_RETURN(const std::optional<DimExpr> batch, VaryingOutermostDim(node, *x));
  const int64_t n = xs[0], hw = xs[1] * xs[2], c = xs[3];
  int vec = MaxVectorWidth({x->dtype(), y->dtype()});
  while (vec > 1 && c % vec != 0) vec /= 2;
  const int64_t groups = c / vec;
  auto tiles_of = [&](int t) { return std::max<int64_t>(1, (groups + t - 1) / t); };
  // The power of two up to 32 that covers the groups with the fewest idle lanes.
  int tx = 32;
  for (int t = 16; t >= 1; t /= 2) {
    if (tiles_of(t) * t < tiles_of(tx) * tx) tx = t;
  }
  while (tx > 2 && tiles_of(tx) * n * kMaxSplits < 32 && hw >= 4096) tx /= 2;
  const int64_t tiles = tiles_of(tx);
  int ty = std::max(1, 32 / tx);  // whole warps
  while (tx * ty * 2 <= kMaxThreads && ty < hw) ty *= 2;
  int64_t splits = 1, pix = 1;
  // Empty tensors keep a grid of one block, which the guards leave idle.
  if (y->numel() > 0) {
    for (splits = 1; splits < kMaxSplits && (hw + ty * splits - 1) / (ty * splits) > kPixTarget;) splits *= 2;
    while (splits > 1 && tiles * n * (splits / 2) >= 264) splits /= 2;  // two CTAs an SM without it
    pix = std::clamp<int64_t>((hw + ty * splits - 1) / (ty * splits), 1, kMaxPix);
  }
  const char* it = IndexType(std::max<int64_t>(x->numel(), 1));
  std::string src = absl::StrCat(
      "// GlobalAveragePool (channels_last) ", x->TypeString(), " -> ", y->TypeString(), "\n",
      TemplateSource("vector.cuh"), "typedef ", StorageTypeName(x->dtype()), " kiln_in_t;\ntypedef ",
      StorageTypeName(y->dtype()), " kiln_out_t;\ntypedef ", it,
      " kiln_idx_t;\nconstexpr kiln_idx_t kGroups = ", groups, ";\nconstexpr kiln_idx_t kHW = ", hw,
      ";\nconstexpr kiln_idx_t kC = ", c, ";\nconstexpr int kVec = ", vec, ";\nconstexpr int kTx = ", tx,
      ";\nconstexpr int kTy = ", ty, ";\nconstexpr int kPix = ", pix, ";\nconstexpr int kSplits = ", splits, ";\n",
      splits > 1 ? absl::StrCat("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n#define KILN_POOL_CLUSTER "
                                "__cluster_dims__(1, 1, ",
                                splits, ")\n#else\n#define KILN_POOL_CLUSTER\n#endif\n")
                 : "#define KILN_POOL_CLUSTER\n",
      batch ? absl::StrCat("#define kN ((kiln_idx_t)", DimCode(*batch), ")\n")
            : absl::StrCat("constexpr kiln_idx_t kN = ", n, ";\n"),
      LoadFn("kiln_load", x->dtype(), Domain::kFloat, "int"),
      StoreFn("kiln_store", y->dtype(), Domain::kFloat, it, absl::StrCat("v / ", FloatLit(static_cast<float>(hw)))),
      TemplateSource("pool_nhwc.cuh"), "extern \"C\" __global__ void __launch_bounds__(", tx * ty,
      ") KILN_POOL_CLUSTER KILN_KERNEL(", Param(y->dtype(), false, "out"), ", ", Param(x->dtype(), true, "in"),
      splits > 1 ? ", unsigned int* __restrict__ kiln_semaphores, float* __restrict__ kiln_scratch" : "",
      batch ? ", const kiln_dims kiln_dims_" : "", ") {\n  kiln_pool_nhwc(out, in, ",
      splits > 1 ? "kiln_semaphores" : "nullptr", ", kN);\n}\n#undef KILN_POOL_CLUSTER\n", batch ? "#undef kN\n" : "");
  KernelLaunch l;
  l.source = std::move(src);
  l.args = {0, InputArg(node, 0)};
  l.block = {static_cast<uint32_t>(tx), static_cast<uint32_t>(ty), 1};
  l.grid = {static_cast<uint32_t>(tiles), static_cast<uint32_t>(std::max<int64_t>(1, n)),
            static_cast<uint32_t>(splits)};
  // Before sm_90 the shares meet in global memory: a counter per (image, tile), then an
  // fp32 accumulator per (image, channel).
  if (splits > 1) l.semaphores = static_cast<uint32_t>(n * (tiles + c));
  if (batch) {
    l.dim_param = true;
    l.grid_extents[1] = *batch;
    l.grid_per_block[1] = 1;
  }
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> ArgReduce(const Node& node) {
  const Value* x = node.input(0);
  auto axis_attr = node.GetInt("axis", 0);
  if (!axis_attr.ok()) return axis_attr.status();
  auto last = node.GetInt("select_last_index", 0);
  if (!last.ok()) return last.status();
  const int64_t rank = x->rank();
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  const kiln::ops::AxisSplit s = kiln::ops::SplitAtAxis(x->shape(), axis);
  const bool is_max = node.op_type() == "ArgMax";
  const Domain dom = DomainOf(x->dtype());
  const char* it = IndexType(x->numel());
  const int64_t n = s.outer * s.inner;
  const std::string cmp = is_max ? (*last ? "v >= bv" : "v > bv") : (*last ? "v <= bv" : "v < bv");
  KernelLaunch l;
  l.args = {0, InputArg(node, 0)};
  l.source = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " axis ", axis, "\nextern \"C\" __global__ void KILN_KERNEL(",
      Param(DType::kInt64, false, "out"), ", ", Param(x->dtype(), true, "in"), ") {\n", GridStrideLoop(n), "const ", it,
      " base = (i / ", s.inner, ") * ", s.len * s.inner, " + i % ", s.inner, ";\n", DomainType(dom), " bv = ",
      LoadAs(x->dtype(), dom, "in", "base"), ";\nkiln_i64 best = 0;\nfor (", it, " l = 1; l < ", s.len, "; ++l) {\n",
      "const ", DomainType(dom), " v = ", LoadAs(x->dtype(), dom, "in", absl::StrCat("base + l * ", s.inner)),
      ";\nif (", cmp, ") { bv = v; best = l; }\n}\nout[i] = best;\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace

bool IsReduceOp(absl::string_view op) {
  static const char* const kOps[] = {"ReduceSum",   "ReduceMean", "ReduceMax",       "ReduceMin",
                                     "ReduceProd",  "ReduceL1",   "ReduceL2",        "ReduceSumSquare",
                                     "ReduceLogSum", "Softmax",   "LogSoftmax",      "LayerNormalization",
                                     "RMSNormalization",
                                     "GlobalAveragePool", "GlobalMaxPool", "ArgMax", "ArgMin"};
  for (const char* k : kOps) {
    if (op == k) return true;
  }
  return false;
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateReduce(const Node& node) {
  const std::string& op = node.op_type();
  if (IsRowOp(op)) return GenerateRowOp(node);
  const bool dynamic = HasDynamicValues(node);  // only EmitReduce takes run-time sizes
  if (op == "ArgMax" || op == "ArgMin") return dynamic ? NoKernel(node, "sizes that vary") : ArgReduce(node);
  const int64_t rank = node.input(0)->rank();
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (op == "GlobalAveragePool") {
      auto channels_last = kiln::ops::ChannelsLast(node);
      if (!channels_last.ok()) return channels_last.status();
      if (*channels_last) return GlobalAveragePoolNhwc(node);
    }
    std::vector<bool> mask(rank, true);
    mask[0] = mask[1] = false;
    return EmitReduce(node, op == "GlobalAveragePool" ? Kind::kMean : Kind::kMax, mask);
  }
  auto mask = kiln::ops::ReducedAxes(node, rank);
  if (!mask.ok()) return mask.status();
  if (node.input(0)->dtype() == DType::kBool) return NoKernel(node, "bool input");
  Kind kind;
  if (op == "ReduceSum") kind = Kind::kSum;
  else if (op == "ReduceMean") kind = Kind::kMean;
  else if (op == "ReduceMax") kind = Kind::kMax;
  else if (op == "ReduceMin") kind = Kind::kMin;
  else if (op == "ReduceProd") kind = Kind::kProd;
  else if (op == "ReduceL1") kind = Kind::kL1;
  else if (op == "ReduceL2") kind = Kind::kL2;
  else if (op == "ReduceSumSquare") kind = Kind::kSumSquare;
  else if (op == "ReduceLogSum") kind = Kind::kLogSum;
  else return NoKernel(node, "");
  return EmitReduce(node, kind, *mask);
}

}  // namespace kiln::codegen::ops
