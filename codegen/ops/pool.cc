// Windowed kernels: MaxPool and AveragePool over 1 to 3 spatial dims, NCHW or
// channels_last NHWC (window geometry resolved by kiln::ops::ComputeWindow, as the
// CPU reference does; the template is codegen/templates/pool.cuh), and LRN across
// channels.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "common/status_macros.h"
#include "codegen/templates.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/window.h"

namespace kiln::codegen::ops {
namespace {

// The pool's window over `spatial` (kernel_shape, ceil_mode, strides, pads,
// dilations), lifted to three dims as the reference does.
absl::StatusOr<kiln::ops::Window3> PoolWindow(const Node& node, const Shape& spatial) {
  auto kernel = node.GetInts("kernel_shape");
  if (!kernel.ok()) return kernel.status();
  auto ceil_mode = node.GetInt("ceil_mode", 0);
  if (!ceil_mode.ok()) return ceil_mode.status();
  auto win = kiln::ops::ComputeWindow(node, spatial, *kernel, /*use_dilations=*/true, *ceil_mode != 0);
  if (!win.ok()) return win.status();
  return kiln::ops::LiftWindow(spatial, *win);
}

// MaxPool with its Indices output (NCHW; graph/ops/max_pool.cc has the rules): one
// thread per output element walks its window.
absl::StatusOr<std::vector<KernelLaunch>> MaxPoolWithIndices(const Node& node) {
  const Value* x = node.input(0);
  const Shape& xs = x->shape();
  auto storage_order = node.GetInt("storage_order", 0);
  if (!storage_order.ok()) return storage_order.status();
  auto window = PoolWindow(node, Shape(xs.begin() + 2, xs.end()));
  if (!window.ok()) return window.status();
  const kiln::ops::Window3& g = *window;
  const int64_t total = node.output(0)->numel(), in_plane = g.in[0] * g.in[1] * g.in[2];
  // Tap k of output o along dim d sits at o * stride - pad_begin + k * dilation.
  std::string taps;
  const char* names[3] = {"d", "h", "w"};
  for (int d = 0; d < 3; ++d) {
    absl::StrAppend(&taps, "for (kiln_index k", names[d], " = 0; k", names[d], " < ", g.kernel[d], "; ++k",
                    names[d], ") {\nconst kiln_index i", names[d], " = o", names[d], " * ", g.stride[d], " - ",
                    g.pad_begin[d], " + k", names[d], " * ", g.dilation[d], ";\nif (i", names[d], " < 0 || i",
                    names[d], " >= ", g.in[d], ") continue;\n");
  }
  const std::string at = *storage_order == 0 ? absl::StrCat("(id * ", g.in[1], " + ih) * ", g.in[2], " + iw")
                                             : absl::StrCat("iw * ", g.in[1], " + ih");
  KernelLaunch l;
  l.args = {0, 1, InputArg(node, 0)};
  l.source = absl::StrCat(
      "// MaxPool with Indices ", x->TypeString(), "\nextern \"C\" __global__ void KILN_KERNEL(",
      Param(x->dtype(), false, "out"), ", ", Param(DType::kInt64, false, "indices"), ", ", Param(x->dtype(), true, "x"), ") {\n",
      GridStrideLoop(total, "o_"), "const kiln_index ow = o_ % ", g.out[2], ", oh = (o_ / ", g.out[2], ") % ",
      g.out[1], ", od = (o_ / ", g.out[1] * g.out[2], ") % ", g.out[0], ", t = o_ / ", g.out[0] * g.out[1] * g.out[2],
      ";\nfloat m = -", FloatLit(INFINITY), ";\nlong long at = -1;\n", taps, "const float v = ",
      LoadAs(x->dtype(), Domain::kFloat, "x", absl::StrCat("t * ", in_plane, " + (id * ", g.in[1], " + ih) * ", g.in[2], " + iw")),
      ";\nif (at < 0 || v > m || (v != v && m == m)) { m = v; at = ", at, "; }\n}\n}\n}\n",
      StoreFrom(x->dtype(), Domain::kFloat, "out", "o_", "m"), "\nindices[o_] = at < 0 ? -1 : t * ", in_plane,
      "LL + at;\n}\n}\n");
  SetGrid1D(l, total);
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> Pool(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  const bool is_max = node.op_type() == "MaxPool";
  if (node.num_outputs() > 1) return MaxPoolWithIndices(node);
  if (x->rank() < 3 || x->rank() > 5) return NoKernel(node, absl::StrCat("rank ", x->rank()));
  if (!IsFloating(x->dtype()) && !(is_max && (x->dtype() == DType::kInt8 || x->dtype() == DType::kUInt8))) {
    return NoKernel(node, absl::StrCat("dtype ", DTypeName(x->dtype())));
  }
  auto count_pad = node.GetInt("count_include_pad", 0);
  if (!count_pad.ok()) return count_pad.status();
  auto channels_last = kiln::ops::ChannelsLast(node);
  if (!channels_last.ok()) return channels_last.status();
  const Shape& xs = x->shape();
  // NCHW: planes = N * C, one channel per plane (kC = 1); channels_last (NHWC):
  // planes = N, the C channels innermost.
  const Shape spatial = *channels_last ? Shape(xs.begin() + 1, xs.end() - 1) : Shape(xs.begin() + 2, xs.end());
  auto window = PoolWindow(node, spatial);
  if (!window.ok()) return window.status();
  const kiln::ops::Window3& g = *window;
  const int64_t planes = *channels_last ? xs[0] : xs[0] * xs[1];
  // A dynamic graph's pool: only the batch (outermost) may vary; the planes are then
  // counted at run time.
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> dynamic_planes, VaryingOutermostDim(node, *x));
  if (dynamic_planes && !*channels_last) dynamic_planes = *DimExpr::Mul(*dynamic_planes, DimExpr::Constant(xs[1]));
  const int64_t channels = *channels_last ? xs[3] : 1;
  // NHWC: up to 16 bytes of adjacent channels per thread when C allows.
  int vec = 1;
  if (*channels_last) {
    const int64_t widest = std::max(DTypeSize(x->dtype()), DTypeSize(y->dtype()));
    for (int v = static_cast<int>(16 / widest); v > 1; v /= 2) {
      if (channels % v == 0) {
        vec = v;
        break;
      }
    }
  }
  const char* it = IndexType(std::max(x->numel(), y->numel()));
  std::string prefix = absl::StrCat("// ", node.op_type(), " ", x->TypeString(), " -> ", y->TypeString(), "\n",
                                    TemplateSource("vector.cuh"), "typedef ",
                                    StorageTypeName(x->dtype()), " kiln_in_t;\ntypedef ", StorageTypeName(y->dtype()),
                                    " kiln_out_t;\ntypedef ", it, " kiln_idx_t;\nconstexpr kiln_idx_t kPlanes = ", planes,
                                    ";\nconstexpr int kC = ", channels, ";\nconstexpr int kVec = ", vec,
                                    ";\nconstexpr bool kIsMax = ", is_max ? "true" : "false",
                                    ";\nconstexpr bool kCountPad = ", *count_pad ? "true" : "false", ";\n");
  auto dims = [&](const char* name, const int64_t* v) {
    for (int d = 0; d < 3; ++d) absl::StrAppend(&prefix, "constexpr int ", name, d, " = ", v[d], ";\n");
  };
  dims("kIn", g.in);
  dims("kOut", g.out);
  dims("kK", g.kernel);
  dims("kS", g.stride);
  dims("kD", g.dilation);
  dims("kPb", g.pad_begin);
  dims("kPe", g.pad_end);
  absl::StrAppend(&prefix, "static __device__ __forceinline__ float kiln_load(const kiln_in_t* p, int i) { return ",
                  LoadAs(x->dtype(), Domain::kFloat, "p", "i"), "; }\n",
                  "static __device__ __forceinline__ void kiln_store(kiln_out_t* p, kiln_idx_t i, float v) { ",
                  StoreFrom(y->dtype(), Domain::kFloat, "p", "i", "v"), " }\n");
  KernelLaunch l;
  l.source = absl::StrCat(prefix, TemplateSource("pool.cuh"), "\nextern \"C\" __global__ void KILN_KERNEL(",
                          Param(y->dtype(), false, "out"), ", ", Param(x->dtype(), true, "in"),
                          dynamic_planes ? ", const kiln_dims kiln_dims_" : "", ") { kiln_pool(out, in, ",
                          dynamic_planes ? absl::StrCat("(kiln_idx_t)", DimCode(*dynamic_planes)) : "kPlanes", "); }\n");
  l.args = {0, InputArg(node, 0)};
  SetGrid1D(l, y->numel() / vec);
  if (dynamic_planes) {
    const int64_t per_plane = y->numel() / planes / vec;  // threads per plane
    SetDynamicGrid1D(l, *DimExpr::Mul(*dynamic_planes, DimExpr::Constant(per_plane)), kBlock);
  }
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> Lrn(const Node& node) {
  const Value* x = node.input(0);
  if (!IsFloating(x->dtype()) || x->rank() < 2) return NoKernel(node, x->TypeString());
  auto size = node.GetInt("size");
  if (!size.ok()) return size.status();
  auto alpha = node.GetFloat("alpha", 1e-4f);
  auto beta = node.GetFloat("beta", 0.75f);
  auto bias = node.GetFloat("bias", 1.f);
  if (!alpha.ok()) return alpha.status();
  if (!beta.ok()) return beta.status();
  if (!bias.ok()) return bias.status();
  const Shape& xs = x->shape();
  const int64_t c = xs[1];
  const int64_t plane = xs[0] * c == 0 ? 0 : x->numel() / (xs[0] * c);
  const int64_t before = (*size - 1) / 2, after = *size - 1 - before;
  const float scale = *alpha / static_cast<float>(*size);
  const int64_t n = x->numel();
  const char* it = IndexType(n);
  const std::string ld = LoadAs(x->dtype(), Domain::kFloat, "in", "i");
  KernelLaunch l;
  l.args = {0, InputArg(node, 0)};
  l.source = absl::StrCat(
      "// LRN ", x->TypeString(), " size ", *size, "\nextern \"C\" __global__ void KILN_KERNEL(",
      Param(x->dtype(), false, "out"), ", ", Param(x->dtype(), true, "in"), ") {\n", GridStrideLoop(n), "const ", it,
      " p = i % ", plane, ";\nconst int ch = (int)((i / ", plane, ") % ", c, ");\nconst ", it, " first = i - (", it,
      ")ch * ", plane, ";\nconst int k0 = ch - ", before, " < 0 ? 0 : ch - ", before, ";\nconst int k1 = ch + ", after,
      " > ", c - 1, " ? ", c - 1, " : ch + ", after, ";\nfloat acc = 0.f;\nfor (int k = k0; k <= k1; ++k) {\n",
      "const float v = ", LoadAs(x->dtype(), Domain::kFloat, "in", absl::StrCat("first + (", it, ")k * ", plane)),
      ";\nacc += v * v;\n}\n(void)p;\n",
      StoreFrom(x->dtype(), Domain::kFloat, "out", "i",
                absl::StrCat(ld, " / powf(", FloatLit(*bias), " + ", FloatLit(scale), " * acc, ", FloatLit(*beta), ")")),
      "\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace

bool IsPoolOp(absl::string_view op) { return op == "MaxPool" || op == "AveragePool" || op == "LRN"; }

absl::StatusOr<std::vector<KernelLaunch>> GeneratePool(const Node& node) {
  if (HasDynamicValues(node) && (node.op_type() == "LRN" || node.num_outputs() > 1)) {
    return NoKernel(node, "sizes that vary (only MaxPool and AveragePool take them at run time)");
  }
  if (node.op_type() == "LRN") return Lrn(node);
  return Pool(node);
}

}  // namespace kiln::codegen::ops
