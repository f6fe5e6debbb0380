// GPU tests of the fused attention kernel (codegen/ops/attention.cc): every case
// (BERT with its additive mask, GPT-2 causal, DistilBERT's Q scale and masked_fill,
// ViT without a mask; odd sizes, Sq != Sk, head dims 32..128, Dv != D, K stored
// [Sk, D] or [D, Sk], fp16 and bf16, forced tile configs) against the CPU reference
// of the group (EvaluateNode of the FusedGroup) and against an fp64 evaluation of the
// same function; the worst errors are printed. Every pattern also in the models'
// layout (Q, K, V read from [B,S,H,D] through the head-split Transposes, the output
// written to [B,S,H,Dv]). Then the BERT-base attention shapes timed: the fused kernel
// against kiln's unfused path (cuBLASLt batched MatMul, the softmax group with scale
// and mask, cuBLASLt MatMul; plus the 4 head Transposes in the models' layout) and
// against one kernel per op.
// Skips without a GPU.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/attention_test_cases.h"
#include "codegen/gpu_test_util.h"
#include "codegen/library_kernels.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "fusion/fuse_pointwise.h"
#include "graph/evaluate.h"

namespace kiln::codegen {
namespace {

using test::AttnCase;
using test::AttnMask;

struct GpuCase {
  AttnCase c;
  ops::AttentionConfig config{0, 0};  // {0, 0}: the heuristic's
  bool hopper = false;                // the heuristic for an sm_90a target (the wgmma kernel)
};

// `c` with kSdpa's mask of kind `m`.
AttnCase WithSdpaMask(AttnCase c, AttnCase::SdpaMask m) {
  c.sdpa_mask = m;
  return c;
}

std::vector<GpuCase> Cases() {
  std::vector<GpuCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const std::vector<AttnCase> cases = {
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kAdd, true},      // BERT-base
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kNone, true},     // ViT-like, no mask
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kCausal, true},   // GPT-2
        {dt, 1, 4, 128, 128, 64, 64, AttnMask::kCausal, false},   // GPT-2, K' [D, Sk]
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kFill, true},     // DistilBERT
        {dt, 2, 3, 77, 77, 64, 64, AttnMask::kAdd, true},         // odd
        {dt, 2, 3, 77, 77, 64, 64, AttnMask::kNone, false},       // odd, K' [D, 77]: element loads
        {dt, 2, 3, 77, 77, 64, 64, AttnMask::kCausal, true},      // odd, causal
        {dt, 2, 4, 50, 130, 64, 64, AttnMask::kAdd, true},        // Sq < Sk
        {dt, 2, 2, 130, 40, 64, 40, AttnMask::kFill, true},       // Sq > Sk, Dv != D
        {dt, 1, 2, 1, 13, 32, 32, AttnMask::kNone, false},        // one query, 13 keys
        {dt, 2, 4, 128, 128, 32, 32, AttnMask::kAdd, true},       // D = 32
        {dt, 2, 4, 200, 200, 128, 128, AttnMask::kCausal, true},  // D = 128
        {dt, 1, 4, 96, 96, 128, 128, AttnMask::kNone, false},     // D = 128, K' [D, Sk]
        {dt, 1, 4, 100, 100, 80, 80, AttnMask::kAdd, true},       // D = 80
        {dt, 1, 4, 100, 100, 96, 96, AttnMask::kFill, false},     // D = 96
        {dt, 1, 4, 512, 512, 64, 64, AttnMask::kCausal, true},    // longer sequence
        {dt, 1, 2, 300, 300, 40, 24, AttnMask::kAdd, false},      // D, Dv padded to 48, 32
        {dt, 2, 4, 33, 45, 32, 32, AttnMask::kSdpa, true, false, 2},  // SDPA + GQA, dense
        {dt, 1, 6, 1, 19, 64, 64, AttnMask::kSdpa, true, false, 3},   // one query, GQA
    };
    // The models' layout: Q, K, V read from [B,S,H,D], the output written to [B,S,H,Dv].
    const std::vector<AttnCase> heads = {
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kAdd, true, true},    // BERT
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kCausal, true, true}, // GPT-2 (trans_b after folding)
        {dt, 2, 4, 77, 77, 64, 64, AttnMask::kCausal, false, true},   // GPT-2, K' by Transpose [0,2,3,1]
        {dt, 2, 12, 77, 77, 64, 64, AttnMask::kFill, true, true},     // DistilBERT
        {dt, 1, 4, 197, 197, 64, 64, AttnMask::kNone, true, true},    // ViT-B/16
        {dt, 1, 3, 50, 90, 128, 80, AttnMask::kAdd, false, true},
        // torch.export's SDPA form: BERT/GPT-2 (dynamo), Llama's GQA (4 heads share a
        // key/value head), Whisper-like D = 64 over 1500 frames.
        {dt, 2, 12, 128, 128, 64, 64, AttnMask::kSdpa, true, true},
        {dt, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2},
        {dt, 1, 32, 100, 100, 128, 128, AttnMask::kSdpa, true, true, 8},
        // Swin-T: Q, K, V selected from the packed QKV product of 7 x 7 windows, the
        // shifted windows' mask added to the scores regrouped per window.
        {dt, 4, 3, 49, 49, 32, 32, AttnMask::kNone, true, false, 0, true},
        {dt, 4, 3, 49, 49, 32, 32, AttnMask::kWindows, false, false, 0, true},
        {dt, 6, 2, 49, 49, 64, 64, AttnMask::kWindows, true, false, 0, true},
        {dt, 2, 12, 197, 197, 64, 64, AttnMask::kNone, true, false, 0, true},  // ViT-B/16, packed
    };
    for (const AttnCase& c : heads) out.push_back({c});
    for (const AttnCase& c : cases) out.push_back({c});
    // torch.export's constant causal mask (GPT-2, Llama's GQA): computed, keys past the
    // CTA's rows skipped; and one that is not causal by one key (read).
    using M = AttnCase::SdpaMask;
    out.push_back({WithSdpaMask({dt, 2, 12, 128, 128, 64, 64, AttnMask::kSdpa, true, true}, M::kCausal)});
    out.push_back({WithSdpaMask({dt, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2}, M::kCausal)});
    out.push_back({WithSdpaMask({dt, 2, 4, 77, 77, 64, 64, AttnMask::kSdpa, true, true}, M::kNearCausal)});
    // A computed scale on Q: the Q prologue (a constant one moves onto the scores).
    for (AttnCase c : {AttnCase{dt, 2, 12, 77, 77, 64, 64, AttnMask::kFill, true, true},
                       AttnCase{dt, 1, 4, 100, 100, 96, 96, AttnMask::kFill, false}}) {
      c.q_scale_input = true;
      out.push_back({c});
    }
    // Forced tiles: many key blocks per CTA, 1..8 warps.
    // Key groups: 2 and 4 blocks of keys per stage, merged at the end.
    for (ops::AttentionConfig cfg : {ops::AttentionConfig{16, 16}, ops::AttentionConfig{32, 32},
                                     ops::AttentionConfig{64, 64}, ops::AttentionConfig{128, 64},
                                     ops::AttentionConfig{64, 32, 2}, ops::AttentionConfig{16, 32, 4},
                                     ops::AttentionConfig{32, 16, 4}}) {
      out.push_back({{dt, 2, 3, 150, 170, 64, 64, AttnMask::kAdd, true}, cfg});
      out.push_back({{dt, 2, 3, 150, 150, 64, 64, AttnMask::kCausal, false}, cfg});
      out.push_back({WithSdpaMask({dt, 2, 3, 150, 150, 64, 64, AttnMask::kSdpa, true, false}, M::kCausal), cfg});
    }
  }
  return out;
}

