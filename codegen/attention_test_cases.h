// Attention test graphs shared by codegen/attention_test.cc (NVRTC, no GPU) and
// codegen/attention_gpu_test.cc: Q, K, V (and a mask) as graph inputs, the
// MatMul -> scale -> mask -> Softmax -> MatMul chain in one of the exported model
// patterns, grouped by the real fusion pass (fusion/fuse_attention.h).
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "fusion/fuse_attention.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

enum class AttnMask {
  kNone,    // ViT: Div(S, sqrt(D)) -> Softmax
  kAdd,     // BERT: Add(Div(S, sqrt(D)), mask[B,1,1,Sk]) with 0 / -10000
  kCausal,  // GPT-2: Where(causal const bool[1,1,Sq,Sk], Div(S, sqrt(D)), -inf)
  kFill,    // DistilBERT: Div(Q, sqrt(D)) first, Where(cond bool[B,H,Sq,Sk], -65504, S)
};

struct AttnCase {
  DType dtype = DType::kFloat16;
  int64_t b = 1, h = 1, sq = 16, sk = 16, d = 64, dv = 64;
  AttnMask mask = AttnMask::kNone;
  bool k_trans = true;  // K stored [B,H,Sk,D], MatMul trans_b; else K' [B,H,D,Sk]
  // Q, K, V given as [B,S,H,D] (the projections' head split) behind Transposes
  // [0,2,1,3] (K: [0,2,1,3] with trans_b, else [0,2,3,1]), and the output merged back
  // by Transpose [0,2,1,3] to [B,Sq,H,Dv], as the models export it.
  bool heads = false;

  std::string Name() const {
    const char* m = mask == AttnMask::kNone     ? "nomask"
                    : mask == AttnMask::kAdd    ? "addmask"
                    : mask == AttnMask::kCausal ? "causal"
                                                : "fill_qscale";
    return absl::StrCat(dtype == DType::kFloat16 ? "f16_" : "bf16_", b, "x", h, "_sq", sq, "_sk", sk, "_d", d, "_dv",
                        dv, "_", m, k_trans ? "_transb" : "_kt", heads ? "_heads" : "");
  }
};

struct AttnBuilt {
  std::unique_ptr<Graph> graph;
  Node* group = nullptr;                // the "attention" FusedGroup
  std::map<std::string, Tensor> feeds;  // graph inputs by name
};

// Uniform [-2, 2] data (scores of a few units, so the online softmax rescales).
inline Tensor AttnRandom(DType dtype, const Shape& shape, uint32_t seed, float scale = 2.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = dist(gen);
  return Tensor::FromFloat(dtype, shape, v);
}

