// The rotary product's test cases (fusion/fuse_rotary_matmul.h on the Hopper family,
// codegen/ops/gemm_sm90.cc), shared by codegen/gemm_rotary_test.cc (planning, config
// rules and NVRTC compiles; no GPU) and codegen/gemm_paired_gpu_test.cc (every case
// and tile config against the CPU reference of the group's members): each builds a
// merged Q/K/V product, its Split and recognize-rope's rotations of the Q and K
// pieces as Llama's export comes out of fuse-siblings, runs fuse-rotary-matmul on it
// and keeps the group node.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fusion/fuse_rotary_matmul.h"
#include "fusion/fusion_test_util.h"
#include "graph/fused_group.h"

namespace kiln::codegen::rotary_test {

struct RotaryCase {
  std::string name;
  int64_t batch = 1, seq = 1, k = 0;  // X [batch, seq, K]
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  std::string dtype = "f16";
};

// Llama's attention input at the tiny zoo width (head dim 16: pairs 8 columns
// apart), odd rows (partial row tiles) at head dim 64, head dim 128 in bf16 (pairs
// 64 apart: tiles of 128 or 256 columns), and a Llama-like GQA at 512 tokens.
inline std::vector<RotaryCase> Cases() {
  return {{"llama_tiny", 2, 64, 64, 4, 2, 16},
          {"odd_rows", 2, 77, 256, 8, 2, 64},
          {"d128_bf16", 1, 100, 128, 4, 4, 128, "bf16"},
          {"llama_gqa", 4, 128, 1024, 16, 4, 64}};
}

// The tile configs each case runs besides the heuristic's: those of the gated
// product and 64-column tiles (which a head dim of 128 does not take).
inline std::vector<std::string> ForcedConfigs() {
  return {"64x64 p2x1 s8",   "128x128 c2x1 s4",    "128x256 c2x1 s4",    "64x256 p2x1 s4",     "64x128 p2x1 s8",
          "256x128 c2x2 s3", "128x128 c2x1 s4 k2", "128x256 c2x1 s4 sk", "128x128 c2x1 s4 cl2"};
}

inline std::string Dims(const std::string& t, const std::vector<int64_t>& dims) {
  return absl::StrCat(t, "[", absl::StrJoin(dims, ","), "]");
}

// One rotated piece (`p`: "q" or "k") of `heads` heads: Reshape to [B, S, H, D] and
// [B, S, H, 2, h], Transpose to [B, H, S, 2, h], the rotation, a Reshape as output.
inline std::string RotationText(const RotaryCase& c, const std::string& p, int64_t heads) {
  const std::string& t = c.dtype;
  const int64_t b = c.batch, s = c.seq, d = c.head_dim, h = d / 2;
  const std::string x5 = Dims(t, {b, heads, s, 2, h});
  auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
    return absl::StrCat("  const %", p, "_", name, " : i64[", v.size(), "] = [", absl::StrJoin(v, ", "), "]\n");
  };
  return absl::StrCat(
      ints("heads", {b, s, heads, d}), ints("halves", {b, s, heads, 2, h}), ints("merge_shape", {b, heads, s, d}),
      "  const %", p, "_cos : ", Dims(t, {1, 1, s, 2, h}), " = splat(0.5)\n  const %", p,
      "_sin : ", Dims(t, {1, 1, s, 2, h}), " = splat(0.5)\n  const %", p, "_sign : ", t, "[2,1] = [-1.0, 1.0]\n  %", p,
      "_4 : ", Dims(t, {b, s, heads, d}), " = Reshape(%", p, ", %", p, "_heads) @", p, "_view\n  %", p,
      "_5 : ", Dims(t, {b, s, heads, 2, h}), " = Reshape(%", p, "_4, %", p, "_halves) @", p, "_x\n  %", p, "_xh : ", x5,
      " = Transpose(%", p, "_5) {perm = [0, 2, 1, 3, 4]} @", p, "_transpose\n  %", p, "_sw : ", x5, " = Slice(%", p,
      "_xh, %swap_starts, %swap_ends, %swap_axes, %swap_steps) @", p, "_swap\n  %", p, "_rot : ", x5, " = Mul(%", p,
      "_sw, %", p, "_sign) @", p, "_rotate_half\n  %", p, "_xc : ", x5, " = Mul(%", p, "_xh, %", p, "_cos) @", p,
      "_x_cos\n  %", p, "_rs : ", x5, " = Mul(%", p, "_rot, %", p, "_sin) @", p, "_rot_sin\n  %", p, "_y : ", x5,
      " = Add(%", p, "_xc, %", p, "_rs) @", p, "_rope\n  %", p, "_out : ", Dims(t, {b, heads, s, d}), " = Reshape(%", p,
      "_y, %", p, "_merge_shape) @", p, "_merge\n  output %", p, "_out\n");
}

inline std::string GraphText(const RotaryCase& c) {
  const std::string& t = c.dtype;
  const int64_t nq = c.q_heads * c.head_dim, nk = c.kv_heads * c.head_dim, n = nq + 2 * nk;
  return absl::StrCat("graph @main {\n  input %x : ", Dims(t, {c.batch, c.seq, c.k}),
                      "\n  const %w : ", Dims(t, {c.k, n}), " = splat(0.5)\n  const %sizes : i64[3] = [", nq, ", ", nk,
                      ", ", nk,
                      "]\n  const %swap_starts : i64[1] = [1]\n  const %swap_ends : i64[1] = [-9223372036854775808]\n"
                      "  const %swap_axes : i64[1] = [3]\n  const %swap_steps : i64[1] = [-1]\n  %qkv : ",
                      Dims(t, {c.batch, c.seq, n}), " = MatMul(%x, %w) @qkv\n  %q : ", Dims(t, {c.batch, c.seq, nq}),
                      ", %k : ", Dims(t, {c.batch, c.seq, nk}), ", %v : ", Dims(t, {c.batch, c.seq, nk}),
                      " = Split(%qkv, %sizes) {axis = -1} @split\n", RotationText(c, "q", c.q_heads),
                      RotationText(c, "k", c.kv_heads), "  output %v\n}\n");
}

// The case's graph after fuse-rotary-matmul (random weights and tables) and its group.
struct Built {
  std::unique_ptr<Graph> graph;
  const Node* group = nullptr;
  std::map<std::string, Tensor> feeds;
};

inline void Build(const RotaryCase& c, uint32_t seed, Built& out) {
  out.graph = ::kiln::testing::ParseTyped(GraphText(c));
  ::kiln::testing::RandomizeConstants(*out.graph, seed);
  const DType dt = c.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  for (const char* sign : {"q_sign", "k_sign"}) {
    out.graph->SetConstant(out.graph->FindValue(sign), Tensor::FromFloat(dt, {2, 1}, {-1.f, 1.f}));
  }
  absl::StatusOr<bool> changed = FuseRotaryMatMul().Run(*out.graph);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed) << c.name << ": fuse-rotary-matmul did not fire";
  for (const Node* n : out.graph->nodes()) {
    if (IsFusedGroup(*n)) out.group = n;
  }
  ASSERT_NE(out.group, nullptr);
  for (const auto& [name, t] : ::kiln::testing::RandomFeeds(*out.graph, seed + 100)) out.feeds.emplace(name, t);
}

}  // namespace kiln::codegen::rotary_test