// On sm_90a, every case again as the heuristic gives it to an sm_90a target (those
// it gives the wgmma kernel; the others are the cases above), and the forced tiles
// with the wgmma kernel's configs: 1 to 3 warpgroups, 64- and 128-key blocks.
std::vector<GpuCase> HopperCases(const std::vector<GpuCase>& cases) {
  std::vector<GpuCase> out;
  for (const GpuCase& g : cases) {
    if (g.config.bm == 0) out.push_back({g.c, g.config, true});
  }
  using M = AttnCase::SdpaMask;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (int bm : {64, 128, 192}) {
      for (int bn : {64, 128}) {
        for (bool overlap : {false, true}) {
          const ops::AttentionConfig cfg{bm, bn, 1, true, overlap};
          if (!ops::VerifyAttentionConfig(cfg, 64, 64, true).ok()) continue;  // 192 rows: 64-key blocks
          out.push_back({{dt, 2, 3, 150, 170, 64, 64, AttnMask::kAdd, true}, cfg});
          out.push_back({{dt, 2, 3, 150, 152, 64, 64, AttnMask::kCausal, false}, cfg});
          out.push_back({WithSdpaMask({dt, 2, 3, 150, 150, 64, 64, AttnMask::kSdpa, true, false}, M::kCausal), cfg});
        }
      }
    }
    AttnCase scaled{dt, 2, 12, 77, 80, 64, 64, AttnMask::kFill, false, true};
    scaled.q_scale_input = true;  // the Q prologue on the swizzled tile
    out.push_back({scaled, ops::AttentionConfig{64, 64, 1, true}});
    out.push_back({scaled, ops::AttentionConfig{128, 128, 1, true, true}});
    out.push_back({{dt, 1, 4, 40, 300, 64, 64, AttnMask::kAdd, true}, ops::AttentionConfig{64, 64, 1, true, true}});
    out.push_back(
        {{dt, 1, 4, 200, 200, 128, 128, AttnMask::kAdd, true, true}, ops::AttentionConfig{128, 128, 1, true}});
    out.push_back({{dt, 1, 4, 100, 100, 40, 24, AttnMask::kAdd, true}, ops::AttentionConfig{64, 64, 1, true}});
  }
  return out;
}

