// Tests of the tensor-core GEMM generator (codegen/ops/gemm.cc): a representative
// instantiation of every form (layouts, load modes, prologues, dual mainloops,
// epilogues, fp16/bf16) compiles with NVRTC for sm_80 and sm_90a without spilling
// (no GPU needed), the config verifier and routing; on a GPU every case (plain MatMul
// in each layout, matmul+epilogue, prologue+matmul[+epilogue], dual-matmul[+epilogue],
// odd shapes including M = 1 and K = 8, batched) matches the CPU reference
// (EvaluateNode of the MatMul or the group node). The GPU test skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/templates.h"
#include "common/float16.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "runtime/tensor_map.h"

namespace kiln::codegen {
namespace {

// kRowsResidual: a residual [M, N] shared by the batch (a position table).
enum class Epi { kNone, kBiasRelu, kBiasGelu, kResidual, kScale, kBiasGeluTanh, kBiasResidual, kRowsResidual };
const char* EpiName(Epi e) {
  switch (e) {
    case Epi::kNone: return "";
    case Epi::kBiasRelu: return "_bias_relu";
    case Epi::kBiasGelu: return "_bias_gelu";
    case Epi::kResidual: return "_residual";
    case Epi::kScale: return "_scale";
    case Epi::kBiasGeluTanh: return "_bias_gelu_tanh";
    case Epi::kBiasResidual: return "_bias_residual";
    case Epi::kRowsResidual: return "_rows_residual";
  }
  return "?";
}

// Prologues (element-wise chains on the loaded operands; f(0) != 0 for most, so
// out-of-range elements must stay exact zeros).
enum class Pro {
  kNone,
  kReluA,       // Relu(A)
  kScaleBiasA,  // A * 0.5 + bias[last stored dim of A]
  kClipB,       // Clip(B + 0.25, -0.5, 0.5)
  kCastA,       // Cast(A: f32 -> storage) * 2   (an fp32 loaded tensor)
  kBoth,        // Sigmoid(A), Tanh(B)
  kRowScaleA,   // A * s[batch..., stored rows, 1]
};
const char* ProName(Pro p) {
  switch (p) {
    case Pro::kNone: return "";
    case Pro::kReluA: return "_pro_reluA";
    case Pro::kScaleBiasA: return "_pro_scalebiasA";
    case Pro::kClipB: return "_pro_clipB";
    case Pro::kCastA: return "_pro_castA";
    case Pro::kBoth: return "_pro_sigA_tanhB";
    case Pro::kRowScaleA: return "_pro_rowscaleA";
  }
  return "?";
}

struct GemmCase {
  DType dtype;
  Shape batch;  // output batch dims
  int64_t m, n, k;
  bool b_broadcast = false;  // B (and B2) are [K, N] for every batch
  bool ta = false, tb = false;
  Epi epi = Epi::kNone;
  Pro pro = Pro::kNone;
  bool dual = false;
  int64_t k2 = 0;
  bool ta2 = false, tb2 = false;

  std::string Kind() const {
    if (dual) return epi == Epi::kNone ? "dual-matmul" : "dual-matmul+epilogue";
    if (pro != Pro::kNone) return epi == Epi::kNone ? "prologue+matmul" : "prologue+matmul+epilogue";
    return epi == Epi::kNone ? "MatMul" : "matmul+epilogue";
  }
  std::string Name() const {
    std::string b;
    for (int64_t d : batch) absl::StrAppend(&b, d, "x");
    std::string s = absl::StrCat(dtype == DType::kFloat16 ? "f16_" : "bf16_", b, m, "_", n, "_", k);
    if (dual) absl::StrAppend(&s, "_", k2);
    absl::StrAppend(&s, b_broadcast ? "_bcastB" : "", "_", ta ? "T" : "N", tb ? "T" : "N");
    if (dual) absl::StrAppend(&s, ta2 ? "T" : "N", tb2 ? "T" : "N", "_dual");
    return absl::StrCat(s, ProName(pro), EpiName(epi));
  }
};

Tensor Rand(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = dist(gen);
  return Tensor::FromFloat(dtype, shape, v);
}

int64_t OnnxType(DType dt) { return dt == DType::kFloat16 ? 10 : dt == DType::kBFloat16 ? 16 : 1; }

// The graph of one case; `node` is the MatMul or the fused group.
struct Built {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;
  std::map<std::string, Tensor> feeds;  // by value name
};

absl::StatusOr<Built> Build(const GemmCase& c, uint32_t seed) {
  Built b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  auto input = [&](const std::string& name, Shape shape, DType dt) {
    Value* v = g.AddValue(name);
    v->SetType(dt, shape);
    g.AddInput(v);
    b.feeds[name] = Rand(dt, shape, seed++);
    return v;
  };
  auto scalar = [&](const std::string& name, float v) {
    return g.AddConstant(name, Tensor::FromFloat(c.dtype, {}, {v}));
  };
  auto with = [](Shape lead, std::initializer_list<int64_t> tail) {
    lead.insert(lead.end(), tail);
    return lead;
  };
  std::vector<Node*> members;
  auto add = [&](const std::string& op, std::vector<Value*> ins) {
    Value* out = g.AddValue(absl::StrCat(op, "_out", members.size()));
    members.push_back(g.AddNode(op, ins, {out}, absl::StrCat(op, members.size())));
    return out;
  };
  const Shape bb = c.b_broadcast ? Shape{} : c.batch;
  const Shape as = c.ta ? with(c.batch, {c.k, c.m}) : with(c.batch, {c.m, c.k});
  const Shape bs = c.tb ? with(bb, {c.n, c.k}) : with(bb, {c.k, c.n});
  const Shape ys = with(c.batch, {c.m, c.n});

  // Operands, through their prologues.
  Value* a = nullptr;
  Value* w = nullptr;
  switch (c.pro) {
    case Pro::kNone:
    case Pro::kClipB: a = input("a", as, c.dtype); break;
    case Pro::kReluA: a = add("Relu", {input("a", as, c.dtype)}); break;
    case Pro::kScaleBiasA:
      a = add("Mul", {input("a", as, c.dtype), scalar("half", 0.5f)});
      a = add("Add", {a, input("a_bias", {as.back()}, c.dtype)});
      break;
    case Pro::kCastA: {
      a = add("Cast", {input("a", as, DType::kFloat32)});
      members.back()->SetAttr("to", OnnxType(c.dtype));
      a = add("Mul", {a, scalar("two", 2.f)});
      break;
    }
    case Pro::kBoth: a = add("Sigmoid", {input("a", as, c.dtype)}); break;
    case Pro::kRowScaleA: {
      Shape rs = as;
      rs.back() = 1;
      a = add("Mul", {input("a", as, c.dtype), input("a_rowscale", rs, c.dtype)});
      break;
    }
  }
  w = input("b", bs, c.dtype);
  if (c.pro == Pro::kClipB) {
    w = add("Add", {w, scalar("quarter", 0.25f)});
    w = add("Clip", {w, scalar("lo", -0.5f), scalar("hi", 0.5f)});
  }
  if (c.pro == Pro::kBoth) w = add("Tanh", {w});

  Value* mm_out = g.AddValue("mm");
  Node* mm = g.AddNode("MatMul", {a, w}, {mm_out}, "mm");
  if (c.ta) mm->SetAttr("trans_a", 1);
  if (c.tb) mm->SetAttr("trans_b", 1);
  members.push_back(mm);
  Value* last = mm_out;
  if (c.dual) {
    const Shape as2 = c.ta2 ? with(c.batch, {c.k2, c.m}) : with(c.batch, {c.m, c.k2});
    const Shape bs2 = c.tb2 ? with(bb, {c.n, c.k2}) : with(bb, {c.k2, c.n});
    Value* mm2_out = g.AddValue("mm2");
    Node* mm2 = g.AddNode("MatMul", {input("a2", as2, c.dtype), input("b2", bs2, c.dtype)}, {mm2_out}, "mm2");
    if (c.ta2) mm2->SetAttr("trans_a", 1);
    if (c.tb2) mm2->SetAttr("trans_b", 1);
    members.push_back(mm2);
    last = add("Add", {last, mm2_out});
  }
  switch (c.epi) {
    case Epi::kNone: break;
    case Epi::kBiasRelu:
      last = add("Add", {last, input("bias", {c.n}, c.dtype)});
      last = add("Relu", {last});
      break;
    case Epi::kBiasGelu:
    case Epi::kBiasGeluTanh:
      last = add("Add", {last, input("bias", {c.n}, c.dtype)});
      last = add("Gelu", {last});
      if (c.epi == Epi::kBiasGeluTanh) members.back()->SetAttr("approximate", std::string("tanh"));
      break;
    case Epi::kResidual: last = add("Add", {input("residual", ys, c.dtype), last}); break;
    case Epi::kRowsResidual: last = add("Add", {last, input("residual", {c.m, c.n}, c.dtype)}); break;
    case Epi::kBiasResidual:  // BERT's attention and FFN outputs
      last = add("Add", {last, input("bias", {c.n}, c.dtype)});
      last = add("Add", {last, input("residual", ys, c.dtype)});
      break;
    case Epi::kScale: last = add("Mul", {last, scalar("scale", 0.125f)}); break;
  }
  g.AddOutput(last);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  if (!s.ok()) return s;
  b.node = mm;
  if (members.size() > 1) {
    absl::StatusOr<Node*> group = FormFusedGroup(g, members, c.Kind(), mm);
    if (!group.ok()) return group.status();
    b.node = *group;
  }
  return b;
}

std::vector<GemmCase> Cases() {
  std::vector<GemmCase> cases;
  const std::array<std::array<bool, 2>, 4> layouts = {{{false, false}, {true, false}, {false, true}, {true, true}}};
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto push = [&](GemmCase c) {
      c.dtype = dt;
      cases.push_back(c);
    };
    // Plain MatMul in each layout (contiguous dims multiples of 8 or not; M = 1; K = 8).
    const std::vector<std::array<int64_t, 3>> shapes = {{1, 64, 64},      {7, 33, 8},      {37, 129, 65},
                                                        {64, 72, 40},     {128, 128, 128}, {257, 511, 300},
                                                        {1024, 768, 768}, {1536, 1024, 256}};
    for (const auto& l : layouts) {
      for (const auto& s : shapes) {
        GemmCase c{dt, {}, s[0], s[1], s[2]};
        c.ta = l[0];
        c.tb = l[1];
        push(c);
      }
      for (bool bcast : {true, false}) {
        GemmCase c{dt, {3}, 65, 130, 70, bcast, l[0], l[1]};
        push(c);
      }
    }
    // Large tiles with both operands register-staged (K not a multiple of 8, B [N,K]).
    push({dt, {}, 1536, 1024, 260, false, false, true});
    push({dt, {}, 1536, 1024, 260, false, false, true, Epi::kBiasRelu, Pro::kBoth});
    // matmul+epilogue.
    for (Epi e : {Epi::kBiasRelu, Epi::kBiasGelu, Epi::kResidual, Epi::kScale}) {
      push({dt, {}, 37, 129, 65, false, false, false, e});
      push({dt, {}, 256, 512, 128, false, false, false, e});
      push({dt, {3}, 65, 130, 70, true, false, false, e});
      push({dt, {}, 256, 512, 128, false, true, true, e});
    }
    push({dt, {}, 7, 33, 8, false, false, false, Epi::kBiasRelu});
    push({dt, {}, 1, 64, 8, false, true, true, Epi::kBiasGelu});
    push({dt, {2, 3}, 33, 64, 48, true, false, false, Epi::kResidual});
    push({dt, {}, 37, 129, 65, false, true, true, Epi::kBiasGelu});
    // Batched with B shared: C's batch folds into its rows (BERT at 77 tokens: one
    // GEMM of 308 rows), unless an operand is shared by the batch but not the rows.
    push({dt, {4}, 77, 768, 256, true, false, true, Epi::kBiasResidual});
    push({dt, {2, 3}, 77, 136, 72, true, false, false, Epi::kRowsResidual});
    // prologue+matmul[+epilogue]: unaligned, aligned, M = 1 with K = 8, partial tiles
    // of aligned dims; the 128x128 config; batched with broadcast side inputs.
    for (Pro p : {Pro::kReluA, Pro::kScaleBiasA, Pro::kClipB, Pro::kCastA, Pro::kBoth, Pro::kRowScaleA}) {
      const std::vector<std::array<int64_t, 3>> pshapes = {{37, 129, 65}, {256, 512, 128}, {1, 64, 8}, {65, 136, 72}};
      for (const auto& s : pshapes) {
        for (const auto& l : layouts) {
          GemmCase c{dt, {}, s[0], s[1], s[2], false, l[0], l[1]};
          c.pro = p;
          push(c);
        }
      }
      GemmCase big{dt, {}, 1536, 1024, 256};
      big.pro = p;
      push(big);
      GemmCase batched{dt, {3}, 65, 130, 70, true};
      batched.pro = p;
      batched.epi = Epi::kBiasRelu;
      push(batched);
      GemmCase epi{dt, {}, 37, 129, 65, false, true, false, p == Pro::kCastA ? Epi::kBiasGelu : Epi::kResidual};
      epi.pro = p;
      push(epi);
    }
    {
      GemmCase c{dt, {2, 3}, 33, 64, 48, false, false, true, Epi::kScale};
      c.pro = Pro::kRowScaleA;
      push(c);
    }
    // dual-matmul[+epilogue]: K1 != K2, each mainloop in its own layout.
    const std::vector<std::array<int64_t, 4>> dshapes = {
        {37, 129, 65, 40}, {256, 512, 128, 64}, {1, 64, 8, 24}, {1536, 1024, 256, 128}, {65, 136, 72, 9}};
    const std::vector<std::array<bool, 4>> dlayouts = {
        {false, false, false, false}, {true, true, false, true}, {true, false, true, true}};
    for (const auto& s : dshapes) {
      for (const auto& l : dlayouts) {
        for (Epi e : {Epi::kNone, Epi::kBiasRelu}) {
          GemmCase c{dt, {}, s[0], s[1], s[2], false, l[0], l[1], e};
          c.dual = true;
          c.k2 = s[3];
          c.ta2 = l[2];
          c.tb2 = l[3];
          push(c);
        }
      }
    }
    {
      GemmCase c{dt, {3}, 65, 130, 70, true, false, true, Epi::kResidual};
      c.dual = true;
      c.k2 = 24;
      c.tb2 = true;
      push(c);
    }
  }
  return cases;
}

ops::Sm90GemmConfig Sm90Swap(int bm, int bn, int consumers, int wg_m, int stages, int split) {
  ops::Sm90GemmConfig c{bm, bn, consumers, wg_m, stages, false, split};
  c.swap_ab = true;
  return c;
}
ops::Sm90GemmConfig Sm90Bk128(ops::Sm90GemmConfig c) {
  c.bk = 128;
  return c;
}

// The sm90 family's cases: Cases() (the sm_80 table, of which it takes the aligned
// ones), then forms only it needs more of: swap-AB's few rows (M = 1, 7, 16, 33, 64)
// with N not a multiple of the 64-row tile, K not a multiple of 64, B in both layouts,
// C rows of odd length (scalar stores), bias+GELU and residual epilogues, batched;
// A-prologues (through registers) in every layout at the 128-row tiles, batched and
// with partial tiles; dual mainloops with aligned partial tiles, K1 != K2 with K tails
// in both, batched.
// `c` with clusters of two along M.
ops::Sm90GemmConfig Sm90Cluster(ops::Sm90GemmConfig c) {
  c.cluster_m = 2;
  return c;
}
// `c` with stream-K.
ops::Sm90GemmConfig WithStreamK(ops::Sm90GemmConfig c) {
  c.stream_k = true;
  return c;
}

std::vector<GemmCase> Sm90Cases() {
  std::vector<GemmCase> cases = Cases();
  const std::array<std::array<bool, 2>, 4> layouts = {{{false, false}, {true, false}, {false, true}, {true, true}}};
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto push = [&](GemmCase c) {
      c.dtype = dt;
      cases.push_back(c);
    };
    // Swap-AB (Generate adds forced swapped tiles to every case with M <= 64 that can).
    push({dt, {}, 1, 200, 584, false, false, true, Epi::kBiasGelu});
    push({dt, {}, 7, 136, 200, false, false, false, Epi::kResidual});
    push({dt, {}, 16, 264, 1000, false, false, true});
    push({dt, {}, 64, 200, 584, false, false, false, Epi::kBiasGelu});
    push({dt, {}, 33, 131, 72, false, false, true, Epi::kBiasRelu});
    push({dt, {3}, 7, 136, 200, true, false, false, Epi::kBiasGelu});
    push({dt, {2, 3}, 16, 64, 48, false, false, true, Epi::kResidual});
    // GELU's tanh form, whose 16-bit results take tanh.approx (templates/pointwise.cuh).
    for (const auto& l : layouts) {
      push({dt, {}, 256, 512, 128, false, l[0], l[1], Epi::kBiasGeluTanh});
    }
    push({dt, {}, 1, 64, 8, false, false, true, Epi::kBiasGeluTanh});
    push({dt, {3}, 65, 136, 72, true, false, false, Epi::kBiasGeluTanh});
    // A bias and a residual (the bias in registers, the residual read in column
    // pairs): batched whole tiles as in BERT's attention output, and partial tiles.
    push({dt, {4}, 128, 384, 256, true, false, false, Epi::kBiasResidual});
    push({dt, {}, 65, 136, 72, false, false, true, Epi::kBiasResidual});
    for (Pro p : {Pro::kReluA, Pro::kRowScaleA}) {
      for (const auto& l : layouts) {
        if (!l[0] && !l[1]) continue;  // NN is in Cases()
        GemmCase big{dt, {}, 1536, 1024, 256, false, l[0], l[1]};
        big.pro = p;
        push(big);
      }
    }
    for (Pro p : {Pro::kReluA, Pro::kScaleBiasA, Pro::kRowScaleA}) {
      for (const auto& l : {layouts[0], layouts[3]}) {
        GemmCase batched{dt, {3}, 65, 136, 72, true, l[0], l[1], Epi::kBiasRelu};
        batched.pro = p;
        push(batched);
      }
      GemmCase gelu{dt, {}, 200, 264, 1000, false, true, false, Epi::kBiasGelu};
      gelu.pro = p;
      push(gelu);
    }
    const std::vector<std::array<bool, 4>> dlayouts = {
        {false, false, false, false}, {true, true, false, true}, {true, false, true, true}};
    for (const auto& l : dlayouts) {
      for (Epi e : {Epi::kNone, Epi::kBiasGelu}) {
        for (const std::array<int64_t, 4>& s : {std::array<int64_t, 4>{65, 136, 72, 24}, {128, 256, 1000, 200}}) {
          GemmCase c{dt, {}, s[0], s[1], s[2], false, l[0], l[1], e};
          c.dual = true;
          c.k2 = s[3];
          c.ta2 = l[2];
          c.tb2 = l[3];
          push(c);
        }
      }
    }
    for (bool bcast : {true, false}) {
      GemmCase c{dt, {3}, 65, 136, 72, bcast, false, true, Epi::kResidual};
      c.dual = true;
      c.k2 = 40;
      c.ta2 = true;
      push(c);
    }
  }
  return cases;
}

