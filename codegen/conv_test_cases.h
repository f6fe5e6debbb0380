// Convolution test graphs shared by codegen/conv_test.cc (NVRTC, no GPU) and
// codegen/conv_gpu_test.cc: an NHWC Conv (channels_last = 1; X, W and the bias as
// graph inputs) alone or as a "conv+epilogue" FusedGroup with a residual Add and/or
// Relu / Clip after it.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen::test {

enum class ConvEpi {
  kNone,          // the Conv node alone (with its bias when `bias`)
  kRelu,          // Relu(conv)
  kResidualRelu,  // Relu(conv + residual[N, OH, OW, OC])
  kClip,          // Clip(conv, 0, 0.75) (ReLU6's form, at this data's scale)
  kHardSwish,     // HardSwish(conv) (MobileNetV3)
};

struct ConvCase {
  DType dtype = DType::kFloat16;
  int64_t n = 1, h = 8, w = 8, c = 8, oc = 8, kh = 3, kw = 3;
  int64_t sh = 1, sw = 1, pt = 1, pl = 1, pb = 1, pr = 1, dh = 1, dw = 1;
  int64_t group = 1;
  bool bias = true;
  ConvEpi epi = ConvEpi::kNone;
  bool nchw = false;  // channels_last = 0 (routing tests)

  std::string Name() const {
    const char* e = epi == ConvEpi::kNone           ? ""
                    : epi == ConvEpi::kRelu         ? "_relu"
                    : epi == ConvEpi::kResidualRelu ? "_residual_relu"
                    : epi == ConvEpi::kClip         ? "_clip"
                                                    : "_hardswish";
    const char* dt = dtype == DType::kFloat16 ? "f16" : dtype == DType::kBFloat16 ? "bf16" : "f32";
    return absl::StrCat(dt, "_n", n, "_", h, "x", w, "x", c, "_oc", oc, "_k", kh, "x", kw, "_s", sh, "x", sw, "_p",
                        pt, pl, pb, pr, "_d", dh, "x", dw, group > 1 ? absl::StrCat("_g", group) : "",
                        bias ? "_bias" : "", e, nchw ? "_nchw" : "");
  }
};

struct ConvBuilt {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;                 // the Conv or the conv+epilogue group
  std::map<std::string, Tensor> feeds;  // graph inputs by name
};

inline Tensor ConvRandom(DType dtype, const Shape& shape, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = dist(gen);
  return Tensor::FromFloat(dtype, shape, v);
}

inline absl::StatusOr<ConvBuilt> BuildConv(const ConvCase& c, uint32_t seed) {
  ConvBuilt b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  auto input = [&](const std::string& name, Shape shape, float scale) {
    Value* v = g.AddValue(name);
    v->SetType(c.dtype, shape);
    g.AddInput(v);
    b.feeds[name] = ConvRandom(c.dtype, shape, seed++, scale);
    return v;
  };
  const int64_t cg = c.c / c.group;
  // Weights scaled so that outputs stay of order 1 whatever the fan-in.
  const float wscale = 1.5f / std::sqrt(static_cast<float>(cg * c.kh * c.kw));
  Value* x = c.nchw ? input("x", {c.n, c.c, c.h, c.w}, 1.f) : input("x", {c.n, c.h, c.w, c.c}, 1.f);
  Value* w = c.nchw ? input("w", {c.oc, cg, c.kh, c.kw}, wscale) : input("w", {c.oc, c.kh, c.kw, cg}, wscale);
  std::vector<Value*> ins = {x, w};
  if (c.bias) ins.push_back(input("bias", {c.oc}, 0.5f));
  Value* y = g.AddValue("conv_out");
  Node* conv = g.AddNode("Conv", ins, {y}, "conv");
  conv->SetAttr("kernel_shape", std::vector<int64_t>{c.kh, c.kw});
  conv->SetAttr("strides", std::vector<int64_t>{c.sh, c.sw});
  conv->SetAttr("pads", std::vector<int64_t>{c.pt, c.pl, c.pb, c.pr});
  conv->SetAttr("dilations", std::vector<int64_t>{c.dh, c.dw});
  conv->SetAttr("group", c.group);
  if (!c.nchw) conv->SetAttr("channels_last", int64_t{1});
  std::vector<Node*> members = {conv};
  Value* last = y;
  auto add = [&](const std::string& op, std::vector<Value*> in) {
    Value* out = g.AddValue(absl::StrCat(op, "_out", members.size()));
    members.push_back(g.AddNode(op, in, {out}, absl::StrCat(op, members.size())));
    return out;
  };
  const int64_t oh = (c.h + c.pt + c.pb - (c.kh - 1) * c.dh - 1) / c.sh + 1;
  const int64_t ow = (c.w + c.pl + c.pr - (c.kw - 1) * c.dw - 1) / c.sw + 1;
  switch (c.epi) {
    case ConvEpi::kNone: break;
    case ConvEpi::kRelu: last = add("Relu", {last}); break;
    case ConvEpi::kResidualRelu:
      last = add("Add", {last, input("residual", c.nchw ? Shape{c.n, c.oc, oh, ow} : Shape{c.n, oh, ow, c.oc}, 1.f)});
      last = add("Relu", {last});
      break;
    case ConvEpi::kClip:
      last = add("Clip", {last, g.AddConstant("lo", Tensor::FromFloat(c.dtype, {}, {0.f})),
                          g.AddConstant("hi", Tensor::FromFloat(c.dtype, {}, {0.75f}))});
      break;
    case ConvEpi::kHardSwish: last = add("HardSwish", {last}); break;
  }
  g.AddOutput(last);
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(g, options); !s.ok()) return s;
  b.node = conv;
  if (members.size() > 1) {
    absl::StatusOr<Node*> group = FormFusedGroup(g, members, "conv+epilogue", conv);
    if (!group.ok()) return group.status();
    b.node = *group;
  }
  return b;
}