std::string Name(const GpuCase& g) {
  const std::string name = g.config.bm == 0
                               ? g.c.Name()
                               : absl::StrCat(g.c.Name(), "_bm", g.config.bm, "_bn", g.config.bn, "_g", g.config.splits,
                                              g.config.wgmma ? "_wgmma" : "", g.config.overlap ? "_overlap" : "");
  return g.hopper ? absl::StrCat(name, "_sm90") : name;
}

// The function in fp64 from the stored inputs (the fp64 value of the stored scale).
std::vector<double> Fp64Reference(const AttnCase& c, const std::map<std::string, Tensor>& feeds) {
  // A packed case's Q, K and V: the selects of [B,S,3,H,D] as [B,H,S,D] tensors.
  auto operand = [&](const char* name, int64_t which) {
    if (!c.packed) return feeds.at(name).ToFloat();
    const std::vector<float> qkv = feeds.at("qkv").ToFloat();
    std::vector<float> out(c.b * c.h * c.sq * c.d);
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t h = 0; h < c.h; ++h)
        for (int64_t s = 0; s < c.sq; ++s)
          for (int64_t d = 0; d < c.d; ++d) {
            out[((b * c.h + h) * c.sq + s) * c.d + d] = qkv[(((b * c.sq + s) * 3 + which) * c.h + h) * c.d + d];
          }
    return out;
  };
  const std::vector<float> q = operand("q", 0), k = operand("k", 1), v = operand("v", 2);
  const bool sdpa = c.mask == AttnMask::kSdpa;
  std::vector<float> mask, cond, bias, wmask;
  if (c.mask == AttnMask::kAdd) mask = feeds.at("mask").ToFloat();
  if (sdpa) mask = Tensor::FromFloat(c.dtype, {c.b, c.sq, c.sk}, test::SdpaMaskValues(c)).ToFloat();
  if (c.mask == AttnMask::kFill) cond = feeds.at("cond").ToFloat();
  if (c.mask == AttnMask::kWindows) {
    bias = test::AttnRandom(c.dtype, {c.h, c.sq, c.sk}, 7, 1.f).ToFloat();
    wmask = feeds.at("wmask").ToFloat();
  }
  // The scores' factor: 1 / sqrt(D) stored, or kSdpa's stored sqrt(1/sqrt(D)) twice.
  double factor = 1.0 / Tensor::FromFloat(c.dtype, {}, {std::sqrt(static_cast<float>(c.d))}).ScalarFloat();
  if (sdpa) {
    const double root =
        Tensor::FromFloat(c.dtype, {}, {std::sqrt(1.f / std::sqrt(static_cast<float>(c.d)))}).ScalarFloat();
    factor = root * root;
  }
  const int64_t hkv = c.KvHeads();
  std::vector<double> out(c.b * c.h * c.sq * c.dv, 0.0);
  std::vector<double> s(c.sk);
  for (int64_t bh = 0; bh < c.b * c.h; ++bh) {
    const int64_t b = bh / c.h, h = bh % c.h;
    // Element (row, col) of head `hd` (of `nh`) in a [B,S,H,C] (heads) or [B,H,S,C] tensor.
    auto at = [&](const std::vector<float>& t, int64_t nh, int64_t hd, int64_t rows, int64_t cols, int64_t row,
                  int64_t col) {
      return static_cast<double>(c.heads ? t[((b * rows + row) * nh + hd) * cols + col]
                                         : t[((b * nh + hd) * rows + row) * cols + col]);
    };
    const int64_t hk = h / (c.h / hkv);
    auto key = [&](int64_t j, int64_t d) {
      return c.heads || c.k_trans || sdpa || c.packed ? at(k, hkv, hk, c.sk, c.d, j, d)
                                                      : at(k, hkv, hk, c.d, c.sk, d, j);
    };
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.sk; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < c.d; ++d) dot += at(q, c.h, h, c.sq, c.d, i, d) * key(j, d);
        double x = dot * factor;
        if (c.mask == AttnMask::kAdd) x += mask[b * c.sk + j];
        if (sdpa) x += mask[(b * c.sq + i) * c.sk + j];
        if (c.mask == AttnMask::kWindows) x += bias[(h * c.sq + i) * c.sk + j] + wmask[((b % 2) * c.sq + i) * c.sk + j];
        if (c.mask == AttnMask::kCausal && j > i) x = -INFINITY;
        if (c.mask == AttnMask::kFill && cond[(bh * c.sq + i) * c.sk + j] != 0.f) x = -65504.0;
        s[j] = x;
        mx = std::max(mx, x);
      }
      if (mx == -INFINITY) continue;  // a fully masked row: the guard's 0
      double sum = 0;
      for (int64_t j = 0; j < c.sk; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = 0; j < c.sk; ++j) {
        for (int64_t e = 0; e < c.dv; ++e) {
          const int64_t o = c.heads ? ((b * c.sq + i) * c.h + h) * c.dv + e : (bh * c.sq + i) * c.dv + e;
          out[o] += s[j] / sum * at(v, hkv, hk, c.sk, c.dv, j, e);
        }
      }
    }
  }
  return out;
}

