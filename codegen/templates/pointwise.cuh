// Helpers of generated element-wise kernels (codegen/ops/pointwise.cc): integer
// arithmetic that wraps like the CPU reference, NaN-propagating max/min, and the
// activation functions whose formulas are longer than one expression.
static __device__ __forceinline__ kiln_i64 kiln_wadd(kiln_i64 a, kiln_i64 b) {
  return (kiln_i64)((unsigned long long)a + (unsigned long long)b);
}
static __device__ __forceinline__ kiln_i64 kiln_wsub(kiln_i64 a, kiln_i64 b) {
  return (kiln_i64)((unsigned long long)a - (unsigned long long)b);
}
static __device__ __forceinline__ kiln_i64 kiln_wmul(kiln_i64 a, kiln_i64 b) {
  return (kiln_i64)((unsigned long long)a * (unsigned long long)b);
}
static __device__ __forceinline__ kiln_i64 kiln_wneg(kiln_i64 a) { return (kiln_i64)(0ULL - (unsigned long long)a); }
static __device__ __forceinline__ kiln_i64 kiln_idiv(kiln_i64 a, kiln_i64 b) {
  return b == 0 ? 0 : (b == -1 ? kiln_wneg(a) : a / b);
}
static __device__ __forceinline__ kiln_i64 kiln_ipow(kiln_i64 base, kiln_i64 e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  unsigned long long r = 1, b = (unsigned long long)base;
  while (e > 0) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return (kiln_i64)r;
}
static __device__ __forceinline__ kiln_i64 kiln_fpow_i64(kiln_i64 base, float e) {
  return (kiln_i64)pow((double)base, (double)e);  // cvt.rzi: truncates, saturates, NaN -> 0
}
static __device__ __forceinline__ float kiln_fmax_nan(float a, float b) { return (a != a || a > b) ? a : b; }
static __device__ __forceinline__ float kiln_fmin_nan(float a, float b) { return (a != a || a < b) ? a : b; }
static __device__ __forceinline__ kiln_i64 kiln_imax(kiln_i64 a, kiln_i64 b) { return a > b ? a : b; }
static __device__ __forceinline__ kiln_i64 kiln_imin(kiln_i64 a, kiln_i64 b) { return a < b ? a : b; }
static __device__ __forceinline__ float kiln_softplus(float x) {
  return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
// Sigmoid for a 16-bit result: ex2.approx (__expf) and the approximate division
// (rcp.approx, __fdividef) instead of expf's range reduction and an IEEE division,
// about a quarter of the instructions (SiLU epilogues of EfficientNet's 1x1-conv
// GEMMs, whose K of 16..40 leaves the epilogue most of the work). Relative error a few
// fp32 ulp over the whole range, far below fp16's and bf16's rounding; past x = -87
// the sum exceeds 2^126 and the result is 0 instead of a value below 2^-125.
static __device__ __forceinline__ float kiln_sigmoid_fast(float x) { return __fdividef(1.f, 1.f + __expf(-x)); }
static __device__ __forceinline__ float kiln_gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.7071067811865476f)); }
static __device__ __forceinline__ float kiln_gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
// The same with the hardware tanh (tanh.approx.f32, sm_75+: one MUFU op, maximum
// relative error about 2^-11 per the PTX ISA, where libdevice's tanhf takes two MUFU
// ops and a dozen more instructions). codegen/ops/pointwise.cc emits it only where
// the Gelu's result is a 16-bit value (fp16/bf16: relative rounding 2^-11 / 2^-8);
// an fp32 result keeps kiln_gelu_tanh. The error is |0.5 x| 2^-11 at most, which is
// relative to 0.5|x| rather than to the result: in the negative tail (x < -2, where
// GELU is tiny) it is far more than an ulp of the result but below 2^-11 max(1, |x|).
static __device__ __forceinline__ float kiln_tanh_approx(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}
static __device__ __forceinline__ float kiln_gelu_tanh_fast(float x) {
  const float h = 0.5f * x;
  const float u = x * fmaf(0.035677408136300125f, x * x, 0.7978845608028654f);  // sqrt(2/pi) (x + 0.044715 x^3)
  return fmaf(h, kiln_tanh_approx(u), h);
}
// GELU's erf form for a 16-bit result in ten FP32-pipe instructions and one MUFU op
// (ex2.approx), no branch, no select; erff selects between two polynomials and branches around its
// ex2 on |x| >= 1. GELU(x) = x Phi(x) = relu(x) - |x| Phi(-|x|) for either sign, and
// Phi(-|x|) = 0.5 erfc(|x| / sqrt(2)) = 2^P(|x|), where P, of degree 7, fits
// log2(0.5 erfc(x / sqrt(2))) on [0, 6.36] (Chebyshev interpolation by
// scripts/fit_gelu_erf.py; 2^P is within 7.9e-6 relative there, fp32 rounding
// included, ~60x under fp16's rounding; every fp16 and bf16 result is within 0.51 ulp
// of GELU in double precision). One fma then gives the result: no cancellation in the
// negative tail, where 1 + erf(x / sqrt(2)) loses everything (x < -4). Past 6.36,
// |x| is held at 6.36: for x > 6.36 the result is x (6.4e-10 below it, lost in the
// rounding), for x < -6.36 it is -6.4e-10 where GELU is smaller still (0 in fp16; in
// bf16 within 1e-9). relu keeps NaN (max.NaN): NaN gives NaN, +inf gives +inf, and
// -inf gives -6.4e-10 (GELU's limit is 0; x Phi(x) in fp32 is NaN there).
static __device__ __forceinline__ float kiln_exp2_approx(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}
static __device__ __forceinline__ float kiln_relu_nan(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float y;
  asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(y) : "f"(x));
  return y;