// The graph of `c`, fused: `fuse` false leaves it unfused (the timing baseline).
inline absl::StatusOr<AttnBuilt> BuildAttention(const AttnCase& c, uint32_t seed, bool fuse = true) {
  AttnBuilt out;
  out.graph = std::make_unique<Graph>();
  Graph& g = *out.graph;
  auto input = [&](const std::string& name, const Shape& shape, DType dt) {
    Value* v = g.AddValue(name);
    v->SetType(dt, shape);
    g.AddInput(v);
    return v;
  };
  auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& name) {
    Value* y = g.AddValue(name + "_out");
    return g.AddNode(op, ins, {y}, name);
  };
  Value* q = nullptr;
  Value* k = nullptr;
  Value* v = nullptr;
  if (c.heads) {
    auto split = [&](Value* x, std::vector<int64_t> perm, const std::string& name) {
      Node* t = node("Transpose", {x}, name);
      t->SetAttr("perm", perm);
      return t->output(0);
    };
    q = split(input("q", {c.b, c.sq, c.h, c.d}, c.dtype), {0, 2, 1, 3}, "q_heads");
    k = split(input("k", {c.b, c.sk, c.h, c.d}, c.dtype), c.k_trans ? std::vector<int64_t>{0, 2, 1, 3}
                                                                       : std::vector<int64_t>{0, 2, 3, 1},
              "k_heads");
    v = split(input("v", {c.b, c.sk, c.h, c.dv}, c.dtype), {0, 2, 1, 3}, "v_heads");
  } else {
    q = input("q", {c.b, c.h, c.sq, c.d}, c.dtype);
    k = input("k", c.k_trans ? Shape{c.b, c.h, c.sk, c.d} : Shape{c.b, c.h, c.d, c.sk}, c.dtype);
    v = input("v", {c.b, c.h, c.sk, c.dv}, c.dtype);
  }
  for (const char* name : {"q", "k", "v"}) {
    const Value* in = g.FindValue(name);
    out.feeds[name] = AttnRandom(c.dtype, in->shape(), seed + (name[0] == 'q' ? 0 : name[0] == 'k' ? 1 : 2));
  }
  Value* scale = g.AddConstant("scale", Tensor::FromFloat(c.dtype, {}, {std::sqrt(static_cast<float>(c.d))}));
  std::mt19937 gen(seed + 3);
  if (c.mask == AttnMask::kFill) q = node("Div", {q, scale}, "qdiv")->output(0);
  Node* mm1 = node("MatMul", {q, k}, "scores");
  if (c.k_trans) mm1->SetAttr("trans_b", 1);
  Value* x = mm1->output(0);
  if (c.mask != AttnMask::kFill) x = node("Div", {x, scale}, "div")->output(0);
  switch (c.mask) {
    case AttnMask::kNone: break;
    case AttnMask::kAdd: {
      Value* m = input("mask", {c.b, 1, 1, c.sk}, c.dtype);
      std::vector<float> mv(c.b * c.sk);
      for (int64_t i = 0; i < c.b * c.sk; ++i) mv[i] = (i % c.sk != 0 && gen() % 4 == 0) ? -10000.f : 0.f;
      out.feeds["mask"] = Tensor::FromFloat(c.dtype, m->shape(), mv);
      x = node("Add", {x, m}, "add")->output(0);
      break;
    }
    case AttnMask::kCausal: {
      std::vector<float> mv(c.sq * c.sk);
      for (int64_t i = 0; i < c.sq; ++i)
        for (int64_t j = 0; j < c.sk; ++j) mv[i * c.sk + j] = j <= i ? 1.f : 0.f;
      Value* m = g.AddConstant("causal", Tensor::FromFloat(DType::kBool, {1, 1, c.sq, c.sk}, mv));
      Value* fill = g.AddConstant("fill", Tensor::FromFloat(c.dtype, {}, {-INFINITY}));
      x = node("Where", {m, x, fill}, "where")->output(0);
      break;
    }
    case AttnMask::kFill: {
      Value* m = input("cond", {c.b, c.h, c.sq, c.sk}, DType::kBool);
      std::vector<float> mv(NumElements(m->shape()));
      for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i % c.sk != 0 && gen() % 4 == 0) ? 1.f : 0.f;
      out.feeds["cond"] = Tensor::FromFloat(DType::kBool, m->shape(), mv);
      Value* fill = g.AddConstant("fill", Tensor::FromFloat(c.dtype, {}, {-65504.f}));
      x = node("Where", {m, fill, x}, "where")->output(0);
      break;
    }
  }
  Node* sm = node("Softmax", {x}, "softmax");
  sm->SetAttr("axis", int64_t{-1});
  Node* mm2 = node("MatMul", {sm->output(0), v}, "context");
  if (c.heads) {
    Node* t = node("Transpose", {mm2->output(0)}, "merge_heads");
    t->SetAttr("perm", std::vector<int64_t>{0, 2, 1, 3});
    g.AddOutput(t->output(0));
  } else {
    g.AddOutput(mm2->output(0));
  }
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(g, options); !s.ok()) return s;
  if (!fuse) return out;
  absl::StatusOr<bool> fused = FuseAttention().Run(g);
  if (!fused.ok()) return fused.status();
  for (Node* n : g.nodes()) {
    if (IsFusedGroup(*n)) out.group = n;
  }
  if (out.group == nullptr) return absl::InternalError(absl::StrCat(c.Name(), ": fuse-attention formed no group"));
  return out;
}

}  // namespace kiln::codegen::test