TEST(AttentionGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);
  std::vector<GpuCase> all = Cases();
  if (arch == "sm_90a") {
    const std::vector<GpuCase> hopper = HopperCases(all);
    all.insert(all.end(), hopper.begin(), hopper.end());
  }
  std::vector<GpuCase> cases;
  std::vector<test::AttnBuilt> built;
  std::vector<KernelLaunch> launches;
  std::vector<ModuleKernel> kernels;
  uint32_t seed = 100;
  int wgmma_cases = 0;
  for (const GpuCase& g : all) {
    absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(g.c, seed += 10);
    ASSERT_TRUE(b.ok()) << Name(g) << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l =
        ops::GenerateAttentionGroup(*b->group, g.config.bm == 0 ? nullptr : &g.config, g.hopper);
    ASSERT_TRUE(l.ok()) << Name(g) << ": " << l.status();
    const bool wgmma = (*l)[0].source.find("wgmma.mma_async") != std::string::npos;
    if (g.hopper && !wgmma) continue;  // the same kernel as the case without the flag
    wgmma_cases += wgmma;
    cases.push_back(g);
    launches.push_back((*l)[0]);
    kernels.push_back({absl::StrCat("kiln_attn_", kernels.size()), (*l)[0].source});
    built.push_back(*std::move(b));
  }
  constexpr int kPerModule = 8;
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  float worst_ref[2] = {0, 0}, worst_fp64[2] = {0, 0};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const std::string name = Name(cases[ci]);
    SCOPED_TRACE(name);
    const Node& node = *built[ci].group;
    const KernelLaunch& l = launches[ci];
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, built[ci].feeds));
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], kernels[ci].function, l.shared_bytes, &kernel));
    ASSERT_NO_FATAL_FAILURE(test::LaunchAndWait(kernel, l, buf.dev));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> g = buf.Output(node).ToFloat(), w = (*ref)[0].ToFloat();
    const std::vector<double> exact = Fp64Reference(cases[ci].c, built[ci].feeds);
    ASSERT_EQ(exact.size(), g.size());
    float err_ref = 0.f, err_fp64 = 0.f, ref_fp64 = 0.f;
    size_t at = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const float e = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]) / std::max(1.f, std::fabs(w[i]));
      if (e > err_ref) {
        err_ref = e;
        at = i;
      }
      const double x = std::max(1.0, std::fabs(exact[i]));
      err_fp64 = std::max(err_fp64, std::isnan(g[i]) ? INFINITY : static_cast<float>(std::fabs(g[i] - exact[i]) / x));
      ref_fp64 = std::max(ref_fp64, static_cast<float>(std::fabs(w[i] - exact[i]) / x));
    }
    const int bf = cases[ci].c.dtype == DType::kBFloat16;
    const float tol = bf ? 6e-2f : 2e-2f;
    const bool ok = err_ref <= tol && err_fp64 <= tol;
    EXPECT_TRUE(ok) << name << ": max scaled |err| " << err_ref << " vs the group reference at " << at << " (got "
                    << g[at] << ", want " << w[at] << "), " << err_fp64 << " vs fp64";
    failures += !ok;
    worst_ref[bf] = std::max(worst_ref[bf], err_ref);
    worst_fp64[bf] = std::max(worst_fp64[bf], err_fp64);
    std::printf("%-52s grid %4u x %3u block %3u smem %6u: err vs group ref %.2e, vs fp64 %.2e (group ref vs fp64 %.2e) %s\n",
                name.c_str(), l.grid[0], l.grid[1], l.block[0], l.shared_bytes, err_ref, err_fp64, ref_fp64,
                ok ? "ok" : "FAIL");
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  std::printf(
      "ran %zu attention cases (%d on the wgmma kernel) on %s (%s): %d failing; worst scaled error vs the group's CPU "
      "reference: "
      "f16 %.2e, bf16 %.2e; vs fp64: f16 %.2e, bf16 %.2e\n",
      cases.size(), wgmma_cases, test::DeviceName().c_str(), arch.c_str(), failures, worst_ref[0], worst_ref[1],
      worst_fp64[0], worst_fp64[1]);
}

