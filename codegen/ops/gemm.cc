// Tensor-core GEMM kernels (codegen/templates/gemm_sm80.cuh; fp32 operands: the SIMT
// template, gemm_simt.cuh) for MatMul and for the MatMul-anchored fused groups: the
// operands' layouts (trans_a / trans_b), a prologue chain per operand and the
// epilogue chain (each member's expression from
// codegen/ops/pointwise.cc, composed by ComposeElementwise) in fp32 registers, and
// the two mainloops of a dual-matmul; the plan both template families start from is
// codegen/ops/gemm_plan.cc's.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/kernel_cache.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_plan.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/gemm_source.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {
namespace {

std::string HashPrefix(absl::string_view text) { return Sha256Hex(text).substr(0, 16); }

}  // namespace

int64_t GemmProblem::KTotal() const {
  int64_t t = 0;
  for (int64_t x : k) t += x;
  return t;
}

double GemmProblem::Flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(KTotal()) *
         static_cast<double>(batch);
}

absl::StatusOr<GemmProblem> DescribeMatMulGroup(const Node& node) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  GemmProblem p;
  p.m = prep.m;
  p.gated = prep.plan.gated;
  p.rotary_half = prep.plan.rotary_half;
  p.n = p.gated ? 2 * prep.n : prep.n;  // the GEMM's N
  p.batch = prep.batch;
  p.dtype = prep.dt;
  p.variant = prep.variant;
  std::string hashed = absl::StrCat("out ", DTypeName(prep.y->dtype()), "\n");
  auto loads_text = [&](const std::vector<ElementwiseLoad>& loads) {
    std::string t;
    for (const ElementwiseLoad& l : loads) {
      absl::StrAppend(&t, " load ", DTypeName(node.input(l.input)->dtype()), ShapeToString(l.view), " ",
                      static_cast<int>(l.domain));
    }
    return t;
  };
  for (size_t i = 0; i < prep.plan.loops.size(); ++i) {
    const LoopPlan& l = prep.plan.loops[i];
    p.k.push_back(l.k);
    if (i > 0) p.layout += "+";
    p.layout += l.a.trans ? "T" : "N";
    p.layout += l.b.trans ? "T" : "N";
    if (prep.batch > 1 && prep.a_batch[i] == 0) p.layout += "a";
    if (prep.batch > 1 && prep.b_batch[i] == 0) p.layout += "b";
    for (const OperandPlan* op : {&l.a, &l.b}) {
      absl::StrAppend(&hashed, "operand ", DTypeName(op->loaded->dtype()), ShapeToString(op->stored->shape()), "\n");
      for (const Node* c : op->chain) absl::StrAppend(&hashed, " ", c->op_type());
      absl::StrAppend(&hashed, "\n", op->code, "return ", op->result, ";", loads_text(op->loads), "\n");
    }
  }
  if (prep.variant.tf32) absl::StrAppend(&hashed, "tf32\n");
  // The sm_80 template's tf32 form has other configs than the SIMT template that ran
  // these groups before it: a tuning entry of one must not reach the other.
  if (prep.variant.tf32 && !prep.variant.simt) absl::StrAppend(&hashed, "tf32 on the sm_80 template\n");
  absl::StrAppend(&hashed, "epilogue\n", prep.plan.epilogue_code, "return ", prep.plan.result, ";",
                  loads_text(prep.plan.loads), "\n");
  std::vector<std::string> ops;
  std::string pattern = "MatMul";
  if (prep.plan.body != nullptr) {
    pattern = node.GetString("pattern", "").value_or("group");
    for (const Node* b : prep.plan.body->nodes()) ops.push_back(b->op_type());
  }
  p.signature = absl::StrCat(pattern, "[", absl::StrJoin(ops, ","), "]#", HashPrefix(hashed));
  return p;
}

