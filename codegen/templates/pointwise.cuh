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
// GELU's erf form for a 16-bit result, with one MUFU op (ex2.approx) and no branch,
// about half the arithmetic of erff (which selects between two polynomials and
// branches around its ex2 on |x| >= 1). With z = |x| / sqrt(2): erfc(z) =
// exp(z Q(z) - z^2), where z Q(z) fits log(erfc(z)) + z^2 on [0, 4.5] (Q of degree 6,
// a Chebyshev interpolation by scripts/fit_gelu_erf.py; the relative error of
// 0.5 erfc(z), fp32 rounding included, is below 1.3e-5 there, ~40x under fp16's
// rounding). Then Phi(x) = 0.5 erfc(z) for x < 0, 1 - 0.5 erfc(z) otherwise, and
// GELU = x Phi(x). Past z = 4.5 (|x| > 6.36) Q is held at 4.5: the result for x <
// -6.36 is then below 1e-9 in magnitude (too small for fp16; relatively off by up to
// tens of percent in bf16), and for x > 6.36 it is x.
static __device__ __forceinline__ float kiln_exp2_approx(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}
static __device__ __forceinline__ float kiln_gelu_erf_fast(float x) {
  const float z = fabsf(x) * 0.7071067811865476f;
  const float zq = fminf(z, 4.5f);
  float q = -1.2991618e-05f;
  q = fmaf(q, zq, 0.000319322629f);
  q = fmaf(q, zq, -0.00350968074f);
  q = fmaf(q, zq, 0.0231610704f);
  q = fmaf(q, zq, -0.105122238f);
  q = fmaf(q, zq, 0.363953263f);
  q = fmaf(q, zq, -1.12840474f);
  // 0.5 erfc(z) = 2^((z Q(z) - z^2) log2(e) - 1)
  const float half_erfc = kiln_exp2_approx(fmaf(fmaf(q, zq, -z * z), 1.4426950408889634f, -1.f));
  return x * (x < 0.f ? half_erfc : 1.f - half_erfc);
}