// A sequence of kernels over one graph's values: library kernels (cuBLASLt) and
// generated launches, all reading and writing device buffers of the graph's values.
class Program {
 public:
  explicit Program(cublasLtHandle_t lt) : lt_(lt) {}
  ~Program() {
    for (auto& [v, p] : buffers_) cudaFree(p);
    if (workspace_ != nullptr) cudaFree(workspace_);
    for (cudaLibrary_t lib : libs_) cudaLibraryUnload(lib);
  }

  // Buffers for every value of `g`; inputs from `feeds`, constants uploaded.
  void Allocate(const Graph& g, const std::map<std::string, Tensor>& feeds) {
    for (const Value* v : g.values()) {
      if (!v->has_type()) continue;
      void* p = nullptr;
      if (v->is_constant()) {
        ASSERT_NO_FATAL_FAILURE(test::Upload(v->constant(), &p));
      } else if (auto it = feeds.find(v->name()); it != feeds.end()) {
        ASSERT_NO_FATAL_FAILURE(test::Upload(it->second, &p));
      } else {
        ASSERT_EQ(cudaMalloc(&p, std::max<size_t>(1, v->numel() * DTypeSize(v->dtype()))), cudaSuccess);
      }
      buffers_[v] = p;
    }
  }

  // One step per node: cuBLASLt where kiln uses it, else its generated kernels.
  void Add(const Node& node, std::vector<ModuleKernel>& kernels) {
    Step s{&node};
    if (!LibraryKernelName(node).empty()) {
      LibraryHandles h;
      h.cublaslt = lt_;
      absl::StatusOr<std::unique_ptr<LibraryKernel>> lib = CreateLibraryKernel(node, h);
      ASSERT_TRUE(lib.ok()) << lib.status();
      s.lib = *std::move(lib);
      workspace_bytes_ = std::max(workspace_bytes_, s.lib->workspace_bytes());
    } else {
      absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(node);
      ASSERT_TRUE(l.ok()) << node.name() << ": " << l.status();
      for (KernelLaunch& k : *l) {
        s.kernel_index.push_back(static_cast<int>(kernels.size()));
        kernels.push_back({absl::StrCat("kiln_bench_", kernels.size()), k.source});
        s.launches.push_back(std::move(k));
      }
    }
    steps_.push_back(std::move(s));
  }

