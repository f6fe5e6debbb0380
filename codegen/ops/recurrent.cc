// RNN, GRU and LSTM on the GPU: one block per (direction, batch entry) walks the
// sequence; its threads share the hidden units, the previous hidden state in shared
// memory, with the reference's order of operations (graph/ops/recurrent.h) so that
// fp32 results agree. A sequential kernel for correctness on every form; large
// recurrences would want each step's products as a GEMM.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/recurrent.h"

namespace kiln::codegen::ops {
namespace {

using kiln::ops::RnnKind;
using kiln::ops::RnnPlan;

constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kLens = 4, kH0 = 5, kC0 = 6, kP = 7;
constexpr int64_t kMaxSharedFloats = 10 * 1024;  // 40 KiB of the 48 KiB static limit

// kiln::ops::ApplyRnnActivation as CUDA source over the expression `x`.
std::string ActivationSource(const kiln::ops::RnnActivation& a, const std::string& x) {
  const std::string& n = a.name;
  const std::string al = absl::StrCat("(", FloatLit(a.alpha), ")"), be = absl::StrCat("(", FloatLit(a.beta), ")");
  if (n == "Sigmoid") return absl::StrCat("(1.f / (1.f + expf(-(", x, "))))");
  if (n == "Tanh") return absl::StrCat("tanhf(", x, ")");
  if (n == "Relu") return absl::StrCat("fmaxf(0.f, ", x, ")");
  if (n == "HardSigmoid") return absl::StrCat("fmaxf(0.f, fminf(1.f, ", al, " * (", x, ") + ", be, "))");
  if (n == "LeakyRelu") return absl::StrCat("((", x, ") >= 0.f ? (", x, ") : ", al, " * (", x, "))");
  if (n == "ThresholdedRelu") return absl::StrCat("((", x, ") > ", al, " ? (", x, ") : 0.f)");
  if (n == "ScaledTanh") return absl::StrCat("(", al, " * tanhf(", be, " * (", x, ")))");
  if (n == "Affine") return absl::StrCat("(", al, " * (", x, ") + ", be, ")");
  if (n == "Elu") return absl::StrCat("((", x, ") >= 0.f ? (", x, ") : ", al, " * (expf(", x, ") - 1.f))");
  if (n == "Softsign") return absl::StrCat("((", x, ") / (1.f + fabsf(", x, ")))");
  return absl::StrCat("log1pf(expf(", x, "))");
}

// activation `k` of the kind, per direction.
std::string Act(const RnnPlan& p, size_t k, const std::string& x) {
  if (p.dirs == 1) return ActivationSource(p.acts[0][k], x);
  return absl::StrCat("(d == 0 ? ", ActivationSource(p.acts[0][k], x), " : ",
                      ActivationSource(p.acts[1][k], x), ")");
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateRecurrent(const Node& node) {
  const RnnKind kind = node.op_type() == "RNN" ? RnnKind::kRnn : node.op_type() == "GRU" ? RnnKind::kGru : RnnKind::kLstm;
  absl::StatusOr<RnnPlan> plan = kiln::ops::PlanRnn(node, kind);
  if (!plan.ok()) return plan.status();
  const RnnPlan& p = *plan;
  const int64_t H = p.hidden, G = p.gates, I = p.input;
  if (4 * H > kMaxSharedFloats) return NoKernel(node, absl::StrCat("hidden_size ", H, " over ", kMaxSharedFloats / 4));
  if (node.num_outputs() == 0 || p.batch == 0 || H == 0) return NoKernel(node, "no outputs or an empty batch");
  KernelLaunch l;
  std::string params;
  for (int o = 0; o < node.num_outputs(); ++o) {
    absl::StrAppend(&params, o ? ", " : "", Param(node.output(o)->dtype(), false, absl::StrCat("out", o)));
    l.args.push_back(o);
  }
  auto has = [&](int i) { return node.has_input(i); };
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (!has(i)) continue;
    absl::StrAppend(&params, ", ", Param(node.input(i)->dtype(), true, absl::StrCat("in", i)));
    l.args.push_back(InputArg(node, i));
  }
  auto in = [&](int i, const std::string& at) { return LoadAs(node.input(i)->dtype(), Domain::kFloat, absl::StrCat("in", i), at); };
  const std::string x_at = p.batch_first ? absl::StrCat("((kiln_index)b * ", p.seq, " + t) * ", I)
                                         : absl::StrCat("((kiln_index)t * ", p.batch, " + b) * ", I);
  const std::string y_at = p.batch_first ? absl::StrCat("(((kiln_index)b * ", p.seq, " + t) * ", p.dirs, " + d) * ", H)
                                         : absl::StrCat("(((kiln_index)t * ", p.dirs, " + d) * ", p.batch, " + b) * ", H);
  const std::string state_at = p.batch_first ? absl::StrCat("((kiln_index)b * ", p.dirs, " + d) * ", H)
                                             : absl::StrCat("((kiln_index)d * ", p.batch, " + b) * ", H);
  const std::string clip = p.has_clip ? absl::StrCat("fmaxf(-", FloatLit(p.clip), ", fminf(", FloatLit(p.clip), ", %))") : "%";
  auto clipped = [&](const std::string& v) {
    std::string c = clip;
    return c.replace(c.find('%'), 1, v);
  };
  // The sum of gate g of unit j: the biases, then x's terms, then (with_h) h's.
  auto gate = [&](const std::string& var, int64_t g, bool with_h) {
    const std::string row = absl::StrCat("((kiln_index)d * ", G * H, " + ", g * H, " + j)");
    std::string s = absl::StrCat("float ", var, " = ",
                                 has(kB) ? absl::StrCat(in(kB, absl::StrCat("(kiln_index)d * ", 2 * G * H, " + ", g * H, " + j")), " + ",
                                                        in(kB, absl::StrCat("(kiln_index)d * ", 2 * G * H, " + ", G * H + g * H, " + j")))
                                         : std::string("0.f"),
                                 ";\nfor (int i = 0; i < ", I, "; ++i) ", var, " += ", in(kX, absl::StrCat(x_at, " + i")), " * ",
                                 in(kW, absl::StrCat(row, " * ", I, " + i")), ";\n");
    if (with_h) {
      absl::StrAppend(&s, "for (int q = 0; q < ", H, "; ++q) ", var, " += h[q] * ", in(kR, absl::StrCat(row, " * ", H, " + q")), ";\n");
    }
    return s;
  };
  std::string step;  // phase 1, per unit j
  std::string phase2;
  if (kind == RnnKind::kRnn) {
    step = absl::StrCat(gate("s0", 0, true), "hn[j] = ", Act(p, 0, clipped("s0")), ";\n");
  } else if (kind == RnnKind::kLstm) {
    auto peep = [&](int64_t k, const std::string& cv) {
      return has(kP) ? absl::StrCat(" + ", in(kP, absl::StrCat("(kiln_index)d * ", 3 * H, " + ", k * H, " + j")), " * ", cv) : "";
    };
    step = absl::StrCat(gate("si", 0, true), gate("so", 1, true), gate("sf", 2, true), gate("sc", 3, true),
                        "const float ig = ", Act(p, 0, clipped(absl::StrCat("si", peep(0, "c[j]")))), ";\n",
                        "const float fg = ", p.input_forget ? "1.f - ig" : Act(p, 0, clipped(absl::StrCat("sf", peep(2, "c[j]")))), ";\n",
                        "const float cc = ", Act(p, 1, clipped("sc")), ";\nconst float cn = fg * c[j] + ig * cc;\n",
                        "const float og = ", Act(p, 0, clipped(absl::StrCat("so", peep(1, "cn")))), ";\n",
                        "aux[j] = cn;\nhn[j] = og * ", Act(p, 2, "cn"), ";\n");
  } else {
    // Phase 1: z (kept in hn) and r (in aux) for every unit; phase 2: the h gate.
    step = absl::StrCat(gate("sz", 0, true), gate("sr", 1, true), "hn[j] = ", Act(p, 0, clipped("sz")), ";\naux[j] = ",
                        Act(p, 0, clipped("sr")), ";\n");
    const std::string rb = has(kB) ? in(kB, absl::StrCat("(kiln_index)d * ", 2 * G * H, " + ", G * H + 2 * H, " + j")) : "0.f";
    const std::string row = absl::StrCat("((kiln_index)d * ", G * H, " + ", 2 * H, " + j)");
    phase2 = absl::StrCat(gate("sg", 2, false), "const float rb = ", rb, ";\nfloat s = sg - rb;\nfloat hr = 0.f;\n",
                          "for (int q = 0; q < ", H, "; ++q) hr += ", p.linear_before_reset ? "h[q]" : "aux[q] * h[q]", " * ",
                          in(kR, absl::StrCat(row, " * ", H, " + q")), ";\n",
                          p.linear_before_reset ? "s += aux[j] * (hr + rb);\n" : "s += hr + rb;\n",
                          "const float hh = ", Act(p, 1, clipped("s")), ";\nconst float z = hn[j];\n",
                          "hn2[j] = (1.f - z) * hh + z * h[j];\n");
  }
  const std::string loop = absl::StrCat("for (int j = threadIdx.x; j < ", H, "; j += blockDim.x) {\n");
  const bool lstm = kind == RnnKind::kLstm;
  std::string body = absl::StrCat(
      "__shared__ float h[", H, "], hn[", H, "], aux[", H, "], hn2[", H, "];\n(void)hn2;\n", "float* c = hn2;  // LSTM's cell state\n",
      "const int d = blockIdx.x / ", p.batch, ", b = blockIdx.x % ", p.batch, ";\nconst bool rev = ",
      p.reverse ? "true" : "d == 1", ";\n(void)rev;\nkiln_index len = ",
      has(kLens) ? absl::StrCat("(kiln_index)in", kLens, "[b];\nlen = len < 0 ? 0 : (len > ", p.seq, " ? ", p.seq, " : len)")
                 : absl::StrCat(p.seq),
      ";\n", loop, "h[j] = ", has(kH0) ? in(kH0, absl::StrCat(state_at, " + j")) : "0.f", ";\n",
      lstm ? absl::StrCat("c[j] = ", has(kC0) ? in(kC0, absl::StrCat(state_at, " + j")) : "0.f", ";\n") : "", "}\n__syncthreads();\n",
      "for (kiln_index k = 0; k < len; ++k) {\nconst kiln_index t = rev ? len - 1 - k : k;\n", loop, step, "}\n__syncthreads();\n");
  if (!phase2.empty()) absl::StrAppend(&body, loop, phase2, "}\n__syncthreads();\n", loop, "hn[j] = hn2[j];\n}\n__syncthreads();\n");
  absl::StrAppend(&body, loop, "h[j] = hn[j];\n", lstm ? "c[j] = aux[j];\n" : "",
                  StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out0", absl::StrCat(y_at, " + j"), "hn[j]"), "\n}\n__syncthreads();\n}\n",
                  "for (kiln_index t = len; t < ", p.seq, "; ++t) {\n", loop,
                  StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out0", absl::StrCat(y_at, " + j"), "0.f"), "\n}\n}\n");
  for (int o = 1; o < node.num_outputs(); ++o) {
    absl::StrAppend(&body, loop,
                    StoreFrom(node.output(o)->dtype(), Domain::kFloat, absl::StrCat("out", o), absl::StrCat(state_at, " + j"),
                              o == 1 ? "h[j]" : "c[j]"),
                    "\n}\n");
  }
  l.source = absl::StrCat("// ", node.op_type(), " ", node.input(kX)->TypeString(), ", hidden ", H,
                          "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", body, "}\n");
  const int64_t threads = std::min<int64_t>(kBlock, (H + 31) / 32 * 32);
  l.grid = {static_cast<uint32_t>(p.dirs * p.batch), 1, 1};
  l.block = {static_cast<uint32_t>(threads), 1, 1};
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