// op(A) * op(B) in fp32 on the CPU (the inputs widened exactly).
absl::StatusOr<std::vector<float>> Float32Product(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Graph g;
  Value* va = g.AddValue("a");
  va->SetType(DType::kFloat32, a.shape());
  Value* vb = g.AddValue("b");
  vb->SetType(DType::kFloat32, b.shape());
  g.AddInput(va);
  g.AddInput(vb);
  Value* y = g.AddValue("y");
  Node* mm = g.AddNode("MatMul", {va, vb}, {y}, "mm");
  if (ta) mm->SetAttr("trans_a", 1);
  if (tb) mm->SetAttr("trans_b", 1);
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(g, options); !s.ok()) return s;
  const Tensor fa = Tensor::FromFloat(DType::kFloat32, a.shape(), a.ToFloat());
  const Tensor fb = Tensor::FromFloat(DType::kFloat32, b.shape(), b.ToFloat());
  absl::StatusOr<std::vector<Tensor>> out = EvaluateNode(*mm, {&fa, &fb});
  if (!out.ok()) return out.status();
  return (*out)[0].ToFloat();
}

struct Generated {
  std::vector<GemmCase> cases;
  std::vector<Built> built;
  std::vector<KernelLaunch> launches;  // one per case
  std::vector<ModuleKernel> kernels;
};

std::string Form(const KernelLaunch& l);

// Every case (GPU), or for the CPU tests one case per template form and prologue
// kind (`heavy`: the 1536x1024 cases, which take the 128x128 tiles, else the rest).
enum class Select { kAll, kFormsLight, kFormsHeavy };

// Which GEMM family generates the cases: the sm_80 template, or the Hopper family
// (only the cases it takes, Sm90Eligible; the others are counted in *routed).
enum class Family { kSm80, kSm90 };

// KILN_GEMM_CASES="a|b": only the cases whose names contain one of the substrings
// (e.g. a compute-sanitizer run over a few forms); every case without it.
bool Wanted(const std::string& name) {
  const char* only = std::getenv("KILN_GEMM_CASES");
  if (only == nullptr) return true;
  for (absl::string_view w : absl::StrSplit(only, '|')) {
    if (name.find(std::string(w)) != std::string::npos) return true;
  }
  return false;
}

void Generate(Generated& out, Select select, Family family = Family::kSm80, int* routed = nullptr) {
  uint32_t seed = 1;
  std::set<std::string> seen;
  for (const GemmCase& c : family == Family::kSm90 ? Sm90Cases() : Cases()) {
    seed += 10;
    if (!Wanted(c.Name())) continue;
    if (family == Family::kSm80 && select != Select::kAll && (c.m == 1536) != (select == Select::kFormsHeavy)) {
      continue;
    }
    if (select == Select::kFormsHeavy && c.dtype != DType::kFloat16) continue;  // registers do not depend on it
    const bool dedupe = select == Select::kFormsLight;
    absl::StatusOr<Built> b = Build(c, seed);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    KernelOptions options;
    options.matmul_groups = codegen::MatMulGroups::kGenerated;
    absl::StatusOr<std::vector<KernelLaunch>> l;
    if (family == Family::kSm90) {
      if (!ops::Sm90Eligible(*b->node).ok()) {
        if (routed != nullptr) ++*routed;
        continue;
      }
      options.hopper = true;
      l = ops::GenerateGemm(*b->node, options);
      if (l.ok()) {
        EXPECT_EQ((*l)[0].family, "gemm_sm90") << c.Name();
      }
      if (select == Select::kFormsHeavy) {
        if (c.m < 1024) continue;
      } else if (dedupe && l.ok()) {
        // One per (dtype, layout, group kind, config).
        const std::string src = (*l)[0].source;
        auto define = [&](const std::string& d) {
          const size_t at = src.find(absl::StrCat("#define ", d, " "));
          return at == std::string::npos ? std::string("-") : src.substr(at, src.find('\n', at) - at);
        };
        const std::string key =
            absl::StrCat(define("GEMM_BF16"), define("GEMM_SWAP_AB"), define("GEMM_TRANS_A"), define("GEMM_TRANS_B"), define("BN"),
                         define("CONSUMERS"), define("GEMM_TMA_STORE"), define("GEMM_TRANS_A2"),
                         define("GEMM_TRANS_B2"), c.Kind(), ProName(c.pro));
        if (!seen.insert(key).second) continue;
      }
    } else {
      l = IsFusedGroup(*b->node) ? GenerateNodeKernels(*b->node, options) : ops::GenerateMatMulGroup(*b->node);
    }
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    if (family == Family::kSm90) {
      // The heuristic's config, then each other tile shape on the same case.
      std::vector<KernelLaunch> all = {(*l)[0]};
      for (const ops::Sm90GemmConfig& cfg : {ops::Sm90GemmConfig{128, 256, 2, 1, 3}, ops::Sm90GemmConfig{128, 128, 2, 1, 4},
                                             ops::Sm90GemmConfig{256, 128, 2, 2, 3}, ops::Sm90GemmConfig{64, 128, 1, 1, 8},
                                             ops::Sm90GemmConfig{128, 64, 2, 1, 3},
                                             ops::Sm90GemmConfig{64, 256, 2, 1, 4, true},
                                             ops::Sm90GemmConfig{128, 128, 2, 2, 5, true},  // the heuristic's ping-pong
                                             // Clusters of two sharing B: K-major B in halves of
                                             // 128, 96 and 32 rows, MN-major in 2, 3 (uneven) and
                                             // 1 boxes; ping-pong.
                                             ops::Sm90GemmConfig{128, 256, 2, 1, 4},  // C in 2 chunks
                                             ops::Sm90GemmConfig{64, 256, 1, 1, 5},   // one consumer, 2 chunks
                                             // Three consumers: 192 rows, C in 3 / 2 chunks.
                                             ops::Sm90GemmConfig{192, 192, 3, 1, 4}, ops::Sm90GemmConfig{192, 128, 3, 1, 5},
                                             Sm90Cluster({128, 256, 2, 1, 4}), Sm90Cluster({128, 192, 2, 1, 4}),
                                             Sm90Cluster({64, 64, 1, 1, 8}),
                                             ops::Sm90GemmConfig{64, 64, 1, 1, 12},  // the deep ring
                                             ops::Sm90GemmConfig{64, 64, 2, 1, 12, true},  // 64-row ping-pong
                                             ops::Sm90GemmConfig{128, 192, 2, 1, 5},  // C in 3 chunks
                                             Sm90Cluster({128, 128, 2, 2, 4, true}),
                                             // Stream-K over 3 CTAs (Sm90SplitCases has more).
                                             WithStreamK({128, 128, 2, 1, 4})}) {
        if (select != Select::kAll && select != Select::kFormsHeavy) break;
        // A grid of 3 blocks: each walks many tiles (ring wrap-around, ping-pong turns).
        absl::StatusOr<std::vector<KernelLaunch>> x = ops::GenerateMatMulGroupSm90(*b->node, &cfg, 3);
        ASSERT_TRUE(x.ok()) << c.Name() << ": " << x.status();
        // Each distinct kernel once (a stream-K config whose tiles fill whole waves is
        // the plain kernel).
        if (std::none_of(all.begin(), all.end(), [&](const KernelLaunch& k) { return k.source == (*x)[0].source; })) {
          all.push_back((*x)[0]);
        }
      }
      if (select == Select::kAll && c.m <= 64 && ops::Sm90SwapAbEligible(*b->node).ok()) {
        // Swapped tiles: n8 (unsplit, the heuristic's 16-stage ring), n16 in clusters of
        // two sharing A^T, two consumers split in 2, two m64 blocks split in 3, three
        // consumers (PickSm90SwapWaveConfig's 192-row tiles), and 128 k per stage with
        // one consumer, with two m64 blocks, and split in 2.
        for (ops::Sm90GemmConfig cfg :
             {Sm90Swap(64, 8, 1, 1, 16, 1), Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1)), Sm90Swap(128, 16, 2, 1, 4, 2),
              Sm90Swap(128, 32, 1, 2, 6, 3), Sm90Swap(192, 48, 3, 1, 4, 1), Sm90Bk128(Sm90Swap(64, 8, 1, 1, 8, 1)),
              Sm90Bk128(Sm90Swap(128, 32, 1, 2, 4, 1)), Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 2))}) {
          const int64_t k_tiles = (c.k + cfg.bk - 1) / cfg.bk;
          if ((cfg.split_k - 1) * ((k_tiles + cfg.split_k - 1) / cfg.split_k) >= k_tiles) cfg.split_k = 1;
          absl::StatusOr<std::vector<KernelLaunch>> x = ops::GenerateMatMulGroupSm90(*b->node, &cfg, 3);
          ASSERT_TRUE(x.ok()) << c.Name() << ": " << x.status();
          all.push_back((*x)[0]);
        }
      }
      for (size_t i = 0; i < all.size(); ++i) {
        out.cases.push_back(c);
        out.kernels.push_back({absl::StrCat("kiln_gemm_", c.Name(), "_cfg", i), all[i].source});
        out.launches.push_back(all[i]);
        absl::StatusOr<Built> again = Build(c, seed);  // each case keeps its own graph
        ASSERT_TRUE(again.ok());
        out.built.push_back(*std::move(again));
      }
      continue;
    }
    if (dedupe && family == Family::kSm80) {
      // Kept when it adds a feature: an operand's (layout, load mode, loaded kind),
      // or the (dtype, group kind) pair.
      const std::string f = Form((*l)[0]);
      auto field = [&](const std::string& d) {
        const size_t at = f.find(absl::StrCat(d, "="));
        return f.substr(at, f.find(' ', at) - at);
      };
      bool fresh = seen.insert(absl::StrCat(field("GEMM_BF16"), " ", c.Kind())).second;
      for (const std::string& feature :
           {absl::StrCat(field("GEMM_TRANS_A"), field("GEMM_A_MODE"), field("GEMM_A_KIND")),
            absl::StrCat(field("GEMM_TRANS_B"), field("GEMM_B_MODE")),
            absl::StrCat(field("GEMM_TRANS_A2"), field("GEMM_A2_MODE")),
            absl::StrCat(field("GEMM_TRANS_B2"), field("GEMM_B2_MODE"))}) {
        fresh |= seen.insert(feature).second;
      }
      if (!fresh) continue;
    }
    out.cases.push_back(c);
    out.kernels.push_back({absl::StrCat("kiln_gemm_", c.Name()), (*l)[0].source});
    out.launches.push_back((*l)[0]);
    out.built.push_back(*std::move(b));
  }
}

// The distinct template forms among the CPU cases: every one must be present.
std::string Form(const KernelLaunch& l) {
  std::string f;
  for (const char* d : {"GEMM_BF16", "GEMM_TRANS_A", "GEMM_TRANS_B", "GEMM_A_MODE", "GEMM_B_MODE", "GEMM_A_KIND",
                        "GEMM_DUAL", "GEMM_TRANS_A2", "GEMM_TRANS_B2", "GEMM_A2_MODE", "GEMM_B2_MODE"}) {
    const std::string key = absl::StrCat("#define ", d, " ");
    const size_t at = l.source.find(key);
    absl::StrAppend(&f, d, "=", at == std::string::npos ? "-" : l.source.substr(at + key.size(), 1), " ");
  }
  return f;
}

constexpr int kPerModule = 8;

// The ptxas log of sm90 kernels keeps the wgmma pipeline whole: setmaxnreg honoured
// (no C7508) and no wgmma waited for or serialized by ptxas: "warpgroup.arrive /
// warpgroup.wait is injected ... to allow use of registers in GMMA" (C7519, C7517:
// code between a wgmma.fence and the wgmmas writes or reads their registers, e.g. an
// accumulator's zero copied in after another block's first wgmma) and "wgmma.mma_async
// instructions are serialized" (C7510, C7515, C7520: the overlap is lost).
void ExpectWgmmaPipelineKept(const std::string& log) {
  for (const char* code : {"C7508", "C7517", "C7519", "serialized"}) {
    const size_t at = log.find(code);
    EXPECT_EQ(at, std::string::npos) << code << ": " << log.substr(at == std::string::npos ? 0 : at, 300);
  }
}

TEST(GemmCodegenTest, CompilesForSm80AndSm90a) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsLight));
  std::set<std::string> forms;
  for (const KernelLaunch& l : gen.launches) forms.insert(Form(l));
  // Both dtypes x every group kind; {cp.async, staged vector, staged scalar} on A
  // and B in both layouts; fp32 prologue loads; dual mainloops in both layouts.
  EXPECT_GE(forms.size(), 20u) << absl::StrJoin(forms, "\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
  }
  std::printf("compiled %zu GEMM kernels (%zu forms) for sm_80 and sm_90a\n", gen.kernels.size(), forms.size());
}

// The register budget of VerifyGemmConfig holds: the heaviest forms (128x128 tiles
// with register-staged operands, fp32 prologue loads, two mainloops) do not spill.
TEST(GemmCodegenTest, LargeTilesDoNotSpill) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsHeavy));
  std::vector<ModuleKernel> heavy;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    if (gen.launches[i].source.find("#define BM 128") != std::string::npos) heavy.push_back(gen.kernels[i]);
  }
  ASSERT_GE(heavy.size(), 16u);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(heavy, "sm_80");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
  }
}

// Every sm90 form (dtype x layouts x group kind x tile config) compiles for sm_90a
// with NVRTC, without spills, with setmaxnreg honoured (no ptxas warning C7508) and
// with the wgmma instructions (SASS HGMMA) rather than a fallback.
TEST(GemmCodegenTest, Sm90CompilesForSm90a) {
  Generated gen;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsLight, Family::kSm90, &routed));
  EXPECT_GE(gen.kernels.size(), 12u);
  EXPECT_GT(routed, 0);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  EXPECT_NE(inspected->ptx.find("wgmma.mma_async"), std::string::npos);
  // Dual groups and A-prologues are among the forms, the latter with the register-A
  // wgmma (A a vector of four registers after the accumulators).
  std::set<std::string> kinds;
  for (const GemmCase& c : gen.cases) kinds.insert(c.Kind());
  for (const char* kind : {"dual-matmul", "dual-matmul+epilogue", "prologue+matmul", "prologue+matmul+epilogue"}) {
    EXPECT_TRUE(kinds.count(kind)) << kind;
  }
  EXPECT_NE(inspected->ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("}, {%r"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("cp.async.bulk.tensor.3d"), std::string::npos);
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
  }
  std::printf("compiled %zu sm90 GEMM kernels for sm_90a (%d cases routed to sm80)\n", gen.kernels.size(), routed);
}

// Every tile config (up to 128 accumulators a thread with setmaxnreg 232) on the
// large cases in each layout: no spills, no stack.
TEST(GemmCodegenTest, Sm90LargeTilesDoNotSpill) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsHeavy, Family::kSm90));
  ASSERT_GE(gen.kernels.size(), 20u);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  // The clustered forms: B's multicast loads, remote releases, cluster barriers.
  for (const char* op : {".multicast::cluster", "mapa.shared::cluster", "barrier.cluster.arrive"}) {
    EXPECT_NE(inspected->ptx.find(op), std::string::npos) << op;
  }
  ExpectWgmmaPipelineKept(inspected->log);
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
    if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
      std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                  static_cast<long long>(r.spill_store_bytes));
    }
  }
}

