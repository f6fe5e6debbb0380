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
#include "models/model_builder.h"

namespace kiln::models {
namespace {

using onnx::TensorProto;

// Which size options a model takes, with their defaults (-1: derived, see Resolve).
struct ModelSpec {
  const char* name;
  std::map<std::string, int64_t> defaults;
};

const std::vector<ModelSpec>& Specs() {
  static const auto* specs = new std::vector<ModelSpec>{
      {"mlp", {{"batch", 1}, {"hidden", 512}}},
      {"tiny_cnn", {{"batch", 1}}},
      {"bert_layer", {{"batch", 1}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 1}}},
      {"bert_base",
       {{"batch", 1}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 12}, {"vocab", 30522}}},
      {"gpt2_block", {{"batch", 8}, {"seq", 128}, {"hidden", 768}, {"heads", 12}, {"ffn", -1}, {"layers", 1}}},
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
  return nullptr;
}

constexpr const char* kFieldNames[] = {"batch", "seq", "hidden", "heads", "ffn", "layers", "vocab"};

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
// GPT-2 (HF GPT2Block, pre-LN).

constexpr float kGpt2LayerNormEps = 1e-5f;

std::string Gpt2Block(ModelBuilder& b, int layer, const std::string& x, const AttentionDims& d, int64_t ffn,
                      const AttentionConstants& c, const std::string& causal, const std::string& masked_value) {
  const std::string lp = absl::StrCat("/h.", layer);
  const std::string attn = absl::StrCat(lp, "/attn");
  std::string h = LayerNorm(b, absl::StrCat(lp, "/ln_1"), x, d.hidden, kGpt2LayerNormEps);
  const std::string qkv = LinearMatMul(b, absl::StrCat(attn, "/c_attn"), h, d.hidden, 3 * d.hidden);
  std::vector<std::string> parts;
  if (b.opset() >= 13) {
    const std::string sizes = b.AddInt64Vector(ParamName(attn, "split_sizes"), {d.hidden, d.hidden, d.hidden});
    parts = b.AddNode("Split", absl::StrCat(attn, "/Split"), {qkv, sizes}, 3, {AttrInt("axis", 2)});
  } else {
    parts = b.AddNode("Split", absl::StrCat(attn, "/Split"), {qkv}, 3,
                      {AttrInt("axis", 2), AttrInts("split", {d.hidden, d.hidden, d.hidden})});
  }
  const std::string qh = SplitHeads(b, attn, parts[0], c, 0, {0, 2, 1, 3});
  const std::string kh = SplitHeads(b, attn, parts[1], c, 1, {0, 2, 3, 1});
  const std::string vh = SplitHeads(b, attn, parts[2], c, 2, {0, 2, 1, 3});
  const std::string ctx = AttentionCore(b, attn, qh, kh, vh, c, [&](const std::string& s) {
    return b.Op("Where", absl::StrCat(attn, "/Where"), {causal, s, masked_value});
  });
  h = LinearMatMul(b, absl::StrCat(attn, "/c_proj"), ctx, d.hidden, d.hidden);
  const std::string resid = b.Op("Add", absl::StrCat(lp, "/Add"), {h, x});

  h = LayerNorm(b, absl::StrCat(lp, "/ln_2"), resid, d.hidden, kGpt2LayerNormEps);
  h = LinearMatMul(b, absl::StrCat(lp, "/mlp/c_fc"), h, d.hidden, ffn);
  h = GeluTanh(b, absl::StrCat(lp, "/mlp/act"), h);
  h = LinearMatMul(b, absl::StrCat(lp, "/mlp/c_proj"), h, ffn, d.hidden);
  return b.Op("Add", absl::StrCat(lp, "/Add_1"), {resid, h});
}

void BuildGpt2(ModelBuilder& b, const ModelOptions& o) {
  const AttentionDims d{*o.batch, *o.seq, *o.hidden, *o.heads};
  std::string h = b.AddInput("hidden_states", TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
  const AttentionConstants c = AddAttentionConstants(b, d);
  // GPT2Attention's `bias` buffer: the lower-triangular causal mask; masked scores
  // become torch.finfo(float32).min, as HF's _attn does with torch.where.
  std::vector<bool> tril(d.seq * d.seq);
  for (int64_t i = 0; i < d.seq; ++i) {
    for (int64_t j = 0; j < d.seq; ++j) tril[i * d.seq + j] = j <= i;
  }
  const std::string causal = b.AddBoolInitializer("attn.causal_mask", {1, 1, d.seq, d.seq}, tril);
  const std::string masked_value = b.AddScalar("attn.masked_value", std::numeric_limits<float>::lowest());
  for (int layer = 0; layer < *o.layers; ++layer) h = Gpt2Block(b, layer, h, d, *o.ffn, c, causal, masked_value);
  b.AddOutput(b.RenameValue(h, "output"), TensorProto::FLOAT, {d.batch, d.seq, d.hidden});
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
    if (!field->has_value() && it->second > 0) *field = it->second;
    if (field->has_value() && **field <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", key, " must be positive, got ", **field));
    }
  }
  // The FFN width defaults to 4 * hidden (3072 for BERT-base and GPT-2 small).
  if (spec->defaults.count("ffn") && !o.ffn.has_value()) o.ffn = 4 * *o.hidden;
  if (o.heads.has_value() && *o.hidden % *o.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--hidden ", *o.hidden, " is not divisible by --heads ", *o.heads));
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
    BuildGpt2(b, o);
  }
  return b.Build(checked);
}

absl::Status WriteModel(const onnx::ModelProto& model, const std::string& path) {
  if (model.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the model is ", model.ByteSizeLong(),
                                                   " bytes, over protobuf's 2 GiB limit; use smaller sizes"));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  if (!model.SerializeToOstream(&out))
    return absl::DataLossError(absl::StrCat(path, ": failed to serialise the model"));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kiln::models
