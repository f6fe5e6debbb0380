// The "mlp" FusedGroup kernel (fusion/fuse_mlp.h): Y = e2(e1(X W1) W2) over a few
// rows, with e1 and e2 the groups' element-wise chains (bias, activation, gate), in
// one launch. Built for squeeze-excitation gates: a few rows of pooled channels,
// weights of at most 128K elements, where two tensor-core GEMMs spend their time
// launching.
//
// Grid (rows, blocks of 32 column vectors of W2); block 512. A CTA stages its row of
// X in shared memory as fp32 and computes the whole hidden layer H = e1(x W1) for it:
// threads over W1's column vectors (loads of up to 16 bytes, coalesced along W1's
// rows) times slices of K, their partial sums added by shuffles within a warp and
// through shared memory across warps. H stays in
// shared memory in fp32; then 32 column vectors of W2 times 16 slices of N1 compute the
// CTA's outputs the same way and apply e2. One row a CTA: its time is its SM streaming
// W1 from L2, which more rows per CTA would not shorten, and the rows' CTAs run on
// other SMs. The chains are composed by ComposeElementwise, as the GEMM epilogue's
// are; their loads (biases) index the chain's output shape.
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

constexpr int kThreads = 512;
constexpr int kCols2 = 32;  // column vectors of W2 per CTA

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

// The kernel's text (see the top of this file).
struct MlpKernel {
  const Value *x = nullptr, *w1 = nullptr, *w2 = nullptr;
  int64_t k1 = 0, n1 = 0, n2 = 0, v1 = 1, v2 = 1, tc1 = 1, slots1 = 1;
  std::string params, code1, result1, code2, result2;
};