// The sm90 kernel source of `epi` on 256x512x256 (unswapped) or, with m = 16, on
// 16x2048x2048 (swap-AB).
absl::StatusOr<std::string> Sm90EpilogueSource(DType dt, Epi epi, int64_t m) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  absl::StatusOr<Built> b =
      Build(GemmCase{dt, {}, m, m == 16 ? 2048 : 512, m == 16 ? 2048 : 256, false, false, false, epi}, 1);
  if (!b.ok()) return b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
  if (!l.ok()) return l.status();
  if ((*l)[0].family != "gemm_sm90") return absl::InternalError("not on the sm90 family");
  return std::move((*l)[0].source);
}

// The sm90 epilogue prefetches into L1 the loads that depend on C's column alone (a
// bias), at the start of each tile, and nothing else: a residual (row and column)
// does not fit the L1 left beside the ring (it goes to L2 instead:
// Sm90ReadsRowDenseOperandsInPairs), and a scalar has nothing to prefetch. Unswapped, a 16-bit
// column vector is also loaded into registers (kiln_epilogue_columns).
TEST(GemmCodegenTest, Sm90PrefetchesColumnVectorsOnly) {
  for (auto [epi, prefetched] : {std::pair<Epi, bool>{Epi::kBiasRelu, true}, {Epi::kBiasGeluTanh, true},
                                 {Epi::kResidual, false}, {Epi::kScale, false}, {Epi::kNone, false}}) {
    // 256x512x256 stays unswapped; 16x2048x2048 swaps A and B (C's columns are the
    // kernel's rows).
    for (int64_t m : {256, 16}) {
      absl::StatusOr<std::string> source = Sm90EpilogueSource(DType::kFloat16, epi, m);
      ASSERT_TRUE(source.ok()) << source.status();
      const std::string& src = *source;
      EXPECT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, m == 16) << EpiName(epi) << " m " << m;
      EXPECT_EQ(src.find("#define KILN_EPILOGUE_PREFETCH(first, t) kiln_sm90_prefetch_columns(e0, first, t);") !=
                    std::string::npos,
                prefetched)
          << EpiName(epi) << " m " << m;
      // The 16-bit bias is also held in registers, two columns a register; the TMA-store
      // epilogue (unswapped here) loads them before the tile's last wgmma wait.
      EXPECT_EQ(src.find("#define KILN_EPILOGUE_COLUMNS 1\n") != std::string::npos, prefetched)
          << EpiName(epi) << " m " << m;
      if (prefetched) {
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_prefetch_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        EXPECT_NE(ptx.find("prefetch.global.L1"), std::string::npos) << EpiName(epi) << " m " << m;
        const size_t pair = std::min(ptx.find("ld.global.u32"), ptx.find("ld.global.nc.u32"));
        const size_t wait = ptx.find("wgmma.wait_group.sync.aligned 0;");
        ASSERT_NE(wait, std::string::npos);
        if (m == 256) {
          EXPECT_LT(pair, wait) << EpiName(epi) << ": no 4-byte bias load before the last wgmma wait";
        } else {
          EXPECT_EQ(pair, std::string::npos) << EpiName(epi) << ": swapped tiles load the bias per element";
        }
      }
    }
  }
}

// The TMA-store epilogue reads a 16-bit operand dense along C's rows (a residual) a
// column pair at a time: one 4-byte load for the two elements a thread's fragment
// holds, after the tile's last wgmma wait (a bias held in registers loads before it),
// when the pointers are 4-byte aligned (KILN_EPILOGUE_PAIRS_ALIGNED); partial tiles
// and unaligned pointers take 2-byte loads. The tile's rows of it are prefetched into
// L2 as the tile starts. Swapped tiles (direct stores) keep the per-element functor.
TEST(GemmCodegenTest, Sm90ReadsRowDenseOperandsInPairs) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (auto [epi, pairs] : {std::pair<Epi, bool>{Epi::kResidual, true}, {Epi::kBiasResidual, true},
                              {Epi::kBiasRelu, false}, {Epi::kScale, false}}) {
      for (int64_t m : {256, 16}) {
        SCOPED_TRACE(absl::StrCat(EpiName(epi), dt == DType::kFloat16 ? " f16" : " bf16", " m ", m));
        absl::StatusOr<std::string> source = Sm90EpilogueSource(dt, epi, m);
        ASSERT_TRUE(source.ok()) << source.status();
        const std::string& src = *source;
        const bool swapped = m == 16;
        ASSERT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, swapped);
        EXPECT_EQ(src.find("#define KILN_EPILOGUE_PAIRS_ALIGNED ((reinterpret_cast<unsigned long long>(e") !=
                      std::string::npos,
                  pairs);
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_pairs_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        const size_t wait = ptx.find("wgmma.wait_group.sync.aligned 0;");
        ASSERT_NE(wait, std::string::npos);
        const size_t pair = ptx.find("ld.global.nc.u32", wait);
        EXPECT_EQ(pair != std::string::npos, pairs && !swapped) << "a 4-byte residual load after the last wait";
        if (pairs && !swapped) {
          EXPECT_NE(ptx.find("ld.global.u16", wait), std::string::npos) << "no 2-byte fallback";
        }
        // Each consumer asks L2 for its tile's rows of the residual as the tile starts.
        EXPECT_EQ(ptx.find("cp.async.bulk.prefetch.L2.global") != std::string::npos, pairs && !swapped);
      }
    }
  }
}

// A ReLU that ends the epilogue runs on the packed 16-bit result in the TMA-store
// epilogue (relu(round(x)) == round(relu(x))): one max.f16x2 / max.bf16x2 per two
// elements, no fp32 max; so does GELU's tanh form for an fp16 result, in fp16x2
// arithmetic (tanh.approx.f16x2; PackedGeluTanhWithinBound bounds its error). A bf16
// GELU stays in the fp32 functor, and the swapped kernel (direct stores) keeps the
// whole functor.
TEST(GemmCodegenTest, Sm90LastOpRunsOnThePackedResult) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const bool f16 = dt == DType::kFloat16;
    for (Epi epi : {Epi::kBiasRelu, Epi::kBiasGeluTanh}) {
      const bool relu = epi == Epi::kBiasRelu, tail = relu || f16;
      const std::string fn = relu ? (f16 ? "kiln_relu_f16x2" : "kiln_relu_bf16x2") : "kiln_gelu_tanh_f16x2";
      const std::string packed = relu ? (f16 ? "max.f16x2" : "max.bf16x2") : "tanh.approx.f16x2";
      const std::string scalar = relu ? "max.f32" : "tanh.approx.f32";
      for (int64_t m : {256, 16}) {
        SCOPED_TRACE(absl::StrCat(EpiName(epi), f16 ? " f16" : " bf16", " m ", m));
        absl::StatusOr<std::string> source = Sm90EpilogueSource(dt, epi, m);
        ASSERT_TRUE(source.ok()) << source.status();
        const std::string& src = *source;
        const bool swapped = m == 16;
        ASSERT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, swapped);
        EXPECT_EQ(src.find(absl::StrCat("#define KILN_EPILOGUE_TAIL(x) ", fn, "(x)\n")) != std::string::npos, tail);
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_tail_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        EXPECT_EQ(ptx.find(packed) != std::string::npos, tail && !swapped);
        EXPECT_EQ(ptx.find(scalar) != std::string::npos, !tail || swapped);
      }
    }
  }
}

// The planner tells the epilogue's work apart (EpilogueWork), and the sm90 heuristic
// picks the tile with it: at 2048x3072x768 (a BERT FFN at 2048 tokens) the plain GEMM
// takes cooperative 192x128 tiles, the others (a bias, a residual, a scale, GELU) the
// 128x128 ping-pong tile, whose consumers overlap one's epilogue with the other's
// mainloop (H100: bias+ReLU 20.9 -> 19.8 us, bias+GELU 22.5 -> 21.6 us; RESULTS.md
// 2026-11-23 (e)). A through registers never takes ping-pong (one consumer's prologue
// at a time would starve the tensor cores).
TEST(GemmCodegenTest, Sm90EpilogueWorkPicksTheTile) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  for (auto [epi, work] : {std::pair<Epi, ops::EpilogueWork>{Epi::kNone, ops::EpilogueWork::kNone},
                           {Epi::kBiasRelu, ops::EpilogueWork::kLight},
                           {Epi::kResidual, ops::EpilogueWork::kLight},
                           {Epi::kScale, ops::EpilogueWork::kLight},
                           {Epi::kBiasGelu, ops::EpilogueWork::kSpecial},
                           {Epi::kBiasGeluTanh, ops::EpilogueWork::kSpecial}}) {
    absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {}, 2048, 3072, 768, false, false, false, epi}, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::GemmFamilyPlan> plan = ops::PlanGemmForFamily(*b->node);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->epilogue_work, work) << EpiName(epi);
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ((*l)[0].family, "gemm_sm90");
    const bool pingpong = (*l)[0].source.find("#define GEMM_PINGPONG 1") != std::string::npos;
    EXPECT_EQ(pingpong, work != ops::EpilogueWork::kNone) << EpiName(epi);
    EXPECT_EQ((*l)[0].config, absl::StrCat("sm90 ", pingpong ? "128x128 p2x2 s5" : "192x128 c3x1 s5",
                                           " (heuristic, epilogue work: ", ops::EpilogueWorkName(work), ")"));
  }
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(2048, 3072, 768, 1, 132)), "192x128 c3x1 s5");
  for (ops::EpilogueWork work : {ops::EpilogueWork::kLight, ops::EpilogueWork::kSpecial}) {
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(2048, 3072, 768, 1, 132, false, work)),
              "128x128 p2x2 s5");
    // 4096^3: the epilogue is a sliver of each tile's time; the tile stays.
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(4096, 4096, 4096, 1, 132, false, work)),
              "128x256 c2x1 s4");
    for (int64_t m : {128, 512, 2048, 8192}) {
      for (int64_t n : {768, 3072}) {
        for (int64_t k : {128, 768, 3072}) {
          EXPECT_FALSE(ops::PickSm90GemmConfig(m, n, k, 1, 132, /*register_a=*/true, work).pingpong)
              << m << "x" << n << "x" << k;
        }
      }
    }
  }
}

// GELU takes its one-MUFU-op forms (kiln_gelu_tanh_fast, kiln_gelu_erf_fast) where its
// result is a 16-bit value and keeps tanhf / erff where it is fp32 (here after a Cast
// of the product), in both GEMM families (one epilogue generator,
// codegen/ops/pointwise.cc).
TEST(GemmCodegenTest, FastGeluOnlyForSixteenBitResults) {
  auto epilogue_of = [](const KernelLaunch& l) { return l.source.substr(l.source.find("float kiln_epilogue(")); };
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  KernelOptions sm80;
  sm80.matmul_groups = codegen::MatMulGroups::kGenerated;
  for (auto [epi, fast] : {std::pair<Epi, const char*>{Epi::kBiasGeluTanh, "kiln_gelu_tanh_fast("},
                           {Epi::kBiasGelu, "kiln_gelu_erf_fast("}}) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      absl::StatusOr<Built> b = Build(GemmCase{dt, {}, 64, 64, 64, false, false, false, epi}, 1);
      ASSERT_TRUE(b.ok()) << b.status();
      for (const KernelOptions& options : {hopper, sm80}) {
        absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, options);
        ASSERT_TRUE(l.ok()) << l.status();
        EXPECT_NE(epilogue_of((*l)[0]).find(fast), std::string::npos) << (*l)[0].family;
      }
    }
  }
  for (const std::string approximate : {"tanh", "none"}) {
    Graph g;
    auto input = [&](const std::string& name, DType dt, Shape shape) {
      Value* v = g.AddValue(name);
      v->SetType(dt, std::move(shape));
      g.AddInput(v);
      return v;
    };
    std::vector<Node*> members;
    auto add = [&](const std::string& op, std::vector<Value*> ins) {
      Value* out = g.AddValue(absl::StrCat(op, "_out"));
      members.push_back(g.AddNode(op, ins, {out}, op));
      return out;
    };
    Value* y = add("MatMul", {input("a", DType::kFloat16, {64, 64}), input("b", DType::kFloat16, {64, 64})});
    y = add("Cast", {y});
    members.back()->SetAttr("to", int64_t{1});
    y = add("Add", {y, input("bias", DType::kFloat32, {64})});
    y = add("Gelu", {y});
    members.back()->SetAttr("approximate", approximate);
    g.AddOutput(y);
    InferShapesOptions options;
    options.fold_constants = false;
    ASSERT_TRUE(InferShapes(g, options).ok());
    absl::StatusOr<Node*> group = FormFusedGroup(g, members, "matmul+epilogue", members[0]);
    ASSERT_TRUE(group.ok()) << group.status();
    const std::string accurate = approximate == "tanh" ? "kiln_gelu_tanh(" : "kiln_gelu_erf(";
    for (const KernelOptions& options : {hopper, sm80}) {
      absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(**group, options);
      ASSERT_TRUE(l.ok()) << l.status();
      const std::string epilogue = epilogue_of((*l)[0]);
      EXPECT_NE(epilogue.find(accurate), std::string::npos) << (*l)[0].family << "\n" << epilogue;
      EXPECT_EQ(epilogue.find("_fast("), std::string::npos) << (*l)[0].family << "\n" << epilogue;
    }
  }
}

