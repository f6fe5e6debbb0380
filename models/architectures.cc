// Model generators: each builds its graph with ModelBuilder in the op pattern that
// torch.onnx exports for the PyTorch module it stands for.
#include "models/architectures.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "models/model_builder.h"

namespace kiln::models {
namespace {

using onnx::TensorProto;

// Which size options a model takes, with their defaults (-1: derived, see Resolve), and
// the longest sequence its position table holds (0: no table).
struct ModelSpec {
  const char* name;
  std::map<std::string, int64_t> defaults;
  int64_t max_seq = 0;
};

const std::vector<ModelSpec>& Specs() {
  static const auto* specs = new std::vector<ModelSpec>{
      {"mlp", {{"batch", 1}, {"hidden", 512}}},
      {"tiny_cnn", {{"batch", 1}}},
      {"bert_layer", {{"batch", 1}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 1}}},
      {"bert_base",
       {{"batch", 1}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 12}, {"vocab", 30522}}},
      {"gpt2_block", {{"batch", 8}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 1}}},
      // distilbert-base-uncased: max_position_embeddings 512.
      {"distilbert",
       {{"batch", 1}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 6}, {"vocab", 30522}},
       512},
      // GPT-2 small: n_positions 1024, vocabulary 50257.
      {"gpt2",
       {{"batch", 8}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 12}, {"vocab", 50257}},
       1024},
      {"vit_b16",
       {{"batch", 1}, {"image", 224}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 12}, {"classes", 1000}}},
      {"resnet50", {{"batch", 1}, {"image", 224}, {"width", 64}, {"classes", 1000}, {"batchnorm", 0}}},
      {"mobilenet_v2", {{"batch", 1}, {"image", 224}, {"classes", 1000}, {"batchnorm", 0}}},
  };
  return *specs;
}

std::optional<int64_t>* Field(ModelOptions& o, const std::string& key) {
  if (key == "batch") return &o.batch;
  if (key == "seq") return &o.seq;
  if (key == "hidden") return &o.hidden;
  if (key == "heads") return &o.heads;
  if (key == "ffn") return &o.ffn;
  if (key == "layers") return &o.layers;
  if (key == "vocab") return &o.vocab;
  if (key == "image") return &o.image;
  if (key == "classes") return &o.classes;
  if (key == "width") return &o.width;
  if (key == "batchnorm") return &o.batchnorm;
  return nullptr;
}

constexpr const char* kFieldNames[] = {"batch", "seq",   "hidden",  "heads", "ffn",      "layers",
                                       "vocab", "image", "classes", "width", "batchnorm"};

// ViT-B/16's patch size.
constexpr int64_t kVitPatch = 16;

// ---------------------------------------------------------------------------
// mlp: x[B,256] -> Gemm(512) -> Relu -> Gemm(10) -> Softmax.

constexpr int64_t kMlpInputs = 256;
constexpr int64_t kClasses = 10;

void BuildMlp(ModelBuilder& b, const ModelOptions& o) {
  const int64_t batch = *o.batch, hidden = *o.hidden;
  const std::string x = b.AddInput("x", TensorProto::FLOAT, {batch, kMlpInputs});
  std::string h = LinearGemm(b, "/fc1", x, kMlpInputs, hidden);
  h = b.Op("Relu", "/relu/Relu", {h});
  h = LinearGemm(b, "/fc2", h, hidden, kClasses);
  h = b.Op("Softmax", "/softmax/Softmax", {h}, {AttrInt("axis", -1)});
  b.AddOutput(b.RenameValue(h, "probs"), TensorProto::FLOAT, {batch, kClasses});
}

// ---------------------------------------------------------------------------
// tiny_cnn: x[B,3,32,32] -> Conv3x3(16)+BN+Relu -> MaxPool2 -> Conv3x3(32)+BN+Relu
//           -> GlobalAveragePool -> Flatten -> Gemm(10).

std::string ConvBnRelu(ModelBuilder& b, int index, const std::string& x, int64_t in_channels, int64_t out_channels) {
  const std::string conv = absl::StrCat("conv", index), bn = absl::StrCat("bn", index);
  // Conv before BatchNorm has no bias (bias=False), as in ResNet-style PyTorch modules.
  const std::string w = b.AddWeight(absl::StrCat(conv, ".weight"), {out_channels, in_channels, 3, 3}, in_channels * 9);
  std::string h = b.Op("Conv", absl::StrCat("/", conv, "/Conv"), {x, w},
                       {AttrInts("dilations", {1, 1}), AttrInt("group", 1), AttrInts("kernel_shape", {3, 3}),
                        AttrInts("pads", {1, 1, 1, 1}), AttrInts("strides", {1, 1})});
  const std::string scale = b.AddRandomNormal(absl::StrCat(bn, ".weight"), {out_channels}, 0.1f, 1.f);
  const std::string bias = b.AddRandomNormal(absl::StrCat(bn, ".bias"), {out_channels}, 0.1f);
  const std::string mean = b.AddRandomNormal(absl::StrCat(bn, ".running_mean"), {out_channels}, 0.1f);
  const std::string var = b.AddRandomUniform(absl::StrCat(bn, ".running_var"), {out_channels}, 0.5f, 1.5f);
  h = b.Op("BatchNormalization", absl::StrCat("/", bn, "/BatchNormalization"), {h, scale, bias, mean, var},
           {AttrFloat("epsilon", 1e-5f), AttrFloat("momentum", 0.9f)});
  return b.Op("Relu", absl::StrCat("/relu", index, "/Relu"), {h});
}

void BuildTinyCnn(ModelBuilder& b, const ModelOptions& o) {
  const int64_t batch = *o.batch;
  const std::string x = b.AddInput("x", TensorProto::FLOAT, {batch, 3, 32, 32});
  std::string h = ConvBnRelu(b, 1, x, 3, 16);
  h = b.Op("MaxPool", "/pool/MaxPool", {h},
           {AttrInt("ceil_mode", 0), AttrInts("kernel_shape", {2, 2}), AttrInts("pads", {0, 0, 0, 0}),
            AttrInts("strides", {2, 2})});
  h = ConvBnRelu(b, 2, h, 16, 32);
  h = b.Op("GlobalAveragePool", "/gap/GlobalAveragePool", {h});
  h = b.Op("Flatten", "/flatten/Flatten", {h}, {AttrInt("axis", 1)});
  h = LinearGemm(b, "/fc", h, 32, kClasses);
  b.AddOutput(b.RenameValue(h, "logits"), TensorProto::FLOAT, {batch, kClasses});
}

