// Tensor-core GEMM kernels (codegen/templates/gemm_sm80.cuh) for MatMul and for
// "matmul+epilogue" fused groups: the MatMul's accumulator goes through the group's
// element-wise chain (each member's expression from codegen/ops/pointwise.cc) in
// fp32 registers before the one store of the group's output.
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {

int64_t GemmSharedBytes(const GemmConfig& c) {
  return static_cast<int64_t>(c.stages) * (c.bm * (c.bk + 8) + c.bk * (c.bn + 8)) * 2;
}

absl::Status VerifyGemmConfig(const GemmConfig& c) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM tile config ", c.bm, "x", c.bn, "x", c.bk, " warps ",
                                                   c.warps_m, "x", c.warps_n, " stages ", c.stages, ": ", why));
  };
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.warps_m <= 0 || c.warps_n <= 0) return bad("non-positive size");
  if (c.bm % (16 * c.warps_m) != 0) return bad("BM must be a multiple of 16 * WARPS_M (m16 fragments per warp)");
  if (c.bn % (16 * c.warps_n) != 0) {
    return bad("BN must be a multiple of 16 * WARPS_N (pairs of n8 fragments per ldmatrix.x4.trans)");
  }
  if (c.bk % 16 != 0) return bad("BK must be a multiple of 16 (the mma k)");
  if (c.stages < 2 || c.stages > 8) return bad("STAGES must be in [2, 8]");
  const int threads = c.warps_m * c.warps_n * 32;
  if (threads > 1024) return bad(absl::StrCat(threads, " threads per block (> 1024)"));
  const int64_t smem = GemmSharedBytes(c);
  if (smem > kGemmMaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kGemmMaxSharedBytes, ", 99 KiB)"));
  }
  return absl::OkStatus();
}

GemmConfig PickGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch) {
  (void)k;
  const int64_t big_tiles = ((m + 127) / 128) * ((n + 127) / 128) * batch;
  if (m >= 128 && n >= 128 && big_tiles >= 96) return GemmConfig{128, 128, 32, 2, 2, 3};
  return GemmConfig{64, 64, 32, 2, 2, 4};
}

namespace {

// The operands of the kernel: the GEMM's A and B (node input indices), the
// element-wise chain after it, and the output.
struct GemmPlan {
  int a = 0, b = 1;
  std::string epilogue_code;  // statements computing the result from `acc`
  std::string result = "acc";
  std::vector<ElementwiseLoad> loads;  // group inputs the epilogue reads (g<l>)
};

// Offset of element (batch, row, col) of an operand of shape `view` broadcast
// against `shape` ([batch..., M, N]).
absl::StatusOr<std::string> BroadcastOffset(const Node& node, const Shape& view, const Shape& shape) {
  if (view.size() > shape.size()) return NoKernel(node, "epilogue input of higher rank than the output");
  const size_t r = shape.size(), lead = r - view.size();
  std::vector<int64_t> st(r, 0);
  const std::vector<int64_t> dense = DenseStrides(view);
  for (size_t d = 0; d < view.size(); ++d) {
    if (view[d] != 1 && view[d] != shape[lead + d]) return NoKernel(node, "epilogue input does not broadcast");
    st[lead + d] = view[d] == 1 ? 0 : dense[d];
  }
  std::vector<std::string> terms;
  int64_t inner = 1;
  for (size_t d = r - 2; d-- > 0;) {
    if (st[d] != 0) {
      terms.push_back(absl::StrCat("(kiln_index)((batch / ", inner, ") % ", shape[d], ") * ", st[d], "LL"));
    }
    inner *= shape[d];
  }
  if (st[r - 2] != 0) terms.push_back(absl::StrCat("(kiln_index)row * ", st[r - 2], "LL"));
  if (st[r - 1] != 0) terms.push_back(absl::StrCat("(kiln_index)col * ", st[r - 1], "LL"));
  if (terms.empty()) return std::string("0");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&out, i ? " + " : "", terms[i]);
  return out;
}