TEST(GemmCodegenTest, Sm90ConfigVerifierAndHeuristic) {
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 3}).ok());
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4}, /*tma_store=*/false).ok());
  // 4 stages of 128x256 leave room for half the C tile: the epilogue stores it in 2 chunks.
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4}).ok());
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{128, 256, 2, 1, 4}), 2);
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{128, 256, 2, 1, 3}), 1);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 4}),
            1024 + 4 * 384 * 128 + 2 * 64 * 128 * 2 + 64 + 16);
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 1, 1, 8}).ok());
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 4}, false), 1024 + 4 * 384 * 128 + 64 + 16);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 3}), 1024 + 3 * 384 * 128 + 128 * 256 * 2 + 48 + 16);
  const absl::Status smem = ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 5}, false);
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 96, 2, 1, 4}).message().find("multiple of 64"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{256, 256, 2, 2, 2}).message().find("accumulator"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 128, 1, 1, 4}).message().find("64 * WG_M"),
            absl::string_view::npos);
  EXPECT_FALSE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 128, 2, 1, 1}).ok());
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true}).ok());
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4, true}).message().find("ping-pong"),
            absl::string_view::npos);
  // Three consumers (152 registers a thread through setmaxnreg): at most 96 accumulators.
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 192, 3, 1, 4}).ok());
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{192, 192, 3, 1, 4}), 3);
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{192, 128, 3, 1, 5}), 2);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 256, 3, 1, 3}).message().find("3 consumer"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{256, 128, 4, 1, 3}).message().find("1 to 3"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 3, 1, 4, true}).message().find("ping-pong"),
            absl::string_view::npos);
  // Their split and stream-K reductions spill past 64 accumulators: BN <= 128, and the
  // split-K heuristic never asks for more.
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 192, 3, 1, 4, false, 2}).message().find("BN <= 128"),
            absl::string_view::npos);
  EXPECT_FALSE(ops::ParseSm90GemmConfig("192x192 c3x1 s4 sk").ok());
  EXPECT_TRUE(ops::ParseSm90GemmConfig("192x128 c3x1 s5 k2").ok());
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{192, 192, 3, 1, 4}, 192, 192, 8192, 1, 132), 1);
  EXPECT_GT(ops::PickSm90SplitK(ops::Sm90GemmConfig{192, 128, 3, 1, 5}, 192, 128, 8192, 1, 132), 1);
  for (const char* text : {"128x256 c2x1 s3", "64x256 p2x1 s4", "64x128 c1x1 s8", "128x256 c2x1 s3 cl2",
                           "192x192 c3x1 s4", "192x128 c3x1 s5 sk",
                           "128x128 p2x2 s4 cl2", "64x128 c1x1 s8 k6", "64x16 c1x1 s8 k4 swap",
                           "64x16 c1x1 s16 swap cl2", "64x16 c1x1 s8 swap bk128"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseSm90GemmConfig("128x256 c2x1 s3 cl2")->cluster_m, 2);
  for (const char* text : {"128x256 x2x1 s4", "128x256 c2x1 s9", "128x256 c2x1 s3 cl", "128x256 c2x1 s3 cl2 k2",
                           "128x256 c2x1 s3 swap k2", "128x256 c2x1 s3 cl2 cl2", "128x256 c2x1 s3 kx",
                           "128x256 c2x1 s3 swapx"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(text).ok()) << text;
  }
  // Clusters: 1 or 2 CTAs, not split; swapped, 16-row multiples of A^T (8 rows a CTA).
  for (const char* text : {"128x256 c2x1 s3 cl3", "64x128 c1x1 s8 k2 cl2", "64x16 c1x1 s8 k2 swap cl2",
                           "64x8 c1x1 s16 swap cl2", "64x24 c1x1 s16 swap cl2"}) {
    const absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find("cluster"), absl::string_view::npos) << c.status();
  }
  // 128 k per stage: swapped tiles without clusters or stream-K only.
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x16 c1x1 s8 swap bk128")->bk, 128);
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x16 c1x1 s8 k3 swap bk128")->split_k, 3);
  for (const char* text : {"64x64 c1x1 s8 bk128", "64x16 c1x1 s8 swap bk96",
                           "64x16 c1x1 s8 swap cl2 bk128", "128x256 c2x1 s4 sk bk128"}) {
    const absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find("bk128"), absl::string_view::npos) << c.status();
  }
  EXPECT_FALSE(ops::ParseSm90GemmConfig("64x16 c1x1 s8 bk128 swap").ok());  // token order
  for (auto [m, n, k] : {std::array<int64_t, 3>{4096, 4096, 4096}, {1, 64, 8}, {128, 768, 768}, {8192, 3072, 768}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132);
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok()) << ops::Sm90GemmConfigString(c);
  }
  // Unsplit: the config of Sm90TileCosts with the least predicted time, which is
  // where the waves come out best (2304x1920: 270 tiles of 128x128 = 3 waves, 180 of
  // 64x192 = 2 shorter ones, 120 of 192x192 = one; on the H100 57.7 -> 48.9 us).
  for (auto [m, n, k, want] : {std::tuple<int64_t, int64_t, int64_t, const char*>{4096, 4096, 4096, "128x256 c2x1 s4"},
                               {8192, 768, 3072, "128x192 c2x1 s5"},
                               {2304, 1920, 3712, "192x192 c3x1 s4"},
                               {1024, 1024, 1024, "64x128 p2x1 s8"}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    double picked_us = -1;
    for (const ops::Sm90TileCost& cost : ops::Sm90TileCosts()) {
      if (ops::Sm90GemmConfigString(cost.config) == want) picked_us = cost.PredictUs(m, n, k, 1, 132);
    }
    ASSERT_GT(picked_us, 0) << want << " is not in Sm90TileCosts";
    for (const ops::Sm90TileCost& cost : ops::Sm90TileCosts()) {
      EXPECT_TRUE(ops::VerifySm90GemmConfig(cost.config).ok()) << ops::Sm90GemmConfigString(cost.config);
      EXPECT_LE(picked_us, cost.PredictUs(m, n, k, 1, 132)) << ops::Sm90GemmConfigString(cost.config);
    }
  }
  // Few tiles with a long K: 64x64 tiles, split until the units fill the SMs
  // (1024x128x3328: 32 tiles, 52 k tiles: at most 132 units of 12 k tiles -> 4 splits
  // of 13; 128x1280x3968: 40 tiles, 62 k tiles -> 3 of 21).
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(1024, 128, 3328, 1, 132)), "64x64 c1x1 s8 k4");
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(128, 1280, 3968, 1, 132)), "64x64 c1x1 s8 k3");
  // Past 40 tiles the 64x64 tiles stay unsplit, and unsplit with K >= 1024 they take a
  // 12-stage ring (48 tiles here; M = 64 no longer swaps).
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(64, 3072, 3072, 1, 132)), "64x64 c1x1 s12");
  // The 12-stage ring only with M <= 128 or N <= 512; ViT-B/16's FFN2 at 197 tokens takes 8.
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(197, 768, 3072, 1, 132)), "64x64 c1x1 s8");
  // Where the cost model's cheapest tile is the 64x64 ping-pong one (each consumer
  // warpgroup its own tiles, 12 stages), it takes it over the cooperative 64x64 tile and
  // its ring rule.
  for (auto [m, n, k, batch] : {std::array<int64_t, 4>{2944, 128, 2432, 1}, {512, 768, 768, 1}, {128, 1280, 3968, 2},
                                {1792, 256, 2304, 1}, {512, 1024, 4096, 1}}) {
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(m, n, k, batch, 132)), "64x64 p2x1 s12")
        << m << "x" << n << "x" << k << " batch " << batch;
  }
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 64, 1, 1, 12}).ok());
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 64, 1, 1, 17}).message().find("[2, 16]"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 1, 1, 10}).message().find("shared memory"),
            absl::string_view::npos);
  // A through registers: cooperative tiles only (64x128 while one wave holds them).
  for (auto [m, n, k, want] : {std::tuple<int64_t, int64_t, int64_t, const char*>{128, 768, 3072, "64x128 c1x1 s8 k3"},
                               {1024, 1024, 1024, "64x128 c1x1 s8"},
                               {2048, 768, 3072, "128x128 c2x1 s5"},
                               {2048, 768, 768, "128x128 c2x1 s5"},
                               {8192, 4096, 1024, "128x256 c2x1 s4"},
                               // One wave of 192x192 (120 tiles) against 3 of 128x128.
                               {2304, 1920, 3712, "192x192 c3x1 s4"}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132, /*register_a=*/true);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok());
  }
}

// A batched group whose A is stored [batch..., M, K] and whose B is shared by the
// batch runs as one GEMM of batch * M rows, the epilogue's operands indexed in C's
// folded rows; not with A transposed, a prologue, a batched B, or an operand shared by
// the batch but not the rows (its offset needs the batch entry). Both families: the
// sm90 plan (PlanGemmForFamily) and the sm_80 template's source and grid.
TEST(GemmCodegenTest, FoldsTheBatchIntoRows) {
  struct Fold {
    GemmCase c;
    bool folds;
  };
  GemmCase pro{DType::kFloat16, {4}, 77, 768, 256, true, false, false, Epi::kBiasRelu};
  pro.pro = Pro::kReluA;
  GemmCase dual{DType::kFloat16, {2, 3}, 77, 136, 72, true, false, true, Epi::kResidual};
  dual.dual = true;
  dual.k2 = 40;
  GemmCase dual_t = dual;
  dual_t.ta2 = true;
  for (const Fold& f : {Fold{{DType::kFloat16, {4}, 77, 768, 256, true, false, true, Epi::kBiasResidual}, true},
                        Fold{{DType::kBFloat16, {2, 3}, 77, 136, 72, true, false, false, Epi::kBiasGeluTanh}, true},
                        Fold{{DType::kFloat16, {4}, 77, 768, 256, true}, true}, Fold{dual, true},
                        Fold{dual_t, false},
                        Fold{{DType::kFloat16, {4}, 77, 768, 256, false, false, true, Epi::kBiasResidual}, false},
                        Fold{{DType::kFloat16, {4}, 80, 768, 256, true, true, false, Epi::kBiasRelu}, false},
                        Fold{{DType::kFloat16, {2, 3}, 77, 136, 72, true, false, false, Epi::kRowsResidual}, false},
                        Fold{pro, false}}) {
    SCOPED_TRACE(f.c.Name());
    absl::StatusOr<Built> b = Build(f.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::GemmFamilyPlan> p = ops::PlanGemmForFamily(*b->node);
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t batch = NumElements(f.c.batch);
    EXPECT_EQ(p->m, f.folds ? batch * f.c.m : f.c.m);
    EXPECT_EQ(p->batch, f.folds ? 1 : batch);
    if (f.folds) {
      EXPECT_EQ(p->a_batch, 0);
      EXPECT_EQ(p->a_shape, (Shape{batch * f.c.m, f.c.k}));
      if (f.c.dual) EXPECT_EQ(p->a2_shape, (Shape{batch * f.c.m, f.c.k2}));
      // A residual dense over C is read at C's folded row, a bias at the column alone.
      if (f.c.epi == Epi::kBiasResidual) {
        EXPECT_NE(p->epilogue_function.find("row * 768"), std::string::npos) << p->epilogue_function;
        EXPECT_EQ(p->epilogue_function.find("(batch /"), std::string::npos) << p->epilogue_function;
      }
    }
    // The sm_80 template folds the same groups: one GEMM of batch * M rows, no batch.
    absl::StatusOr<std::vector<KernelLaunch>> sm80 = ops::GenerateMatMulGroup(*b->node);
    ASSERT_TRUE(sm80.ok()) << sm80.status();
    const std::string& src = sm80->at(0).source;
    EXPECT_NE(src.find(absl::StrCat("#define GEMM_M ", f.folds ? batch * f.c.m : f.c.m, "\n")), std::string::npos);
    EXPECT_EQ(src.find("#define GEMM_C_BATCH 0LL\n") != std::string::npos, f.folds) << src.substr(0, 2000);
    EXPECT_EQ(sm80->at(0).grid[2], f.folds ? 1u : static_cast<uint32_t>(batch));
  }
}

// With `hopper`, GenerateNodeKernels gives the sm90 family what it takes (dual groups
// and A-prologues included) and the sm_80 template the rest: rows that are not 16-byte
// aligned (TMA), prologues on B or loading fp32, with the reason in Sm90Eligible.
TEST(GemmCodegenTest, Sm90Routing) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  struct Route {
    GemmCase c;
    const char* family;
    const char* why;  // in Sm90Eligible's message when routed
  };
  GemmCase dual{DType::kFloat16, {}, 64, 64, 64};
  dual.dual = true;
  dual.k2 = 32;
  GemmCase dual_odd = dual;  // A2 [64, 9]: TMA cannot read it
  dual_odd.k2 = 9;
  GemmCase pro{DType::kFloat16, {}, 64, 64, 64};
  pro.pro = Pro::kReluA;
  GemmCase pro_t{DType::kBFloat16, {3}, 64, 136, 72, true, true, false, Epi::kBiasGelu};
  pro_t.pro = Pro::kScaleBiasA;
  GemmCase pro_b = pro;
  pro_b.pro = Pro::kClipB;
  GemmCase pro_both = pro;
  pro_both.pro = Pro::kBoth;
  GemmCase pro_f32 = pro;
  pro_f32.pro = Pro::kCastA;
  GemmCase pro_odd = pro;  // A [37, 65]
  pro_odd.m = 37;
  pro_odd.k = 65;
  for (const Route& r : {Route{GemmCase{DType::kFloat16, {}, 256, 512, 128}, "gemm_sm90", ""},
                         Route{GemmCase{DType::kBFloat16, {3}, 64, 136, 72, true, true, true, Epi::kBiasGelu},
                               "gemm_sm90", ""},
                         Route{GemmCase{DType::kFloat16, {}, 1, 64, 8}, "gemm_sm90", ""},
                         Route{GemmCase{DType::kFloat16, {}, 37, 129, 64}, "gemm_sm80", "multiple of 8"},
                         Route{GemmCase{DType::kFloat16, {}, 37, 128, 65}, "gemm_sm80", "multiple of 8"},
                         Route{pro, "gemm_sm90", ""}, Route{pro_t, "gemm_sm90", ""}, Route{dual, "gemm_sm90", ""},
                         Route{pro_b, "gemm_sm80", "prologue on B"}, Route{pro_both, "gemm_sm80", "prologue on B"},
                         Route{pro_f32, "gemm_sm80", "loading f32"},
                         Route{pro_odd, "gemm_sm80", "multiple of 8"}, Route{dual_odd, "gemm_sm80", "multiple of 8"}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << r.c.Name() << ": " << l.status();
    EXPECT_EQ((*l)[0].family, r.family) << r.c.Name();
    const absl::Status eligible = ops::Sm90Eligible(*b->node);
    EXPECT_EQ(eligible.ok(), std::string(r.family) == "gemm_sm90") << r.c.Name();
    if (!eligible.ok()) {
      EXPECT_NE(eligible.message().find(r.why), absl::string_view::npos) << eligible;
    }
    if ((*l)[0].family == "gemm_sm90") {
      // A, B [, A2, B2] and C (TMA store: N % 8 == 0); these small shapes do not swap.
      EXPECT_NE((*l)[0].source.find("#define GEMM_SWAP_AB 0"), std::string::npos) << r.c.Name();
      EXPECT_EQ((*l)[0].tensor_maps.size(), r.c.dual ? 5u : 3u);
      EXPECT_LE((*l)[0].grid[0], 132u);
      const std::string& src = (*l)[0].source;
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_DUAL ", r.c.dual ? 1 : 0)), std::string::npos);
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_PROLOGUE ", r.c.pro != Pro::kNone ? 1 : 0)), std::string::npos);
      if (r.c.pro == Pro::kScaleBiasA) {  // C, the prologue's bias, then the epilogue's
        EXPECT_EQ((*l)[0].args.size(), 3u);
        EXPECT_NE(src.find("struct kiln_prologue_a"), std::string::npos);
      }
    }
    // Without `hopper` the sm_80 template takes everything.
    KernelOptions sm80;
    sm80.matmul_groups = codegen::MatMulGroups::kGenerated;
    absl::StatusOr<std::vector<KernelLaunch>> l80 = ops::GenerateGemm(*b->node, sm80);
    ASSERT_TRUE(l80.ok());
    EXPECT_EQ((*l80)[0].family, "gemm_sm80");
  }
}

TEST(GemmCodegenTest, ConfigVerifier) {
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{64, 64, 32, 2, 2, 4}).ok());
  const absl::Status bad_m = ops::VerifyGemmConfig(ops::GemmConfig{48, 128, 32, 2, 2, 3});
  EXPECT_NE(bad_m.message().find("16 * WARPS_M"), absl::string_view::npos) << bad_m;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 24, 2, 2, 3}).ok());
  const absl::Status smem = ops::VerifyGemmConfig(ops::GemmConfig{256, 256, 64, 2, 2, 4});
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{512, 512, 16, 8, 8, 2}).ok());  // 2048 threads

  // Shared memory follows the layouts: A [BM][BK+8] or [BK][BM+8], B [BK][BN+8] or
  // [BN][BK+8]; a dual kernel takes its larger mainloop.
  const ops::GemmConfig c{128, 64, 32, 2, 2, 3};
  ops::GemmVariant nn;
  EXPECT_EQ(ops::GemmSharedBytes(c, nn), 3 * (128 * 40 + 32 * 72) * 2);
  ops::GemmVariant tt;
  tt.mainloops[0].a.trans = tt.mainloops[0].b.trans = true;
  EXPECT_EQ(ops::GemmSharedBytes(c, tt), 3 * (32 * 136 + 64 * 40) * 2);
  ops::GemmVariant dual = nn;
  dual.mainloops.push_back(tt.mainloops[0]);
  EXPECT_EQ(ops::GemmSharedBytes(c, dual), 3 * std::max(128 * 40 + 32 * 72, 32 * 136 + 64 * 40) * 2);
  // Thin k tiles: both operands k-major ([BK][BM+8], [BK][BN+8]) fit in 84 KB, both
  // k-contiguous ([BM][BK+8], [BN][BK+8]) need 120 KB.
  const ops::GemmConfig thin{256, 256, 16, 4, 4, 5};
  ops::GemmVariant tn;
  tn.mainloops[0].a.trans = true;
  ops::GemmVariant nt;
  nt.mainloops[0].b.trans = true;
  EXPECT_EQ(ops::GemmSharedBytes(thin, tn), 5 * (16 * 264 + 16 * 264) * 2);
  EXPECT_EQ(ops::GemmSharedBytes(thin, nt), 5 * (256 * 24 + 256 * 24) * 2);
  EXPECT_TRUE(ops::VerifyGemmConfig(thin, tn).ok()) << ops::VerifyGemmConfig(thin, tn);
  EXPECT_NE(ops::VerifyGemmConfig(thin, nt).message().find("shared memory"), absl::string_view::npos);

  // Registers: accumulators + fragments + the register-staged tiles.
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}), 128 + 16 + 4);
  ops::GemmVariant staged;
  staged.mainloops[0].a.load = ops::GemmLoad::kStagedVector;
  staged.mainloops[0].a.element_bytes = 4;                      // fp32: 4 items x 8 words
  staged.mainloops[0].b.load = ops::GemmLoad::kStagedScalar;    // 4096 / 128 = 32 words
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, staged), 148 + 32 + 32);
  const absl::Status regs = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}, staged);
  EXPECT_NE(regs.message().find("registers"), absl::string_view::npos) << regs;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{256, 128, 32, 2, 2, 3}).ok());  // 256 accumulators
  // The heuristic falls back to a config the variant admits.
  const ops::GemmConfig picked = ops::PickGemmConfig(4096, 4096, 1024, 1, staged);
  EXPECT_TRUE(ops::VerifyGemmConfig(picked, staged).ok());
  EXPECT_EQ(picked.bm, 128);
  EXPECT_EQ(picked.warps_n, 4);
  ops::GemmVariant dual2;
  dual2.mainloops.resize(2);
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, dual2), 148 + 40);
  EXPECT_EQ(ops::PickGemmConfig(4096, 4096, 1024, 1, dual2).warps_n, 4);
  EXPECT_EQ(ops::PickGemmConfig(4096, 4096, 1024, 1).bm, 128);
  ops::GemmVariant three;
  three.mainloops.resize(3);
  EXPECT_NE(ops::VerifyGemmConfig(ops::GemmConfig{}, three).message().find("mainloops"), absl::string_view::npos);
}

TEST(GemmCodegenTest, UnsupportedForms) {
  Graph g;
  Value* a = g.AddValue("a");
  a->SetType(DType::kFloat32, {4, 8});
  Value* b = g.AddValue("b");
  b->SetType(DType::kFloat32, {8, 4});
  g.AddInput(a);
  g.AddInput(b);
  Value* y = g.AddValue("y");
  Node* mm = g.AddNode("MatMul", {a, b}, {y}, "mm");
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  ASSERT_TRUE(InferShapes(g, options).ok());
  EXPECT_EQ(ops::GenerateMatMulGroup(*mm).status().code(), absl::StatusCode::kUnimplemented);
}

