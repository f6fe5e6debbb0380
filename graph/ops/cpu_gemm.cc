// Internal fp32 GEMM for the CPU reference ops: BLIS-style packing into MR x KC and
// KC x NR panels, a register-blocked 6x16 micro-kernel (AVX-512 or AVX2+FMA chosen
// at run time on x86-64, a portable auto-vectorised loop elsewhere), and a parallel
// loop over MC x NC output tiles of every problem. Skinny problems (one operand a
// vector or nearly so) take a streaming path that reads each operand once.
#include "graph/ops/cpu_gemm.h"

#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_GEMM_X86 1
#include <immintrin.h>
#endif

namespace kiln::ops::cpu {
namespace {

constexpr int kMR = 6;
constexpr int kNR = 16;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 144;  // multiple of kMR
constexpr int64_t kNC = 512;  // multiple of kNR
constexpr int64_t kMinMC = 24;
constexpr int64_t kMinNC = 64;

// C tile (mr x nr valid of kMR x kNR) = alpha * Ap * Bp, or += when `accumulate`.
using KernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                          float alpha, bool accumulate);

void StoreTile(const float (&acc)[kMR][kNR], float* c, int64_t ldc, int mr, int nr, float alpha,
               bool accumulate) {
  for (int i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      for (int j = 0; j < nr; ++j) row[j] += alpha * acc[i][j];
    } else {
      for (int j = 0; j < nr; ++j) row[j] = alpha * acc[i][j];
    }
  }
}

// Portable kernel. With GCC/Clang the accumulators are generic 4-wide vectors
// (SSE/NEON/...); otherwise the contiguous j loop is left to the auto-vectoriser.
void KernelGeneric(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                   float alpha, bool accumulate) {
#if defined(__GNUC__) || defined(__clang__)
  typedef float V4 __attribute__((vector_size(16)));
  constexpr int kLanes = kNR / 4;
  V4 acc[kMR][kLanes] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kMR;
    V4 bv[kLanes];
    std::memcpy(bv, b + p * kNR, sizeof(bv));
    for (int i = 0; i < kMR; ++i) {
      const float av = ap[i];
      for (int j = 0; j < kLanes; ++j) acc[i][j] += av * bv[j];
    }
  }
  float out[kMR][kNR];
  std::memcpy(out, acc, sizeof(out));
#else
  float out[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kMR;
    const float* bp = b + p * kNR;
    for (int i = 0; i < kMR; ++i) {
      const float av = ap[i];
      for (int j = 0; j < kNR; ++j) out[i][j] += av * bp[j];
    }
  }
#endif
  StoreTile(out, c, ldc, mr, nr, alpha, accumulate);
}

#ifdef KILN_GEMM_X86

__attribute__((target("avx512f"))) void KernelAvx512(int64_t kc, const float* a, const float* b, float* c,
                                                     int64_t ldc, int mr, int nr, float alpha,
                                                     bool accumulate) {
  __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 bv = _mm512_loadu_ps(b);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), bv, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a[1]), bv, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2]), bv, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3]), bv, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a[4]), bv, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a[5]), bv, c5);
    a += kMR;
    b += kNR;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 rows[kMR] = {c0, c1, c2, c3, c4, c5};
  const __mmask16 mask = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  for (int i = 0; i < mr; ++i) {
    float* dst = c + i * ldc;
    __m512 r = _mm512_mul_ps(rows[i], va);
    if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, dst));
    _mm512_mask_storeu_ps(dst, mask, r);
  }
}

__attribute__((target("avx2,fma"))) void KernelAvx2(int64_t kc, const float* a, const float* b, float* c,
                                                    int64_t ldc, int mr, int nr, float alpha,
                                                    bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps();
  __m256 c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps();
  __m256 c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += kMR;
    b += kNR;
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 rows[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (nr == kNR) {
    for (int i = 0; i < mr; ++i) {
      float* dst = c + i * ldc;
      __m256 r0 = _mm256_mul_ps(rows[i][0], va);
      __m256 r1 = _mm256_mul_ps(rows[i][1], va);
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(dst));
        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(dst + 8));
      }
      _mm256_storeu_ps(dst, r0);
      _mm256_storeu_ps(dst + 8, r1);
    }
    return;
  }
  alignas(32) float acc[kMR][kNR];
  for (int i = 0; i < kMR; ++i) {
    _mm256_store_ps(acc[i], rows[i][0]);
    _mm256_store_ps(acc[i] + 8, rows[i][1]);
  }
  StoreTile(acc, c, ldc, mr, nr, alpha, accumulate);
}

