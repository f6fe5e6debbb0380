// The GEMM generator's test cases (codegen/ops/gemm.cc, gemm_sm90.cc), shared by
// codegen/gemm_test.cc (NVRTC compiles, configs and routing; no GPU) and
// codegen/gemm_gpu_test.cc (every case against the CPU reference on a GPU): the
// epilogue and prologue forms, the graphs each case builds, the sm_80 and sm_90a case
// lists and their generation.
#pragma once

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
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "codegen/gemm_simt_test_configs.h"
#include "codegen/gpu_test_util.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/templates.h"
#include "common/float16.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/tf32_math.h"
#include "runtime/tensor_map.h"

namespace kiln::codegen::gemm_test {

// kRowsResidual: a residual [M, N] shared by the batch (a position table).
enum class Epi { kNone, kBiasRelu, kBiasGelu, kResidual, kScale, kBiasGeluTanh, kBiasResidual, kRowsResidual };
inline const char* EpiName(Epi e) {
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
  kChannelScaleA,  // A * s[first batch dim, 1..., last stored dim] (squeeze-excitation's scale)
};
inline const char* ProName(Pro p) {
  switch (p) {
    case Pro::kNone: return "";
    case Pro::kReluA: return "_pro_reluA";
    case Pro::kScaleBiasA: return "_pro_scalebiasA";
    case Pro::kClipB: return "_pro_clipB";
    case Pro::kCastA: return "_pro_castA";
    case Pro::kBoth: return "_pro_sigA_tanhB";
    case Pro::kRowScaleA: return "_pro_rowscaleA";
    case Pro::kChannelScaleA: return "_pro_chanscaleA";
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
  bool tf32 = false;  // f32 operands, every MatMul marked tf32 (Family::kTf32)

  std::string Kind() const {
    if (dual) return epi == Epi::kNone ? "dual-matmul" : "dual-matmul+epilogue";
    if (pro != Pro::kNone) return epi == Epi::kNone ? "prologue+matmul" : "prologue+matmul+epilogue";
    return epi == Epi::kNone ? "MatMul" : "matmul+epilogue";
  }
  std::string Name() const {
    std::string b;
    for (int64_t d : batch) absl::StrAppend(&b, d, "x");
    std::string s = absl::StrCat(DTypeName(dtype), "_", b, m, "_", n, "_", k);
    if (dual) absl::StrAppend(&s, "_", k2);
    absl::StrAppend(&s, b_broadcast ? "_bcastB" : "", "_", ta ? "T" : "N", tb ? "T" : "N");
    if (dual) absl::StrAppend(&s, ta2 ? "T" : "N", tb2 ? "T" : "N", "_dual");
    return absl::StrCat(s, ProName(pro), EpiName(epi), tf32 ? "_tf32" : "");
  }
};

inline Tensor Rand(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = dist(gen);
  return Tensor::FromFloat(dtype, shape, v);
}

inline int64_t OnnxType(DType dt) { return dt == DType::kFloat16 ? 10 : dt == DType::kBFloat16 ? 16 : 1; }

// The graph of one case; `node` is the MatMul or the fused group.
struct Built {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;
  std::map<std::string, Tensor> feeds;  // by value name
};

inline absl::StatusOr<Built> Build(const GemmCase& c, uint32_t seed) {
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
    case Pro::kChannelScaleA: {
      Shape cs(as.size(), 1);
      if (as.size() > 2) cs[0] = as[0];
      cs.back() = as.back();
      a = add("Mul", {input("a", as, c.dtype), input("a_chanscale", cs, c.dtype)});
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
  if (c.tf32) MarkForTf32(*mm);
  members.push_back(mm);
  Value* last = mm_out;
  if (c.dual) {
    const Shape as2 = c.ta2 ? with(c.batch, {c.k2, c.m}) : with(c.batch, {c.m, c.k2});
    const Shape bs2 = c.tb2 ? with(bb, {c.n, c.k2}) : with(bb, {c.k2, c.n});
    Value* mm2_out = g.AddValue("mm2");
    Node* mm2 = g.AddNode("MatMul", {input("a2", as2, c.dtype), input("b2", bs2, c.dtype)}, {mm2_out}, "mm2");
    if (c.ta2) mm2->SetAttr("trans_a", 1);
    if (c.tb2) mm2->SetAttr("trans_b", 1);
    if (c.tf32) MarkForTf32(*mm2);
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

inline std::vector<GemmCase> Cases(std::vector<DType> dtypes = {DType::kFloat16, DType::kBFloat16}) {
  std::vector<GemmCase> cases;
  const std::array<std::array<bool, 2>, 4> layouts = {{{false, false}, {true, false}, {false, true}, {true, true}}};
  for (DType dt : dtypes) {
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
    // EfficientNet's projection after squeeze-excitation in NHWC: A [N, H, W, C] scaled
    // per (image, channel), B shared: the batch folds into the rows with the scale
    // indexed by the folded row (partial tiles, a residual epilogue); with A transposed
    // the batch does not fold and the scale is indexed by the batch.
    for (const auto& s : std::vector<std::array<int64_t, 4>>{{10, 72, 48, 0}, {56, 24, 96, 0}, {10, 72, 48, 1}}) {
      GemmCase se{dt, {4, 6}, s[0], s[1], s[2], true, s[3] == 1};
      se.pro = Pro::kChannelScaleA;
      se.epi = Epi::kBiasResidual;
      push(se);
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

inline ops::Sm90GemmConfig Sm90Swap(int bm, int bn, int consumers, int wg_m, int stages, int split) {
  ops::Sm90GemmConfig c{bm, bn, consumers, wg_m, stages, false, split};
  c.swap_ab = true;
  return c;
}
inline ops::Sm90GemmConfig Sm90Bk128(ops::Sm90GemmConfig c) {
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
inline ops::Sm90GemmConfig Sm90Cluster(ops::Sm90GemmConfig c) {
  c.cluster_m = 2;
  return c;
}
// `c` with stream-K.
inline ops::Sm90GemmConfig WithStreamK(ops::Sm90GemmConfig c) {
  c.stream_k = true;
  return c;
}

inline std::vector<GemmCase> Sm90Cases() {
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
inline absl::StatusOr<std::vector<float>> Float32Product(const Tensor& a, const Tensor& b, bool ta, bool tb) {
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

inline std::string Form(const KernelLaunch& l);

// Every case (GPU), or for the CPU tests one case per template form and prologue
// kind (`heavy`: the 1536x1024 cases, which take the 128x128 tiles, else the rest).
enum class Select { kAll, kFormsLight, kFormsHeavy };

// Which GEMM family generates the cases: the sm_80 template, the Hopper family
// (only the cases it takes, Sm90Eligible; the others are counted in *routed), or the
// SIMT template (the fp32 cases, SimtCases), or the Hopper family's tf32 form (the
// fp32 cases marked tf32 that it takes, Tf32Cases), or the sm_80 template's tf32 form
// (the Tf32Cases it takes; the others, left to the SIMT template, are counted in *routed).
enum class Family { kSm80, kSm90, kSimt, kTf32, kSm80Tf32 };

// The SIMT template's cases: Cases() in fp32 (every layout, load mode, prologue,
// epilogue and dual form at odd and aligned sizes), then what only it has: rows of a
// multiple of 4 but not of 8 (16-byte fp32 loads), C rows not a multiple of 4 (scalar
// stores), partial tiles of each heuristic tile, K shorter than one k tile, few rows
// with a long K (the heuristic splits K: 7 to 8 splits, a prologue, batched, an
// epilogue), and each pool config the heuristic does not pick on one case.
inline std::vector<GemmCase> SimtCases() {
  std::vector<GemmCase> cases = Cases({DType::kFloat32});
  const DType f = DType::kFloat32;
  cases.push_back({f, {}, 1, 200, 584, false, false, true, Epi::kBiasGelu});
  cases.push_back({f, {}, 33, 130, 1000, false, true, false});
  cases.push_back({f, {3}, 17, 40, 900, true, false, false, Epi::kResidual});
  cases.push_back({f, {}, 128, 768, 3072, false, false, false, Epi::kBiasRelu});
  {
    GemmCase c{f, {}, 64, 64, 1024, false, true, true};
    c.pro = Pro::kScaleBiasA;
    cases.push_back(c);
  }
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({f, {}, 132, 260, 36, false, ta, tb, Epi::kBiasGelu});
      cases.push_back({f, {}, 300, 4100, 12, false, ta, tb});
      cases.push_back({f, {2}, 1030, 515, 3, false, ta, tb, Epi::kResidual});
    }
  }
  return cases;
}
// The Hopper family's tf32 cases: Cases() in fp32 without prologues, every MatMul
// marked tf32 with A stored [M, K] and B [N, K] (the K-major operands the tf32 wgmma
// reads), then rows of a multiple of 4 but not of 8 (16-byte fp32 rows), few rows
// (swap-AB), few tiles with a long K (split-K) and a batched residual form.
inline std::vector<GemmCase> Tf32Cases() {
  std::vector<GemmCase> cases;
  std::set<std::string> names;
  auto push = [&](GemmCase c) {
    c.dtype = DType::kFloat32;
    c.tf32 = true;
    c.ta = c.ta2 = false;
    c.tb = c.tb2 = true;
    if (c.pro == Pro::kNone && names.insert(c.Name()).second) cases.push_back(c);
  };
  for (const GemmCase& c : Cases({DType::kFloat32})) push(c);
  const DType f = DType::kFloat32;
  push({f, {}, 1, 200, 584, false, false, true, Epi::kBiasGelu});
  push({f, {}, 8, 1024, 3072, false, false, true, Epi::kBiasRelu});
  push({f, {}, 33, 132, 1000, false, false, true});
  push({f, {3}, 17, 44, 900, false, false, true, Epi::kResidual});
  push({f, {}, 128, 768, 3072, false, false, true, Epi::kBiasResidual});
  push({f, {}, 300, 4100, 12, false, false, true});
  return cases;
}

// Whether the pipeline takes case `c`: fp32 A [M, K] and B [K, N] without a prologue,
// rows of a multiple of 4 floats, in every mainloop; and `cfg` fits its registers.
inline bool SimtPipelineTakes(const GemmCase& c, const ops::GemmConfig& cfg) {
  ops::GemmVariant v;
  v.simt = true;
  v.mainloops.resize(c.dual ? 2 : 1);
  const bool layouts = !c.ta && !c.tb && (!c.dual || (!c.ta2 && !c.tb2 && c.k2 % 4 == 0));
  return c.pro == Pro::kNone && layouts && c.k % 4 == 0 && c.n % 4 == 0 && ops::VerifyGemmConfig(cfg, v).ok();
}

// KILN_GEMM_CASES="a|b": only the cases whose names contain one of the substrings
// (e.g. a compute-sanitizer run over a few forms); every case without it.
inline bool Wanted(const std::string& name) {
  const char* only = std::getenv("KILN_GEMM_CASES");
  if (only == nullptr) return true;
  for (absl::string_view w : absl::StrSplit(only, '|')) {
    if (name.find(std::string(w)) != std::string::npos) return true;
  }
  return false;
}

// The Hopper family's other tile shapes on case `c` (`node` its group), appended to
// `all` (the heuristic's kernel first) when distinct: every forced config with
// kAll and kFormsHeavy, and with kAll the swapped tiles of a case of at most 64 rows.
inline void Sm90Variants(const GemmCase& c, const Node& node, Select select, std::vector<KernelLaunch>& all) {
  for (const ops::Sm90GemmConfig& cfg :
       {ops::Sm90GemmConfig{128, 256, 2, 1, 3}, ops::Sm90GemmConfig{128, 128, 2, 1, 4},
        ops::Sm90GemmConfig{256, 128, 2, 2, 3}, ops::Sm90GemmConfig{64, 128, 1, 1, 8},
        ops::Sm90GemmConfig{128, 64, 2, 1, 3}, ops::Sm90GemmConfig{64, 256, 2, 1, 4, true},
        ops::Sm90GemmConfig{128, 128, 2, 2, 5, true},  // the heuristic's ping-pong
        // Clusters of two sharing B: K-major B in halves of
        // 128, 96 and 32 rows, MN-major in 2, 3 (uneven) and
        // 1 boxes; ping-pong.
        ops::Sm90GemmConfig{128, 256, 2, 1, 4},  // C in 2 chunks
        ops::Sm90GemmConfig{64, 256, 1, 1, 5},   // one consumer, 2 chunks
        // Three consumers: 192 rows, C in 3 / 2 chunks.
        ops::Sm90GemmConfig{192, 192, 3, 1, 4}, ops::Sm90GemmConfig{192, 128, 3, 1, 5},
        Sm90Cluster({128, 256, 2, 1, 4}), Sm90Cluster({128, 192, 2, 1, 4}), Sm90Cluster({64, 64, 1, 1, 8}),
        ops::Sm90GemmConfig{64, 64, 1, 1, 12},        // the deep ring
        ops::Sm90GemmConfig{64, 64, 2, 1, 12, true},  // 64-row ping-pong
        ops::Sm90GemmConfig{128, 192, 2, 1, 5},       // C in 3 chunks
        Sm90Cluster({128, 128, 2, 2, 4, true}),
        // Stream-K over 3 CTAs (Sm90SplitCases has more).
        WithStreamK({128, 128, 2, 1, 4})}) {
    if (select != Select::kAll && select != Select::kFormsHeavy) break;
    // A grid of 3 blocks: each walks many tiles (ring wrap-around, ping-pong turns).
    absl::StatusOr<std::vector<KernelLaunch>> x = ops::GenerateMatMulGroupSm90(node, &cfg, 3);
    ASSERT_TRUE(x.ok()) << c.Name() << ": " << x.status();
    // Each distinct kernel once (a stream-K config whose tiles fill whole waves is
    // the plain kernel).
    if (std::none_of(all.begin(), all.end(), [&](const KernelLaunch& k) { return k.source == (*x)[0].source; })) {
      all.push_back((*x)[0]);
    }
  }
  if (select == Select::kAll && c.m <= 64 && ops::Sm90SwapAbEligible(node).ok()) {
    // Swapped tiles: n8 (unsplit, the heuristic's 16-stage ring), n16 in clusters of
    // two sharing A^T, two consumers split in 2, two m64 blocks split in 3, three
    // consumers (PickSm90SwapWaveConfig's 192-row tiles), and 128 k per stage with
    // one consumer, with two m64 blocks, and split in 2.
    for (ops::Sm90GemmConfig cfg :
         {Sm90Swap(64, 8, 1, 1, 16, 1), Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1)), Sm90Swap(128, 16, 2, 1, 4, 2),
          Sm90Swap(128, 32, 1, 2, 6, 3), Sm90Swap(192, 48, 3, 1, 4, 1), Sm90Bk128(Sm90Swap(64, 8, 1, 1, 8, 1)),
          Sm90Bk128(Sm90Swap(128, 32, 1, 2, 4, 1)), Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 2))}) {
      const int64_t k_units = c.tf32 ? 2 * c.k : c.k;  // a tf32 element takes two 16-bit ones' bytes
      const int64_t k_tiles = (k_units + cfg.bk - 1) / cfg.bk;
      if ((cfg.split_k - 1) * ((k_tiles + cfg.split_k - 1) / cfg.split_k) >= k_tiles) cfg.split_k = 1;
      absl::StatusOr<std::vector<KernelLaunch>> x = ops::GenerateMatMulGroupSm90(node, &cfg, 3);
      ASSERT_TRUE(x.ok()) << c.Name() << ": " << x.status();
      all.push_back((*x)[0]);
    }
  }
}

// Case `c` (graph `node`, built from `seed`) generated with the forced tile config
// `cfg`, appended to `out` as kernel kiln_gemm_<case>_<config without spaces> with a
// graph of its own.
inline void AddForcedConfig(Generated& out, const GemmCase& c, uint32_t seed, const Node& node,
                            const ops::GemmConfig& cfg) {
  const std::string tag = absl::StrReplaceAll(ops::GemmConfigString(cfg), {{" ", ""}});
  absl::StatusOr<std::vector<KernelLaunch>> x = ops::GenerateMatMulGroup(node, &cfg);
  ASSERT_TRUE(x.ok()) << c.Name() << " " << ops::GemmConfigString(cfg) << ": " << x.status();
  absl::StatusOr<Built> again = Build(c, seed);
  ASSERT_TRUE(again.ok());
  out.cases.push_back(c);
  out.kernels.push_back({absl::StrCat("kiln_gemm_", c.Name(), "_", tag), (*x)[0].source});
  out.launches.push_back((*x)[0]);
  out.built.push_back(*std::move(again));
}

inline void Generate(Generated& out, Select select, Family family = Family::kSm80, int* routed = nullptr) {
  uint32_t seed = 1;
  std::set<std::string> seen;
  const bool simt = family == Family::kSimt;
  const bool sm90 = family == Family::kSm90 || family == Family::kTf32;
  const bool sm80_tf32 = family == Family::kSm80Tf32;
  for (const GemmCase& c : family == Family::kSm90                ? Sm90Cases()
                           : family == Family::kTf32 || sm80_tf32 ? Tf32Cases()
                           : simt                                 ? SimtCases()
                                                                  : Cases()) {
    seed += 10;
    if (!Wanted(c.Name())) continue;
    if (!sm90 && select != Select::kAll && (c.m == 1536) != (select == Select::kFormsHeavy)) {
      continue;
    }
    if (select == Select::kFormsHeavy && c.dtype == DType::kBFloat16) continue;  // registers do not depend on it
    const bool dedupe = select == Select::kFormsLight;
    absl::StatusOr<Built> b = Build(c, seed);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    KernelOptions options;
    options.matmul_groups = codegen::MatMulGroups::kGenerated;
    absl::StatusOr<std::vector<KernelLaunch>> l;
    if (sm90) {
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
            absl::StrCat(define("GEMM_BF16"), define("GEMM_TF32"), define("GEMM_SWAP_AB"), define("GEMM_TRANS_A"),
                         define("GEMM_TRANS_B"), define("BN"), define("CONSUMERS"), define("GEMM_TMA_STORE"),
                         define("GEMM_TRANS_A2"), define("GEMM_TRANS_B2"), c.Kind(), ProName(c.pro));
        if (!seen.insert(key).second) continue;
      }
    } else {
      l = IsFusedGroup(*b->node) ? GenerateNodeKernels(*b->node, options) : ops::GenerateMatMulGroup(*b->node);
    }
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    if (sm90) {
      // The heuristic's config, then each other tile shape on the same case.
      std::vector<KernelLaunch> all = {(*l)[0]};
      ASSERT_NO_FATAL_FAILURE(Sm90Variants(c, *b->node, select, all));
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
    if (simt) {
      EXPECT_EQ((*l)[0].family, "gemm_simt") << c.Name();
    }
    if (sm80_tf32 && (*l)[0].family != "gemm_sm80") {
      if (routed != nullptr) ++*routed;
      continue;
    }
    if (sm80_tf32 && select != Select::kFormsLight && c.m == 1536) {
      // The tuner's other tiles on the large cases (BK 64 units: 32 elements a stage).
      absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b->node);
      ASSERT_TRUE(p.ok()) << p.status();
      for (const ops::GemmConfig& cfg : {ops::GemmConfig{64, 64, 64, 2, 2, 3}, ops::GemmConfig{256, 128, 32, 4, 2, 3},
                                         ops::GemmConfig{128, 128, 32, 2, 4, 4}}) {
        if (!ops::VerifyGemmConfig(cfg, p->variant).ok()) continue;
        ASSERT_NO_FATAL_FAILURE(AddForcedConfig(out, c, seed, *b->node, cfg));
      }
    }
    if (simt && select != Select::kFormsLight && c.m == 1536 && c.pro == Pro::kNone && !c.dual && !c.tb) {
      // The pool's other configs on the large plain cases.
      for (const ops::GemmConfig& cfg : SimtExtraConfigs()) {
        ASSERT_NO_FATAL_FAILURE(AddForcedConfig(out, c, seed, *b->node, cfg));
      }
    }
    if (simt && select != Select::kFormsLight && !c.dual && c.pro == Pro::kNone) {
      // The register-staged 8-warp tile in two CTAs an SM (128 registers) on one
      // mainloop without a prologue, any layout and epilogue.
      ASSERT_NO_FATAL_FAILURE(AddForcedConfig(out, c, seed, *b->node, SimtWideO2Config()));
    }
    if (simt && select != Select::kFormsLight) {
      // The pipeline's configs on every case it takes (with kFormsHeavy the 1536-row
      // ones), split in 8 on the few-rows case and in 4 on the large plain one.
      std::vector<ops::GemmConfig> configs = SimtPipelineConfigs();
      if (c.m == 128 && c.k == 3072) configs.push_back({64, 32, 16, 2, 2, 3, 8});
      if (c.m == 1536 && !c.dual && c.epi == Epi::kNone) configs.push_back({64, 32, 16, 2, 2, 3, 4});
      for (const ops::GemmConfig& cfg : configs) {
        if (!SimtPipelineTakes(c, cfg)) continue;
        ASSERT_NO_FATAL_FAILURE(AddForcedConfig(out, c, seed, *b->node, cfg));
      }
      // The k-major pipeline's on every case it takes: any layout, fp32 without a prologue.
      absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*b->node);
      ASSERT_TRUE(p.ok()) << p.status();
      configs = SimtKMajorConfigs();
      if (c.m == 128 && c.k == 3072) {
        for (const ops::GemmConfig& split : SimtKMajorSplits()) configs.push_back(split);
      }
      for (const ops::GemmConfig& cfg : configs) {
        if (!ops::VerifyGemmConfig(cfg, p->variant).ok()) continue;
        ASSERT_NO_FATAL_FAILURE(AddForcedConfig(out, c, seed, *b->node, cfg));
      }
    }
    if (dedupe && !sm90) {
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
            absl::StrCat(field("GEMM_TRANS_B2"), field("GEMM_B2_MODE")), field("GEMM_SPLIT_K")}) {
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
inline std::string Form(const KernelLaunch& l) {
  std::string f;
  for (const char* d :
       {"GEMM_BF16", "GEMM_TRANS_A", "GEMM_TRANS_B", "GEMM_A_MODE", "GEMM_B_MODE", "GEMM_A_KIND", "GEMM_DUAL",
        "GEMM_TRANS_A2", "GEMM_TRANS_B2", "GEMM_A2_MODE", "GEMM_B2_MODE", "GEMM_SPLIT_K"}) {
    const std::string key = absl::StrCat("#define ", d, " ");
    const size_t at = l.source.find(key);
    absl::StrAppend(&f, d, "=", at == std::string::npos ? "-" : l.source.substr(at + key.size(), 1), " ");
  }
  return f;
}

inline constexpr int kPerModule = 8;

// The ptxas log of sm90 kernels keeps the wgmma pipeline whole: setmaxnreg honoured
// (no C7508) and no wgmma waited for or serialized by ptxas: "warpgroup.arrive /
// warpgroup.wait is injected ... to allow use of registers in GMMA" (C7519, C7517:
// code between a wgmma.fence and the wgmmas writes or reads their registers, e.g. an
// accumulator's zero copied in after another block's first wgmma) and "wgmma.mma_async
// instructions are serialized" (C7510, C7515, C7520: the overlap is lost).
inline void ExpectWgmmaPipelineKept(const std::string& log) {
  for (const char* code : {"C7508", "C7517", "C7519", "serialized"}) {
    const size_t at = log.find(code);
    EXPECT_EQ(at, std::string::npos) << code << ": " << log.substr(at == std::string::npos ? 0 : at, 300);
  }
}

}  // namespace kiln::codegen::gemm_test