// Prologue and dual groups run on the GEMM template when it is chosen and name the
// option otherwise (library mode expands them: cuBLASLt has no prologue).
TEST(GemmCodegenTest, RoutesPrologueAndDualGroups) {
  for (GemmCase c : {GemmCase{DType::kFloat16, {}, 64, 64, 64, false, false, false, Epi::kNone, Pro::kReluA},
                     GemmCase{DType::kFloat16, {}, 64, 64, 64, false, false, false, Epi::kBiasRelu, Pro::kClipB}}) {
    absl::StatusOr<Built> b = Build(c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(IsMatMulGroup(*b->node)) << c.Kind();
    KernelOptions on;
    on.matmul_groups = codegen::MatMulGroups::kGenerated;
    EXPECT_TRUE(GenerateNodeKernels(*b->node, on).ok()) << c.Kind();
    const absl::Status off = GenerateNodeKernels(*b->node, KernelOptions{}).status();
    EXPECT_EQ(off.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(off.message().find("--matmul-groups generated"), absl::string_view::npos) << off;
  }
  GemmCase dual{DType::kBFloat16, {}, 64, 64, 64, false, false, false, Epi::kScale};
  dual.dual = true;
  dual.k2 = 32;
  absl::StatusOr<Built> b = Build(dual, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(IsMatMulGroup(*b->node));
  KernelOptions on;
  on.matmul_groups = codegen::MatMulGroups::kGenerated;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, on);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NE((*l)[0].source.find("#define GEMM_DUAL 1"), std::string::npos);
  EXPECT_EQ((*l)[0].args, (std::vector<int>{0, 1, 2, 3, 4}));  // C, A, B, A2, B2
}

void RunOnGpu(Family family) {
  KILN_ARCH_OR_SKIP(arch);
  if (family == Family::kSm90 && arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family needs sm_90a, not " << arch;

  Generated gen;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kAll, family, &routed));
  if (family == Family::kSm90) std::printf("sm90 family: %zu cases, %d routed to sm80\n", gen.cases.size(), routed);
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  std::map<std::string, std::pair<int, float>> per_kind;  // kind -> cases, worst error
  for (size_t ci = 0; ci < gen.cases.size(); ++ci) {
    const std::string name = gen.cases[ci].Name();
    SCOPED_TRACE(name);
    const Node& node = *gen.built[ci].node;
    const KernelLaunch& l = gen.launches[ci];
    const Value* y = node.output(0);
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, gen.built[ci].feeds));
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], gen.kernels[ci].function, l.shared_bytes, &kernel));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> w = (*ref)[0].ToFloat();
    const float tol = y->dtype() == DType::kFloat16 ? 2e-2f : 6e-2f;
    // Errors are scaled by the reference's magnitude, or for a dual-matmul by that of
    // its products: the reference rounds each product to the storage dtype before
    // the Add (the kernel adds in fp32), and P + Q may cancel to far less than |P|.
    std::vector<float> scale(w.size(), 1.f);
    for (size_t i = 0; i < w.size(); ++i) scale[i] = std::max(1.f, std::fabs(w[i]));
    if (gen.cases[ci].dual) {
      const GemmCase& c = gen.cases[ci];
      const auto& feeds = gen.built[ci].feeds;
      for (auto [a, b, ta, tb] : {std::make_tuple("a", "b", c.ta, c.tb), std::make_tuple("a2", "b2", c.ta2, c.tb2)}) {
        absl::StatusOr<std::vector<float>> p = Float32Product(feeds.at(a), feeds.at(b), ta, tb);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_EQ(p->size(), w.size());
        for (size_t i = 0; i < w.size(); ++i) scale[i] = std::max(scale[i], std::fabs((*p)[i]));
      }
    }
    // One launch on the buffers `dev`, checked against the reference.
    auto run = [&](const std::vector<void*>& dev, const std::string& label) {
      KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, buf.out_bytes));
      DeviceWorkspace workspace;  // a launch the heuristic splits (K over blockIdx.y) takes one
      ASSERT_TRUE(workspace.ReserveFor(l).ok());
      absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(l, [&](int v) { return dev[v]; }, workspace.view());
      ASSERT_TRUE(args.ok()) << args.status();
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                    dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes,
                                    nullptr));
      KILN_CUDA_OK(cudaGetLastError());
      KILN_CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> g = buf.Output(node).ToFloat();
      float worst = 0.f;
      size_t worst_i = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        const float err = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]) / scale[i];
        if (err > worst) {
          worst = err;
          worst_i = i;
        }
      }
      const bool ok = worst <= tol;
      EXPECT_TRUE(ok) << name << label << ": max scaled |err| " << worst << " at " << worst_i << " (got "
                      << g[worst_i] << ", want " << w[worst_i] << ")";
      failures += !ok;
      const GemmCase& c = gen.cases[ci];
      auto& [count, kind_worst] = per_kind[absl::StrCat(c.Kind(), c.dtype == DType::kFloat16 ? " f16" : " bf16")];
      ++count;
      kind_worst = std::max(kind_worst, worst);
      if (!ok || std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
        std::printf("%-56s grid %u x %u block %u smem %u: max scaled err %.3g %s\n", (name + label).c_str(),
                    l.grid[0], l.grid[2], l.block[0], l.shared_bytes, worst, ok ? "ok" : "FAIL");
      }
    };
    ASSERT_NO_FATAL_FAILURE(run(buf.dev, ""));
    // The sm90 epilogue loads a 16-bit bias or residual two elements at a time where
    // the pointer allows: again with each of them 2 bytes past an aligned address.
    const Epi epi = gen.cases[ci].epi;
    if (family == Family::kSm90 && (epi == Epi::kBiasRelu || epi == Epi::kBiasGelu || epi == Epi::kBiasGeluTanh ||
                                    epi == Epi::kResidual || epi == Epi::kBiasResidual)) {
      std::vector<void*> dev = buf.dev;
      std::vector<void*> shifted;
      for (int i = 0; i < node.num_inputs(); ++i) {
        const Tensor& t = buf.host[i];
        const std::string& in = node.input(i)->name();
        if ((in != "bias" && in != "residual") || DTypeSize(t.dtype()) != 2) continue;
        void* p = nullptr;
        KILN_CUDA_OK(cudaMalloc(&p, t.nbytes() + 2));
        shifted.push_back(p);
        KILN_CUDA_OK(cudaMemcpy(static_cast<char*>(p) + 2, t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice));
        dev[1 + i] = static_cast<char*>(p) + 2;
      }
      ASSERT_FALSE(shifted.empty()) << name << ": no bias or residual input";
      ASSERT_NO_FATAL_FAILURE(run(dev, " (epilogue inputs misaligned)"));
      for (void* p : shifted) cudaFree(p);
    }
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  for (const auto& [kind, r] : per_kind) {
    std::printf("  %-32s %4d cases, worst scaled err %.3g\n", kind.c_str(), r.first, r.second);
  }
  std::printf("ran %zu GEMM cases (%s family) on %s (%s): %d failing\n", gen.cases.size(),
              family == Family::kSm90 ? "sm90" : "sm80", test::DeviceName().c_str(), arch.c_str(), failures);
}

// The sm90 epilogue's GELU (tanh form) for an fp16 result, on packed fp16 pairs
// (kiln_gelu_tanh_f16x2, templates/pointwise.cuh), on every finite fp16 input against
// GELU in double precision: within 2 ulps of the result plus 2^-10 |0.5 x|. The fp32
// form's bound (op_kernels_gpu_test.cc) is one ulp plus 2^-11 |0.5 x|: the fp16x2 form
// rounds its polynomial in fp16 and tanh.approx.f16x2 is coarser. NaN stays NaN and
// +inf gives +inf.
TEST(GemmGpuTest, PackedGeluTanhWithinBound) {
  KILN_ARCH_OR_SKIP(arch);
  if (arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family's epilogue needs sm_90a, not " << arch;
  const std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), R"(
extern "C" __global__ void KILN_KERNEL(unsigned* y, const unsigned* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 32768) y[i] = kiln_gelu_tanh_f16x2(x[i]);
})");
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules({{"kiln_gelu_f16x2_check", src}}, arch, 1);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  cudaLibrary_t lib;
  KILN_CUDA_OK(cudaLibraryLoadData(&lib, (*cubins)[0].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel;
  ASSERT_NO_FATAL_FAILURE(test::GetKernel(lib, "kiln_gelu_f16x2_check", 0, &kernel));
  std::vector<uint16_t> in(65536), out(65536);
  for (int i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  void *dx = nullptr, *dy = nullptr;
  KILN_CUDA_OK(cudaMalloc(&dx, 65536 * 2));
  KILN_CUDA_OK(cudaMalloc(&dy, 65536 * 2));
  KILN_CUDA_OK(cudaMemcpy(dx, in.data(), 65536 * 2, cudaMemcpyHostToDevice));
  void* params[] = {&dy, &dx};
  KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(128), dim3(256), params, 0, nullptr));
  KILN_CUDA_OK(cudaDeviceSynchronize());
  KILN_CUDA_OK(cudaMemcpy(out.data(), dy, 65536 * 2, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  cudaLibraryUnload(lib);
  double worst = 0;  // |error| / (ulp + 2^-11 |0.5 x|)
  int worst_at = 0, bad = 0;
  for (int i = 0; i < 65536; ++i) {
    const double x = HalfToFloat(in[i]), got = HalfToFloat(out[i]);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << "GELU(NaN) = " << got;
      continue;
    }
    if (std::isinf(x)) {
      if (x > 0) {
        EXPECT_EQ(got, x) << "GELU(+inf)";
      }
      continue;
    }
    const double exact = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    double ulp = std::ldexp(1.0, -24);  // fp16's smallest subnormal
    if (std::fabs(exact) >= std::ldexp(1.0, -14)) ulp = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(std::fabs(exact)))) - 10);
    const double err = std::fabs(got - exact), unit = ulp + std::ldexp(std::fabs(0.5 * x), -11);
    if (!(err <= 2 * ulp + std::ldexp(std::fabs(0.5 * x), -10))) {
      if (++bad <= 5) ADD_FAILURE() << "x = " << x << ": got " << got << ", GELU(x) = " << exact;
    }
    if (!(err / unit <= worst)) {
      worst = err / unit;
      worst_at = i;
    }
  }
  std::printf("kiln_gelu_tanh_f16x2 on %d fp16 inputs: %d out of bound; worst |err| %.3g x (ulp + 2^-11 |0.5 x|) at x = %g\n",
              65536, bad, worst, HalfToFloat(in[worst_at]));
}

TEST(GemmGpuTest, MatchesCpuReference) { RunOnGpu(Family::kSm80); }

// The Hopper family on every case it takes (skips off sm_90a).
TEST(GemmGpuTest, Sm90MatchesCpuReference) { RunOnGpu(Family::kSm90); }

// ---------------------------------------------------------------------------------
// Split-K (GEMM_SPLIT_K in codegen/templates/gemm_sm80.cuh): K over blockIdx.y, the
// partials reduced in split order by the CTA that arrives last at its tile.

struct SplitCase {
  GemmCase c;
  std::optional<ops::GemmConfig> config;  // forced; nullopt: the heuristic's (which splits)
  // The sm90 family (codegen/templates/gemm_sm90.cuh) instead, with this forced config
  // (nullopt: the heuristic's) on `sm_count` SMs (a small grid walks many units).
  bool sm90 = false;
  std::optional<ops::Sm90GemmConfig> sm90_config;
  int sm_count = 132;
};

ops::GemmConfig SplitConfig(int bm, int bn, int bk, int stages, int split) {
  return ops::GemmConfig{bm, bn, bk, 2, 2, stages, split};
}

// Every group kind that splits (MatMul, matmul+epilogue with bias+GELU, bias+ReLU and
// a residual, prologue+matmul[+epilogue]) in every layout; K not a multiple of
// S * BK and rows not 16-byte aligned; M = 1; batched with B broadcast or not; 64x64,
// 32x32x64 and 128x128 tiles; fp16 and bf16.
std::vector<SplitCase> SplitCases() {
  std::vector<SplitCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, std::optional<ops::GemmConfig> config) {
      c.dtype = dt;
      out.push_back({c, config});
    };
    // BERT-base at 128 tokens, where the heuristic splits: FFN down (+ residual, k5) and
    // M = 1 with B stored [N, K] (k6).
    add({dt, {}, 128, 768, 3072}, std::nullopt);
    add({dt, {}, 128, 768, 3072, false, false, false, Epi::kResidual}, std::nullopt);
    add({dt, {}, 1, 768, 3072, false, false, true, Epi::kBiasGelu}, std::nullopt);
    add({dt, {}, 128, 3072, 768, false, false, false, Epi::kBiasGelu}, SplitConfig(64, 64, 32, 4, 3));
    // Odd shapes: 32 k tiles in splits of 11, 11, 10; 16 of 3 x 5 + 1; each layout.
    add({dt, {}, 37, 129, 1000}, SplitConfig(64, 64, 32, 4, 3));
    add({dt, {}, 37, 129, 999, false, true, false}, SplitConfig(32, 32, 64, 4, 6));
    add({dt, {}, 37, 129, 999, false, false, true}, SplitConfig(64, 64, 32, 3, 5));
    add({dt, {}, 37, 129, 999, false, true, true, Epi::kBiasRelu}, SplitConfig(64, 64, 32, 4, 2));
    add({dt, {}, 1, 64, 520, false, false, true}, SplitConfig(64, 64, 32, 4, 4));  // 17 k tiles: 5, 5, 5, 2
    // Batched: one semaphore and S partial tiles per (batch entry, tile); with B shared
    // the batch folds into M first (one GEMM of 195 rows, split the same way).
    add({dt, {3}, 65, 130, 700, false}, SplitConfig(64, 64, 32, 4, 4));
    add({dt, {3}, 65, 130, 700, true}, SplitConfig(64, 64, 32, 4, 4));
    add({dt, {2, 3}, 33, 64, 480, false, false, false, Epi::kResidual}, SplitConfig(32, 32, 64, 4, 3));
    // Prologues see absolute coordinates: the split does not change them.
    GemmCase relu{dt, {}, 37, 129, 1000};
    relu.pro = Pro::kReluA;
    add(relu, SplitConfig(64, 64, 32, 4, 3));
    GemmCase cast{dt, {}, 64, 136, 1000, false, false, false, Epi::kBiasGelu};
    cast.pro = Pro::kCastA;
    add(cast, SplitConfig(64, 64, 32, 4, 4));
    // 128x128 tiles (128 accumulators a thread through the reduction).
    add({dt, {}, 256, 256, 2048}, SplitConfig(128, 128, 32, 3, 4));
  }
  return out;
}

struct SplitGenerated {
  std::vector<SplitCase> cases;
  std::vector<Built> built;
  std::vector<KernelLaunch> launches;
  std::vector<ModuleKernel> kernels;
};

template <class T>
const T* ptr(const T& v) {
  return &v;
}

ops::Sm90GemmConfig Sm90Split(int bm, int bn, int consumers, int wg_m, int stages, int split) {
  return ops::Sm90GemmConfig{bm, bn, consumers, wg_m, stages, false, split};
}