std::string MlpSource(const Node& group, const MlpKernel& k) {
  return absl::StrCat(
      TemplateSource("pointwise.cuh"), TemplateSource("vector.cuh"), "\n// fused MLP group: ",
      ShapeToString(k.x->shape()), " x [", k.k1, ",", k.n1, "] x [", k.n1, ",", k.n2, "]\nconstexpr int kK = ", k.k1,
      ", kN1 = ", k.n1, ", kN2 = ", k.n2, ", kV1 = ", k.v1, ", kTC1 = ", k.tc1, ", kS1 = ", kThreads / k.tc1,
      ", kP1 = ", k.slots1, ", kV2 = ", k.v2,
      ", kTC2 = ", kCols2, ", kS2 = ", kThreads / kCols2, ";\n",
      "extern \"C\" __global__ void __launch_bounds__(", kThreads, ") KILN_KERNEL(", k.params, ") {\n",
      "  __shared__ float xs[kK];\n"
      "  __shared__ float hs[kN1];\n"
      "  __shared__ float red[", kThreads * 8, "];  // partial sums of the K slices\n"
      "  const int row = blockIdx.x, t = threadIdx.x;\n"
      "  for (int k = t; k < kK; k += blockDim.x) xs[k] = ",
      LoadAs(k.x->dtype(), Domain::kFloat, "x", "row * kK + k"), ";\n"
      "  __syncthreads();\n"
      "  {\n"
      "    const int c = t % kTC1, s = t / kTC1;\n"
      "    float acc[kV1];\n"
      "#pragma unroll\n"
      "    for (int v = 0; v < kV1; ++v) acc[v] = 0.f;\n"
      "    if (c * kV1 < kN1) {\n"
      "#pragma unroll 8\n"
      "      for (int k = s; k < kK; k += kS1) {\n"
      "        const auto w = kiln_vec_ld<kV1>(w1 + k * kN1 + c * kV1);\n"
      "        const float xk = xs[k];\n"
      "#pragma unroll\n"
      "        for (int v = 0; v < kV1; ++v) acc[v] += xk * ", LoadAs(k.w1->dtype(), Domain::kFloat, "w.v", "v"), ";\n"
      "      }\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int o = kTC1; o < 32; o *= 2) {\n"
      "#pragma unroll\n"
      "      for (int v = 0; v < kV1; ++v) acc[v] += __shfl_xor_sync(0xffffffffu, acc[v], o);\n"
      "    }\n"
      "    const int slot = kTC1 < 32 ? t / 32 : s;\n"
      "    if (kTC1 >= 32 || t % 32 < kTC1) {\n"
      "#pragma unroll\n"
      "      for (int v = 0; v < kV1; ++v) red[(slot * kV1 + v) * kTC1 + c] = acc[v];\n"
      "    }\n"
      "  }\n"
      "  __syncthreads();\n"
      "  for (int j = t; j < kN1; j += blockDim.x) {\n"
      "    float acc = 0.f;\n"
      "    for (int s = 0; s < kP1; ++s) acc += red[(s * kV1 + j % kV1) * kTC1 + j / kV1];\n"
      "    const int i = row * kN1 + j;\n",
      k.code1, "    hs[j] = ", k.result1, ";\n"
      "  }\n"
      "  __syncthreads();\n"
      "  // Second layer: kTC2 column vectors of W2 a CTA, K split into kS2 slices.\n"
      "  {\n"
      "    const int c = blockIdx.y * kTC2 + t % kTC2, s = t / kTC2;\n"
      "    float acc[kV2];\n"
      "#pragma unroll\n"
      "    for (int v = 0; v < kV2; ++v) acc[v] = 0.f;\n"
      "    if (c * kV2 < kN2) {\n"
      "#pragma unroll 8\n"
      "      for (int k = s; k < kN1; k += kS2) {\n"
      "        const auto w = kiln_vec_ld<kV2>(w2 + k * kN2 + c * kV2);\n"
      "        const float hk = hs[k];\n"
      "#pragma unroll\n"
      "        for (int v = 0; v < kV2; ++v) acc[v] += hk * ", LoadAs(k.w2->dtype(), Domain::kFloat, "w.v", "v"), ";\n"
      "      }\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int v = 0; v < kV2; ++v) red[(s * kV2 + v) * kTC2 + t % kTC2] = acc[v];\n"
      "  }\n"
      "  __syncthreads();\n"
      "  for (int e = t; e < kTC2 * kV2; e += blockDim.x) {\n"
      "    const int col = blockIdx.y * kTC2 * kV2 + e;\n"
      "    if (col >= kN2) break;\n"
      "    float acc = 0.f;\n"
      "    for (int s = 0; s < kS2; ++s) acc += red[(s * kV2 + e % kV2) * kTC2 + e / kV2];\n"
      "    const int i = row * kN2 + col;\n",
      k.code2, "    ", StoreFrom(group.output(0)->dtype(), Domain::kFloat, "out", "i", k.result2), "\n"
      "  }\n"
      "}\n");
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
    if (!IsFloating(v->dtype())) return NoKernel(group, "an MLP operand that is not a float");
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
  // Elements per weight load: up to 16 bytes, dividing the row so that every row
  // starts aligned (weights are 256-byte aligned in the bundle).
  auto vector_width = [](const Value* w, int64_t cols) {
    int64_t v = 16 / static_cast<int64_t>(DTypeSize(w->dtype()));
    while (cols % v != 0) v /= 2;
    return v;
  };
  const int64_t v1 = vector_width(w1, n1), v2 = vector_width(w2, n2);
  if (n1 / v1 > kThreads) return NoKernel(group, "an MLP hidden layer of more column vectors than a CTA has threads");
  // First layer: threads over W1's column vectors (tc1, the power of two >= their
  // count, at most kThreads), the rest of the block over slices of K. With fewer
  // than 32 column vectors a warp holds several slices, added by shuffles first.
  int64_t tc1 = 1;
  while (tc1 < n1 / v1 && tc1 < kThreads) tc1 *= 2;
  const int64_t slots1 = tc1 < 32 ? kThreads / 32 : kThreads / tc1;  // partial sums per column

  std::vector<int> args = {0, InputArg(group, input_index.at(x)), InputArg(group, input_index.at(w1)),
                           InputArg(group, input_index.at(w2))};
  MlpKernel kernel{x, w1, w2, k1, n1, n2, v1, v2, tc1, slots1};
  kernel.params = absl::StrCat(Param(group.output(0)->dtype(), false, "out"), ", ", Param(x->dtype(), true, "x"), ", ",
                               Param(w1->dtype(), true, "w1"), ", ", Param(w2->dtype(), true, "w2"));
  KILN_RETURN_IF_ERROR(EmitChain(group, body, first, &kernel.code1, &kernel.result1, &kernel.params, &args));
  KILN_RETURN_IF_ERROR(EmitChain(group, body, second, &kernel.code2, &kernel.result2, &kernel.params, &args));

  KernelLaunch l;
  l.args = std::move(args);
  l.grid = {static_cast<uint32_t>(m), static_cast<uint32_t>((n2 / v2 + kCols2 - 1) / kCols2), 1};
  l.block = {kThreads, 1, 1};
  l.source = MlpSource(group, kernel);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