namespace {

// The prologue of operand `op` ('a' or 'b') as both template families take it:
// `struct kiln_prologue_<which> { float operator()(float x, int row, int col, int
// batch) }` over the stored operand's coordinates, reading kernel parameters
// p<which><l> (`params`, ", const kiln_f16* __restrict__ pa0"), built by `object`
// ("kiln_prologue_a{pa0}"); `args` are the launch args of those parameters.
struct PrologueSource {
  std::string params, functor, object;
  std::vector<int> args;
};
// `folded`: the GEMM's batch folds into its rows (GemmPrep::folded), so the functor
// gets the folded row and batch 0.
absl::StatusOr<PrologueSource> MakePrologueSource(const Node& node, const OperandPlan& op, char which, bool folded) {
  PrologueSource p;
  std::string members, loads, init;
  for (size_t l = 0; l < op.loads.size(); ++l) {
    const Value* v = node.input(op.loads[l].input);
    const std::string param = absl::StrCat("p", std::string(1, which), l);
    absl::StrAppend(&p.params, ", ", Param(v->dtype(), true, param));
    absl::StrAppend(&members, "  ", Param(v->dtype(), true, absl::StrCat("p", l)), ";\n");
    absl::StrAppend(&init, l ? ", " : "", param);
    absl::StatusOr<std::string> off = BroadcastOffset(node, op.loads[l].view, op.stored->shape(), folded);
    if (!off.ok()) return off.status();
    absl::StrAppend(&loads, "    const ", DomainType(op.loads[l].domain), " g", l, " = ",
                    LoadAs(v->dtype(), op.loads[l].domain, absl::StrCat("p", l), *off), ";\n");
    p.args.push_back(InputArg(node, op.loads[l].input));
  }
  p.functor = absl::StrCat("// The prologue of ", which == 'a' ? "A" : "B", " (", op.chain.size(), " op(s) from ",
                           op.loaded->TypeString(), "), at (row, col) of the stored ",
                           ShapeToString(op.stored->shape()), ".\nstruct kiln_prologue_", std::string(1, which),
                           " {\n  static constexpr bool kIdentity = false;\n", members,
                           "  __device__ __forceinline__ float operator()(float x, int row, int col, int batch) const {\n",
                           loads, op.code, "    return ", op.result, ";\n  }\n};\n");
  p.object = absl::StrCat("kiln_prologue_", std::string(1, which), "{", init, "}");
  return p;
}

// The kernel source's comment line describing the group and its products:
// "// fused group (PATTERN): MatMul f16[..] x f16[..] [+ MatMul ...] -> f16[..]\n". No
// node name: identical layers then share one module (one NVRTC compile).
std::string GroupComment(const Node& node, const GemmPlan& plan, const Value& y) {
  std::string s = IsFusedGroup(node)
                      ? absl::StrCat("// fused group (", node.GetString("pattern", "").value_or(""), "):")
                      : std::string("//");
  for (const LoopPlan& l : plan.loops) {
    absl::StrAppend(&s, l.mm == plan.loops[0].mm ? " " : " + ", "MatMul ", l.a.stored->TypeString(),
                    l.a.trans ? " (trans_a)" : "", " x ", l.b.stored->TypeString(), l.b.trans ? " (trans_b)" : "");
  }
  absl::StrAppend(&s, " -> ", y.TypeString(), "\n");
  return s;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroup(const Node& node, const GemmConfig* config,
                                                              int sm_count) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  if (prep.plan.gated || prep.plan.rotary_half > 0) {
    return NoKernel(node, std::string(kPairedEpilogueRefusal));
  }
  const GemmPlan& plan = prep.plan;
  const GemmVariant& variant = prep.variant;
  const std::vector<int64_t>& a_batch = prep.a_batch;
  const std::vector<int64_t>& b_batch = prep.b_batch;
  const int64_t m = prep.m, n = prep.n, batch = prep.batch;
  const DType dt = prep.dt;
  const Value* y = prep.y;
  const Shape& ys = prep.out_shape;
  GemmConfig cfg;
  if (config != nullptr) {
    cfg = *config;
  } else {
    GemmProblem problem;
    problem.m = m;
    problem.n = n;
    problem.batch = batch;
    for (const LoopPlan& l : plan.loops) problem.k.push_back(l.k);
    problem.variant = variant;
    cfg = HeuristicGemmConfig(problem, sm_count);
  }
  if (absl::Status valid = VerifyGemmConfig(cfg, variant); !valid.ok()) {
    if (config != nullptr) return valid;
    return NoKernel(node, absl::StrCat("no tile config for this form: ", valid.message()));
  }
  const int64_t tiles = ((m + cfg.bm - 1) / cfg.bm) * ((n + cfg.bn - 1) / cfg.bn);
  if (tiles >= (int64_t{1} << 31)) return NoKernel(node, "too many tiles");

  KernelLaunch launch;
  launch.family = variant.simt ? "gemm_simt" : "gemm_sm80";
  launch.args = {0};
  for (const LoopPlan& l : plan.loops) {
    launch.args.push_back(InputArg(node, l.a.input));
    launch.args.push_back(InputArg(node, l.b.input));
  }
  // Prologue functors (kernel parameters pa<l> / pb<l>), then the epilogue's (e<l>).
  std::string functors, prologue_params, prologue_objects[2];
  for (int i = 0; i < 2; ++i) {
    const OperandPlan& op = i == 0 ? plan.loops[0].a : plan.loops[0].b;
    if (op.chain.empty()) {
      prologue_objects[i] = "kiln_gemm_identity{}";
      continue;
    }
    absl::StatusOr<PrologueSource> pro = MakePrologueSource(node, op, i == 0 ? 'a' : 'b', prep.folded);
    if (!pro.ok()) return pro.status();
    absl::StrAppend(&prologue_params, pro->params);
    absl::StrAppend(&functors, pro->functor);
    prologue_objects[i] = pro->object;
    launch.args.insert(launch.args.end(), pro->args.begin(), pro->args.end());
  }
  GemmEpilogueSource epilogue;
  if (absl::Status st = AppendGemmEpilogueLoads(
          node, plan.loads, [&](const Shape& view) { return BroadcastOffset(node, prep.View(view), ys); }, epilogue,
          launch);
      !st.ok()) {
    return st;
  }

  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n", GroupComment(node, plan, *y));
  auto mode = GemmLoadMode;
  const LoopPlan& l0 = plan.loops[0];
  const GemmMainloop& v0 = variant.mainloops[0];
  // The tf32 form (variant.tf32 on the sm_80 template): K in 16-bit units (the
  // variant's), the loaded kinds the tensor-core view's; A2 and B2 are 16-bit pointers.
  const bool tf32_mma = variant.tf32 && !variant.simt;
  const auto kind = [&](const Value* v) { return tf32_mma ? 0 : GemmDTypeKind(v->dtype()); };
  const int64_t units = tf32_mma ? 2 : 1;
  if (tf32_mma) absl::StrAppend(&src, "#define GEMM_TF32 1\n");
  absl::StrAppend(&src, "#define GEMM_BF16 ", dt == DType::kBFloat16 ? 1 : 0, "\n#define GEMM_M ", m,
                  "\n#define GEMM_N ", n, "\n#define GEMM_K ", v0.k, "\n#define GEMM_A_BATCH ", a_batch[0],
                  "LL\n#define GEMM_B_BATCH ", b_batch[0], "LL\n#define GEMM_C_BATCH ", batch > 1 ? m * n : 0,
                  "LL\n#define GEMM_TRANS_A ", l0.a.trans ? 1 : 0, "\n#define GEMM_TRANS_B ", l0.b.trans ? 1 : 0,
                  "\n#define GEMM_A_MODE ", mode(v0.a.load), "\n#define GEMM_B_MODE ", mode(v0.b.load),
                  "\n#define GEMM_A_KIND ", kind(l0.a.loaded), "\n#define GEMM_B_KIND ", kind(l0.b.loaded),
                  "\n#define GEMM_A_T ", StorageTypeName(l0.a.loaded->dtype()), "\n#define GEMM_B_T ",
                  StorageTypeName(l0.b.loaded->dtype()), "\n#define GEMM_PROLOGUE_A ", prologue_objects[0],
                  "\n#define GEMM_PROLOGUE_B ", prologue_objects[1], "\n");
  if (plan.loops.size() == 2) {
    const LoopPlan& l1 = plan.loops[1];
    const GemmMainloop& v1 = variant.mainloops[1];
    absl::StrAppend(&src, "#define GEMM_DUAL 1\n#define GEMM_K2 ", v1.k, "\n#define GEMM_A2_BATCH ", units * a_batch[1],
                    "LL\n#define GEMM_B2_BATCH ", units * b_batch[1], "LL\n#define GEMM_TRANS_A2 ", l1.a.trans ? 1 : 0,
                    "\n#define GEMM_TRANS_B2 ", l1.b.trans ? 1 : 0, "\n#define GEMM_A2_MODE ", mode(v1.a.load),
                    "\n#define GEMM_B2_MODE ", mode(v1.b.load), "\n");
  }
  if (variant.simt && y->dtype() == DType::kFloat32 && n % 4 == 0) absl::StrAppend(&src, "#define GEMM_OUT_VEC 1\n");
  absl::StrAppend(&src, GemmSourceTail(cfg, y->dtype(), prologue_params, functors, epilogue, plan.epilogue_code,
                                       plan.result, variant.simt));
  launch.source = std::move(src);
  if (absl::Status st = SetGemmGridAndWorkspace(cfg, tiles, batch, launch); !st.ok()) {
    if (config != nullptr) return st;
    return NoKernel(node, std::string(st.message()));
  }
  launch.block = {static_cast<uint32_t>(cfg.warps_m * cfg.warps_n * 32), 1, 1};
  launch.shared_bytes = static_cast<uint32_t>(GemmSharedBytes(cfg, variant));
  return std::vector<KernelLaunch>{std::move(launch)};
}

namespace {

// The problem's shape, layouts and operands as the Hopper family reads them.
GemmFamilyPlan FamilyProblem(const GemmPrep& prep) {
  const GemmPlan& plan = prep.plan;
  const LoopPlan& l0 = plan.loops[0];
  GemmFamilyPlan f;
  f.m = prep.m;
  f.gated = plan.gated;
  f.rotary_half = plan.rotary_half;
  f.c_n = prep.n;
  f.n = plan.gated ? 2 * prep.n : prep.n;
  f.k = l0.k;
  f.batch = prep.batch;
  f.a_batch = prep.a_batch[0];
  f.b_batch = prep.b_batch[0];
  f.trans_a = l0.a.trans;
  f.trans_b = l0.b.trans;
  f.dual = plan.loops.size() > 1;
  f.tf32 = prep.variant.tf32;
  f.dtype = prep.dt;
  f.out_dtype = prep.y->dtype();
  f.a_input = l0.a.input;
  f.b_input = l0.b.input;
  f.a_shape = l0.a.stored->shape();
  f.b_shape = l0.b.stored->shape();
  if (plan.loops.size() > 1) {
    const LoopPlan& l1 = plan.loops[1];
    f.k2 = l1.k;
    f.a2_batch = prep.a_batch[1];
    f.b2_batch = prep.b_batch[1];
    f.trans_a2 = l1.a.trans;
    f.trans_b2 = l1.b.trans;
    f.a2_input = l1.a.input;
    f.b2_input = l1.b.input;
    f.a2_shape = l1.a.stored->shape();
    f.b2_shape = l1.b.stored->shape();
  }
  // A folded batch: A is read as one [batch * M, K] matrix (a 2-D tensor map).
  if (prep.folded) {
    f.a_shape = Shape{f.m, f.k};
    if (f.dual) f.a2_shape = Shape{f.m, f.k2};
  }
  return f;
}

}  // namespace

namespace {

// A gated product's functor (gemm_sm90_epilogue.cuh, GEMM_GATED): the output element
// at (row, col) from its gate (acc) and up (acc_up) products.
std::string GatedEpilogueFunction(const GemmPlan& plan, const GemmEpilogueSource& epilogue) {
  return absl::StrCat(
      "static __device__ __forceinline__ float kiln_epilogue(float acc, int row, int col, int batch "
      "KILN_EPILOGUE_PARAMS) {\n  return acc;\n}\n"
      "// The output element at (row, col) from its gate (acc) and up (acc_up) products.\n"
      "static __device__ __forceinline__ float kiln_epilogue_gated(float acc, float acc_up, int row, int col, "
      "int batch KILN_EPILOGUE_PARAMS) {\n",
      epilogue.loads, plan.epilogue_code, "  return ", plan.result, ";\n}\n");
}

// A rotary product's functors (gemm_sm90_epilogue.cuh, GEMM_ROTARY): the output
// element at (row, col) from its product (acc) and that of the column GEMM_ROTARY away
// (acc_partner), kiln_epilogue_rotary; and kiln_epilogue_rotary2 on a fragment's
// column pair (col even), which reads 16-bit operands dense along C's rows (the
// rotation's tables) one 4-byte load for both columns where every operand is one:
// half the load instructions, which bound this epilogue.
std::string RotaryEpilogueFunctions(const Node& node, const GemmPrep& prep, const GemmEpilogueSource& epilogue) {
  const GemmPlan& plan = prep.plan;
  const Shape& ys = prep.out_shape;
  std::string out = absl::StrCat(
      "static __device__ __forceinline__ float kiln_epilogue(float acc, int row, int col, int batch "
      "KILN_EPILOGUE_PARAMS) {\n  return acc;\n}\n"
      "static __device__ __forceinline__ float kiln_epilogue_rotary(float acc, float acc_partner, int row, int col, "
      "int batch KILN_EPILOGUE_PARAMS) {\n",
      epilogue.loads, plan.epilogue_code, "  return ", plan.result, ";\n}\n",
      "static __device__ __forceinline__ void kiln_epilogue_rotary2(float& y0, float& y1, float x0, float x1, float "
      "p0, "
      "float p1, int row, int col, int batch KILN_EPILOGUE_PARAMS) {\n");
  bool pairs = !ys.empty() && ys.back() % 2 == 0;
  std::string aligned = "true", loads;
  for (size_t l = 0; l < plan.loads.size() && pairs; ++l) {
    const ElementwiseLoad& ld = plan.loads[l];
    const Shape view = prep.View(ld.view);
    const DType dt = node.input(ld.input)->dtype();
    pairs = !view.empty() && ld.strides.empty() && ld.offset == 0 && view.back() == ys.back() &&
            (dt == DType::kFloat16 || dt == DType::kBFloat16) && ld.domain == Domain::kFloat;
    const std::string e = absl::StrCat("e", l), g = absl::StrCat("g", l), off = epilogue.offset[l];
    absl::StrAppend(&aligned, " && (reinterpret_cast<unsigned long long>(", e, ") & 3) == 0");
    absl::StrAppend(&loads, "  float ", g, "_0, ", g, "_1;\n  if (aligned) {\n    kiln_unpack_", FloatSuffix(dt),
                    "x2(__ldg(reinterpret_cast<const unsigned*>(", e, " + (", off, "))), ", g, "_0, ", g,
                    "_1);\n  } else {\n    ", g, "_0 = ", LoadAs(dt, ld.domain, e, off), ";\n    ", g,
                    "_1 = ", LoadAs(dt, ld.domain, e, absl::StrCat("(", off, ") + 1")), ";\n  }\n");
  }
  if (!pairs) {
    return absl::StrCat(out,
                        "  y0 = kiln_epilogue_rotary(x0, p0, row, col, batch KILN_EPILOGUE_ARGS);\n"
                        "  y1 = kiln_epilogue_rotary(x1, p1, row, col + 1, batch KILN_EPILOGUE_ARGS);\n}\n");
  }
  absl::StrAppend(&out, "  const bool aligned = ", aligned, ";\n", loads, "  const int col1 = col + 1;\n");
  for (int i = 0; i < 2; ++i) {
    absl::StrAppend(&out, "  {\n    const float acc = x", i, ", acc_partner = p", i, ";\n");
    if (i == 1) absl::StrAppend(&out, "    const int col = col1;\n");
    for (size_t l = 0; l < plan.loads.size(); ++l)
      absl::StrAppend(&out, "    const float g", l, " = g", l, "_", i, ";\n");
    absl::StrAppend(&out, plan.epilogue_code, "    y", i, " = ", plan.result, ";\n  }\n");
  }
  return absl::StrCat(out, "}\n");
}

// The functors of a gated or rotary product, their defines appended to `defines`.
std::string PairedEpilogueFunctions(const Node& node, const GemmPrep& prep, const GemmEpilogueSource& epilogue,
                                    std::string& defines) {
  if (prep.plan.gated) {
    absl::StrAppend(&defines, "#define GEMM_GATED 1\n#define GEMM_C_N ", prep.n, "\n");
    return GatedEpilogueFunction(prep.plan, epilogue);
  }
  absl::StrAppend(&defines, "#define GEMM_ROTARY ", prep.plan.rotary_half, "\n");
  return RotaryEpilogueFunctions(node, prep, epilogue);
}

}  // namespace

absl::StatusOr<GemmFamilyPlan> PlanGemmForFamily(const Node& node) {
  GemmPrep prep;
  if (absl::Status st = PrepareMatMul(node, prep); !st.ok()) return st;
  if (prep.variant.simt && !prep.variant.tf32) {
    return NoKernel(node,
                    "sm90 GEMM family: f32 operands without TF32 math (the SIMT template takes them; "
                    "--precision tf32 runs them on tensor cores)");
  }
  const GemmPlan& plan = prep.plan;
  const LoopPlan& l0 = plan.loops[0];
  GemmFamilyPlan f = FamilyProblem(prep);
  const Shape& ys = prep.out_shape;
  f.prologue_a = !l0.a.chain.empty();
  f.prologue_b = !l0.b.chain.empty();
  f.a_loaded_dtype = l0.a.loaded->dtype();
  if (f.prologue_a) {  // the same functor as the sm_80 template's (parameters pa<l>)
    absl::StatusOr<PrologueSource> pro = MakePrologueSource(node, l0.a, 'a', prep.folded);
    if (!pro.ok()) return pro.status();
    f.prologue_params = std::move(pro->params);
    f.prologue_a_functor = std::move(pro->functor);
    f.prologue_a_object = std::move(pro->object);
    f.prologue_args = std::move(pro->args);
  }
  GemmEpilogueSource epilogue;
  KernelLaunch loads;
  if (absl::Status st = AppendGemmEpilogueLoads(
          node, plan.loads, [&](const Shape& view) { return BroadcastOffset(node, prep.View(view), ys); },
          epilogue, loads);
      !st.ok()) {
    return st;
  }
  f.epilogue_args = std::move(loads.args);
  f.epilogue_defines = absl::StrCat("#define KILN_EPILOGUE_PARAMS ", epilogue.params, "\n#define KILN_EPILOGUE_ARGS ",
                                    epilogue.args, "\n");
  // Loads that depend on the output column alone (a bias; a per-channel scale): the
  // sm90 template prefetches the lines a tile's epilogue will read while its
  // mainloop runs (KILN_EPILOGUE_PREFETCH in gemm_sm90.cuh), and the TMA-store
  // epilogue holds 16-bit ones in registers, two columns a register, loaded while
  // the tile's last wgmmas run (kiln_epilogue_columns, kiln_epilogue_at).
  // 16-bit loads dense along the output's rows (a residual) are read there a column
  // pair at a time, one 4-byte load for the two elements a thread's fragment holds
  // (kiln_epilogue_at2): half the load instructions, which bound that epilogue.
  std::string prefetch, members, column_loads, values, unpack, at_loads, paired, unpaired, aligned, prefetch_rows;
  int registers = 0;
  // Gated and rotary products' epilogues (gemm_sm90_epilogue.cuh, GEMM_GATED and
  // GEMM_ROTARY) pair accumulators and load their operands themselves.
  const bool pairs_columns = plan.gated || plan.rotary_half > 0;
  if (pairs_columns) f.epilogue_function = PairedEpilogueFunctions(node, prep, epilogue, f.epilogue_defines);
  for (size_t l = 0; l < plan.loads.size() && !pairs_columns; ++l) {
    const ElementwiseLoad& ld = plan.loads[l];
    const Shape view = prep.View(ld.view);
    const bool dense_rows = !view.empty() && ld.strides.empty() && ld.offset == 0 && ys.size() >= 2 &&
                            view.back() == ys.back() && ys.back() > 1;
    const bool column = dense_rows && std::all_of(view.begin(), view.end() - 1, [](int64_t d) { return d == 1; });
    if (column) absl::StrAppend(&prefetch, " kiln_sm90_prefetch_columns(e", l, ", first, t);");
    const DType dt = node.input(ld.input)->dtype();
    const bool sixteen = dt == DType::kFloat16 || dt == DType::kBFloat16;
    const std::string g = absl::StrCat("g", l), e = absl::StrCat("e", l);
    if (column && sixteen && ld.domain == Domain::kFloat) {
      const std::string r = absl::StrCat("r", registers);
      absl::StrAppend(&members, "  unsigned ", r, "[BN / 8];  // ", e, "\n");
      absl::StrAppend(&column_loads, "    kiln_column_pairs(", r, ", ", e, ", first, bound);\n");
      absl::StrAppend(&values, "  float ", g, ";\n");
      absl::StrAppend(&unpack, "    kiln_unpack_", FloatSuffix(dt), "x2(", r, "[j], lo.", g, ", hi.", g, ");\n");
      absl::StrAppend(&at_loads, "  const float ", g, " = kiln_c.", g, ";\n");
      ++registers;
      continue;
    }
    // Dense rows of even length: every other stride of the offset is a multiple of
    // the row, so columns col (even) and col + 1 are one aligned 4-byte word when
    // the pointer is (KILN_EPILOGUE_PAIRS_ALIGNED). Only operands that vary along
    // C's rows: one broadcast over them (a bias per batch entry) is loaded once per
    // column already, the compiler sharing it between the rows, and pairs measured
    // slower there (session 1 of
    // benchmarks/results/gemm_sm90_residual_pairs_ncu_h100_2026-11-26c.csv).
    const size_t rank = ys.size();
    const bool per_row = view.size() >= 2 && view[view.size() - 2] == ys[rank - 2] && ys[rank - 2] > 1;
    if (dense_rows && per_row && sixteen && ld.domain == Domain::kFloat && ys.back() % 2 == 0) {
      const std::string& off = epilogue.offset[l];
      absl::StrAppend(&values, "  float ", g, ";\n");
      absl::StrAppend(&at_loads, "  const float ", g, " = kiln_c.", g, ";\n");
      absl::StrAppend(&paired, "    kiln_unpack_", FloatSuffix(dt), "x2(__ldg(reinterpret_cast<const unsigned*>(", e,
                      " + (", off, "))), kiln_c0.", g, ", kiln_c1.", g, ");\n");
      absl::StrAppend(&unpaired, "    kiln_c0.", g, " = ", LoadAs(dt, ld.domain, e, off), ";\n    kiln_c1.", g,
                      " = ", LoadAs(dt, ld.domain, e, absl::StrCat("(", off, ") + 1")), ";\n");
      absl::StrAppend(&aligned, aligned.empty() ? "" : " && ", "(reinterpret_cast<unsigned long long>(", e,
                      ") & 3) == 0");
      absl::StrAppend(&prefetch_rows, " kiln_sm90_prefetch_row(", e, " + (", off, "), bytes);");
      continue;
    }
    absl::StrAppend(&at_loads, epilogue.load[l]);
  }
  if (!prefetch.empty()) absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PREFETCH(first, t)", prefetch, "\n");
  if (!pairs_columns) f.epilogue_function = GemmEpilogueFunction(epilogue, plan.epilogue_code, plan.result);
  // The TMA-store epilogue's form of the functor: column operands from registers, and
  // without a last op that it applies to the packed result instead (KILN_EPILOGUE_TAIL).
  if (registers > 0 || !paired.empty() || !plan.packed_tail.empty()) {
    absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_AT 1\n#define KILN_EPILOGUE_COLUMNS ", registers,
                    "\n");
    if (!aligned.empty()) absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PAIRS_ALIGNED (", aligned, ")\n");
    if (!prefetch_rows.empty()) {
      absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_PREFETCH_ROWS(row, col, batch, bytes)",
                      prefetch_rows, "\n");
    }
    if (!plan.packed_tail.empty()) {
      absl::StrAppend(&f.epilogue_defines, "#define KILN_EPILOGUE_TAIL(x) ", plan.packed_tail, "(x)\n");
    }
    absl::StrAppend(
        &f.epilogue_function,
        "// The 16-bit column operands in registers: r<i>[j] holds columns first + 8 j and\n"
        "// first + 8 j + 1 (zeros at or past `bound`); at(j, lo, hi) gives columns first + 8 j\n"
        "// and first + 8 j + 1 of each as fp32, once for all the rows of the columns.\n"
        "struct kiln_epilogue_column_values {\n", values, "};\nstruct kiln_epilogue_columns {\n", members,
        "  __device__ __forceinline__ void load(int first, int bound KILN_EPILOGUE_PARAMS) {\n", column_loads,
        "  }\n  __device__ __forceinline__ void at(int j, kiln_epilogue_column_values& lo, "
        "kiln_epilogue_column_values& hi) const {\n", unpack, "  }\n};\n"
        "// kiln_epilogue with the column operands from kiln_c",
        plan.packed_tail.empty() ? "" : absl::StrCat(", up to ", plan.packed_tail, "'s input"),
        ".\nstatic __device__ __forceinline__ float kiln_epilogue_at(float acc, int row, int col, int batch, "
        "const kiln_epilogue_column_values& kiln_c KILN_EPILOGUE_PARAMS) {\n",
        at_loads, plan.epilogue_code, "  return ", plan.packed_tail.empty() ? plan.result : plan.tail_input,
        ";\n}\n"
        "// kiln_epilogue_at on columns col and col + 1 of a row (kiln_c0, kiln_c1: their\n"
        "// column operands), the row-dense operands one 4-byte load for both (PAIRED: the\n"
        "// pointers are 4-byte aligned, KILN_EPILOGUE_PAIRS_ALIGNED) or two 2-byte loads.\n"
        "template <bool PAIRED>\n"
        "static __device__ __forceinline__ void kiln_epilogue_at2(float& acc0, float& acc1, int row, int col, "
        "int batch, kiln_epilogue_column_values kiln_c0, kiln_epilogue_column_values kiln_c1 "
        "KILN_EPILOGUE_PARAMS) {\n",
        paired.empty() ? "" : absl::StrCat("  if (PAIRED) {\n", paired, "  } else {\n", unpaired, "  }\n"),
        "  acc0 = kiln_epilogue_at(acc0, row, col, batch, kiln_c0 KILN_EPILOGUE_ARGS);\n"
        "  acc1 = kiln_epilogue_at(acc1, row, col + 1, batch, kiln_c1 KILN_EPILOGUE_ARGS);\n}\n");
  }
  f.epilogue_work = plan.epilogue_work;
  f.description = GroupComment(node, plan, *prep.y);
  for (const ElementwiseLoad& ld : plan.loads) {
    f.epilogue_loads.push_back({ld.input, prep.View(ld.view), ld.strides.empty() && ld.offset == 0});
  }
  f.out_shape = ys;
  return f;
}

}  // namespace kiln::codegen::ops