// The sm90 family's split forms: the heuristic's on few-tile shapes (M = 1..128 at
// BERT/LLM widths), every layout, both consumer counts and 128 accumulators a thread
// through the reduction; K not a multiple of S * 64 (the last split shorter); the
// register-store epilogue (N % 8 != 0, B stored [N, K]); batched with B broadcast or
// not; A-prologues; dual mainloops whose splits straddle the two K sequences; and a
// grid of 3 CTAs that walks many units (several splits of one tile in one CTA).
std::vector<SplitCase> Sm90SplitCases() {
  std::vector<SplitCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, std::optional<ops::Sm90GemmConfig> config, int sm_count = 132) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 1, 768, 3072, false, false, true, Epi::kBiasGelu}, std::nullopt);
    add({dt, {}, 16, 768, 3072, false, false, false, Epi::kResidual}, std::nullopt);
    add({dt, {}, 64, 4096, 4096, false, false, true}, std::nullopt);
    add({dt, {}, 128, 768, 3072, false, false, false, Epi::kBiasGeluTanh}, std::nullopt);
    // Odd shapes: 16 k tiles in 6, 6, 4 and 3 x 5 + 1; 10 in 3, 3, 3, 1; each layout.
    add({dt, {}, 37, 136, 1000}, Sm90Split(64, 128, 1, 1, 8, 3));
    add({dt, {}, 40, 136, 1000, false, true, false}, Sm90Split(64, 128, 1, 1, 8, 6));
    add({dt, {}, 37, 136, 1000, false, false, true, Epi::kBiasRelu}, Sm90Split(128, 128, 2, 1, 4, 3));
    add({dt, {}, 40, 136, 1000, false, true, true, Epi::kBiasGelu}, Sm90Split(64, 128, 1, 1, 8, 3));
    add({dt, {}, 1, 64, 584, false, false, true}, Sm90Split(64, 128, 1, 1, 8, 4));
    // N = 130 (B stored [N, K]): C is stored from registers, not through TMA.
    add({dt, {}, 37, 130, 1000, false, false, true, Epi::kBiasGelu}, Sm90Split(64, 128, 1, 1, 8, 3));
    // 128 accumulators a thread; two m64 blocks per consumer.
    add({dt, {}, 200, 264, 2048}, Sm90Split(128, 256, 2, 1, 3, 4));
    add({dt, {}, 200, 264, 2048, false, true, false}, Sm90Split(256, 128, 2, 2, 3, 2));
    // Batched: per (batch entry, tile, consumer).
    add({dt, {3}, 65, 136, 584, true}, Sm90Split(64, 128, 1, 1, 8, 4));
    add({dt, {2, 3}, 33, 64, 480, false, false, false, Epi::kResidual}, Sm90Split(128, 128, 2, 1, 4, 3));
    // A grid of 3: several units (splits of one tile included) per CTA, the ring wraps.
    add({dt, {3}, 65, 136, 1000, false, false, true, Epi::kBiasGelu}, Sm90Split(128, 128, 2, 1, 4, 6), 3);
    // A through registers (prologue): absolute coordinates are unchanged by the split.
    GemmCase relu{dt, {}, 37, 136, 1000};
    relu.pro = Pro::kReluA;
    add(relu, Sm90Split(64, 128, 1, 1, 8, 3));
    GemmCase scale{dt, {}, 200, 264, 1000, false, true, false, Epi::kBiasGelu};
    scale.pro = Pro::kScaleBiasA;
    add(scale, Sm90Split(128, 128, 2, 1, 4, 4));
    // Dual: 16 + 4 k tiles in splits of 7 (one straddles) and of 4 (the last is all
    // of the second pair's).
    GemmCase dual{dt, {}, 65, 136, 1000, false, false, false, Epi::kBiasGelu};
    dual.dual = true;
    dual.k2 = 200;
    add(dual, Sm90Split(64, 128, 1, 1, 8, 3));
    dual.m = 72;  // A stored [K, M]: rows of 16-byte multiples
    dual.ta = true;
    dual.tb2 = true;
    add(dual, Sm90Split(128, 128, 2, 1, 4, 5), 3);
  }
  // Stream-K (Sm90StreamK's partition on `sm_count` SMs): every tile stream-K with
  // ranges shorter and longer than a tile (a CTA with a tail, a head and whole tiles
  // between), data-parallel waves before the stream-K tiles, one k tile per CTA (16
  // partials into one tile), both consumer counts and 128 accumulators a thread, the
  // register-store epilogue, A-prologues, batched, and a dual range that straddles
  // the two K sequences.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count) {
      c.dtype = dt;
      config.stream_k = true;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 200, 264, 2048}, {128, 128, 2, 1, 4}, 5);                    // 6 tiles, 38.4 k tiles a CTA
    add({dt, {}, 200, 264, 2048, false, true, true}, {128, 256, 2, 1, 4}, 5);  // 4 tiles, grid 5
    add({dt, {}, 256, 512, 256, false, false, true, Epi::kBiasRelu}, {64, 128, 1, 1, 8}, 3);  // DP 12, SK 4
    add({dt, {}, 512, 1024, 512, false, true, false, Epi::kResidual}, {128, 256, 2, 1, 4}, 3);
    add({dt, {}, 37, 136, 1000}, {64, 128, 1, 1, 8}, 132);  // 2 tiles, grid 32: one k tile a CTA
    add({dt, {}, 37, 130, 1000, false, false, true, Epi::kBiasGelu}, {64, 128, 1, 1, 8}, 3);
    add({dt, {3}, 65, 136, 584, true}, {64, 128, 1, 1, 8}, 5);  // 12 tiles: DP 5, SK 7
    GemmCase relu{dt, {}, 37, 136, 1000};
    relu.pro = Pro::kReluA;
    add(relu, {64, 128, 1, 1, 8}, 5);
    GemmCase scale{dt, {}, 200, 264, 1000, false, true, false, Epi::kBiasGelu};
    scale.pro = Pro::kScaleBiasA;
    add(scale, {128, 128, 2, 1, 4}, 4);
    GemmCase dual{dt, {}, 72, 136, 1000, false, true, false, Epi::kBiasGelu};  // 16 + 4 k tiles
    dual.dual = true;
    dual.k2 = 200;
    dual.tb2 = true;
    add(dual, {128, 128, 2, 1, 4}, 3);
  }
  // Swap-AB: each B layout, 16, 32 and 48 columns of C^T (3 n16 pairs: a short group
  // in the reduction), two consumers, two m64 blocks, batched on a grid of 3. After
  // the others, which keep their inputs (seeds count cases).
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count = 132) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 1, 200, 584, false, false, true, Epi::kBiasGelu}, Sm90Swap(64, 16, 1, 1, 8, 4));
    add({dt, {}, 7, 136, 1000, false, false, false, Epi::kResidual}, Sm90Swap(128, 16, 2, 1, 4, 3));
    add({dt, {}, 40, 264, 1000, false, false, true}, Sm90Swap(64, 48, 1, 1, 8, 6));
    add({dt, {}, 64, 136, 1000, false, false, false, Epi::kBiasGelu}, Sm90Swap(128, 32, 1, 2, 6, 4));
    add({dt, {3}, 16, 136, 584, true, false, true}, Sm90Swap(64, 16, 1, 1, 8, 4), 3);
    // The unsplit 16-stage ring around twice (33 k tiles, a K tail), batched on 2 CTAs.
    add({dt, {2}, 8, 200, 2056, false, false, true, Epi::kBiasRelu}, Sm90Swap(64, 8, 1, 1, 16, 1), 2);
    // 128 k per stage: split in 3 (17 k tiles, a K tail of 8: splits of 6, 6, 5) with B
    // stored [N, K] (a K-major A^T), and unsplit around an 8-stage ring twice on 2 CTAs
    // with B stored [K, N] (an MN-major A^T of 128-row boxes).
    add({dt, {}, 16, 200, 2056, false, false, true, Epi::kBiasGelu}, Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 3)));
    add({dt, {2}, 5, 136, 2056, false, false, false, Epi::kBiasRelu}, Sm90Bk128(Sm90Swap(64, 8, 1, 1, 8, 1)), 2);
  }
  // Three consumer warpgroups (192-row tiles): split-K with a partial row tile, and
  // stream-K with data-parallel tiles first (12 tiles on 5 CTAs: DP 5, SK 7).
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 248, 264, 2048, false, true, false, Epi::kBiasRelu}, Sm90Split(192, 128, 3, 1, 5, 3), 132);
    add({dt, {}, 700, 296, 1000}, WithStreamK({192, 128, 3, 1, 5}), 5);
  }
  return out;
}

void GenerateSplit(SplitGenerated& out, bool sm90 = false) {
  uint32_t seed = 7;
  for (const SplitCase& sc : sm90 ? Sm90SplitCases() : SplitCases()) {
    seed += 10;
    if (!Wanted(sc.c.Name())) continue;
    absl::StatusOr<Built> b = Build(sc.c, seed);
    ASSERT_TRUE(b.ok()) << sc.c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l;
    if (sc.sm90) {
      ASSERT_TRUE(ops::Sm90Eligible(*b->node).ok()) << sc.c.Name() << ": " << ops::Sm90Eligible(*b->node);
      l = ops::GenerateMatMulGroupSm90(*b->node, sc.sm90_config.has_value() ? &*sc.sm90_config : nullptr,
                                       sc.sm_count);
    } else {
      l = ops::GenerateMatMulGroup(*b->node, sc.config.has_value() ? &*sc.config : nullptr);
    }
    ASSERT_TRUE(l.ok()) << sc.c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    const KernelLaunch& launch = (*l)[0];
    if (sc.sm90) {
      ASSERT_TRUE(launch.source.find("#define GEMM_SPLIT_K ") != std::string::npos ||
                  launch.source.find("#define GEMM_STREAM_K 1") != std::string::npos)
          << sc.c.Name() << ": not split";
    } else {
      ASSERT_GT(launch.grid[1], 1u) << sc.c.Name() << ": not split";
    }
    out.cases.push_back(sc);
    out.kernels.push_back({absl::StrCat(sc.sm90 ? "kiln_gemm_sm90_split_" : "kiln_gemm_split_", sc.c.Name(),
                                        "_", out.cases.size()),
                           launch.source});
    out.launches.push_back(launch);
    out.built.push_back(*std::move(b));
  }
}

TEST(GemmCodegenTest, SplitKConfigStringsVerifierAndHeuristic) {
  // Strings: " kS" after the stages when split; old strings parse as unsplit.
  for (const char* text : {"64x128x32 w2x2 s3 k4", "128x128x32 w2x2 s3", "32x32x64 w2x2 s4 k32"}) {
    absl::StatusOr<ops::GemmConfig> c = ops::ParseGemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ops::GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseGemmConfig("128x128x32 w2x2 s3")->split_k, 1);
  EXPECT_EQ(ops::ParseGemmConfig("64x128x32 w2x2 s3 k4")->split_k, 4);
  for (const char* bad : {"64x64x32 w2x2 s4 k0", "64x64x32 w2x2 s4 x4", "64x64x32 w2x2 s4 k", "64x64x32 w2x2 s4 k2 k2"}) {
    EXPECT_FALSE(ops::ParseGemmConfig(bad).ok()) << bad;
  }
  EXPECT_FALSE(ops::GemmConfig{} == SplitConfig(128, 128, 32, 3, 2));

  // Verifier: every split needs a k tile; no split of a dual kernel; S <= 32.
  ops::GemmVariant k8;
  k8.mainloops[0].k = 8;
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 1), k8).ok());
  const absl::Status k8_split = ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), k8);
  EXPECT_NE(k8_split.message().find("without one"), absl::string_view::npos) << k8_split;
  ops::GemmVariant k100;  // 4 k tiles of 32: 2 splits of 2 fit, 3 of 2 leave one empty
  k100.mainloops[0].k = 100;
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), k100).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 4), k100).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 3), k100).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 5), k100).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 3)).ok());  // K unknown
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 33)).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 0)).ok());
  ops::GemmVariant dual;
  dual.mainloops.resize(2);
  EXPECT_NE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), dual).message().find("dual"),
            absl::string_view::npos);

  // PickGemmSplitK (132 SMs unless named): split when the tiles fill at most half the
  // SMs, S = min(SMs / tiles, k tiles / 16), then the fewest splits of the same length.
  const ops::GemmConfig t64 = SplitConfig(64, 64, 32, 4, 1);
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 1), 5);   // 24 tiles, 96 k tiles: 5 x 20 (BERT FFN down)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 768, 1), 1);    // 24 k tiles: too short (attention out)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 768, 1, 0, 4), 5);  // the candidates' 4: 5 x 5
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 3072, 768, 1), 1);   // 96 tiles (FFN up)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 3), 1);   // a batch of 3: 72 tiles
  EXPECT_EQ(ops::PickGemmSplitK(t64, 512, 768, 3072, 1), 1);   // 96 tiles
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 768, 3072, 1), 6);     // 12 tiles: min(11, 6) x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 49, 512, 4608, 1), 9);    // 8 tiles: min(16, 9) x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 1, 108), 4);  // an A100's 108 SMs: 4 x 24
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 8, 1), 1);         // K = 8: one k tile
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 992, 1), 1);       // 31 k tiles: fewer than 2 x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 1024, 1), 2);
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 65536, 1), 32);    // at most kGemmMaxSplitK
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 2000, 1, 0, 4), 13);  // 63 k tiles: 15 by count, 5 each: 13 splits
  // HeuristicGemmConfig: the split when it fills at least half the SMs, else 32x32x64
  // tiles for an under-filled grid; 64x64 (or 128x128) once the tiles fill the GPU.
  auto heuristic = [](int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
    ops::GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = {k};
    p.batch = batch;
    p.variant.mainloops[0].k = k;
    return ops::GemmConfigString(ops::HeuristicGemmConfig(p));
  };
  EXPECT_EQ(heuristic(128, 768, 3072), "64x64x32 w2x2 s4 k5");   // 120 CTAs
  EXPECT_EQ(heuristic(128, 1024, 4096), "64x64x32 w2x2 s4 k4");  // 128 CTAs
  EXPECT_EQ(heuristic(1, 768, 3072), "64x64x32 w2x2 s4 k6");     // 72 CTAs
  EXPECT_EQ(heuristic(128, 768, 768), "32x32x64 w2x2 s4");       // too short to split: 96 small tiles
  EXPECT_EQ(heuristic(128, 1024, 1024), "32x32x64 w2x2 s4");     // k2 would give 64 CTAs of 132
  EXPECT_EQ(heuristic(128, 3072, 768), "64x64x32 w2x2 s4");      // 96 tiles
  EXPECT_EQ(heuristic(128, 768, 768, 3), "64x64x32 w2x2 s4");    // 72 tiles
  EXPECT_EQ(heuristic(4096, 4096, 1024), "128x128x32 w2x2 s3");
  ops::GemmProblem bert;
  bert.m = 128;
  bert.n = 768;
  bert.k = {3072};
  bert.variant.mainloops[0].k = 3072;
  ops::GemmProblem bert_dual = bert;
  bert_dual.k = {3072, 768};
  bert_dual.variant.mainloops.resize(2);
  EXPECT_EQ(ops::HeuristicGemmConfig(bert_dual).split_k, 1);
  // Candidates: the heuristic's (split) first, then unsplit tiles, then split forms.
  const std::vector<ops::GemmConfig> cands = ops::GemmCandidateConfigs(bert);
  int split = 0;
  for (const ops::GemmConfig& c : cands) {
    EXPECT_TRUE(ops::VerifyGemmConfig(c, bert.variant).ok()) << ops::GemmConfigString(c);
    split += c.split_k > 1;
  }
  EXPECT_EQ(cands[0].split_k, 5);
  EXPECT_GE(split, 4);
  EXPECT_LE(split, ops::kGemmMaxSplitCandidates + 1);
  ops::GemmProblem large = bert;
  large.m = 8192;
  for (const ops::GemmConfig& c : ops::GemmCandidateConfigs(large)) EXPECT_EQ(c.split_k, 1);
}

// The generated launch: grid (tiles, S, batch), the workspace sizes, the #define and
// the two workspace parameters; a split that leaves a split without K is refused.
TEST(GemmCodegenTest, SplitKLaunches) {
  absl::StatusOr<Built> bert = Build(GemmCase{DType::kFloat16, {}, 128, 768, 3072, false, false, false,
                                              Epi::kBiasGelu}, 1);
  ASSERT_TRUE(bert.ok()) << bert.status();
  KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*bert->node, options);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(k.grid, (std::array<uint32_t, 3>{24, 5, 1}));
  EXPECT_EQ(k.semaphores, 24u);
  EXPECT_EQ(k.scratch_bytes, 24u * 5 * 64 * 64 * 4);
  EXPECT_NE(k.source.find("#define GEMM_SPLIT_K 5\n"), std::string::npos);
  EXPECT_NE(k.source.find("unsigned int* __restrict__ kiln_semaphores, float* __restrict__ kiln_scratch"),
            std::string::npos);
  EXPECT_EQ(k.args, (std::vector<int>{0, 1, 2, 3}));  // C, A, B, bias: the workspace is not a tensor

  // Batched: per (batch, tile). B per batch: with B shared the batch would fold into M.
  absl::StatusOr<Built> batched = Build(GemmCase{DType::kBFloat16, {3}, 65, 130, 700, false}, 1);
  ASSERT_TRUE(batched.ok());
  const ops::GemmConfig four = SplitConfig(64, 64, 32, 4, 4);
  absl::StatusOr<std::vector<KernelLaunch>> b = ops::GenerateMatMulGroup(*batched->node, &four);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].grid, (std::array<uint32_t, 3>{6, 4, 3}));
  EXPECT_EQ((*b)[0].semaphores, 18u);
  EXPECT_EQ((*b)[0].scratch_bytes, 18u * 4 * 64 * 64 * 4);

  // Unsplit launches have no workspace and their sources do not mention it.
  absl::StatusOr<Built> big = Build(GemmCase{DType::kFloat16, {}, 1024, 768, 768}, 1);
  ASSERT_TRUE(big.ok());
  absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroup(*big->node);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].grid[1], 1u);
  EXPECT_EQ((*u)[0].semaphores, 0u);
  EXPECT_EQ((*u)[0].scratch_bytes, 0u);
  EXPECT_NE((*u)[0].source.find("#define STAGES 4\n#define GEMM_OUT_T "), std::string::npos);  // no GEMM_SPLIT_K

  // K = 8 (one k tile): a forced split is refused, the heuristic does not split.
  absl::StatusOr<Built> k8 = Build(GemmCase{DType::kFloat16, {}, 1, 64, 8}, 1);
  ASSERT_TRUE(k8.ok());
  const ops::GemmConfig two = SplitConfig(64, 64, 32, 4, 2);
  const absl::Status refused = ops::GenerateMatMulGroup(*k8->node, &two).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("K = 8"), absl::string_view::npos) << refused;
  EXPECT_EQ((*ops::GenerateMatMulGroup(*k8->node))[0].grid[1], 1u);
  // A dual group is never split.
  GemmCase dual{DType::kFloat16, {}, 128, 768, 3072};
  dual.dual = true;
  dual.k2 = 3072;
  absl::StatusOr<Built> d = Build(dual, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*ops::GenerateMatMulGroup(*d->node))[0].grid[1], 1u);
  EXPECT_EQ(ops::GenerateMatMulGroup(*d->node, &two).status().code(), absl::StatusCode::kInvalidArgument);
  // Scratch beyond kGemmMaxScratchBytes: refused for a forced config.
  absl::StatusOr<Built> huge = Build(GemmCase{DType::kFloat16, {}, 4096, 4096, 1024}, 1);  // 1024 tiles x 32 x 64 KiB
  ASSERT_TRUE(huge.ok());
  const ops::GemmConfig wide = SplitConfig(128, 128, 32, 3, 32);
  const absl::Status scratch = ops::GenerateMatMulGroup(*huge->node, &wide).status();
  EXPECT_NE(scratch.message().find("bytes of scratch"), absl::string_view::npos) << scratch;
}