#else
  return x != x ? x : fmaxf(x, 0.f);
#endif
}
static __device__ __forceinline__ float kiln_gelu_erf_fast(float x) {
  const float xq = fminf(fabsf(x), 6.36f);
  float p = -1.88805018e-06f;  // P, highest power first
  p = fmaf(p, xq, 6.28750058e-05f);
  p = fmaf(p, xq, -0.000942605024f);
  p = fmaf(p, xq, 0.00856493786f);
  p = fmaf(p, xq, -0.0540996939f);
  p = fmaf(p, xq, -0.458299279f);
  p = fmaf(p, xq, -1.15132594f);
  p = fmaf(p, xq, -0.99998951f);
  return fmaf(-xq, kiln_exp2_approx(p), kiln_relu_nan(x));  // relu(x) - |x| Phi(-|x|)
}
// Column pairs of a 16-bit column vector (a GEMM epilogue's bias) as registers, the
// way a wgmma accumulator fragment holds them: r[j] = elements first + 8 j (low half)
// and first + 8 j + 1 (high half), zeros at or past `bound`. One 4-byte load a pair
// where `first` is even and p 4-byte aligned, two 2-byte loads otherwise.
// kiln_unpack_f16x2 / kiln_unpack_bf16x2 give a register's low and high halves as fp32
// (a column pair; two elements of a wgmma fragment).
template <int J>
static __device__ __forceinline__ void kiln_column_pairs(unsigned (&r)[J], const unsigned short* p, int first,
                                                         int bound) {
  if ((first & 1) == 0 && (reinterpret_cast<unsigned long long>(p) & 3) == 0 && first + 8 * (J - 1) + 1 < bound) {
    const unsigned* q = reinterpret_cast<const unsigned*>(p + first);
#pragma unroll
    for (int j = 0; j < J; ++j) r[j] = q[4 * j];
  } else {
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int c = first + 8 * j;
      r[j] = (c < bound ? p[c] : 0u) | ((c + 1 < bound ? p[c + 1] : 0u) << 16);
    }
  }
}
static __device__ __forceinline__ void kiln_unpack_f16x2(unsigned v, float& lo, float& hi) {
  asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(v));
}
static __device__ __forceinline__ void kiln_unpack_bf16x2(unsigned v, float& lo, float& hi) {
  lo = __uint_as_float(v << 16);
  hi = __uint_as_float(v & 0xffff0000u);
}
// ReLU of two packed 16-bit values (a GEMM epilogue's last op, after rounding:
// relu(round(x)) == round(relu(x)); NaN gives 0, as x > 0 ? x : 0 does).
static __device__ __forceinline__ unsigned kiln_relu_f16x2(unsigned x) {
  unsigned y;
  asm("max.f16x2 %0, %1, %2;" : "=r"(y) : "r"(x), "r"(0u));
  return y;
}
static __device__ __forceinline__ unsigned kiln_relu_bf16x2(unsigned x) {
  unsigned y;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(y) : "r"(x), "r"(0u));
  return y;
}
// GELU's tanh form on two packed fp16 values, in fp16x2 arithmetic (a GEMM epilogue's
// last op with an fp16 result, on the rounded pre-activation): six instructions for
// two elements, where the fp32 form takes six per element (five and a MUFU op);
// tanh.approx.f16x2 is still two MUFU.TANH.F16 in SASS. Constants rounded to fp16: 0.5, sqrt(2/pi) =
// 0.79785 (0x3a62), 0.044715 sqrt(2/pi) = 0.035675 (0x2891). x^2 overflows past
// |x| = 256 to inf, and tanh(+-inf) = +-1 gives x or 0 there, as GELU does.
static __device__ __forceinline__ unsigned kiln_gelu_tanh_f16x2(unsigned x) {
  unsigned h, x2, p, u, t, y;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(h) : "r"(x), "r"(0x38003800u));
  asm("mul.rn.f16x2 %0, %1, %1;" : "=r"(x2) : "r"(x));
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(p) : "r"(x2), "r"(0x28912891u), "r"(0x3a623a62u));
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(u) : "r"(x), "r"(p));
  asm("tanh.approx.f16x2 %0, %1;" : "=r"(t) : "r"(u));
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(h), "r"(t), "r"(h));
  return y;
}
