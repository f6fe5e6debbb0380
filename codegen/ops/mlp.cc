// The "mlp" FusedGroup kernel (fusion/fuse_mlp.h): Y = e2(e1(X W1) W2) over a few
// rows, with e1 and e2 the groups' element-wise chains (bias, activation, gate), in
// one launch. Built for squeeze-excitation gates: a few rows of pooled channels,
// weights of at most 128K elements, where two tensor-core GEMMs spend their time
// launching.
//
// Grid (row blocks of R rows, column blocks of 256 outputs of W2); block 256. Every
// CTA stages its rows of X in shared memory as fp32, computes the whole hidden layer
// H = e1(X W1) for them (threads over hidden columns in chunks of T, a power of two
// from 32 to 256, and 256 / T slices of K summed through shared memory; W1 read
// coalesced along its rows), keeps H in shared memory in fp32, then each thread computes one output
// column of its rows (W2 read coalesced) and applies e2. The chains are composed by
// ComposeElementwise, as the GEMM epilogue's are; their loads (biases) index the
// chain's output shape.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {
namespace {

constexpr int kThreads = 256;

struct Chain {
  std::vector<const Node*> members;
  const Value* acc = nullptr;     // the MatMul output it starts from
  const Value* result = nullptr;  // the value it ends in
  Shape shape;
};

// Code declaring the chain's loads at linear element `i` of its shape and computing
// it from `acc`; sets *result to the expression of the chain's value. Parameters
// are appended to *params (named p<next>), their group inputs to *args.
absl::Status EmitChain(const Node& group, const Graph& body, const Chain& chain, std::string* code,
                       std::string* result, std::string* params, std::vector<int>* args) {
  ComposedElementwise composed;
  composed.computed[chain.acc] = {"acc", Domain::kFloat};
  if (absl::Status st = ComposeElementwise(group, body, chain.members, chain.shape, composed); !st.ok()) return st;
  auto out = composed.computed.find(chain.result);
  if (out == composed.computed.end() || out->second.second != Domain::kFloat) {
    return NoKernel(group, "an MLP layer's result is not computed in floating point");
  }
  // One decomposition of `i` serves every load: operand 0 is the layer's own dense
  // layout, operand l + 1 the l-th load's broadcast strides.
  StridedSpace space{chain.shape, {DenseStrides(chain.shape)}};
  std::vector<int> operands;
  for (size_t l = 0; l < composed.loads.size(); ++l) {
    std::vector<int64_t> strides;
    if (!composed.loads[l].strides.empty() || !BroadcastStrides(composed.loads[l].view, chain.shape, &strides)) {
      return NoKernel(group, "an MLP epilogue operand that does not broadcast into its layer");
    }
    space.strides.push_back(std::move(strides));
    operands.push_back(static_cast<int>(l) + 1);
  }
  space.Collapse();
  std::string loads = operands.empty() ? "" : OffsetCode(space, operands, "i", "int", "off");
  for (size_t l = 0; l < composed.loads.size(); ++l) {
    const ElementwiseLoad& load = composed.loads[l];
    const std::string p = absl::StrCat("p", args->size());
    const DType dt = group.input(load.input)->dtype();
    absl::StrAppend(params, ", ", Param(dt, true, p));
    args->push_back(InputArg(group, load.input));
    absl::StrAppend(&loads, "    const ", DomainType(load.domain), " g", l, " = ",
                    LoadAs(dt, load.domain, p, absl::StrCat("off", l + 1)), ";\n");
  }
  *code = absl::StrCat(loads, composed.code);
  *result = out->second.first;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMlpGroup(const Node& group) {
  absl::StatusOr<std::shared_ptr<const Graph>> body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) return NoKernel(group, "MLP group with several outputs");
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);
  std::vector<const Node*> mms;
  for (const Node* n : body.nodes()) {
    if (n->op_type() == "MatMul") mms.push_back(n);
  }
  if (mms.size() != 2) return NoKernel(group, "an MLP group has two MatMuls");
  // The second layer's chain: every node downstream of the second MatMul.
  absl::flat_hash_set<const Value*> downstream = {mms[1]->output(0)};
  Chain first, second;
  first.acc = mms[0]->output(0);
  second.acc = mms[1]->output(0);
  for (const Node* n : body.nodes()) {
    if (n == mms[0] || n == mms[1]) continue;
    bool after = false;
    for (const Value* v : n->inputs()) after |= v != nullptr && downstream.contains(v);
    if (after) {
      for (const Value* v : n->outputs()) downstream.insert(v);
      second.members.push_back(n);
    } else {
      first.members.push_back(n);
    }
  }
  first.result = mms[1]->input(0);
  second.result = body.outputs()[0];
  first.shape = first.acc->shape();
  second.shape = second.acc->shape();
  const Value* x = mms[0]->input(0);
  const Value* w1 = mms[0]->input(1);
  const Value* w2 = mms[1]->input(1);
  for (const Value* v : {x, w1, w2}) {
    if (!input_index.contains(v)) return NoKernel(group, "an MLP operand computed inside the group");
  }
  if (w1->shape().size() != 2 || w2->shape().size() != 2 || first.result->shape() != first.shape ||
      second.result->shape() != second.shape || group.output(0)->shape() != second.shape) {
    return NoKernel(group, "MLP shapes other than [rows, K] x [K, N1] x [N1, N2]");
  }
  const int64_t k1 = w1->shape()[0], n1 = w1->shape()[1], n2 = w2->shape()[1];
  if (k1 == 0 || n1 == 0 || n2 == 0 || w2->shape()[0] != n1 || x->numel() % k1 != 0) {
    return NoKernel(group, "empty or mismatched MLP widths");
  }
  const int64_t m = x->numel() / k1;
  if (m == 0 || m > 65535 || k1 > 4096 || n1 > 4096 || k1 * n1 > (1 << 17) || n1 * n2 > (1 << 17) ||
      m * std::max({k1, n1, n2}) >= (int64_t{1} << 31)) {  // int indices
    return NoKernel(group, "an MLP larger than the one-kernel form takes");
  }
  // Rows per CTA: as many as keep X's and H's rows within 32 KiB, at most 4.
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>({m, 4, 4096 / k1, 4096 / n1}));
  // Hidden columns per pass: a power of two from 32 to 256, so that the slices of K
  // (kThreads / t_cols) cover the block exactly.
  int64_t t_cols = 32;
  while (t_cols < n1 && t_cols < kThreads) t_cols *= 2;
  const int64_t slices = kThreads / t_cols;

  std::vector<int> args = {0, InputArg(group, input_index.at(x)), InputArg(group, input_index.at(w1)),
                           InputArg(group, input_index.at(w2))};
  std::string params = absl::StrCat(Param(group.output(0)->dtype(), false, "out"), ", ",
                                    Param(x->dtype(), true, "x"), ", ", Param(w1->dtype(), true, "w1"), ", ",
                                    Param(w2->dtype(), true, "w2"));
  std::string code1, result1, code2, result2;
  KILN_RETURN_IF_ERROR(EmitChain(group, body, first, &code1, &result1, &params, &args));
  KILN_RETURN_IF_ERROR(EmitChain(group, body, second, &code2, &result2, &params, &args));

  KernelLaunch l;
  l.args = std::move(args);
  l.grid = {static_cast<uint32_t>((m + rows - 1) / rows), static_cast<uint32_t>((n2 + kThreads - 1) / kThreads), 1};
  l.block = {kThreads, 1, 1};
  l.source = absl::StrCat(
      TemplateSource("pointwise.cuh"), "\n// fused MLP group ", group.name(), ": ", ShapeToString(x->shape()), " x [", k1, ",", n1, "] x [", n1, ",",
      n2, "]\nconstexpr int kM = ", m, ", kK = ", k1, ", kN1 = ", n1, ", kN2 = ", n2, ", kR = ", rows,
      ", kT = ", t_cols, ", kS = ", slices, ";\n",
      "extern \"C\" __global__ void __launch_bounds__(", kThreads, ") KILN_KERNEL(", params, ") {\n",
      "  __shared__ float xs[kR][kK];\n"
      "  __shared__ float hs[kR][kN1];\n"
      "  __shared__ float part[kS][kR][kT];\n"
      "  const int row0 = blockIdx.x * kR, t = threadIdx.x;\n"
      "  for (int e = t; e < kR * kK; e += blockDim.x) {\n"
      "    const int r = e / kK, k = e % kK;\n"
      "    xs[r][k] = row0 + r < kM ? ", LoadAs(x->dtype(), Domain::kFloat, "x", "(row0 + r) * kK + k"), " : 0.f;\n"
      "  }\n"
      "  __syncthreads();\n"
      "  const int tj = t % kT, slice = t / kT;\n"
      "  for (int j0 = 0; j0 < kN1; j0 += kT) {\n"
      "    float acc_r[kR];\n"
      "#pragma unroll\n"
      "    for (int r = 0; r < kR; ++r) acc_r[r] = 0.f;\n"
      "    const int j = j0 + tj;\n"
      "    if (j < kN1) {\n"
      "      for (int k = slice; k < kK; k += kS) {\n"
      "        const float w = ", LoadAs(w1->dtype(), Domain::kFloat, "w1", "k * kN1 + j"), ";\n"
      "#pragma unroll\n"
      "        for (int r = 0; r < kR; ++r) acc_r[r] += xs[r][k] * w;\n"
      "      }\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int r = 0; r < kR; ++r) part[slice][r][tj] = acc_r[r];\n"
      "    __syncthreads();\n"
      "    for (int e = t; e < kR * kT; e += blockDim.x) {\n"
      "      const int r = e / kT, jj = j0 + e % kT;\n"
      "      if (jj >= kN1 || row0 + r >= kM) continue;\n"
      "      float acc = 0.f;\n"
      "      for (int s = 0; s < kS; ++s) acc += part[s][r][e % kT];\n"
      "      const int i = (row0 + r) * kN1 + jj;\n",
      code1, "      hs[r][jj] = ", result1, ";\n"
      "    }\n"
      "    __syncthreads();\n"
      "  }\n"
      "  const int col = blockIdx.y * ", kThreads, " + t;\n"
      "  if (col >= kN2) return;\n"
      "  float acc_r[kR];\n"
      "#pragma unroll\n"
      "  for (int r = 0; r < kR; ++r) acc_r[r] = 0.f;\n"
      "  for (int k = 0; k < kN1; ++k) {\n"
      "    const float w = ", LoadAs(w2->dtype(), Domain::kFloat, "w2", "k * kN2 + col"), ";\n"
      "#pragma unroll\n"
      "    for (int r = 0; r < kR; ++r) acc_r[r] += hs[r][k] * w;\n"
      "  }\n"
      "#pragma unroll\n"
      "  for (int r = 0; r < kR; ++r) {\n"
      "    if (row0 + r >= kM) break;\n"
      "    const int i = (row0 + r) * kN2 + col;\n"
      "    const float acc = acc_r[r];\n",
      code2, "    ", StoreFrom(group.output(0)->dtype(), Domain::kFloat, "out", "i", result2), "\n"
      "  }\n"
      "}\n");
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