// Grouped, not depthwise, convs (implicit GEMM, one GEMM per group), fp16 and bf16:
// AlexNet's group 2 (C/G = 32: the cp.async gather), ShuffleNet's group 4 1x1 convs
// (C/G = 6 and 34: the register-staged one), group 2 with C/G = 58 (ShuffleNetV2's
// width), group 8 with C/G = 8 and 16 (stride 2), odd C/G = 3 and 5 (strides,
// asymmetric pads), a channel multiplier (group = C, OC = 2C: C/G = 1), with bias +
// relu, residual, clip and no-bias epilogues.
inline std::vector<ConvCase> GroupedConvCases() {
  std::vector<ConvCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto push = [&](ConvCase c, int64_t group, ConvEpi epi, bool bias = true) {
      c.dtype = dt;
      c.group = group;
      c.epi = epi;
      c.bias = bias;
      out.push_back(c);
    };
    push(ConvCase{dt, 1, 13, 13, 64, 128}, 2, ConvEpi::kRelu);                           // AlexNet-like 3x3
    push(ConvCase{dt, 1, 28, 28, 24, 112, 1, 1, 1, 1, 0, 0, 0, 0}, 4, ConvEpi::kRelu);   // ShuffleNet's first
    push(ConvCase{dt, 2, 14, 14, 136, 136, 1, 1, 1, 1, 0, 0, 0, 0}, 4, ConvEpi::kResidualRelu);
    push(ConvCase{dt, 1, 14, 14, 116, 116, 1, 1, 1, 1, 0, 0, 0, 0}, 2, ConvEpi::kRelu);
    push(ConvCase{dt, 1, 16, 16, 64, 64, 1, 1, 1, 1, 0, 0, 0, 0}, 8, ConvEpi::kNone);
    push(ConvCase{dt, 2, 15, 17, 128, 256, 3, 3, 2, 2}, 8, ConvEpi::kRelu);
    push(ConvCase{dt, 1, 11, 9, 9, 6, 3, 3, 2, 2, 1, 0, 1, 2}, 3, ConvEpi::kResidualRelu);  // C/G = 3
    push(ConvCase{dt, 2, 12, 10, 10, 14, 5, 5, 1, 1, 2, 1, 2, 1}, 2, ConvEpi::kClip, false);  // C/G = 5
    push(ConvCase{dt, 1, 10, 10, 16, 32}, 16, ConvEpi::kRelu);                           // channel multiplier 2
  }
  return out;
}