#endif  // KILN_GEMM_X86

struct KernelChoice {
  KernelFn fn;
  const char* name;
  bool supported;
};

// Every kernel of this build, best first, with whether this CPU runs it.
const std::vector<KernelChoice>& Kernels() {
  static const std::vector<KernelChoice> kernels = [] {
    std::vector<KernelChoice> k;
#ifdef KILN_GEMM_X86
    __builtin_cpu_init();
    k.push_back({KernelAvx512, "avx512", __builtin_cpu_supports("avx512f") != 0});
    k.push_back({KernelAvx2, "avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")});
#endif
    k.push_back({KernelGeneric, "generic", true});
    return k;
  }();
  return kernels;
}

std::atomic<const KernelChoice*>& Selected() {
  static std::atomic<const KernelChoice*> selected = [] {
    for (const KernelChoice& k : Kernels()) {
      if (k.supported) return &k;
    }
    return &Kernels().back();
  }();
  return selected;
}

const KernelChoice& Kernel() { return *Selected().load(std::memory_order_relaxed); }

// 64-byte aligned scratch that grows on demand (one per thread).
class Scratch {
 public:
  float* Get(size_t n) {
    if (n > size_) {
      data_.reset(static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64)));
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

// Packs A rows [i0, i0+mc), cols [p0, p0+kc) into kMR-row panels (panel r at
// dst + r*kc, element (p, ii) at p*kMR + ii), zero-padding the last panel.
void PackA(const MatrixRef& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - ir));
    float* d = dst + ir * kc;
    if (a.col_stride == 1) {
      for (int ii = 0; ii < mr; ++ii) {
        const float* src = a.data + (i0 + ir + ii) * a.row_stride + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * kMR + ii] = src[p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a.data + (p0 + p) * a.col_stride + (i0 + ir) * a.row_stride;
        for (int ii = 0; ii < mr; ++ii) d[p * kMR + ii] = src[ii * a.row_stride];
      }
    }
    if (mr < kMR) {
      for (int64_t p = 0; p < kc; ++p) {
        for (int ii = mr; ii < kMR; ++ii) d[p * kMR + ii] = 0.f;
      }
    }
  }
}

// Packs B rows [p0, p0+kc), cols [j0, j0+nc) into kNR-column panels (panel at
// dst + jr*kc, element (p, jj) at p*kNR + jj), zero-padding the last panel.
void PackB(const GemmProblem& pr, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst,
           float* row_buf) {
  const MatrixRef& b = pr.b;
  if (pr.b_rows || b.col_stride == 1) {
    for (int64_t p = 0; p < kc; ++p) {
      const float* row;
      if (pr.b_rows) {
        pr.b_rows(p0 + p, j0, nc, row_buf);
        row = row_buf;
      } else {
        row = b.data + (p0 + p) * b.row_stride + j0;
      }
      for (int64_t jr = 0; jr < nc; jr += kNR) {
        const int64_t nr = std::min<int64_t>(kNR, nc - jr);
        float* d = dst + jr * kc + p * kNR;
        std::memcpy(d, row + jr, nr * sizeof(float));
        for (int64_t jj = nr; jj < kNR; ++jj) d[jj] = 0.f;
      }
    }
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t nr = std::min<int64_t>(kNR, nc - jr);
    float* d = dst + jr * kc;
    for (int64_t jj = 0; jj < nr; ++jj) {
      const float* src = b.data + p0 * b.row_stride + (j0 + jr + jj) * b.col_stride;
      for (int64_t p = 0; p < kc; ++p) d[p * kNR + jj] = src[p * b.row_stride];
    }
    for (int64_t jj = nr; jj < kNR; ++jj) {
      for (int64_t p = 0; p < kc; ++p) d[p * kNR + jj] = 0.f;
    }
  }
}

// C tile rows [i0, i0+mc), cols [j0, j0+nc) *= beta (0 clears without reading).
void ScaleTile(float* c, int64_t ldc, int64_t i0, int64_t mc, int64_t j0, int64_t nc, float beta) {
  for (int64_t i = i0; i < i0 + mc; ++i) {
    float* row = c + i * ldc + j0;
    if (beta == 0.f) {
      std::fill(row, row + nc, 0.f);
    } else {
      for (int64_t j = 0; j < nc; ++j) row[j] *= beta;
    }
  }
}