  void Load(const std::vector<ModuleKernel>& kernels, const std::string& arch) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, 48);
    ASSERT_TRUE(cubins.ok()) << cubins.status();
    for (const std::string& c : *cubins) {
      cudaLibrary_t lib;
      KILN_CUDA_OK(cudaLibraryLoadData(&lib, c.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      libs_.push_back(lib);
    }
    for (Step& s : steps_) {
      for (size_t i = 0; i < s.launches.size(); ++i) {
        cudaKernel_t k;
        KILN_CUDA_OK(cudaLibraryGetKernel(&k, libs_[s.kernel_index[i] / 48], kernels[s.kernel_index[i]].function.c_str()));
        if (s.launches[i].shared_bytes > 48 * 1024) {
          KILN_CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(s.launches[i].shared_bytes)));
        }
        s.fns.push_back(k);
      }
    }
    if (workspace_bytes_ > 0) KILN_CUDA_OK(cudaMalloc(&workspace_, workspace_bytes_));
  }

  // Enqueues step `i` (all steps for -1).
  void Run(int only = -1) {
    for (size_t si = 0; si < steps_.size(); ++si) {
      if (only >= 0 && static_cast<int>(si) != only) continue;
      Step& s = steps_[si];
      const Node& n = *s.node;
      if (s.lib) {
        LibraryLaunchArgs a;
        for (const Value* v : n.outputs()) a.outputs.push_back(buffers_.at(v));
        for (const Value* v : n.inputs()) a.inputs.push_back(v ? buffers_.at(v) : nullptr);
        a.workspace = workspace_;
        a.workspace_bytes = workspace_bytes_;
        ASSERT_TRUE(s.lib->Launch(a).ok());
        continue;
      }
      for (size_t i = 0; i < s.launches.size(); ++i) {
        const KernelLaunch& l = s.launches[i];
        std::vector<void*> ptrs(l.args.size());
        std::vector<void*> params(l.args.size());
        for (size_t j = 0; j < l.args.size(); ++j) {
          const int a = l.args[j];
          ptrs[j] = buffers_.at(a < n.num_outputs() ? n.output(a) : n.input(a - n.num_outputs()));
          params[j] = &ptrs[j];
        }
        KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(s.fns[i]), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                      dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes, nullptr));
      }
    }
  }

  // Median over 5 rounds of the mean time of `iters` runs (ms).
  double Time(int only = -1, int iters = 200) {
    for (int i = 0; i < 20; ++i) Run(only);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> rounds;
    for (int r = 0; r < 5; ++r) {
      cudaEventRecord(a);
      for (int i = 0; i < iters; ++i) Run(only);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      rounds.push_back(ms / iters);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(rounds.begin(), rounds.end());
    return rounds[2];
  }

  Tensor Read(const Value* v) {
    Tensor t(v->dtype(), v->shape());
    cudaMemcpy(t.mutable_raw_data(), buffers_.at(v), t.nbytes(), cudaMemcpyDeviceToHost);
    return t;
  }
  size_t steps() const { return steps_.size(); }
  std::string StepName(size_t i) const {
    const Step& s = steps_[i];
    return s.lib ? absl::StrCat("cuBLASLt ", s.node->op_type()) : s.node->op_type() == "FusedGroup"
                                                                      ? s.node->GetString("pattern", "").value_or("")
                                                                      : s.node->op_type();
  }

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<LibraryKernel> lib;
    std::vector<KernelLaunch> launches;
    std::vector<int> kernel_index;
    std::vector<cudaKernel_t> fns;
  };
  cublasLtHandle_t lt_;
  std::map<const Value*, void*> buffers_;
  std::vector<Step> steps_;
  std::vector<cudaLibrary_t> libs_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Mean device time (ms) of 100 back-to-back launches of `kernel`, the median of 5
// rounds after 10 warm-up launches, into `ms`.
void TimeLaunches(cudaKernel_t kernel, const KernelLaunch& l, const std::vector<void*>& dev, double* ms) {
  constexpr int kIters = 100;
  std::vector<void*> params(l.args.size());
  for (size_t j = 0; j < l.args.size(); ++j) params[j] = const_cast<void**>(&dev[l.args[j]]);
  auto launch = [&] {
    KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                  dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes, nullptr));
  };
  for (int i = 0; i < 10; ++i) launch();
  cudaEvent_t a, b;
  KILN_CUDA_OK(cudaEventCreate(&a));
  KILN_CUDA_OK(cudaEventCreate(&b));
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    KILN_CUDA_OK(cudaEventRecord(a));
    for (int i = 0; i < kIters; ++i) launch();
    KILN_CUDA_OK(cudaEventRecord(b));
    KILN_CUDA_OK(cudaEventSynchronize(b));
    float round_ms = 0;
    KILN_CUDA_OK(cudaEventElapsedTime(&round_ms, a, b));
    rounds.push_back(round_ms / kIters);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(rounds.begin(), rounds.end());
  *ms = rounds[2];
}

