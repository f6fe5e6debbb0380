// The gated product's test cases (fusion/fuse_gated_matmul.h on the Hopper family,
// codegen/ops/gemm_sm90.cc), shared by codegen/gemm_gated_test.cc (planning, config
// rules and NVRTC compiles; no GPU) and codegen/gemm_paired_gpu_test.cc (every case
// and tile config against the CPU reference of the group's members): each builds the
// FFN as an exporter writes it, runs fuse-gated-matmul on it and keeps the group node.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fusion/fuse_gated_matmul.h"
#include "fusion/fusion_test_util.h"
#include "graph/fused_group.h"

namespace kiln::codegen::gated_test {

struct GatedCase {
  std::string name;
  std::vector<int64_t> rows;  // X's leading dims [..., M]
  int64_t k = 0, n = 0;       // X [..., M, K], both weights [K, N]
  std::string dtype = "f16";
  bool geglu = false;   // Gelu(gate) * (up * s[N]) instead of SiLU(gate) * up
  bool merged = false;  // one gate_up weight [K, 2N] and a Split (Phi-3), not two MatMuls
};

// Llama's SwiGLU at the tiny zoo width (2N = 352: the last column tile is partial),
// odd rows, a batch of sequences in bf16 with GeGLU and an epilogue load, a Llama-like
// width ratio at 512 tokens, and a merged gate_up weight.
inline std::vector<GatedCase> Cases() {
  return {{"llama_tiny", {2, 64}, 64, 176},
          {"odd_rows", {77}, 256, 512},
          {"geglu_bf16", {3, 50}, 128, 256, "bf16", true},
          {"llama_ratio", {512}, 1024, 1408},
          {"merged_gate_up", {4, 33}, 192, 96, "f16", false, true}};
}

// The tile configs each case runs besides the heuristic's: cooperative and ping-pong
// tiles of 128 and 256 columns (C in chunks at 128x256), two m64 blocks a consumer,
// split-K, stream-K and clusters.
inline std::vector<std::string> ForcedConfigs() {
  return {"128x128 c2x1 s4", "128x256 c2x1 s4",    "64x256 p2x1 s4",     "64x128 p2x1 s8",
          "256x128 c2x2 s3", "128x128 c2x1 s4 k2", "128x256 c2x1 s4 sk", "128x128 c2x1 s4 cl2"};
}

inline std::string GraphText(const GatedCase& c) {
  std::vector<int64_t> xs = c.rows, ys = c.rows;
  xs.push_back(c.k);
  ys.push_back(c.n);
  const std::string t = c.dtype;
  const std::string x = absl::StrCat(t, "[", absl::StrJoin(xs, ","), "]");
  const std::string y = absl::StrCat(t, "[", absl::StrJoin(ys, ","), "]");
  const std::string w = absl::StrCat(t, "[", c.k, ",", c.n, "]");
  std::string text = absl::StrCat("graph @main {\n  input %x : ", x, "\n  const %wg : ", w,
                                  " = splat(0.5)\n  const %wu : ", w, " = splat(0.25)\n");
  if (c.merged) {
    const std::string w2 = absl::StrCat(t, "[", c.k, ",", 2 * c.n, "]");
    std::vector<int64_t> ps = c.rows;
    ps.push_back(2 * c.n);
    return absl::StrCat("graph @main {\n  input %x : ", x, "\n  const %w : ", w2, " = splat(0.5)\n  %gu : ", t, "[",
                        absl::StrJoin(ps, ","), "] = MatMul(%x, %w) @gate_up\n  %g : ", y, ", %u : ", y,
                        " = Split(%gu) {axis = -1, num_outputs = 2} @chunk\n  %sig : ", y,
                        " = Sigmoid(%g) @sigmoid\n  %silu : ", y, " = Mul(%g, %sig) @silu\n  %out : ", y,
                        " = Mul(%silu, %u) @join\n  output %out\n}\n");
  }
  if (c.geglu) {
    absl::StrAppend(&text, "  const %s : ", t, "[", c.n, "] = splat(2.0)\n  %g : ", y,
                    " = MatMul(%x, %wg) @gate\n  %a : ", y, " = Gelu(%g) @gelu\n  %u : ", y,
                    " = MatMul(%x, %wu) @up\n  %us : ", y, " = Mul(%u, %s) @scale\n  %out : ", y,
                    " = Mul(%a, %us) @join\n");
  } else {
    absl::StrAppend(&text, "  %g : ", y, " = MatMul(%x, %wg) @gate\n  %sig : ", y,
                    " = Sigmoid(%g) @sigmoid\n  %silu : ", y, " = Mul(%g, %sig) @silu\n  %u : ", y,
                    " = MatMul(%x, %wu) @up\n  %out : ", y, " = Mul(%silu, %u) @join\n");
  }
  absl::StrAppend(&text, "  output %out\n}\n");
  return text;
}

// The case's graph after fuse-gated-matmul (random weights and scale) and its group.
struct Built {
  std::unique_ptr<Graph> graph;
  const Node* group = nullptr;
  std::map<std::string, Tensor> feeds;
};

inline void Build(const GatedCase& c, uint32_t seed, Built& out) {
  out.graph = ::kiln::testing::ParseTyped(GraphText(c));
  ::kiln::testing::RandomizeConstants(*out.graph, seed);
  absl::StatusOr<bool> changed = FuseGatedMatMul().Run(*out.graph);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed) << c.name << ": fuse-gated-matmul did not fire";
  for (const Node* n : out.graph->nodes()) {
    if (IsFusedGroup(*n)) out.group = n;
  }
  ASSERT_NE(out.group, nullptr);
  for (const auto& [name, t] : ::kiln::testing::RandomFeeds(*out.graph, seed + 100)) out.feeds.emplace(name, t);
}

}  // namespace kiln::codegen::gated_test
