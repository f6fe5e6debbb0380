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
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

enum class AttnMask {
  kNone,    // ViT: Div(S, sqrt(D)) -> Softmax
  kAdd,     // BERT: Add(Div(S, sqrt(D)), mask[B,1,1,Sk]) with 0 / -10000
  kCausal,  // GPT-2: Where(causal const bool[1,1,Sq,Sk], Div(S, sqrt(D)), -inf)
  kFill,    // DistilBERT: Div(Q, sqrt(D)) first, Where(cond bool[B,H,Sq,Sk], -65504, S)
  // torch.export's SDPA decomposition (BERT, GPT-2, Llama exported by dynamo): Q and K
  // each times sqrt(1/sqrt(D)), K through Reshape [B*H,Sk,D] -> Transpose -> Mul ->
  // Reshape [B,H,D,Sk], Add of a [B,1,Sq,Sk] 0/-inf mask (row 0 fully masked), the
  // Where(IsNaN(P), 0, P) guard; with h_kv < h, K and V repeated per query head by
  // Unsqueeze -> Expand -> Reshape (GQA's repeat_kv).
  kSdpa,
  // Swin's shifted windows: Div(S, sqrt(D)), Add of a relative-position bias constant
  // [H,Sq,Sk], the scores regrouped by Reshape to [B/2, 2, H, Sq, Sk], Add of the
  // windows' 0 / -100 mask [1,2,1,Sq,Sk] (a graph input), Reshape back.
  kWindows,
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
  int64_t h_kv = 0;  // kSdpa: key/value heads (0: h)
  // Q, K and V selected from one [B,S,3,H,D] input "qkv" (a packed projection, as Swin
  // and torchvision's attention export it): Transpose [2,0,3,1,4], then Gather of
  // index 0, 1, 2 on axis 0; K' by trans_b or Transpose [0,1,3,2]. Needs Sq = Sk, D = Dv.
  bool packed = false;
  // kSdpa's mask: a graph input fed 0 / -inf with row 0 of batch 0 all -inf (kInput);
  // the constant [B,1,Sq,Sk] causal mask, 0 on and below the diagonal and -inf above,
  // as torch.export writes GPT-2's and Llama's (kCausal); that constant with one key
  // past the diagonal kept in one row (kNearCausal: not causal, so it is read).
  enum class SdpaMask { kInput, kCausal, kNearCausal };
  SdpaMask sdpa_mask = SdpaMask::kInput;
  // kFill: Q divided by a one-element graph input "qscale" fed sqrt(D) (a computed
  // scale: it stays on Q, the kernel's Q prologue) instead of the constant (moved onto
  // the scores).
  bool q_scale_input = false;