// Fills `plan` from a FusedGroup body: one MatMul whose operands are group inputs,
// every other member element-wise over the MatMul's output shape.
absl::Status PlanGroup(const Node& group, GemmPlan& plan) {
  auto body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) return NoKernel(group, "matmul group with several outputs");
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);

  const Node* mm = nullptr;
  for (const Node* n : body.nodes()) {
    if (n->op_type() != "MatMul") continue;
    if (mm != nullptr) return NoKernel(group, "more than one MatMul in the group");
    mm = n;
  }
  if (mm == nullptr) return NoKernel(group, "group without a MatMul");
  for (int i = 0; i < 2; ++i) {
    auto it = input_index.find(mm->input(i));
    if (it == input_index.end()) return NoKernel(group, "MatMul operand computed inside the group (prologue)");
    (i == 0 ? plan.a : plan.b) = it->second;
  }
  const Shape& shape = mm->output(0)->shape();
  if (group.output(0)->shape() != shape) return NoKernel(group, "group output shape differs from the MatMul's");

  ComposedElementwise composed;
  composed.computed[mm->output(0)] = {"acc", Domain::kFloat};
  if (absl::Status st = ComposeElementwise(group, body, mm, shape, composed); !st.ok()) return st;
  plan.epilogue_code = std::move(composed.code);
  plan.loads = std::move(composed.loads);
  const auto& computed = composed.computed;
  auto out = computed.find(body.outputs()[0]);
  if (out == computed.end()) return NoKernel(group, "group output is not computed from the MatMul");
  if (out->second.second != Domain::kFloat) return NoKernel(group, "epilogue result is not floating point");
  plan.result = out->second.first;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroup(const Node& node, const GemmConfig* config) {
  GemmPlan plan;
  if (IsFusedGroup(node)) {
    absl::Status s = PlanGroup(node, plan);
    if (!s.ok()) return s;
  } else if (node.op_type() != "MatMul") {
    return NoKernel(node, "not a MatMul");
  }
  const Value* a = node.input(plan.a);
  const Value* b = node.input(plan.b);
  const Value* y = node.output(0);
  const DType dt = a->dtype();
  if ((dt != DType::kFloat16 && dt != DType::kBFloat16) || b->dtype() != dt) {
    return NoKernel(node, absl::StrCat("tensor-core MatMul of ", DTypeName(a->dtype()), " x ", DTypeName(b->dtype())));
  }
  if (!IsFloating(y->dtype())) return NoKernel(node, "non-floating output");
  if (a->rank() < 2 || b->rank() < 2) return NoKernel(node, "MatMul with a 1-D operand");
  const Shape& ys = y->shape();
  if (ys.size() < 2) return NoKernel(node, "MatMul output of rank < 2");
  const int64_t m = a->shape()[a->rank() - 2], k = a->shape()[a->rank() - 1];
  const int64_t n = b->shape()[b->rank() - 1];
  if (b->shape()[b->rank() - 2] != k || ys[ys.size() - 2] != m || ys[ys.size() - 1] != n) {
    return NoKernel(node, "inconsistent MatMul shapes");
  }
  const Shape out_batch(ys.begin(), ys.end() - 2);
  const int64_t batch = NumElements(out_batch);
  if (m <= 0 || n <= 0 || batch <= 0) return NoKernel(node, "empty MatMul");
  if (k <= 0) return NoKernel(node, "MatMul with K = 0");
  if (batch > 65535) return NoKernel(node, "batch > 65535");
  if (m * k >= (int64_t{1} << 31) || k * n >= (int64_t{1} << 31) || m * n >= (int64_t{1} << 31)) {
    return NoKernel(node, "MatMul operand of 2^31 or more elements per batch");
  }
  auto batch_stride = [&](const Value* v, int64_t per) -> absl::StatusOr<int64_t> {
    const int64_t nb = NumElements(Shape(v->shape().begin(), v->shape().end() - 2));
    if (nb == 1) return int64_t{0};
    if (nb == batch) return per;
    return NoKernel(node, "MatMul operand broadcast over part of the batch");
  };
  absl::StatusOr<int64_t> a_batch = batch_stride(a, m * k), b_batch = batch_stride(b, k * n);
  if (!a_batch.ok()) return a_batch.status();
  if (!b_batch.ok()) return b_batch.status();

  const GemmConfig cfg = config != nullptr ? *config : PickGemmConfig(m, n, k, batch);
  absl::Status valid = VerifyGemmConfig(cfg);
  if (!valid.ok()) return valid;
  const int64_t tiles = ((m + cfg.bm - 1) / cfg.bm) * ((n + cfg.bn - 1) / cfg.bn);
  if (tiles >= (int64_t{1} << 31)) return NoKernel(node, "too many tiles");

  KernelLaunch launch;
  launch.args = {0, InputArg(node, plan.a), InputArg(node, plan.b)};
  std::string params, args, loads;
  for (size_t l = 0; l < plan.loads.size(); ++l) {
    const Value* v = node.input(plan.loads[l].input);
    absl::StrAppend(&params, ", ", Param(v->dtype(), true, absl::StrCat("e", l)));
    absl::StrAppend(&args, ", e", l);
    absl::StatusOr<std::string> off = BroadcastOffset(node, plan.loads[l].view, ys);
    if (!off.ok()) return off.status();
    absl::StrAppend(&loads, "  const ", DomainType(plan.loads[l].domain), " g", l, " = ",
                    LoadAs(v->dtype(), plan.loads[l].domain, absl::StrCat("e", l), *off), ";\n");
    launch.args.push_back(InputArg(node, plan.loads[l].input));
  }
  const bool vec = k % 8 == 0 && n % 8 == 0;
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n// ", IsFusedGroup(node) ? "fused group " : "",
                                 node.name(), ": MatMul ", a->TypeString(), " x ", b->TypeString(), " -> ",
                                 y->TypeString(), IsFusedGroup(node) ? " with epilogue" : "", "\n");
  absl::StrAppend(&src, "#define GEMM_BF16 ", dt == DType::kBFloat16 ? 1 : 0, "\n#define GEMM_M ", m,
                  "\n#define GEMM_N ", n, "\n#define GEMM_K ", k, "\n#define GEMM_A_BATCH ", *a_batch,
                  "LL\n#define GEMM_B_BATCH ", *b_batch, "LL\n#define GEMM_C_BATCH ", batch > 1 ? m * n : 0,
                  "LL\n#define GEMM_VEC ", vec ? 1 : 0, "\n#define BM ", cfg.bm, "\n#define BN ", cfg.bn,
                  "\n#define BK ", cfg.bk, "\n#define WARPS_M ", cfg.warps_m, "\n#define WARPS_N ", cfg.warps_n,
                  "\n#define STAGES ", cfg.stages, "\n#define GEMM_OUT_T ", StorageTypeName(y->dtype()),
                  "\n#define GEMM_STORE(p, i, v) KILN_STORE_", FloatSuffix(y->dtype()), "(p, i, v)",
                  "\n#define KILN_EPILOGUE_PARAMS ", params, "\n#define KILN_EPILOGUE_ARGS ", args, "\n");
  absl::StrAppend(&src,
                  "static __device__ __forceinline__ float kiln_epilogue(float acc, int row, int col, int batch "
                  "KILN_EPILOGUE_PARAMS) {\n",
                  loads, plan.epilogue_code, "  return ", plan.result, ";\n}\n", TemplateSource("gemm_sm80.cuh"));
  launch.source = std::move(src);
  launch.grid = {static_cast<uint32_t>(tiles), 1, static_cast<uint32_t>(batch)};
  launch.block = {static_cast<uint32_t>(cfg.warps_m * cfg.warps_n * 32), 1, 1};
  launch.shared_bytes = static_cast<uint32_t>(GemmSharedBytes(cfg));
  return std::vector<KernelLaunch>{std::move(launch)};
}

}  // namespace kiln::codegen::ops