// ---------------------------------------------------------------------------
// Attention core shared by BERT and GPT-2: q, k, v are [B,S,H] projections.

struct AttentionDims {
  int64_t batch, seq, hidden, heads;
  int64_t head_dim() const { return hidden / heads; }
};

// Constants shared by every layer: Reshape targets as int64 initializers, the way
// torch.onnx exports view() with static shapes.
struct AttentionConstants {
  std::string heads_shape;   // [B,S,A,D]
  std::string merged_shape;  // [B,S,H]
  std::string scale;         // sqrt(D), the divisor of QK^T
};

AttentionConstants AddAttentionConstants(ModelBuilder& b, const AttentionDims& d) {
  AttentionConstants c;
  c.heads_shape = b.AddInt64Vector("attention.heads_shape", {d.batch, d.seq, d.heads, d.head_dim()});
  c.merged_shape = b.AddInt64Vector("attention.merged_shape", {d.batch, d.seq, d.hidden});
  c.scale = b.AddScalar("attention.scale", static_cast<float>(std::sqrt(static_cast<double>(d.head_dim()))));
  return c;
}

// Reshape [B,S,H] -> [B,S,A,D] + Transpose(perm). `index` numbers the nodes
// (Reshape, Reshape_1, ...) as torch.onnx does within one module.
std::string SplitHeads(ModelBuilder& b, absl::string_view prefix, const std::string& x, const AttentionConstants& c,
                       int index, const std::vector<int64_t>& perm) {
  const std::string suffix = index == 0 ? "" : absl::StrCat("_", index);
  const std::string r = b.Op("Reshape", absl::StrCat(prefix, "/Reshape", suffix), {x, c.heads_shape});
  return b.Op("Transpose", absl::StrCat(prefix, "/Transpose", suffix), {r}, {AttrInts("perm", perm)});
}

// scores = Q K^T / sqrt(D); `mask` turns scores into masked scores; then Softmax,
// P V, Transpose back and Reshape to [B,S,H]. Node indices continue after SplitHeads'.
template <typename MaskFn>
std::string AttentionCore(ModelBuilder& b, absl::string_view prefix, const std::string& q, const std::string& k_t,
                          const std::string& v, const AttentionConstants& c, MaskFn mask) {
  std::string s = b.Op("MatMul", absl::StrCat(prefix, "/MatMul"), {q, k_t});
  s = b.Op("Div", absl::StrCat(prefix, "/Div"), {s, c.scale});
  s = mask(s);
  const std::string p = b.Op("Softmax", absl::StrCat(prefix, "/Softmax"), {s}, {AttrInt("axis", -1)});
  std::string ctx = b.Op("MatMul", absl::StrCat(prefix, "/MatMul_1"), {p, v});
  ctx = b.Op("Transpose", absl::StrCat(prefix, "/Transpose_3"), {ctx}, {AttrInts("perm", {0, 2, 1, 3})});
  return b.Op("Reshape", absl::StrCat(prefix, "/Reshape_3"), {ctx, c.merged_shape});
}

// ---------------------------------------------------------------------------
// BERT (HF BertLayer, post-LN).

constexpr float kBertLayerNormEps = 1e-12f;

std::string BertLayer(ModelBuilder& b, int layer, const std::string& x, const std::string& mask, const AttentionDims& d,
                      int64_t ffn, const AttentionConstants& c) {
  const std::string lp = absl::StrCat("/encoder/layer.", layer);
  const std::string self = absl::StrCat(lp, "/attention/self");
  const std::string q = LinearMatMul(b, absl::StrCat(self, "/query"), x, d.hidden, d.hidden);
  const std::string k = LinearMatMul(b, absl::StrCat(self, "/key"), x, d.hidden, d.hidden);
  const std::string v = LinearMatMul(b, absl::StrCat(self, "/value"), x, d.hidden, d.hidden);
  // K's transpose(0,2,1,3) and transpose(-1,-2) reach ONNX as one Transpose(0,2,3,1).
  const std::string qh = SplitHeads(b, self, q, c, 0, {0, 2, 1, 3});
  const std::string kh = SplitHeads(b, self, k, c, 1, {0, 2, 3, 1});
  const std::string vh = SplitHeads(b, self, v, c, 2, {0, 2, 1, 3});
  const std::string ctx = AttentionCore(b, self, qh, kh, vh, c, [&](const std::string& s) {
    return b.Op("Add", absl::StrCat(self, "/Add"), {s, mask});
  });
  const std::string out = absl::StrCat(lp, "/attention/output");
  std::string h = LinearMatMul(b, absl::StrCat(out, "/dense"), ctx, d.hidden, d.hidden);
  h = b.Op("Add", absl::StrCat(out, "/Add"), {h, x});
  const std::string attn_out = LayerNorm(b, absl::StrCat(out, "/LayerNorm"), h, d.hidden, kBertLayerNormEps);

  h = LinearMatMul(b, absl::StrCat(lp, "/intermediate/dense"), attn_out, d.hidden, ffn);
  h = GeluErf(b, absl::StrCat(lp, "/intermediate/intermediate_act_fn"), h);
  const std::string fo = absl::StrCat(lp, "/output");
  h = LinearMatMul(b, absl::StrCat(fo, "/dense"), h, ffn, d.hidden);
  h = b.Op("Add", absl::StrCat(fo, "/Add"), {h, attn_out});
  return LayerNorm(b, absl::StrCat(fo, "/LayerNorm"), h, d.hidden, kBertLayerNormEps);
}