struct Tile {
  int problem;
  int64_t i0, mc, j0, nc;
};

void RunTile(const GemmProblem& pr, const Tile& t) {
  if (pr.k == 0) {
    ScaleTile(pr.c, pr.ldc, t.i0, t.mc, t.j0, t.nc, pr.beta);
    return;
  }
  if (pr.beta != 0.f && pr.beta != 1.f) ScaleTile(pr.c, pr.ldc, t.i0, t.mc, t.j0, t.nc, pr.beta);
  thread_local Scratch a_scratch, b_scratch, row_scratch;
  // Split K into equal blocks of at most kKC (no short tail block).
  const int64_t kc_max = (pr.k + (pr.k + kKC - 1) / kKC - 1) / ((pr.k + kKC - 1) / kKC);
  float* ap = a_scratch.Get(((t.mc + kMR - 1) / kMR) * kMR * kc_max);
  float* bp = b_scratch.Get(((t.nc + kNR - 1) / kNR) * kNR * kc_max);
  float* row_buf = pr.b_rows ? row_scratch.Get(t.nc) : nullptr;
  const KernelFn kernel = Kernel().fn;
  for (int64_t p0 = 0; p0 < pr.k; p0 += kc_max) {
    const int64_t kc = std::min<int64_t>(kc_max, pr.k - p0);
    PackA(pr.a, t.i0, t.mc, p0, kc, ap);
    PackB(pr, p0, kc, t.j0, t.nc, bp, row_buf);
    const bool accumulate = p0 > 0 || pr.beta != 0.f;
    for (int64_t jr = 0; jr < t.nc; jr += kNR) {
      const int nr = static_cast<int>(std::min<int64_t>(kNR, t.nc - jr));
      for (int64_t ir = 0; ir < t.mc; ir += kMR) {
        const int mr = static_cast<int>(std::min<int64_t>(kMR, t.mc - ir));
        kernel(kc, ap + ir * kc, bp + jr * kc, pr.c + (t.i0 + ir) * pr.ldc + t.j0 + jr, pr.ldc, mr, nr,
               pr.alpha, accumulate);
      }
    }
  }
}

// Skinny problems: at most kSkinny rows of C (or columns, by transposition). C is
// addressed as C(i, j) = c[i * c_rs + j * c_cs].
constexpr int64_t kSkinny = 2;

struct Skinny {
  int64_t m, n, k;
  MatrixRef a, b;
  float* c;
  int64_t c_rs, c_cs;
  float alpha, beta;
};

// Whether the problem can take the streaming path; fills `s` if so.
bool AsSkinny(const GemmProblem& pr, Skinny* s) {
  if (pr.b_rows || pr.k == 0) return false;
  if (pr.m <= kSkinny) {
    *s = {pr.m, pr.n, pr.k, pr.a, pr.b, pr.c, pr.ldc, 1, pr.alpha, pr.beta};
  } else if (pr.n <= kSkinny) {
    // C^T = B^T A^T.
    const MatrixRef at{pr.b.data, pr.b.col_stride, pr.b.row_stride};
    const MatrixRef bt{pr.a.data, pr.a.col_stride, pr.a.row_stride};
    *s = {pr.n, pr.m, pr.k, at, bt, pr.c, 1, pr.ldc, pr.alpha, pr.beta};
  } else {
    return false;
  }
  // Needs B contiguous along rows (axpy form) or along columns (dot form).
  return s->b.col_stride == 1 || s->b.row_stride == 1;
}

constexpr int64_t kSkinnyChunk = 2048;

void StoreSkinny(const Skinny& s, int64_t i, int64_t j0, int64_t nc, const float* acc) {
  for (int64_t j = 0; j < nc; ++j) {
    float& dst = s.c[i * s.c_rs + (j0 + j) * s.c_cs];
    const float v = s.alpha * acc[j];
    dst = s.beta == 0.f ? v : v + s.beta * dst;
  }
}

float Dot(const float* x, int64_t x_stride, const float* y, int64_t n) {
  if (x_stride == 1) {
    float part[8] = {};
    int64_t p = 0;
    for (; p + 8 <= n; p += 8) {
      for (int l = 0; l < 8; ++l) part[l] += x[p + l] * y[p + l];
    }
    float sum = 0.f;
    for (; p < n; ++p) sum += x[p] * y[p];
    for (int l = 0; l < 8; ++l) sum += part[l];
    return sum;
  }
  float sum = 0.f;
  for (int64_t p = 0; p < n; ++p) sum += x[p * x_stride] * y[p];
  return sum;
}