// The GPU cases (fp16 and bf16 each, plus fp32 depthwise ones): odd spatial sizes,
// OC not a multiple of 8, C = 3 and 5 (the register-staged gather), strides 2, pads
// (asymmetric too), dilation, 1x1 / 3x3 / 5x5 / 7x7, batch 1 and > 1, the 128x128
// tiles (both gathers), epilogues, depthwise 3x3 stride 1 and 2, 5x5 and 7x7 with 8-channel
// vectors or one channel and 1, 2 or 4 outputs per thread; and GroupedConvCases().
inline std::vector<ConvCase> ConvCases() {
  std::vector<ConvCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto push = [&](ConvCase c) {
      c.dtype = dt;
      out.push_back(c);
    };
    ConvCase c;
    // 1x1, bias + relu; and without a bias or group.
    c = ConvCase{dt, 1, 14, 14, 64, 256, 1, 1, 1, 1, 0, 0, 0, 0};
    c.epi = ConvEpi::kRelu;
    push(c);
    c.bias = false;
    c.epi = ConvEpi::kNone;
    push(c);
    // 1x1 stride 2 (ResNet's downsample), odd size.
    c = ConvCase{dt, 2, 15, 13, 32, 64, 1, 1, 2, 2, 0, 0, 0, 0};
    push(c);
    // 3x3 pad 1, odd sizes, batch 2, bias + residual + relu.
    c = ConvCase{dt, 2, 17, 19, 32, 48};
    c.epi = ConvEpi::kResidualRelu;
    push(c);
    // 3x3 stride 2, clip.
    c = ConvCase{dt, 1, 28, 28, 64, 128, 3, 3, 2, 2};
    c.epi = ConvEpi::kClip;
    push(c);
    // 3x3 dilation 2, pad 2.
    c = ConvCase{dt, 1, 20, 18, 16, 24, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2};
    c.epi = ConvEpi::kRelu;
    push(c);
    // OC not a multiple of 8; C = 8.
    c = ConvCase{dt, 1, 9, 11, 8, 13};
    push(c);
    // C = 5 (scalar gather), 5x5, asymmetric pads, OC = 7, no bias, residual.
    c = ConvCase{dt, 2, 12, 10, 5, 7, 5, 5, 1, 1, 1, 2, 0, 1};
    c.bias = false;
    c.epi = ConvEpi::kResidualRelu;
    push(c);
    // ResNet's stem: 7x7 stride 2 pad 3 over C = 3 (scalar gather), batch 1 and 2.
    c = ConvCase{dt, 1, 64, 64, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3};
    c.epi = ConvEpi::kRelu;
    push(c);
    c.n = 2;
    c.h = c.w = 45;
    push(c);
    // 128x128 tiles (>= 96 of them): cp.async gather (M = 4*40*40, OC = 256) and the
    // scalar one (M = 4*64*64, OC = 128).
    c = ConvCase{dt, 4, 40, 40, 32, 256};
    c.epi = ConvEpi::kResidualRelu;
    push(c);
    c = ConvCase{dt, 4, 64, 64, 3, 128, 3, 3, 1, 1};
    c.epi = ConvEpi::kRelu;
    push(c);
    // Depthwise 3x3 stride 1 and 2 (MobileNetV2: + bias, ReLU6), C % 8 == 0 and not.
    c = ConvCase{dt, 2, 14, 14, 32, 32};
    c.group = 32;
    c.epi = ConvEpi::kClip;
    push(c);
    c = ConvCase{dt, 1, 15, 15, 96, 96, 3, 3, 2, 2};
    c.group = 96;
    c.epi = ConvEpi::kClip;
    push(c);
    c = ConvCase{dt, 1, 9, 7, 12, 12, 3, 3, 2, 1, 1, 0, 1, 2};
    c.group = 12;
    c.epi = ConvEpi::kRelu;
    push(c);
    c = ConvCase{dt, 1, 10, 10, 16, 16, 5, 5, 1, 1, 4, 4, 4, 4, 2, 2};
    c.group = 16;
    c.bias = false;
    push(c);
    // MobileNetV3's depthwise 5x5 stride 2 with HardSwish.
    c = ConvCase{dt, 1, 15, 15, 72, 72, 5, 5, 2, 2, 2, 2, 2, 2};
    c.group = 72;
    c.epi = ConvEpi::kHardSwish;
    push(c);
    // Stems of 8 channels (3x3 stride 2): MobileNetV3's at an odd size and at batch 1
    // (64-row tiles of 16 columns), EfficientNet's 32 channels in 128-row tiles, and 16
    // in 256-row tiles.
    for (const auto& [n, hw, oc] :
         {std::tuple<int64_t, int64_t, int64_t>{2, 17, 16}, {1, 224, 16}, {4, 192, 32}, {6, 240, 16}}) {
      c = ConvCase{dt, n, hw, hw, 8, oc, 3, 3, 2, 2};
      c.epi = ConvEpi::kHardSwish;
      push(c);
    }
    // More channels than a block's tile (its weights in shared memory), the last tile
    // partial: ConvNeXt's 7x7 and EfficientNet's late 5x5.
    c = ConvCase{dt, 2, 9, 9, 384, 384, 7, 7, 1, 1, 3, 3, 3, 3};
    c.group = 384;
    push(c);
    c = ConvCase{dt, 1, 12, 12, 1152, 1152, 5, 5, 1, 1, 2, 2, 2, 2};
    c.group = 1152;
    c.epi = ConvEpi::kRelu;
    push(c);
    // Large enough for several outputs per thread: 4 per row segment, the last segment
    // of a 62-wide row partial; 2 at stride 2.
    c = ConvCase{dt, 2, 62, 62, 256, 256};
    c.group = 256;
    c.epi = ConvEpi::kClip;
    push(c);
    c = ConvCase{dt, 4, 112, 112, 64, 64, 3, 3, 2, 2, 0, 0, 1, 1};
    c.group = 64;
    push(c);
    // Enough threads for 8 outputs each (ConvNeXt's 7x7 at batch 32), the last
    // segment of a 62-wide row partial.
    c = ConvCase{dt, 3, 62, 62, 256, 256, 7, 7, 1, 1, 3, 3, 3, 3};
    c.group = 256;
    push(c);
  }
  for (const ConvCase& c : GroupedConvCases()) out.push_back(c);
  ConvCase f32{DType::kFloat32, 2, 14, 14, 32, 32};
  f32.group = 32;
  f32.epi = ConvEpi::kClip;
  out.push_back(f32);
  f32 = ConvCase{DType::kFloat32, 1, 66, 66, 32, 32};  // one channel, 4 outputs a thread
  f32.group = 32;
  out.push_back(f32);
  return out;
}

}  // namespace kiln::codegen::test