// The tile sweep behind PickAttentionConfig, key groups included: the zoo models'
// attention shapes at full size (Whisper-base's encoder at batch 1, BERT-base and
// GPT-2 at 8 x 128, ViT-B/16's packed QKV at 1 and 32, Llama's GQA), every config
// timed and its output checked against the heuristic's mma.sync kernel (on sm_90a the
// wgmma kernel's configs too, and the heuristic for an sm_90a target). Prints one line
// per config.
TEST(AttentionGpuTest, TileSweepTiming) {
  KILN_ARCH_OR_SKIP(arch);
  const DType f16 = DType::kFloat16;
  const std::vector<std::pair<std::string, AttnCase>> shapes = {
      {"Whisper-base b1", {f16, 1, 8, 1500, 1500, 64, 64, AttnMask::kNone, true, true}},
      {"BERT-base 8x128", {f16, 8, 12, 128, 128, 64, 64, AttnMask::kAdd, true, true}},
      {"GPT-2 8x128", {f16, 8, 12, 128, 128, 64, 64, AttnMask::kCausal, true, true}},
      {"ViT-B/16 b1", {f16, 1, 12, 197, 197, 64, 64, AttnMask::kNone, true, false, 0, true}},
      {"ViT-B/16 b32", {f16, 32, 12, 197, 197, 64, 64, AttnMask::kNone, true, false, 0, true}},
      {"GPT-2 8x128 sdpa",
       WithSdpaMask({f16, 8, 12, 128, 128, 64, 64, AttnMask::kSdpa, true, true}, AttnCase::SdpaMask::kCausal)},
      {"Llama 8x128",
       WithSdpaMask({f16, 8, 32, 128, 128, 64, 64, AttnMask::kSdpa, true, true, 4}, AttnCase::SdpaMask::kCausal)},
      {"BERT-base b1", {f16, 1, 12, 128, 128, 64, 64, AttnMask::kAdd, true, true}},
      {"GPT-2 b1x128", {f16, 1, 12, 128, 128, 64, 64, AttnMask::kCausal, true, true}},
      {"Swin-T b1 st1", {f16, 64, 3, 49, 49, 32, 32, AttnMask::kWindows, true, false, 0, true}},
      {"Swin-T b1 st3", {f16, 4, 12, 49, 49, 32, 32, AttnMask::kWindows, true, false, 0, true}},
      {"T5 8x128", {f16, 8, 12, 128, 128, 64, 64, AttnMask::kAdd, true, true}},
  };
  std::vector<ops::AttentionConfig> configs = {{0, 0, 0},   {64, 64, 1}, {32, 64, 1}, {16, 64, 1},  {64, 32, 2},
                                               {64, 64, 2}, {32, 64, 2}, {16, 64, 2}, {32, 32, 4},  {16, 32, 4},
                                               {16, 64, 4}, {64, 16, 4}, {32, 16, 4}, {128, 64, 1}, {96, 64, 1},
                                               {80, 64, 1}, {48, 64, 1}, {96, 32, 1}, {48, 32, 2}};
  // The first config (the reference of the others' outputs) is the heuristic's
  // mma.sync kernel; on sm_90a {0, 0, 0, true} is the heuristic for an sm_90a target.
  if (arch == "sm_90a") {  // the wgmma kernel's configs
    configs.push_back({0, 0, 0, true});
    for (int bm : {64, 128, 192}) {
      for (int bn : {64, 128}) {
        configs.push_back({bm, bn, 1, true});
        configs.push_back({bm, bn, 1, true, true});
      }
    }
  }
  for (const auto& [label, c] : shapes) {
    absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 5);
    ASSERT_TRUE(b.ok()) << label << ": " << b.status();
    const Node& node = *b->group;
    std::vector<KernelLaunch> launches;
    std::vector<ModuleKernel> kernels;
    std::vector<std::string> names;
    for (const ops::AttentionConfig& cfg : configs) {
      const bool heuristic = cfg.bm == 0, hopper = heuristic && cfg.wgmma;
      if (!heuristic && !ops::VerifyAttentionConfig(cfg, c.d, c.dv, c.k_trans).ok()) continue;
      absl::StatusOr<std::vector<KernelLaunch>> l =
          ops::GenerateAttentionGroup(node, heuristic ? nullptr : &cfg, hopper);
      ASSERT_TRUE(l.ok()) << label << ": " << l.status();
      launches.push_back((*l)[0]);
      kernels.push_back({absl::StrCat("kiln_attn_sweep_", kernels.size()), (*l)[0].source});
      const ops::AttentionConfig used =
          heuristic ? ops::PickAttentionConfig(launches.back().grid[1], c.sq, c.sk, c.d, c.dv, c.k_trans, hopper) : cfg;
      names.push_back(absl::StrCat(heuristic ? (hopper ? "heuristic sm_90a " : "heuristic ") : "",
                                   used.wgmma ? "wgmma " : "", used.overlap ? "overlap " : "", "BM ", used.bm, " BN ",
                                   used.bn, " groups ", used.splits));
    }
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, kernels.size());
    ASSERT_TRUE(cubins.ok()) << cubins.status();
    cudaLibrary_t lib;
    KILN_CUDA_OK(cudaLibraryLoadData(&lib, (*cubins)[0].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, b->feeds));
    std::vector<float> want;
    for (size_t i = 0; i < launches.size(); ++i) {
      cudaKernel_t kernel;
      ASSERT_NO_FATAL_FAILURE(test::GetKernel(lib, kernels[i].function, launches[i].shared_bytes, &kernel));
      ASSERT_NO_FATAL_FAILURE(test::LaunchAndWait(kernel, launches[i], buf.dev));
      const std::vector<float> got = buf.Output(node).ToFloat();
      if (i == 0) want = got;
      float diff = 0.f;
      for (size_t j = 0; j < got.size(); ++j) {
        const float scale = std::max(1.f, std::fabs(want[j]));
        diff = std::max(diff, std::isnan(got[j]) ? INFINITY : std::fabs(got[j] - want[j]) / scale);
      }
      EXPECT_LE(diff, 2e-2f) << label << ", " << names[i];
      double ms = 0;
      ASSERT_NO_FATAL_FAILURE(TimeLaunches(kernel, launches[i], buf.dev, &ms));
      std::printf("%-16s %-40s %8.4f ms  (grid %u x %u, %u threads)\n", label.c_str(), names[i].c_str(), ms,
                  launches[i].grid[0], launches[i].grid[1], launches[i].block[0]);
    }
    cudaLibraryUnload(lib);
  }
}