void RunSkinnyChunk(const Skinny& s, int64_t j0, int64_t nc) {
  float acc[kSkinnyChunk];
  for (int64_t i = 0; i < s.m; ++i) {
    const float* arow = s.a.data + i * s.a.row_stride;
    if (s.b.col_stride == 1) {
      std::fill(acc, acc + nc, 0.f);
      for (int64_t p = 0; p < s.k; ++p) {
        const float av = arow[p * s.a.col_stride];
        const float* brow = s.b.data + p * s.b.row_stride + j0;
        for (int64_t j = 0; j < nc; ++j) acc[j] += av * brow[j];
      }
    } else {
      for (int64_t j = 0; j < nc; ++j) {
        acc[j] = Dot(arow, s.a.col_stride, s.b.data + (j0 + j) * s.b.col_stride, s.k);
      }
    }
    StoreSkinny(s, i, j0, nc, acc);
  }
}

}  // namespace

const char* GemmKernelName() { return Kernel().name; }

bool UseGemmKernel(const std::string& name) {
  for (const KernelChoice& k : Kernels()) {
    if (k.supported && (name.empty() || name == k.name)) {
      Selected().store(&k);
      return true;
    }
  }
  return false;
}

void Gemm(absl::Span<const GemmProblem> problems) {
  // Skinny problems stream; the rest are split into tiles.
  std::vector<Skinny> skinny;
  std::vector<int> tiled;
  double flops = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const GemmProblem& pr = problems[i];
    if (pr.m <= 0 || pr.n <= 0) continue;
    flops += 2.0 * pr.m * pr.n * std::max<int64_t>(pr.k, 1);
    Skinny s;
    if (AsSkinny(pr, &s)) {
      skinny.push_back(s);
    } else {
      tiled.push_back(static_cast<int>(i));
    }
  }
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  const bool serial = flops < 4e5 || threads <= 1;

  if (!skinny.empty()) {
    struct Chunk {
      int problem;
      int64_t j0, nc;
    };
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < skinny.size(); ++i) {
      // Long contiguous chunks, but at least two per thread.
      const int64_t n = skinny[i].n;
      const int64_t chunk = std::clamp<int64_t>((n / (2 * threads) + 15) / 16 * 16, 256, kSkinnyChunk);
      for (int64_t j0 = 0; j0 < n; j0 += chunk) {
        chunks.push_back({static_cast<int>(i), j0, std::min<int64_t>(chunk, n - j0)});
      }
    }
    const int64_t count = static_cast<int64_t>(chunks.size());
    ParallelFor(count, serial ? count : 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) RunSkinnyChunk(skinny[chunks[t].problem], chunks[t].j0, chunks[t].nc);
    });
  }
  if (tiled.empty()) return;

  // Shrink tiles until there are enough to keep every thread busy.
  int64_t mc = kMC, nc = kNC;
  auto count_tiles = [&] {
    int64_t total = 0;
    for (int i : tiled) total += ((problems[i].m + mc - 1) / mc) * ((problems[i].n + nc - 1) / nc);
    return total;
  };
  const int64_t target = 4 * threads;
  while (!serial && count_tiles() < target && (mc > kMinMC || nc > kMinNC)) {
    if (mc > kMinMC && (mc >= nc / 4 || nc <= kMinNC)) {
      mc = std::max<int64_t>(kMinMC, ((mc / 2 + kMR - 1) / kMR) * kMR);
    } else {
      nc = std::max<int64_t>(kMinNC, ((nc / 2 + kNR - 1) / kNR) * kNR);
    }
  }
  std::vector<Tile> tiles;
  tiles.reserve(count_tiles());
  for (int i : tiled) {
    const GemmProblem& pr = problems[i];
    for (int64_t i0 = 0; i0 < pr.m; i0 += mc) {
      for (int64_t j0 = 0; j0 < pr.n; j0 += nc) {
        tiles.push_back({i, i0, std::min(mc, pr.m - i0), j0, std::min(nc, pr.n - j0)});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(tiles.size());
  ParallelFor(count, serial ? count : 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) RunTile(problems[tiles[t].problem], tiles[t]);
  });
}

}  // namespace kiln::ops::cpu