// Every split form compiles for sm_80 and sm_90a without spills (the reduction keeps
// the partial sums of one fragment at a time).
TEST(GemmCodegenTest, SplitKCompilesWithoutSpills) {
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen));
  std::vector<ModuleKernel> kernels;
  int bf16 = 0;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    // Every fp16 case, and the first three bf16 ones (registers do not depend on it).
    if (gen.cases[i].c.dtype == DType::kFloat16 || bf16++ < 3) kernels.push_back(gen.kernels[i]);
  }
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, arch);
    ASSERT_TRUE(inspected.ok()) << arch << ": " << inspected.status();
    const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
    EXPECT_EQ(resources.size(), kernels.size()) << arch;
    for (const KernelResources& r : resources) {
      EXPECT_EQ(r.spill_store_bytes, 0) << arch << " " << r.function << " spills (" << r.registers << " registers)";
      if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
        std::printf("%s %-60s %d registers\n", arch, r.function.c_str(), r.registers);
      }
    }
    EXPECT_NE(inspected->ptx.find("atom.global.add.u32"), std::string::npos) << arch;
    EXPECT_NE(inspected->ptx.find("ld.global.cg.v4.f32"), std::string::npos) << arch;
  }
  std::printf("compiled %zu split-K GEMM kernels for sm_80 and sm_90a\n", kernels.size());
}

// The sm90 split and stream-K forms compile for sm_90a without spills or a stack,
// with setmaxnreg honoured and the wgmmas not serialized; the reductions are there
// (the semaphore atomic, L2-only partial loads, the warpgroup's barrier reduction,
// stream-K's acquiring wait).
TEST(GemmCodegenTest, Sm90SplitKCompilesWithoutSpills) {
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen, /*sm90=*/true));
  std::vector<ModuleKernel> kernels;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    if (gen.cases[i].c.dtype == DType::kFloat16) kernels.push_back(gen.kernels[i]);  // registers do not depend on it
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
  EXPECT_EQ(resources.size(), kernels.size());
  for (const KernelResources& r : resources) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
    if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
      std::printf("%-70s %d registers\n", r.function.c_str(), r.registers);
    }
  }
  EXPECT_NE(inspected->ptx.find("atom.global.add.u32"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("ld.global.cg.v4.f32"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("bar.red.or.pred"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("ld.acquire.gpu.global.u32"), std::string::npos);  // stream-K's wait
  std::printf("compiled %zu sm90 split-K and stream-K GEMM kernels for sm_90a\n", kernels.size());
}

// Config strings, the verifier, the split heuristic and the launches' workspace.
TEST(GemmCodegenTest, Sm90SplitKConfigsHeuristicAndLaunches) {
  for (const char* text : {"64x128 c1x1 s8 k6", "128x256 c2x1 s3 k2", "64x128 c1x1 s8"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x128 c1x1 s8 k6")->split_k, 6);
  for (const char* bad : {"64x128 c1x1 s8 k", "64x128 c1x1 s8 k0", "64x128 c1x1 s8 k33", "64x128 c1x1 s8 x2",
                          "64x256 p2x1 s4 k2"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true, 2}).message().find("cooperative"),
            std::string::npos);
  // Splits only when the tiles fill at most half the SMs and K gives every split
  // kSm90MinSplitKTiles k tiles; the fewest splits of that length. The few-tiles
  // rule's 64x64 tiles fill every SM, with kSm90SmallTileMinSplitKTiles k tiles a split.
  const int min_tiles = ops::kSm90MinSplitKTiles, small_min_tiles = ops::kSm90SmallTileMinSplitKTiles;
  EXPECT_EQ(ops::PickSm90GemmConfig(4096, 4096, 4096, 1, 132).split_k, 1);
  EXPECT_EQ(ops::PickSm90GemmConfig(2048, 768, 3072, 1, 132).split_k, 1);
  EXPECT_EQ(ops::PickSm90GemmConfig(16, 768, 768, 1, 132).split_k,
            12 / small_min_tiles >= 2 ? 12 / small_min_tiles : 1);
  const ops::Sm90GemmConfig m16 = ops::PickSm90GemmConfig(16, 768, 3072, 1, 132);  // 12 tiles of 64x64, 48 k tiles
  EXPECT_EQ(ops::Sm90GemmConfigString(m16).substr(0, 13), "64x64 c1x1 s8");
  EXPECT_EQ(m16.split_k, ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132, small_min_tiles, 132));
  EXPECT_EQ(m16.split_k, 4);
  EXPECT_EQ(ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132), 3);  // half the SMs, 16 k tiles a split
  EXPECT_EQ(ops::PickSm90GemmConfig(16, 768, 4096, 1, 132).split_k, 4);  // 5 of 13 would fit: at most 4
  EXPECT_GE(48 / ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132), min_tiles);
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 1, 132, 4), 10);  // 11 of 5 -> 10
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 1, 132, 5), 8);  // 6 each
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 12, 132, 4), 1);  // 72 tiles
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true}, 16, 768, 3072, 1, 132, 4), 1);

  // A forced split: grid = units, the workspace per (tile, consumer), the parameters.
  // B per batch entry, so that the batch stays (a shared B folds it into M).
  absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {3}, 65, 136, 1000}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const ops::Sm90GemmConfig two_wg = Sm90Split(128, 128, 2, 1, 4, 3);  // 1 x 2 tiles x 3 batches
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &two_wg, 132);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(k.grid, (std::array<uint32_t, 3>{18, 1, 1}));
  EXPECT_EQ(k.semaphores, 6u * 2);
  EXPECT_EQ(k.scratch_bytes, 6u * 3 * 128 * 128 * 4);
  EXPECT_NE(k.source.find("#define GEMM_SPLIT_K 3\n"), std::string::npos);
  EXPECT_EQ(k.args, (std::vector<int>{0}));  // C: the workspace is not a tensor
  EXPECT_EQ((*ops::GenerateMatMulGroupSm90(*b->node, &two_wg, 4))[0].grid[0], 4u);
  // Unsplit: no workspace, no GEMM_SPLIT_K.
  const ops::Sm90GemmConfig one = Sm90Split(128, 128, 2, 1, 4, 1);
  absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroupSm90(*b->node, &one, 132);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].semaphores, 0u);
  EXPECT_EQ((*u)[0].scratch_bytes, 0u);
  const std::string& us = (*u)[0].source;  // only the template's default
  EXPECT_EQ(us.find("#define GEMM_SPLIT_K "), us.find("#ifndef GEMM_SPLIT_K\n#define GEMM_SPLIT_K 1\n") + 21);
  // Scratch beyond kGemmMaxScratchBytes: refused for a forced config (4096 tiles x 32
  // splits x 16 KiB).
  absl::StatusOr<Built> huge = Build(GemmCase{DType::kFloat16, {}, 4096, 4096, 2048}, 1);
  ASSERT_TRUE(huge.ok());
  const absl::Status scratch =
      ops::GenerateMatMulGroupSm90(*huge->node, ptr(Sm90Split(64, 64, 1, 1, 8, 32)), 132).status();
  EXPECT_EQ(scratch.code(), absl::StatusCode::kInvalidArgument) << scratch;
  EXPECT_NE(scratch.message().find("bytes of scratch"), absl::string_view::npos) << scratch;
  // 16 k tiles: 6 splits of 3 leave one; 17 splits of 1 would leave none (K = 1000).
  EXPECT_TRUE(ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Split(64, 128, 1, 1, 8, 6)), 132).ok());
  const absl::Status refused = ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Split(64, 128, 1, 1, 8, 17)), 132).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("K = 1000"), absl::string_view::npos) << refused;
  // The heuristic through GenerateGemm: M = 48 at BERT-base's FFN down splits the same
  // 12 tiles (N = 768: unswapped above M = 32, PreferSm90SwapAb); M = 16 swaps, unsplit
  // with 128 k per stage on the 12 tiles of N.
  EXPECT_EQ(ops::PickSm90GemmConfig(48, 768, 3072, 1, 132).split_k, m16.split_k);
  // PickSm90SplitK counts k tiles of the tile's bk: K = 4096 is 64 tiles of 64 (5 splits
  // of >= 12) but 32 of 128 (2).
  ops::Sm90GemmConfig narrow = Sm90Swap(64, 16, 1, 1, 8, 1);
  EXPECT_EQ(ops::PickSm90SplitK(narrow, 768, 16, 4096, 1, 132, 12, 132), 5);
  EXPECT_EQ(ops::PickSm90SplitK(Sm90Bk128(narrow), 768, 16, 4096, 1, 132, 12, 132), 2);
  absl::StatusOr<Built> small = Build(GemmCase{DType::kBFloat16, {}, 48, 768, 3072, false, false, true}, 1);
  ASSERT_TRUE(small.ok());
  KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.hopper = true;
  options.sm_count = 132;
  absl::StatusOr<std::vector<KernelLaunch>> h = ops::GenerateGemm(*small->node, options);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].family, "gemm_sm90");
  EXPECT_EQ((*h)[0].grid[0], 12u * m16.split_k);
  EXPECT_EQ((*h)[0].semaphores, 12u);
  EXPECT_NE((*h)[0].source.find("#define GEMM_SWAP_AB 0"), std::string::npos);
  absl::StatusOr<Built> few = Build(GemmCase{DType::kBFloat16, {}, 16, 768, 3072, false, false, true}, 1);
  ASSERT_TRUE(few.ok());
  absl::StatusOr<std::vector<KernelLaunch>> swapped = ops::GenerateGemm(*few->node, options);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ((*swapped)[0].grid[0], 12u);
  EXPECT_EQ((*swapped)[0].semaphores, 0u);
  EXPECT_NE((*swapped)[0].source.find("#define GEMM_SWAP_AB 1"), std::string::npos);
  EXPECT_NE((*swapped)[0].source.find("#define GEMM_BK 128"), std::string::npos);
}

// Stream-K: config strings, the verifier, the partition (Sm90StreamK) and the launches'
// grid, defines and workspace.
TEST(GemmCodegenTest, Sm90StreamKConfigsPartitionAndLaunches) {
  absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig("128x256 c2x1 s4 sk");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->stream_k);
  EXPECT_EQ(ops::Sm90GemmConfigString(*c), "128x256 c2x1 s4 sk");
  EXPECT_FALSE(ops::ParseSm90GemmConfig("128x256 c2x1 s4").value().stream_k);
  for (const char* bad : {"64x256 p2x1 s5 sk", "64x128 c1x1 s8 k2 sk", "128x256 c2x1 s4 cl2 sk", "64x16 c1x1 s8 swap sk",
                          "128x256 c2x1 s4 sk cl2", "128x256 c2x1 s4 skx"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::ParseSm90GemmConfig("64x256 p2x1 s5 sk").status().message().find("stream-K"), std::string::npos);
  // The partition: the tiles past whole waves plus one wave; all of them under two
  // waves; none in whole waves; the grid at most the SMs and the iterations.
  auto split = [](int64_t tiles, int64_t k_tiles, int sms) {
    const ops::Sm90StreamKSplit s = ops::Sm90StreamK(tiles, k_tiles, sms);
    return std::array<int64_t, 2>{s.sk_tiles, s.grid};
  };
  EXPECT_EQ(split(512, 64, 132), (std::array<int64_t, 2>{132 + 116, 132}));  // 4096^3 at 128x256
  EXPECT_EQ(split(264, 64, 132), (std::array<int64_t, 2>{0, 132}));
  EXPECT_EQ(split(132, 64, 132), (std::array<int64_t, 2>{0, 132}));
  EXPECT_EQ(split(144, 50, 132), (std::array<int64_t, 2>{144, 132}));
  EXPECT_EQ(split(40, 44, 132), (std::array<int64_t, 2>{40, 132}));
  EXPECT_EQ(split(2, 16, 132), (std::array<int64_t, 2>{2, 32}));
  EXPECT_EQ(split(1, 1, 132), (std::array<int64_t, 2>{1, 1}));

  // Launches: 12 tiles of 64x128 (65 x 136 x 3 batches) on 5 SMs: 5 data-parallel, 7
  // stream-K tiles, grid 5, a semaphore per stream-K tile, a partial per CTA. B per
  // batch entry (a shared one folds the batch into M).
  absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {3}, 65, 136, 584}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const ops::Sm90GemmConfig sk = WithStreamK({64, 128, 1, 1, 8});
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &sk, 5);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].grid, (std::array<uint32_t, 3>{5, 1, 1}));
  EXPECT_EQ((*l)[0].semaphores, 7u);
  EXPECT_EQ((*l)[0].scratch_bytes, 5u * 64 * 128 * 4);
  EXPECT_NE((*l)[0].source.find("#define GEMM_STREAM_K 1\n#define GEMM_SK_TILES 7\n#define GEMM_GRID 5\n"),
            std::string::npos);
  // Whole waves (12 tiles on 4 or 6 SMs): the plain kernel, no workspace.
  for (int sms : {4, 6}) {
    absl::StatusOr<std::vector<KernelLaunch>> whole = ops::GenerateMatMulGroupSm90(*b->node, &sk, sms);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ((*whole)[0].grid[0], static_cast<uint32_t>(sms));
    EXPECT_EQ((*whole)[0].semaphores, 0u);
    EXPECT_EQ((*whole)[0].scratch_bytes, 0u);
    EXPECT_EQ((*whole)[0].source.find("#define GEMM_STREAM_K 1"), std::string::npos);
  }
  // Two consumers: a semaphore per (stream-K tile, consumer).
  const ops::Sm90GemmConfig sk2 = WithStreamK({128, 128, 2, 1, 4});  // 1 x 2 x 3 = 6 tiles
  absl::StatusOr<std::vector<KernelLaunch>> l2 = ops::GenerateMatMulGroupSm90(*b->node, &sk2, 132);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ((*l2)[0].grid[0], 60u);  // 6 tiles x 10 k tiles: one iteration a CTA
  EXPECT_EQ((*l2)[0].semaphores, 6u * 2);
}