// BERT-base attention (H = 12, S = 128, D = 64, additive mask, fp16) at batch 1 and
// 32: the fused kernel against (a) kiln's unfused path with the softmax group
// (cuBLASLt Q K^T, one kernel for scale + mask + softmax, cuBLASLt P V) and (b) one
// kernel per op (cuBLASLt, Div, Add, Softmax, cuBLASLt). Same inputs; the outputs of
// all three agree.
TEST(AttentionGpuTest, BertBaseTiming) {
  KILN_ARCH_OR_SKIP(arch);
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  for (bool heads : {false, true}) {
    for (int64_t batch : {1, 32}) {
      const AttnCase c{DType::kFloat16, batch, 12, 128, 128, 64, 64, AttnMask::kAdd, true, heads};
      absl::StatusOr<test::AttnBuilt> fused = test::BuildAttention(c, 7);
      absl::StatusOr<test::AttnBuilt> grouped = test::BuildAttention(c, 7, /*fuse=*/false);
      absl::StatusOr<test::AttnBuilt> per_op = test::BuildAttention(c, 7, /*fuse=*/false);
      ASSERT_TRUE(fused.ok() && grouped.ok() && per_op.ok());
      ASSERT_TRUE(FusePointwise().Run(*grouped->graph).ok());  // forms the softmax group

      std::map<std::string, double> ms;
      std::map<std::string, size_t> kernels_run;
      std::vector<Tensor> outs;
      std::string breakdown;
      for (test::AttnBuilt* b : {&*fused, &*grouped, &*per_op}) {
        Program p(lt);
        std::vector<ModuleKernel> kernels;
        ASSERT_NO_FATAL_FAILURE(p.Allocate(*b->graph, b->feeds));
        for (const Node* n : b->graph->nodes()) ASSERT_NO_FATAL_FAILURE(p.Add(*n, kernels));
        ASSERT_NO_FATAL_FAILURE(p.Load(kernels, arch));
        p.Run();
        KILN_CUDA_OK(cudaDeviceSynchronize());
        outs.push_back(p.Read(b->graph->outputs()[0]));
        const std::string form = b == &*fused ? "fused" : b == &*grouped ? "softmax group" : "per op";
        ms[form] = p.Time();
        kernels_run[form] = p.steps();
        KILN_CUDA_OK(cudaGetLastError());
        if (b != &*fused) {
          absl::StrAppend(&breakdown, "    ", form, ":");
          for (size_t i = 0; i < p.steps(); ++i) {
            absl::StrAppend(&breakdown, " ", p.StepName(i), " ", absl::StrFormat("%.4f", p.Time(i)), " ms;");
          }
          absl::StrAppend(&breakdown, "\n");
        }
      }
      for (size_t i = 1; i < outs.size(); ++i) {
        const std::vector<float> a = outs[0].ToFloat(), b = outs[i].ToFloat();
        float diff = 0;
        for (size_t j = 0; j < a.size(); ++j) diff = std::max(diff, std::fabs(a[j] - b[j]));
        EXPECT_LT(diff, 2e-2f) << "fused vs unfused form " << i;
      }
      std::printf("BERT-base attention%s, B=%lld H=12 S=128 D=64 fp16 on %s: fused %.4f ms (1 kernel); unfused "
                  "(cuBLASLt + softmax group + cuBLASLt%s) %.4f ms (%zu kernels, %.2fx); one kernel per op %.4f ms "
                  "(%zu kernels, %.2fx)\n%s",
                  heads ? " from/to [B,S,H,D]" : "", static_cast<long long>(batch), test::DeviceName().c_str(),
                  ms["fused"], heads ? " + 4 Transposes" : "", ms["softmax group"], kernels_run["softmax group"],
                  ms["softmax group"] / ms["fused"], ms["per op"], kernels_run["per op"], ms["per op"] / ms["fused"],
                  breakdown.c_str());
    }
  }
  cublasLtDestroy(lt);
}

}  // namespace
}  // namespace kiln::codegen