void BuildBert(ModelBuilder& b, const ModelOptions& o, bool with_embeddings) {
  const AttentionDims d{*o.batch, *o.seq, *o.hidden, *o.heads};
  std::string h;
  if (with_embeddings) {
    const std::string ids = b.AddInput("input_ids", TensorProto::INT64, {d.batch, d.seq});
    const std::string table = b.AddRandomNormal("embeddings.word_embeddings.weight", {*o.vocab, d.hidden}, 0.02f);
    // position_embeddings(position_ids[:, :S]) is constant: torch.onnx folds it into a
    // [1,S,H] initializer.
    const std::string pos = b.AddRandomNormal("embeddings.position_embeddings", {1, d.seq, d.hidden}, 0.02f);
    h = b.Op("Gather", "/embeddings/word_embeddings/Gather", {table, ids}, {AttrInt("axis", 0)});
    h = b.Op("Add", "/embeddings/Add", {h, pos});
    h = LayerNorm(b, "/embeddings/LayerNorm", h, d.hidden, kBertLayerNormEps);
  } else {
    h = b.AddInput("hidden_states", TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
  }
  const std::string mask = b.AddInput("attention_mask", TensorProto::FLOAT, {d.batch, 1, 1, d.seq});
  const AttentionConstants c = AddAttentionConstants(b, d);
  for (int layer = 0; layer < *o.layers; ++layer) h = BertLayer(b, layer, h, mask, d, *o.ffn, c);
  b.AddOutput(b.RenameValue(h, "last_hidden_state"), TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
}

// ---------------------------------------------------------------------------
// GPT-2 (HF GPT2Block, pre-LN; eager attention).

constexpr float kGpt2LayerNormEps = 1e-5f;

// Constants every GPT-2 block shares.
struct Gpt2Constants {
  AttentionConstants attn;
  std::string causal;        // bool [1,1,S,S], lower-triangular
  std::string masked_value;  // finfo(float32).min
  // HF Conv1D's views around addmm (gpt2 only): x.view(-1, in) and .view(B, S, out).
  std::string flat_hidden, flat_ffn, out_qkv, out_hidden, out_ffn;
};

Gpt2Constants AddGpt2Constants(ModelBuilder& b, const AttentionDims& d, int64_t ffn, bool conv1d) {
  Gpt2Constants c;
  c.attn = AddAttentionConstants(b, d);
  // GPT2Attention's `bias` buffer: the lower-triangular causal mask; masked scores
  // become torch.finfo(float32).min, as HF's _attn does with torch.where.
  std::vector<bool> tril(d.seq * d.seq);
  for (int64_t i = 0; i < d.seq; ++i) {
    for (int64_t j = 0; j < d.seq; ++j) tril[i * d.seq + j] = j <= i;
  }
  c.causal = b.AddBoolInitializer("attn.causal_mask", {1, 1, d.seq, d.seq}, tril);
  c.masked_value = b.AddScalar("attn.masked_value", std::numeric_limits<float>::lowest());
  if (conv1d) {
    c.flat_hidden = b.AddInt64Vector("conv1d.flat_shape", {-1, d.hidden});
    c.flat_ffn = b.AddInt64Vector("conv1d.flat_shape_ffn", {-1, ffn});
    c.out_qkv = b.AddInt64Vector("conv1d.out_shape_qkv", {d.batch, d.seq, 3 * d.hidden});
    c.out_hidden = c.attn.merged_shape;  // [B,S,H]
    c.out_ffn = b.AddInt64Vector("conv1d.out_shape_ffn", {d.batch, d.seq, ffn});
  }
  return c;
}

// HF Conv1D: x.view(-1, in) -> torch.addmm(bias, x, W[in,out]) -> .view(B, S, out).
// torch.onnx exports addmm on 2-D operands as Gemm (alpha 1, beta 1, no transposes).
std::string Conv1D(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t in_features,
                   int64_t out_features, const std::string& flat_shape, const std::string& out_shape) {
  const std::string w = b.AddWeight(ParamName(prefix, "weight"), {in_features, out_features}, in_features);
  const std::string bias = b.AddRandomNormal(ParamName(prefix, "bias"), {out_features}, 0.1f);
  std::string h = b.Op("Reshape", absl::StrCat(prefix, "/Reshape"), {x, flat_shape});
  h = b.Op("Gemm", absl::StrCat(prefix, "/Gemm"), {h, w, bias}, {AttrFloat("alpha", 1.f), AttrFloat("beta", 1.f)});
  return b.Op("Reshape", absl::StrCat(prefix, "/Reshape_1"), {h, out_shape});
}

// One block at node scope `lp` ("/h.0" or "/transformer/h.0"). conv1d: the projections
// are HF Conv1D (Reshape, Gemm, Reshape) as in the real export; otherwise nn.Linear's
// MatMul + Add (gpt2_block's long-standing form).
std::string Gpt2Block(ModelBuilder& b, absl::string_view lp, const std::string& x, const AttentionDims& d, int64_t ffn,
                      const Gpt2Constants& c, bool conv1d) {
  const std::string attn = absl::StrCat(lp, "/attn");
  auto linear = [&](absl::string_view prefix, const std::string& in, int64_t in_features, int64_t out_features,
                    const std::string& flat_shape, const std::string& out_shape) {
    return conv1d ? Conv1D(b, prefix, in, in_features, out_features, flat_shape, out_shape)
                  : LinearMatMul(b, prefix, in, in_features, out_features);
  };
  std::string h = LayerNorm(b, absl::StrCat(lp, "/ln_1"), x, d.hidden, kGpt2LayerNormEps);
  const std::string qkv = linear(absl::StrCat(attn, "/c_attn"), h, d.hidden, 3 * d.hidden, c.flat_hidden, c.out_qkv);
  std::vector<std::string> parts;
  if (b.opset() >= 13) {
    const std::string sizes = b.AddInt64Vector(ParamName(attn, "split_sizes"), {d.hidden, d.hidden, d.hidden});
    parts = b.AddNode("Split", absl::StrCat(attn, "/Split"), {qkv, sizes}, 3, {AttrInt("axis", 2)});
  } else {
    parts = b.AddNode("Split", absl::StrCat(attn, "/Split"), {qkv}, 3,
                      {AttrInt("axis", 2), AttrInts("split", {d.hidden, d.hidden, d.hidden})});
  }
  const std::string qh = SplitHeads(b, attn, parts[0], c.attn, 0, {0, 2, 1, 3});
  const std::string kh = SplitHeads(b, attn, parts[1], c.attn, 1, {0, 2, 3, 1});
  const std::string vh = SplitHeads(b, attn, parts[2], c.attn, 2, {0, 2, 1, 3});
  const std::string ctx = AttentionCore(b, attn, qh, kh, vh, c.attn, [&](const std::string& s) {
    return b.Op("Where", absl::StrCat(attn, "/Where"), {c.causal, s, c.masked_value});
  });
  h = linear(absl::StrCat(attn, "/c_proj"), ctx, d.hidden, d.hidden, c.flat_hidden, c.out_hidden);
  const std::string resid = b.Op("Add", absl::StrCat(lp, "/Add"), {h, x});

  h = LayerNorm(b, absl::StrCat(lp, "/ln_2"), resid, d.hidden, kGpt2LayerNormEps);
  h = linear(absl::StrCat(lp, "/mlp/c_fc"), h, d.hidden, ffn, c.flat_hidden, c.out_ffn);
  h = GeluTanh(b, absl::StrCat(lp, "/mlp/act"), h);
  h = linear(absl::StrCat(lp, "/mlp/c_proj"), h, ffn, d.hidden, c.flat_ffn, c.out_hidden);
  return b.Op("Add", absl::StrCat(lp, "/Add_1"), {resid, h});
}

void BuildGpt2Block(ModelBuilder& b, const ModelOptions& o) {
  const AttentionDims d{*o.batch, *o.seq, *o.hidden, *o.heads};
  std::string h = b.AddInput("hidden_states", TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
  const Gpt2Constants c = AddGpt2Constants(b, d, *o.ffn, /*conv1d=*/false);
  for (int layer = 0; layer < *o.layers; ++layer) {
    h = Gpt2Block(b, absl::StrCat("/h.", layer), h, d, *o.ffn, c, /*conv1d=*/false);
  }
  b.AddOutput(b.RenameValue(h, "output"), TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
}

// Position ids 0..S-1 as torch.onnx leaves them: a constant [1,S] int64 tensor (the
// Range/Slice before it folds; the Gather with 2-D indices after it does not).
std::string AddPositionIds(ModelBuilder& b, absl::string_view name, int64_t seq) {
  std::vector<int64_t> ids(seq);
  for (int64_t i = 0; i < seq; ++i) ids[i] = i;
  return b.AddInt64Initializer(name, {1, seq}, ids);
}

// GPT2LMHeadModel (GPT-2 small at the defaults), use_cache=False, eager attention.
void BuildGpt2(ModelBuilder& b, const ModelOptions& o) {
  const AttentionDims d{*o.batch, *o.seq, *o.hidden, *o.heads};
  const int64_t vocab = *o.vocab, positions = 1024;
  const std::string ids = b.AddInput("input_ids", TensorProto::INT64, {d.batch, d.seq});
  // GPT2Model: input_ids.view(-1, input_shape[-1]).
  const std::string ids_2d =
      b.Op("Reshape", "/transformer/Reshape", {ids, b.AddInt64Vector("transformer.input_ids_shape", {-1, d.seq})});
  // wte is tied to lm_head: the Gather reads it as [V,H]; lm_head's Linear exports as
  // MatMul(h, Transpose(W)), and constant folding stores that transpose as its own
  // [H,V] initializer.
  const std::vector<float> wte = b.RandomNormalValues("transformer.wte.weight", vocab * d.hidden, 0.02f);
  std::vector<float> wte_t(wte.size());
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t i = 0; i < d.hidden; ++i) wte_t[i * vocab + v] = wte[v * d.hidden + i];
  }
  const std::string wte_init = b.AddFloatInitializer("transformer.wte.weight", {vocab, d.hidden}, wte);
  const std::string wpe = b.AddRandomNormal("transformer.wpe.weight", {positions, d.hidden}, 0.02f);
  std::string h = b.Op("Gather", "/transformer/wte/Gather", {wte_init, ids_2d}, {AttrInt("axis", 0)});
  const std::string pos = b.Op("Gather", "/transformer/wpe/Gather",
                               {wpe, AddPositionIds(b, "transformer.position_ids", d.seq)}, {AttrInt("axis", 0)});
  h = b.Op("Add", "/transformer/Add", {h, pos});
  const Gpt2Constants c = AddGpt2Constants(b, d, *o.ffn, /*conv1d=*/true);
  for (int layer = 0; layer < *o.layers; ++layer) {
    h = Gpt2Block(b, absl::StrCat("/transformer/h.", layer), h, d, *o.ffn, c, /*conv1d=*/true);
  }
  h = LayerNorm(b, "/transformer/ln_f", h, d.hidden, kGpt2LayerNormEps);
  // GPT2Model: hidden_states.view(output_shape).
  h = b.Op("Reshape", "/transformer/Reshape_1", {h, c.attn.merged_shape});
  const std::string lm_head = b.AddFloatInitializer("lm_head.weight_transposed", {d.hidden, vocab}, wte_t);
  h = b.Op("MatMul", "/lm_head/MatMul", {h, lm_head});
  b.AddOutput(b.RenameValue(h, "logits"), TensorProto::FLOAT, {d.batch, d.seq, vocab});
}

// ---------------------------------------------------------------------------
// DistilBERT (HF DistilBertModel, post-LN; eager MultiHeadSelfAttention).

constexpr float kDistilBertLayerNormEps = 1e-12f;
constexpr int64_t kDistilBertPositions = 512;

struct DistilBertConstants {
  std::string heads_shape;   // [B,-1,A,D]: x.view(bs, -1, n_heads, dim_per_head)
  std::string merged_shape;  // [B,-1,H]
  std::string scale;         // sqrt(D), the divisor of q
  std::string zero;          // int64 0 of (mask == 0)
  std::string mask_shape;    // [B,1,1,S]
  std::string scores_shape;  // [B,A,S,S]: expand_as(scores)
  std::string fill;          // torch.finfo(float32).min
};

std::string DistilBertLayer(ModelBuilder& b, int layer, const std::string& x, const std::string& mask,
                            const AttentionDims& d, int64_t ffn, const DistilBertConstants& c) {
  const std::string lp = absl::StrCat("/transformer/layer.", layer);
  const std::string a = absl::StrCat(lp, "/attention");
  auto op = [&](absl::string_view type, absl::string_view leaf, const std::vector<std::string>& in,
                const std::vector<onnx::AttributeProto>& attrs = {}) {
    return b.Op(type, absl::StrCat(a, "/", leaf), in, attrs);
  };
  const auto perm_0213 = AttrInts("perm", {0, 2, 1, 3});
  // Node order as exported: q = shape(q_lin(x)), k, v likewise; q / sqrt(D); then
  // k.transpose(2, 3), which torch's peephole merges with shape(k)'s transpose into
  // one Transpose(0,2,3,1) at the later position.
  std::string q = LinearMatMul(b, absl::StrCat(a, "/q_lin"), x, d.hidden, d.hidden);
  q = op("Transpose", "Transpose", {op("Reshape", "Reshape", {q, c.heads_shape})}, {perm_0213});
  std::string k = LinearMatMul(b, absl::StrCat(a, "/k_lin"), x, d.hidden, d.hidden);
  k = op("Reshape", "Reshape_1", {k, c.heads_shape});
  std::string v = LinearMatMul(b, absl::StrCat(a, "/v_lin"), x, d.hidden, d.hidden);
  v = op("Transpose", "Transpose_1", {op("Reshape", "Reshape_2", {v, c.heads_shape})}, {perm_0213});
  q = op("Div", "Div", {q, c.scale});
  k = op("Transpose", "Transpose_2", {k}, {AttrInts("perm", {0, 2, 3, 1})});
  std::string s = op("MatMul", "MatMul", {q, k});
  // mask = (mask == 0).view(bs, 1, 1, k_length).expand_as(scores);
  // scores.masked_fill(mask, finfo.min): masked_fill's symbolic casts the mask to bool.
  std::string m = op("Equal", "Equal", {mask, c.zero});
  m = op("Reshape", "Reshape_3", {m, c.mask_shape});
  m = op("Expand", "Expand", {m, c.scores_shape});
  m = op("Cast", "Cast", {m}, {AttrInt("to", TensorProto::BOOL)});
  s = op("Where", "Where", {m, c.fill, s});
  const std::string p = op("Softmax", "Softmax", {s}, {AttrInt("axis", -1)});
  std::string ctx = op("MatMul", "MatMul_1", {p, v});
  ctx = op("Reshape", "Reshape_4", {op("Transpose", "Transpose_3", {ctx}, {perm_0213}), c.merged_shape});
  std::string h = LinearMatMul(b, absl::StrCat(a, "/out_lin"), ctx, d.hidden, d.hidden);
  h = b.Op("Add", absl::StrCat(lp, "/Add"), {h, x});  // sa_output + x
  const std::string sa = LayerNorm(b, absl::StrCat(lp, "/sa_layer_norm"), h, d.hidden, kDistilBertLayerNormEps);
  h = LinearMatMul(b, absl::StrCat(lp, "/ffn/lin1"), sa, d.hidden, ffn);
  h = GeluErf(b, absl::StrCat(lp, "/ffn/activation"), h);
  h = LinearMatMul(b, absl::StrCat(lp, "/ffn/lin2"), h, ffn, d.hidden);
  h = b.Op("Add", absl::StrCat(lp, "/Add_1"), {h, sa});  // ffn_output + sa_output
  return LayerNorm(b, absl::StrCat(lp, "/output_layer_norm"), h, d.hidden, kDistilBertLayerNormEps);
}

void BuildDistilBert(ModelBuilder& b, const ModelOptions& o) {
  const AttentionDims d{*o.batch, *o.seq, *o.hidden, *o.heads};
  const std::string ids = b.AddInput("input_ids", TensorProto::INT64, {d.batch, d.seq});
  const std::string mask = b.AddInput("attention_mask", TensorProto::INT64, {d.batch, d.seq});
  const std::string words = b.AddRandomNormal("embeddings.word_embeddings.weight", {*o.vocab, d.hidden}, 0.02f);
  const std::string positions =
      b.AddRandomNormal("embeddings.position_embeddings.weight", {kDistilBertPositions, d.hidden}, 0.02f);
  std::string h = b.Op("Gather", "/embeddings/word_embeddings/Gather", {words, ids}, {AttrInt("axis", 0)});
  const std::string pos = b.Op("Gather", "/embeddings/position_embeddings/Gather",
                               {positions, AddPositionIds(b, "embeddings.position_ids", d.seq)}, {AttrInt("axis", 0)});
  h = b.Op("Add", "/embeddings/Add", {h, pos});
  h = LayerNorm(b, "/embeddings/LayerNorm", h, d.hidden, kDistilBertLayerNormEps);
  DistilBertConstants c;
  c.heads_shape = b.AddInt64Vector("attention.heads_shape", {d.batch, -1, d.heads, d.head_dim()});
  c.merged_shape = b.AddInt64Vector("attention.merged_shape", {d.batch, -1, d.hidden});
  c.scale = b.AddScalar("attention.scale", static_cast<float>(std::sqrt(static_cast<double>(d.head_dim()))));
  c.zero = b.AddInt64Initializer("attention.mask_zero", {}, {0});
  c.mask_shape = b.AddInt64Vector("attention.mask_shape", {d.batch, 1, 1, d.seq});
  c.scores_shape = b.AddInt64Vector("attention.scores_shape", {d.batch, d.heads, d.seq, d.seq});
  c.fill = b.AddScalar("attention.masked_value", std::numeric_limits<float>::lowest());
  for (int layer = 0; layer < *o.layers; ++layer) h = DistilBertLayer(b, layer, h, mask, d, *o.ffn, c);
  b.AddOutput(b.RenameValue(h, "last_hidden_state"), TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
}

// ---------------------------------------------------------------------------
// ViT-B/16 (HF ViTForImageClassification, pre-LN; eager attention).

constexpr float kVitLayerNormEps = 1e-12f;

std::string VitLayer(ModelBuilder& b, int layer, const std::string& x, const AttentionDims& d, int64_t ffn,
                     const AttentionConstants& c) {
  const std::string lp = absl::StrCat("/vit/encoder/layer.", layer);
  const std::string sa = absl::StrCat(lp, "/attention/attention");
  auto op = [&](absl::string_view type, absl::string_view leaf, const std::vector<std::string>& in,
                const std::vector<onnx::AttributeProto>& attrs = {}) {
    return b.Op(type, absl::StrCat(sa, "/", leaf), in, attrs);
  };
  const auto perm_0213 = AttrInts("perm", {0, 2, 1, 3});
  const std::string n1 = LayerNorm(b, absl::StrCat(lp, "/layernorm_before"), x, d.hidden, kVitLayerNormEps);
  // ViTSelfAttention: mixed_query = query(x); key = transpose_for_scores(key(x));
  // value likewise; query = transpose_for_scores(mixed_query); key.transpose(-1, -2)
  // merges with key's permute into Transpose(0,2,3,1).
  const std::string q_lin = LinearMatMul(b, absl::StrCat(sa, "/query"), n1, d.hidden, d.hidden);
  std::string k =
      op("Reshape", "Reshape", {LinearMatMul(b, absl::StrCat(sa, "/key"), n1, d.hidden, d.hidden), c.heads_shape});
  std::string v = LinearMatMul(b, absl::StrCat(sa, "/value"), n1, d.hidden, d.hidden);
  v = op("Transpose", "Transpose", {op("Reshape", "Reshape_1", {v, c.heads_shape})}, {perm_0213});
  const std::string q =
      op("Transpose", "Transpose_1", {op("Reshape", "Reshape_2", {q_lin, c.heads_shape})}, {perm_0213});
  k = op("Transpose", "Transpose_2", {k}, {AttrInts("perm", {0, 2, 3, 1})});
  std::string s = op("Div", "Div", {op("MatMul", "MatMul", {q, k}), c.scale});
  s = op("Softmax", "Softmax", {s}, {AttrInt("axis", -1)});
  std::string ctx = op("MatMul", "MatMul_1", {s, v});
  ctx = op("Reshape", "Reshape_3", {op("Transpose", "Transpose_3", {ctx}, {perm_0213}), c.merged_shape});
  std::string h = LinearMatMul(b, absl::StrCat(lp, "/attention/output/dense"), ctx, d.hidden, d.hidden);
  const std::string resid = b.Op("Add", absl::StrCat(lp, "/Add"), {h, x});  // attention_output + hidden_states
  h = LayerNorm(b, absl::StrCat(lp, "/layernorm_after"), resid, d.hidden, kVitLayerNormEps);
  h = LinearMatMul(b, absl::StrCat(lp, "/intermediate/dense"), h, d.hidden, ffn);
  h = GeluErf(b, absl::StrCat(lp, "/intermediate/intermediate_act_fn"), h);
  h = LinearMatMul(b, absl::StrCat(lp, "/output/dense"), h, ffn, d.hidden);
  return b.Op("Add", absl::StrCat(lp, "/output/Add"), {h, resid});  // ViTOutput: hidden_states + input_tensor
}

void BuildVit(ModelBuilder& b, const ModelOptions& o) {
  const int64_t batch = *o.batch, image = *o.image, hidden = *o.hidden, grid = image / kVitPatch;
  const int64_t tokens = grid * grid + 1;
  const AttentionDims d{batch, tokens, hidden, *o.heads};
  const std::string x = b.AddInput("pixel_values", TensorProto::FLOAT, {batch, 3, image, image});
  const std::string pe = "/vit/embeddings/patch_embeddings";
  const std::string w = b.AddWeight("vit.embeddings.patch_embeddings.projection.weight",
                                    {hidden, 3, kVitPatch, kVitPatch}, 3 * kVitPatch * kVitPatch);
  const std::string bias = b.AddRandomNormal("vit.embeddings.patch_embeddings.projection.bias", {hidden}, 0.1f);
  std::string h = Conv2d(b, absl::StrCat(pe, "/projection/Conv"), x, w, bias, kVitPatch, kVitPatch, 0, 1);
  // .flatten(2) (torch's flatten helper: Reshape to [B,H,-1]) then .transpose(1, 2).
  h = b.Op("Reshape", absl::StrCat(pe, "/Reshape"),
           {h, b.AddInt64Vector("vit.embeddings.patch_shape", {batch, hidden, -1})});
  h = b.Op("Transpose", absl::StrCat(pe, "/Transpose"), {h}, {AttrInts("perm", {0, 2, 1})});
  // cls_token.expand(B, -1, -1): torch.onnx does not constant-fold Expand, so the node
  // stays in the file (kiln folds it on import).
  std::string cls = b.AddRandomNormal("vit.embeddings.cls_token", {1, 1, hidden}, 0.02f);
  cls = b.Op("Expand", "/vit/embeddings/Expand", {cls, b.AddInt64Vector("vit.embeddings.cls_shape", {batch, 1, 1})});
  h = b.Op("Concat", "/vit/embeddings/Concat", {cls, h}, {AttrInt("axis", 1)});
  h = b.Op("Add", "/vit/embeddings/Add",
           {h, b.AddRandomNormal("vit.embeddings.position_embeddings", {1, tokens, hidden}, 0.02f)});
  const AttentionConstants c = AddAttentionConstants(b, d);
  for (int layer = 0; layer < *o.layers; ++layer) h = VitLayer(b, layer, h, d, *o.ffn, c);
  h = LayerNorm(b, "/vit/layernorm", h, hidden, kVitLayerNormEps);
  // sequence_output[:, 0, :]: the full slices vanish, select() is a Gather with a scalar index.
  h = b.Op("Gather", "/Gather", {h, b.AddInt64Initializer("classifier.token_index", {}, {0})}, {AttrInt("axis", 1)});
  h = LinearGemm(b, "/classifier", h, hidden, *o.classes);
  b.AddOutput(b.RenameValue(h, "logits"), TensorProto::FLOAT, {batch, *o.classes});
}

// ---------------------------------------------------------------------------
// ResNet-50 (torchvision resnet50, v1.5: the stride on the 3x3 conv).

std::string MaxPool(ModelBuilder& b, absl::string_view name, const std::string& x, int64_t kernel, int64_t stride,
                    int64_t pad) {
  return b.Op("MaxPool", name, {x},
              {AttrInt("ceil_mode", 0), AttrInts("kernel_shape", {kernel, kernel}),
               AttrInts("pads", {pad, pad, pad, pad}), AttrInts("strides", {stride, stride})});
}

// torchvision Bottleneck at node scope `np` ("/layer1/layer1.0") and parameter path
// `pp` ("layer1.0"). Its one `relu` module runs three times: Relu, Relu_1, Relu_2.
std::string Bottleneck(ModelBuilder& b, const std::string& np, const std::string& pp, const std::string& x,
                       int64_t in_channels, int64_t planes, int64_t stride, bool downsample, bool keep_bn) {
  auto conv_bn = [&](const std::string& conv, const std::string& bn, const std::string& in, const ConvSpec& spec) {
    return ConvBatchNorm(b, absl::StrCat(np, "/", conv), absl::StrCat(pp, ".", conv), absl::StrCat(np, "/", bn),
                         absl::StrCat(pp, ".", bn), in, spec, keep_bn);
  };
  const int64_t out_channels = 4 * planes;
  std::string h = conv_bn("conv1", "bn1", x, {in_channels, planes, 1, 1, 0});
  h = b.Op("Relu", absl::StrCat(np, "/relu/Relu"), {h});
  h = conv_bn("conv2", "bn2", h, {planes, planes, 3, stride, 1});
  h = b.Op("Relu", absl::StrCat(np, "/relu/Relu_1"), {h});
  h = conv_bn("conv3", "bn3", h, {planes, out_channels, 1, 1, 0});
  std::string identity = x;
  if (downsample) {
    identity = ConvBatchNorm(b, absl::StrCat(np, "/downsample/downsample.0"), absl::StrCat(pp, ".downsample.0"),
                             absl::StrCat(np, "/downsample/downsample.1"), absl::StrCat(pp, ".downsample.1"), x,
                             {in_channels, out_channels, 1, stride, 0}, keep_bn);
  }
  h = b.Op("Add", absl::StrCat(np, "/Add"), {h, identity});  // out += identity
  return b.Op("Relu", absl::StrCat(np, "/relu/Relu_2"), {h});
}

void BuildResNet50(ModelBuilder& b, const ModelOptions& o) {
  const int64_t batch = *o.batch, image = *o.image, width = *o.width;
  const bool keep_bn = *o.batchnorm != 0;
  const std::string x = b.AddInput("x", TensorProto::FLOAT, {batch, 3, image, image});
  std::string h = ConvBatchNorm(b, "/conv1", "conv1", "/bn1", "bn1", x, {3, width, 7, 2, 3}, keep_bn);
  h = b.Op("Relu", "/relu/Relu", {h});
  h = MaxPool(b, "/maxpool/MaxPool", h, 3, 2, 1);
  int64_t channels = width;
  const int64_t blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = width << stage;
    for (int64_t j = 0; j < blocks[stage]; ++j) {
      const std::string layer = absl::StrCat("layer", stage + 1);
      const int64_t stride = (stage > 0 && j == 0) ? 2 : 1;
      h = Bottleneck(b, absl::StrCat("/", layer, "/", layer, ".", j), absl::StrCat(layer, ".", j), h, channels, planes,
                     stride, /*downsample=*/j == 0, keep_bn);
      channels = 4 * planes;
    }
  }
  h = b.Op("GlobalAveragePool", "/avgpool/GlobalAveragePool", {h});
  h = b.Op("Flatten", "/Flatten", {h}, {AttrInt("axis", 1)});
  h = LinearGemm(b, "/fc", h, channels, *o.classes);
  b.AddOutput(b.RenameValue(h, "logits"), TensorProto::FLOAT, {batch, *o.classes});
}

// ---------------------------------------------------------------------------
// MobileNetV2 (torchvision mobilenet_v2, width_mult 1.0).

struct Relu6Bounds {
  std::string min, max;
};

// Conv2dNormActivation(..., activation_layer=nn.ReLU6) named `child` ("features.0",
// "conv.1") at node scope `scope`, parameters under `param`: children .0 Conv, .1
// BatchNorm, .2 ReLU6 = Clip(x, 0, 6) (min/max as inputs since opset 11).
std::string ConvBnRelu6(ModelBuilder& b, const std::string& scope, const std::string& child, const std::string& param,
                        const std::string& x, const ConvSpec& spec, bool keep_bn, const Relu6Bounds& relu6) {
  const std::string node = absl::StrCat(scope, "/", child);
  const std::string h =
      ConvBatchNorm(b, absl::StrCat(node, "/", child, ".0"), absl::StrCat(param, ".0"),
                    absl::StrCat(node, "/", child, ".1"), absl::StrCat(param, ".1"), x, spec, keep_bn);
  return b.Op("Clip", absl::StrCat(node, "/", child, ".2/Clip"), {h, relu6.min, relu6.max});
}

// InvertedResidual features.`index`: [1x1 expand + ReLU6] -> 3x3 depthwise + ReLU6 ->
// 1x1 linear projection (+BN), plus x when stride is 1 and the width is unchanged.
std::string InvertedResidual(ModelBuilder& b, int index, const std::string& x, int64_t in, int64_t out, int64_t stride,
                             int64_t expand, bool keep_bn, const Relu6Bounds& relu6) {
  const std::string block = absl::StrCat("/features/features.", index);
  const std::string scope = absl::StrCat(block, "/conv");
  const std::string param = absl::StrCat("features.", index, ".conv");
  const int64_t hidden = in * expand;
  int child = 0;
  std::string h = x;
  if (expand != 1) {
    h = ConvBnRelu6(b, scope, "conv.0", absl::StrCat(param, ".0"), h, {in, hidden, 1, 1, 0}, keep_bn, relu6);
    ++child;
  }
  h = ConvBnRelu6(b, scope, absl::StrCat("conv.", child), absl::StrCat(param, ".", child), h,
                  {hidden, hidden, 3, stride, 1, /*groups=*/hidden}, keep_bn, relu6);
  ++child;
  h = ConvBatchNorm(b, absl::StrCat(scope, "/conv.", child), absl::StrCat(param, ".", child),
                    absl::StrCat(scope, "/conv.", child + 1), absl::StrCat(param, ".", child + 1), h,
                    {hidden, out, 1, 1, 0}, keep_bn);
  if (stride == 1 && in == out) h = b.Op("Add", absl::StrCat(block, "/Add"), {x, h});  // x + self.conv(x)
  return h;
}

void BuildMobileNetV2(ModelBuilder& b, const ModelOptions& o) {
  const int64_t batch = *o.batch, image = *o.image;
  const bool keep_bn = *o.batchnorm != 0;
  const std::string x = b.AddInput("x", TensorProto::FLOAT, {batch, 3, image, image});
  const Relu6Bounds relu6{b.AddScalar("relu6.min", 0.f), b.AddScalar("relu6.max", 6.f)};
  std::string h = ConvBnRelu6(b, "/features", "features.0", "features.0", x, {3, 32, 3, 2, 1}, keep_bn, relu6);
  // (expand ratio t, output channels c, repeats n, first stride s), torchvision's table.
  const int64_t settings[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t channels = 32;
  int index = 1;
  for (const auto& [t, c, n, s] : settings) {
    for (int64_t i = 0; i < n; ++i) {
      h = InvertedResidual(b, index++, h, channels, c, i == 0 ? s : 1, t, keep_bn, relu6);
      channels = c;
    }
  }
  constexpr int64_t kLastChannels = 1280;
  h = ConvBnRelu6(b, "/features", absl::StrCat("features.", index), absl::StrCat("features.", index), h,
                  {channels, kLastChannels, 1, 1, 0}, keep_bn, relu6);
  // nn.functional.adaptive_avg_pool2d(x, (1, 1)) and torch.flatten(x, 1) in forward().
  h = b.Op("GlobalAveragePool", "/GlobalAveragePool", {h});
  h = b.Op("Flatten", "/Flatten", {h}, {AttrInt("axis", 1)});
  // classifier = Sequential(Dropout(0.2), Linear(1280, classes)).
  h = LinearGemm(b, "/classifier/classifier.1", h, kLastChannels, *o.classes, "classifier.1");
  b.AddOutput(b.RenameValue(h, "logits"), TensorProto::FLOAT, {batch, *o.classes});
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelSpec& s : Specs()) names.push_back(s.name);
  return names;
}

absl::StatusOr<ModelOptions> ResolveOptions(absl::string_view name, const ModelOptions& options) {
  const ModelSpec* spec = nullptr;
  for (const ModelSpec& s : Specs()) {
    if (name == s.name) spec = &s;
  }
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", name, "' (models: ", absl::StrJoin(ModelNames(), ", "), ")"));
  }
  if (options.opset < kMinModelOpset || options.opset > kMaxModelOpset) {
    return absl::InvalidArgumentError(absl::StrCat("--opset ", options.opset, " is outside the supported range ",
                                                   kMinModelOpset, "..", kMaxModelOpset));
  }
  ModelOptions o = options;
  for (const char* key : kFieldNames) {
    std::optional<int64_t>* field = Field(o, key);
    auto it = spec->defaults.find(key);
    if (it == spec->defaults.end()) {
      if (field->has_value()) {
        std::vector<std::string> accepted;
        for (const auto& [k, v] : spec->defaults) accepted.push_back(absl::StrCat("--", k));
        return absl::InvalidArgumentError(absl::StrCat("--", key, " does not apply to ", name, " (it takes ",
                                                       accepted.empty() ? "none" : absl::StrJoin(accepted, ", "), ")"));
      }
      continue;
    }
    if (!field->has_value() && it->second >= 0) *field = it->second;
    if (std::string(key) == "batchnorm") {
      if (**field != 0 && **field != 1) {
        return absl::InvalidArgumentError(absl::StrCat("--batchnorm must be 0 or 1, got ", **field));
      }
      continue;
    }
    if (field->has_value() && **field <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", key, " must be positive, got ", **field));
    }
  }
  // The FFN width defaults to 4 * hidden (3072 for BERT-base, GPT-2 small and ViT-B).
  if (spec->defaults.count("ffn") && !o.ffn.has_value()) o.ffn = 4 * *o.hidden;
  if (o.heads.has_value() && *o.hidden % *o.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--hidden ", *o.hidden, " is not divisible by --heads ", *o.heads));
  }
  if (spec->max_seq > 0 && *o.seq > spec->max_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq ", *o.seq, " exceeds ", name, "'s ", spec->max_seq, " position embeddings"));
  }
  if (name == "vit_b16" && *o.image % kVitPatch != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image ", *o.image, " is not a multiple of the patch size ", kVitPatch));
  }
  return o;
}

absl::StatusOr<onnx::ModelProto> MakeModel(absl::string_view name, const ModelOptions& options, bool* checked) {
  KILN_ASSIGN_OR_RETURN(const ModelOptions o, ResolveOptions(name, options));
  ModelBuilder b(name, o.opset, o.seed);
  if (name == "mlp") {
    BuildMlp(b, o);
  } else if (name == "tiny_cnn") {
    BuildTinyCnn(b, o);
  } else if (name == "bert_layer") {
    BuildBert(b, o, /*with_embeddings=*/false);
  } else if (name == "bert_base") {
    BuildBert(b, o, /*with_embeddings=*/true);
  } else if (name == "gpt2_block") {
    BuildGpt2Block(b, o);
  } else if (name == "distilbert") {
    BuildDistilBert(b, o);
  } else if (name == "gpt2") {
    BuildGpt2(b, o);
  } else if (name == "vit_b16") {
    BuildVit(b, o);
  } else if (name == "resnet50") {
    BuildResNet50(b, o);
  } else if (name == "mobilenet_v2") {
    BuildMobileNetV2(b, o);
  }
  return b.Build(checked);
}

absl::Status WriteModel(const onnx::ModelProto& model, const std::string& path) {
  if (model.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the model is ", model.ByteSizeLong(),
                                                   " bytes, over protobuf's 2 GiB limit; use smaller sizes"));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return absl::DataLossError(absl::StrCat(path, ": failed to serialise the model"));
  return WriteFile(path, bytes, "writing the model");
}

}  // namespace kiln::models