// Swap-AB: config strings, the verifier, the heuristic (swapped where PreferSm90SwapAb:
// M <= 64, N and K >= 2048; split until the units fill the SMs) and the routing (plain
// matmul[+epilogue] groups with A stored [M, K]).
TEST(GemmCodegenTest, Sm90SwapAbConfigsHeuristicAndRouting) {
  for (const char* text : {"64x16 c1x1 s8 k4 swap", "128x8 c2x1 s4 swap", "128x32 c1x2 s6 k3 swap"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_TRUE(c->swap_ab) << text;
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_FALSE(ops::ParseSm90GemmConfig("64x128 c1x1 s8")->swap_ab);
  for (const char* bad : {"64x16 c1x1 s8 swap k4", "64x16 c1x1 s8 swapx", "64x16 c1x1 s8 k4 swap ", "64x16 c1x1 s8",
                          "64x12 c1x1 s8 swap", "64x8 c1x1 s8 k2 swap", "64x16 p2x1 s8 swap"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::VerifySm90GemmConfig(Sm90Swap(64, 12, 1, 1, 8, 1)).message().find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(Sm90Swap(64, 8, 1, 1, 8, 2)).message().find("multiple of 16"),
            std::string::npos);
  EXPECT_TRUE(ops::VerifySm90GemmConfig(Sm90Swap(64, 256, 1, 1, 4, 1)).ok());
  EXPECT_FALSE(ops::VerifySm90GemmConfig(Sm90Swap(64, 264, 1, 1, 4, 1)).ok());
  // C's tile goes through shared memory where it fits beside the ring, else none
  // (C is stored from registers): 13 stages of n64 leave room for it, 14 do not.
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 16, 1, 1, 8, 1)), 1024 + 8 * 80 * 128 + 128 + 16 + 64 * 16 * 2);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 1))),
            1024 + 8 * 80 * 256 + 128 + 16 + 64 * 16 * 2);  // 128 k per stage: twice the ring
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 64, 1, 1, 13, 1)), 1024 + 13 * 128 * 128 + 13 * 16 + 16 + 64 * 64 * 2);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 64, 1, 1, 14, 1)), 1024 + 14 * 128 * 128 + 14 * 16 + 16);
  EXPECT_EQ(ops::Sm90CChunks(Sm90Swap(128, 256, 2, 1, 4, 1)), 1);
  // The heuristic: 64-row tiles of N, bn = M rounded up to 8. From 32 of them unsplit,
  // the deepest ring up to 16 stages that fits; else 128 k per stage, up to 8 stages,
  // split in 4 (bn = M rounded up to 16) at up to 12 tiles with K >= 4096.
  for (auto [m, n, k, want] :
       {std::tuple<int64_t, int64_t, int64_t, const char*>{1, 4096, 4096, "64x8 c1x1 s16 swap"},  // 64 tiles
        {16, 2048, 3072, "64x16 c1x1 s16 swap"},           // 32 tiles
        {16, 1984, 3072, "64x16 c1x1 s8 swap bk128"},      // 31 tiles
        {16, 768, 3072, "64x16 c1x1 s8 swap bk128"},       // 12 tiles, K < 4096
        {8, 768, 4096, "64x16 c1x1 s8 k4 swap bk128"},     // 12 tiles, K = 4096: split, n16
        {16, 832, 4096, "64x16 c1x1 s8 swap bk128"},       // 13 tiles
        {64, 768, 4096, "64x64 c1x1 s7 k4 swap bk128"},    // 32 KiB stages: 7 fit
        {33, 4096, 768, "64x40 c1x1 s16 swap"},            // 64 tiles
        {33, 1024, 768, "64x40 c1x1 s8 swap bk128"},       // 16 tiles
        {1, 768, 768, "64x8 c1x1 s8 swap bk128"},
        {8, 64, 8, "64x8 c1x1 s8 swap bk128"},             // one k tile
        {64, 16384, 4096, "64x64 c1x1 s14 swap"}}) {  // 16 KiB stages: 14 fit in 227 KiB
    const ops::Sm90GemmConfig c = ops::PickSm90SwapAbConfig(m, n, k, 1);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok()) << ops::Sm90GemmConfigString(c);
  }
  // Batches count as tiles: 4 x 8 tiles of N go unsplit.
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90SwapAbConfig(8, 512, 4096, 4)), "64x8 c1x1 s16 swap");
  EXPECT_TRUE(ops::PreferSm90SwapAb(1, 4096, 4096));
  EXPECT_TRUE(ops::PreferSm90SwapAb(16, 2048, 2048));
  EXPECT_TRUE(ops::PreferSm90SwapAb(32, 4096, 4096));
  EXPECT_FALSE(ops::PreferSm90SwapAb(33, 4096, 4096));  // unsplit 12-stage 64x64 tiles measured faster at 64
  EXPECT_FALSE(ops::PreferSm90SwapAb(64, 4096, 4096));
  EXPECT_TRUE(ops::PreferSm90SwapAb(16, 768, 3072));    // bk128 tiles from N = 768
  EXPECT_TRUE(ops::PreferSm90SwapAb(1, 1536, 768));     // and K = 768 below N = 2048
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 512, 3072));   // not measured below N = 768
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 1024, 512));   // nor below K = 768
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 4096, 768));   // from N = 2048: measured slower at K = 768
  // Routing: which groups swap (the heuristic) and why the others cannot.
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  GemmCase dual{DType::kFloat16, {}, 16, 64, 64};
  dual.dual = true;
  dual.k2 = 32;
  GemmCase pro{DType::kFloat16, {}, 16, 64, 64};
  pro.pro = Pro::kReluA;
  struct Route {
    GemmCase c;
    bool swapped;
    const char* why;  // in Sm90SwapAbEligible's message when not eligible
  };
  for (const Route& r : {Route{GemmCase{DType::kFloat16, {}, 16, 4096, 4096, false, false, true}, true, ""},
                         Route{GemmCase{DType::kBFloat16, {3}, 7, 2048, 2048, false, false, false, Epi::kBiasGelu},
                               true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 16, 3072, 2048}, true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 32, 3072, 2048}, true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 33, 3072, 2048}, false, ""},  // eligible, M > 32
                         Route{GemmCase{DType::kFloat16, {}, 16, 768, 3072}, false, ""},   // eligible, N < 2048
                         Route{GemmCase{DType::kFloat16, {}, 16, 64, 64, false, true, false}, false, "[K, M]"},
                         Route{dual, false, "dual"}, Route{pro, false, "prologue"}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << r.c.Name() << ": " << l.status();
    EXPECT_EQ((*l)[0].family, "gemm_sm90") << r.c.Name();
    const std::string& src = (*l)[0].source;
    EXPECT_NE(src.find(absl::StrCat("#define GEMM_SWAP_AB ", r.swapped ? 1 : 0, "\n")), std::string::npos)
        << r.c.Name();
    const absl::Status eligible = ops::Sm90SwapAbEligible(*b->node);
    EXPECT_EQ(eligible.ok(), std::string(r.why).empty()) << r.c.Name() << ": " << eligible;
    if (!eligible.ok()) {
      EXPECT_NE(eligible.message().find(r.why), absl::string_view::npos) << eligible;
      // A forced swapped config names the reason.
      const absl::Status forced = ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Swap(64, 16, 1, 1, 8, 1))).status();
      EXPECT_EQ(forced.code(), absl::StatusCode::kInvalidArgument) << forced;
      EXPECT_NE(forced.message().find(r.why), absl::string_view::npos) << forced;
    }
    if (r.swapped) {
      // The kernel's problem is C^T: M and N trade places, B's map first, A's (box of
      // bn rows) second, then C's own (C's columns first, boxes of 64 of them x bn C
      // rows: the TMA store); the workspace counts C^T's tiles.
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_M ", r.c.n, "\n#define GEMM_N ", r.c.m, "\n")),
                std::string::npos);
      ASSERT_EQ((*l)[0].tensor_maps.size(), 3u);
      const ops::Sm90GemmConfig plain{64, 128, 1, 1, 8};
      absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroupSm90(*b->node, &plain);
      ASSERT_TRUE(u.ok()) << u.status();
      EXPECT_EQ((*l)[0].tensor_maps[0].tensor, (*u)[0].tensor_maps[1].tensor);
      EXPECT_EQ((*l)[0].tensor_maps[1].tensor, (*u)[0].tensor_maps[0].tensor);
      EXPECT_EQ((*u)[0].source.find("#define GEMM_SWAP_AB 1"), std::string::npos);
      EXPECT_EQ((*l)[0].tensor_maps[1].dims[1], static_cast<uint64_t>(r.c.m));
      const int64_t batch = r.c.batch.empty() ? 1 : r.c.batch[0];
      const ops::Sm90GemmConfig want = ops::PickSm90SwapAbConfig(r.c.m, r.c.n, r.c.k, batch);
      EXPECT_EQ((*l)[0].tensor_maps[1].box[1], static_cast<uint32_t>(want.bn));
      EXPECT_EQ((*l)[0].grid[0], static_cast<uint32_t>(std::min<int64_t>(
                                      ((r.c.n + 63) / 64) * ((r.c.m + want.bn - 1) / want.bn) * batch * want.split_k,
                                      132)));
      EXPECT_NE(src.find("#define GEMM_TMA_STORE 1"), std::string::npos);
      EXPECT_EQ((*l)[0].tensor_maps[2].dims[0], static_cast<uint64_t>(r.c.n));
      EXPECT_EQ((*l)[0].tensor_maps[2].box[0], 64u);
      EXPECT_EQ((*l)[0].tensor_maps[2].box[1], static_cast<uint32_t>(want.bn));
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_TRANS_A ", r.c.tb ? 0 : 1, "\n#define GEMM_TRANS_B 1\n")),
                std::string::npos);
      // Clustered: pairs of tiles of N share A^T, each CTA multicasting bn / 2 of its
      // rows; the grid is whole clusters walking the pairs.
      const ops::Sm90GemmConfig pair = Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1));
      absl::StatusOr<std::vector<KernelLaunch>> cl = ops::GenerateMatMulGroupSm90(*b->node, &pair);
      ASSERT_TRUE(cl.ok()) << cl.status();
      EXPECT_NE((*cl)[0].source.find("#define GEMM_CLUSTER_M 2\n"), std::string::npos);
      EXPECT_EQ((*cl)[0].tensor_maps[1].box[1], 8u);
      EXPECT_EQ((*cl)[0].grid[0],
                static_cast<uint32_t>(2 * std::min<int64_t>((r.c.n + 127) / 128 * ((r.c.m + 15) / 16) * batch, 66)));
    }
  }
}

// Swapped tiles that fill the wave where the unswapped pick's 64-column steps leave it
// part-empty (PickSm90SwapWaveConfig), and the heuristic taking them.
TEST(GemmCodegenTest, Sm90SwapWaveTilesFillTheWave) {
  // 120 tiles of 64x192 over 1280x1024: 1280 x 1024 / (132 x 64 x 192).
  EXPECT_NEAR(ops::Sm90WaveUse(1280, 1024, 1, 64, 192, 132), 1280.0 * 1024 / (132 * 64 * 192), 1e-12);
  EXPECT_NEAR(ops::Sm90WaveUse(1024, 1280, 1, 128, 80, 132), 1280.0 * 1024 / (132 * 128 * 80), 1e-12);
  EXPECT_NEAR(ops::Sm90WaveUse(4096, 4096, 1, 128, 256, 132), 4096.0 * 4096 / (4 * 132 * 128 * 256), 1e-12);
  const ops::Sm90GemmConfig c64x192{64, 192, 1, 1, 6}, c192x128{192, 128, 3, 1, 5}, c128x256{128, 256, 2, 1, 4};
  for (auto [m, n, k, tile, want] : std::vector<std::tuple<int64_t, int64_t, int64_t, ops::Sm90GemmConfig, const char*>>{
           {1280, 1024, 2816, c64x192, "128x80 c2x1 s7 swap"},    // 8 x 16 tiles: the wave, none of them partial
           {2048, 1152, 1152, c192x128, "192x96 c3x1 s5 swap"},   // 6 x 22 = 132 tiles
           {2816, 256, 3840, {64, 128, 1, 1, 8}, "64x96 c1x1 s10 swap"},  // 4 x 30 tiles
           {640, 2176, 3200, c64x192, ""},                        // 17 x 7 tiles of 128x96: no better
           {1024, 1664, 3712, {128, 128, 2, 1, 5}, ""},           // 128x112: use 0.79 -> 0.90, under the margin
           {4096, 4096, 4096, c128x256, ""},                      // four full waves already
           {1280, 1024, 960, c64x192, ""},                        // K < 1024
       }) {
    const std::optional<ops::Sm90GemmConfig> c = ops::PickSm90SwapWaveConfig(tile, m, n, k, 1, 132);
    EXPECT_EQ(c ? ops::Sm90GemmConfigString(*c) : "", want) << m << "x" << n << "x" << k;
    if (c) {
      EXPECT_TRUE(ops::VerifySm90GemmConfig(*c).ok()) << ops::Sm90GemmConfigString(*c);
    }
  }
  ops::Sm90GemmConfig split = c64x192;
  split.split_k = 2;
  EXPECT_FALSE(ops::PickSm90SwapWaveConfig(split, 1280, 1024, 2816, 1, 132).has_value());
  // The heuristic: swapped where C's rows suit the TMA store; unswapped where they are
  // not 16-byte aligned (N = 1020, B stored [N, K]) and where A is stored [K, M].
  for (auto [n, ta, tb, swapped] : {std::tuple<int64_t, bool, bool, bool>{1024, false, false, true},
                                    {1024, false, true, true}, {1020, false, true, false}, {1024, true, false, false}}) {
    absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {}, 1280, n, 2816, false, ta, tb}, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::Sm90GemmConfig> h = ops::HeuristicSm90GemmConfig(*b->node);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->swap_ab, swapped) << n << " " << ta << tb << ": " << ops::Sm90GemmConfigString(*h);
  }
}

// The swapped forms compile for sm_90a without spills, a stack frame, setmaxnreg
// warnings or serialized wgmmas: n8..n64 wgmmas with A' K-major (B stored [N, K]) and
// M-major (B [K, N]), one or two consumers, two m64 blocks, clusters, fp16 and bf16, C
// through shared memory and (n64 with 14 stages, no room for C's tile) from registers.
TEST(GemmCodegenTest, Sm90SwapAbCompilesForSm90a) {
  std::vector<ModuleKernel> kernels;
  int n = 0;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (bool tb : {false, true}) {
      const GemmCase c{dt, {}, 33, 200, 584, false, false, tb, tb ? Epi::kBiasGelu : Epi::kResidual};
      absl::StatusOr<Built> b = Build(c, 1);
      ASSERT_TRUE(b.ok()) << b.status();
      for (const ops::Sm90GemmConfig& cfg :
           {Sm90Swap(64, 8, 1, 1, 16, 1), Sm90Swap(64, 48, 1, 1, 8, 1), Sm90Swap(128, 64, 2, 1, 6, 1),
            Sm90Swap(128, 32, 1, 2, 6, 1), Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1)),
            Sm90Cluster(Sm90Swap(128, 32, 2, 1, 8, 1)), Sm90Swap(64, 64, 1, 1, 14, 1)}) {
        absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &cfg);
        ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
        kernels.push_back({absl::StrCat("kiln_gemm_swap_", c.Name(), "_", n++), (*l)[0].source});
      }
    }
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  for (const char* shape : {"m64n8k16", "m64n48k16", "m64n64k16", "m64n32k16"}) {
    EXPECT_NE(inspected->ptx.find(shape), std::string::npos) << shape;
  }
  EXPECT_NE(inspected->ptx.find("shfl.sync.bfly"), std::string::npos);  // the transposing store
  EXPECT_NE(inspected->ptx.find("cp.async.bulk.tensor.3d.global.shared::cta"), std::string::npos);  // through smem
  EXPECT_NE(inspected->ptx.find("st.global"), std::string::npos);  // n64 with 14 stages: from registers
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
  }
}

// On the GPU: every split case against the CPU reference, each launched twice on one
// workspace shared by all cases (as a session's): the same bits both times, and the
// semaphores back at zero after every launch.
void RunSplitOnGpu(bool sm90) {
  KILN_ARCH_OR_SKIP(arch);
  if (sm90 && arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family needs sm_90a, not " << arch;
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen, sm90));
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  DeviceWorkspace workspace;
  for (const KernelLaunch& l : gen.launches) ASSERT_TRUE(workspace.ReserveFor(l).ok());
  int failures = 0;
  float worst_f16 = 0, worst_bf16 = 0;
  for (size_t ci = 0; ci < gen.cases.size(); ++ci) {
    const std::string name = gen.cases[ci].c.Name();
    SCOPED_TRACE(name);
    const Node& node = *gen.built[ci].node;
    const KernelLaunch& l = gen.launches[ci];
    const Value* y = node.output(0);
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, gen.built[ci].feeds));
    const std::vector<void*>& dev = buf.dev;
    const size_t ybytes = buf.out_bytes;
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], gen.kernels[ci].function, l.shared_bytes, &kernel));
    absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(l, [&](int v) { return dev[v]; }, workspace.view());
    ASSERT_TRUE(args.ok()) << args.status();
    Tensor runs[2] = {Tensor(y->dtype(), y->shape()), Tensor(y->dtype(), y->shape())};
    for (Tensor& got : runs) {
      KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, ybytes));
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                    dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes,
                                    nullptr));
      KILN_CUDA_OK(cudaGetLastError());
      KILN_CUDA_OK(cudaDeviceSynchronize());
      KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), dev[0], ybytes, cudaMemcpyDeviceToHost));
      std::vector<uint32_t> sems(l.semaphores);
      KILN_CUDA_OK(cudaMemcpy(sems.data(), workspace.view().semaphores, sems.size() * sizeof(uint32_t),
                              cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::count(sems.begin(), sems.end(), 0u), static_cast<long>(sems.size())) << "semaphores left set";
    }
    EXPECT_EQ(std::memcmp(runs[0].raw_data(), runs[1].raw_data(), ybytes), 0) << "two launches differ";
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> g = runs[0].ToFloat(), w = (*ref)[0].ToFloat();
    const test::ScaledError scaled = test::MaxScaledError(g, w);
    const float worst = scaled.worst;
    const size_t worst_i = scaled.at;
    const float tol = y->dtype() == DType::kFloat16 ? 2e-2f : 6e-2f;
    const bool ok = worst <= tol;
    EXPECT_TRUE(ok) << name << ": max scaled |err| " << worst << " at " << worst_i << " (got " << g[worst_i]
                    << ", want " << w[worst_i] << ")";
    failures += !ok;
    float& dtype_worst = y->dtype() == DType::kFloat16 ? worst_f16 : worst_bf16;
    dtype_worst = std::max(dtype_worst, worst);
    std::printf("%-56s grid %u x %u x %u: max scaled err %.3g %s\n", name.c_str(), l.grid[0], l.grid[1], l.grid[2],
                worst, ok ? "ok" : "FAIL");
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  std::printf("ran %zu %s split-K GEMM cases twice on %s (%s): %d failing; worst scaled err %.3g (f16), %.3g (bf16)\n",
              gen.cases.size(), sm90 ? "sm90" : "sm80", test::DeviceName().c_str(), arch.c_str(), failures, worst_f16,
              worst_bf16);
}

TEST(GemmGpuTest, SplitKMatchesCpuReferenceAndRepeats) { RunSplitOnGpu(false); }

// The sm90 family's split forms (Sm90SplitCases), the same way.
TEST(GemmGpuTest, Sm90SplitKMatchesCpuReferenceAndRepeats) { RunSplitOnGpu(true); }

}  // namespace
}  // namespace kiln::codegen