  int64_t KvHeads() const { return h_kv > 0 ? h_kv : h; }
  std::string Name() const {
    const char* m = mask == AttnMask::kNone     ? "nomask"
                    : mask == AttnMask::kAdd    ? "addmask"
                    : mask == AttnMask::kCausal ? "causal"
                    : mask == AttnMask::kFill   ? "fill_qscale"
                    : mask == AttnMask::kSdpa   ? "sdpa"
                                                : "windows";
    const char* layout = mask == AttnMask::kSdpa ? "" : k_trans ? "_transb" : "_kt";
    const char* sdpa = sdpa_mask == SdpaMask::kCausal       ? "_constcausal"
                       : sdpa_mask == SdpaMask::kNearCausal ? "_nearcausal"
                                                            : "";
    return absl::StrCat(dtype == DType::kFloat16 ? "f16_" : "bf16_", b, "x", h, "_sq", sq, "_sk", sk, "_d", d, "_dv",
                        dv, "_", m, layout, heads ? "_heads" : "", packed ? "_packed" : "",
                        KvHeads() != h ? absl::StrCat("_gqa", KvHeads()) : "", sdpa,
                        q_scale_input ? "_qscaleinput" : "");
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

// kSdpa's mask values [B,Sq,Sk] (AttnCase::sdpa_mask).
inline std::vector<float> SdpaMaskValues(const AttnCase& c) {
  std::mt19937 gen(c.sq * 31 + c.sk);
  std::vector<float> mv(c.b * c.sq * c.sk);
  for (size_t i = 0; i < mv.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / c.sk % c.sq, col = static_cast<int64_t>(i) % c.sk;
    switch (c.sdpa_mask) {
      case AttnCase::SdpaMask::kInput: {
        const bool full_row = i < static_cast<size_t>(c.sk) && c.sq > 1;
        mv[i] = full_row || (col != 0 && gen() % 4 == 0) ? -INFINITY : 0.f;
        break;
      }
      case AttnCase::SdpaMask::kCausal:
      case AttnCase::SdpaMask::kNearCausal: {
        const bool kept = c.sdpa_mask == AttnCase::SdpaMask::kNearCausal && row == c.sq / 2 && col == row + 1;
        mv[i] = col <= row || kept ? 0.f : -INFINITY;
        break;
      }
    }
  }
  return mv;
}

// kSdpa's scores as torch.export writes them, from q [B,H,Sq,D] and k, v [B,Hkv,S,.]
// (GQA's repeat_kv first, replacing `v` by its repeated form): the masked, scaled
// scores [B,H,Sq,Sk], the mask a graph input or a constant (AttnCase::sdpa_mask).
inline Value* SdpaScores(const AttnCase& c, Graph& g, Value* q, Value* k, Value*& v,
                         std::map<std::string, Tensor>& feeds) {
  int serial = 0;
  auto node = [&](const std::string& op, std::vector<Value*> ins) {
    const std::string name = absl::StrCat("sdpa_", op, "_", serial++);
    return g.AddNode(op, ins, {g.AddValue(name + "_out")}, name)->output(0);
  };
  auto ints = [&](std::vector<int64_t> v) {
    return g.AddConstant(absl::StrCat("sdpa_shape_", serial++),
                         Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
  };
  const int64_t hkv = c.KvHeads(), rep = c.h / hkv;
  auto repeat_kv = [&](Value* x, int64_t s, int64_t d) {
    if (rep == 1) return x;
    Value* u = node("Unsqueeze", {x, ints({2})});
    Value* e = node("Expand", {u, ints({c.b, hkv, rep, s, d})});
    return node("Reshape", {e, ints({c.b, c.h, s, d})});
  };
  k = repeat_kv(k, c.sk, c.d);
  v = repeat_kv(v, c.sk, c.dv);
  const float root = std::sqrt(1.f / std::sqrt(static_cast<float>(c.d)));
  Value* half = g.AddConstant("sdpa_scale", Tensor::FromFloat(c.dtype, {}, {root}));
  Value* qs = node("Mul", {q, half});
  Value* kf = node("Reshape", {k, ints({c.b * c.h, c.sk, c.d})});
  Node* kt = g.AddNode("Transpose", {kf}, {g.AddValue("sdpa_kt_out")}, "sdpa_kt");
  kt->SetAttr("perm", std::vector<int64_t>{0, 2, 1});
  Value* ks = node("Mul", {kt->output(0), half});
  Value* k4 = node("Reshape", {ks, ints({c.b, c.h, c.d, c.sk})});
  Value* s = g.AddNode("MatMul", {qs, k4}, {g.AddValue("scores_out")}, "scores")->output(0);
  const Tensor mask = Tensor::FromFloat(c.dtype, {c.b, 1, c.sq, c.sk}, SdpaMaskValues(c));
  Value* m = nullptr;
  if (c.sdpa_mask == AttnCase::SdpaMask::kInput) {
    m = g.AddValue("mask");
    m->SetType(c.dtype, mask.shape());
    g.AddInput(m);
    feeds["mask"] = mask;
  } else {
    m = g.AddConstant("mask", mask);
  }
  return node("Add", {s, m});
}

// A graph input `name` of `shape` and `dt`.
inline Value* AttnInput(Graph& g, const std::string& name, const Shape& shape, DType dt) {
  Value* v = g.AddValue(name);
  v->SetType(dt, shape);
  g.AddInput(v);
  return v;
}

// Node `name` computing `op` of `ins` into a new value `name`_out.
inline Node* AttnNode(Graph& g, const std::string& op, std::vector<Value*> ins, const std::string& name) {
  return g.AddNode(op, ins, {g.AddValue(name + "_out")}, name);
}

// The Q, K and V operands of `c`: a packed QKV input's selects, per-head inputs
// split by Transposes, or the head-major inputs themselves.
inline void AttnOperands(const AttnCase& c, Graph& g, Value*& q, Value*& k, Value*& v) {
  const bool sdpa = c.mask == AttnMask::kSdpa;
  const int64_t hkv = c.KvHeads();
  auto transpose = [&](Value* x, std::vector<int64_t> perm, const std::string& name) {
    Node* t = AttnNode(g, "Transpose", {x}, name);
    t->SetAttr("perm", perm);
    return t->output(0);
  };
  if (c.packed) {
    Value* heads = transpose(AttnInput(g, "qkv", {c.b, c.sq, 3, c.h, c.d}, c.dtype), {2, 0, 3, 1, 4}, "qkv_heads");
    auto select = [&](int64_t i, const char* name) {
      Value* index = g.AddConstant(absl::StrCat(name, "_index"), Tensor::FromInt64(DType::kInt64, {}, {i}));
      return AttnNode(g, "Gather", {heads, index}, name)->output(0);
    };
    q = select(0, "q_select");
    k = select(1, "k_select");
    v = select(2, "v_select");
    if (!c.k_trans) k = transpose(k, {0, 1, 3, 2}, "k_transpose");
  } else if (c.heads) {
    const bool k_rows = c.k_trans || sdpa;
    q = transpose(AttnInput(g, "q", {c.b, c.sq, c.h, c.d}, c.dtype), {0, 2, 1, 3}, "q_heads");
    k = transpose(AttnInput(g, "k", {c.b, c.sk, hkv, c.d}, c.dtype),
                  k_rows ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{0, 2, 3, 1}, "k_heads");
    v = transpose(AttnInput(g, "v", {c.b, c.sk, hkv, c.dv}, c.dtype), {0, 2, 1, 3}, "v_heads");
  } else {
    q = AttnInput(g, "q", {c.b, c.h, c.sq, c.d}, c.dtype);
    k = AttnInput(g, "k", c.k_trans || sdpa ? Shape{c.b, hkv, c.sk, c.d} : Shape{c.b, hkv, c.d, c.sk}, c.dtype);
    v = AttnInput(g, "v", {c.b, hkv, c.sk, c.dv}, c.dtype);
  }
}

// The scores `x` with `c`'s mask (kAdd, kCausal, kWindows, kFill; the others
// unchanged), its inputs' values in `feeds` (random by `seed`).
inline Value* MaskScores(const AttnCase& c, Graph& g, Value* x, uint32_t seed, std::map<std::string, Tensor>& feeds) {
  std::mt19937 gen(seed);
  switch (c.mask) {
    case AttnMask::kNone:
    case AttnMask::kSdpa:
      return x;
    case AttnMask::kAdd: {
      Value* m = AttnInput(g, "mask", {c.b, 1, 1, c.sk}, c.dtype);
      std::vector<float> mv(c.b * c.sk);
      for (int64_t i = 0; i < c.b * c.sk; ++i) mv[i] = (i % c.sk != 0 && gen() % 4 == 0) ? -10000.f : 0.f;
      feeds["mask"] = Tensor::FromFloat(c.dtype, m->shape(), mv);
      return AttnNode(g, "Add", {x, m}, "add")->output(0);
    }
    case AttnMask::kCausal: {
      std::vector<float> mv(c.sq * c.sk);
      for (int64_t i = 0; i < c.sq; ++i)
        for (int64_t j = 0; j < c.sk; ++j) mv[i * c.sk + j] = j <= i ? 1.f : 0.f;
      Value* m = g.AddConstant("causal", Tensor::FromFloat(DType::kBool, {1, 1, c.sq, c.sk}, mv));
      Value* fill = g.AddConstant("fill", Tensor::FromFloat(c.dtype, {}, {-INFINITY}));
      return AttnNode(g, "Where", {m, x, fill}, "where")->output(0);
    }
    case AttnMask::kWindows: {
      auto ints = [&](const std::string& name, std::vector<int64_t> v) {
        return g.AddConstant(name, Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
      };
      Value* bias = g.AddConstant("bias", AttnRandom(c.dtype, {c.h, c.sq, c.sk}, 7, 1.f));
      x = AttnNode(g, "Add", {x, bias}, "add_bias")->output(0);
      x = AttnNode(g, "Reshape", {x, ints("windows_shape", {c.b / 2, 2, c.h, c.sq, c.sk})}, "to_windows")->output(0);
      Value* m = AttnInput(g, "wmask", {1, 2, 1, c.sq, c.sk}, c.dtype);
      std::vector<float> mv(NumElements(m->shape()));
      for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i >= mv.size() / 2 && gen() % 3 == 0) ? -100.f : 0.f;
      feeds["wmask"] = Tensor::FromFloat(c.dtype, m->shape(), mv);
      x = AttnNode(g, "Add", {x, m}, "add_windows")->output(0);
      return AttnNode(g, "Reshape", {x, ints("scores_shape", {c.b, c.h, c.sq, c.sk})}, "from_windows")->output(0);
    }
    case AttnMask::kFill: {
      Value* m = AttnInput(g, "cond", {c.b, c.h, c.sq, c.sk}, DType::kBool);
      std::vector<float> mv(NumElements(m->shape()));
      for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i % c.sk != 0 && gen() % 4 == 0) ? 1.f : 0.f;
      feeds["cond"] = Tensor::FromFloat(DType::kBool, m->shape(), mv);
      Value* fill = g.AddConstant("fill", Tensor::FromFloat(c.dtype, {}, {-65504.f}));
      return AttnNode(g, "Where", {m, fill, x}, "where")->output(0);
    }
  }
  return x;
}

// The graph of `c`, fused: `fuse` false leaves it unfused (the timing baseline).
inline absl::StatusOr<AttnBuilt> BuildAttention(const AttnCase& c, uint32_t seed, bool fuse = true) {
  AttnBuilt out;
  out.graph = std::make_unique<Graph>();
  Graph& g = *out.graph;
  Value* q = nullptr;
  Value* k = nullptr;
  Value* v = nullptr;
  const bool sdpa = c.mask == AttnMask::kSdpa;
  AttnOperands(c, g, q, k, v);
  for (const char* name : {"q", "k", "v", "qkv"}) {
    const Value* in = g.FindValue(name);
    if (in == nullptr || in->producer() != nullptr) continue;
    out.feeds[name] = AttnRandom(c.dtype, in->shape(), seed + (name[0] == 'q' ? 0 : name[0] == 'k' ? 1 : 2));
  }
  Value* scale = g.AddConstant("scale", Tensor::FromFloat(c.dtype, {}, {std::sqrt(static_cast<float>(c.d))}));
  if (c.mask == AttnMask::kFill) {
    Value* qscale = scale;
    if (c.q_scale_input) {
      qscale = AttnInput(g, "qscale", {}, c.dtype);
      out.feeds["qscale"] = scale->constant();
    }
    q = AttnNode(g, "Div", {q, qscale}, "qdiv")->output(0);
  }
  Value* x = nullptr;
  if (sdpa) {
    x = SdpaScores(c, g, q, k, v, out.feeds);
  } else {
    Node* mm1 = AttnNode(g, "MatMul", {q, k}, "scores");
    if (c.k_trans) mm1->SetAttr("trans_b", 1);
    x = mm1->output(0);
    if (c.mask != AttnMask::kFill) x = AttnNode(g, "Div", {x, scale}, "div")->output(0);
  }
  x = MaskScores(c, g, x, seed + 3, out.feeds);
  Node* sm = AttnNode(g, "Softmax", {x}, "softmax");
  sm->SetAttr("axis", int64_t{-1});
  Value* p = sm->output(0);
  if (sdpa) {
    Value* nan = AttnNode(g, "IsNaN", {p}, "isnan")->output(0);
    Value* zero = g.AddConstant("zero", Tensor::FromFloat(c.dtype, {}, {0.f}));
    p = AttnNode(g, "Where", {nan, zero, p}, "guard")->output(0);
  }
  Node* mm2 = AttnNode(g, "MatMul", {p, v}, "context");
  if (c.heads) {
    Node* t = AttnNode(g, "Transpose", {mm2->output(0)}, "merge_heads");
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
  // Views the group left outside (an Unsqueeze ahead of repeat_kv's Expand): their
  // values join the feeds, so that every group input has one.
  for (Node* n : g.nodes()) {
    if (n == out.group) break;
    std::vector<const Tensor*> ins;
    for (const Value* in : n->inputs()) {
      ins.push_back(in == nullptr ? nullptr : in->is_constant() ? &in->constant() : &out.feeds.at(in->name()));
    }
    absl::StatusOr<std::vector<Tensor>> outs = EvaluateNode(*n, ins);
    if (!outs.ok()) return outs.status();
    for (int i = 0; i < n->num_outputs(); ++i) out.feeds[n->output(i)->name()] = (*outs)[i];
  }
  return out;
}

}  // namespace kiln::codegen::test
