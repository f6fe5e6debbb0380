// Windowed pooling template (codegen/ops/pool.cc): one thread per output element of
// X [planes, spatial..., kC] lifted to 3 spatial dims: NCHW is planes = N * C with
// kC = 1, channels_last NHWC is planes = N with the kC channels innermost (adjacent
// threads read adjacent channels). The generated prefix defines
// kiln_in_t, kiln_out_t, kiln_idx_t, kPlanes, kC, kIn{0,1,2}, kOut{0,1,2}, kK{0,1,2},
// kS{0,1,2} (strides), kD{0,1,2} (dilations), kPb{0,1,2}, kPe{0,1,2} (pads), kIsMax,
// kCountPad, kiln_load(p, i) -> float, kiln_store(p, i, float).
struct kiln_taps {
  int start, lo, hi, lo_pad, hi_pad;
};

static __device__ __forceinline__ int kiln_ceil_div(int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

static __device__ __forceinline__ int kiln_clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Taps t in [0, k) of output position o that land inside the input (lo, hi) and
// inside the input extended by its pads (lo_pad, hi_pad).
static __device__ __forceinline__ kiln_taps kiln_window(int o, int in, int k, int s, int d, int pb, int pe) {
  kiln_taps t;
  t.start = o * s - pb;
  t.lo = kiln_clampi(kiln_ceil_div(-t.start, d), 0, k);
  t.hi = kiln_clampi(kiln_ceil_div(in - t.start, d), t.lo, k);
  t.lo_pad = kiln_clampi(kiln_ceil_div(-pb - t.start, d), 0, k);
  t.hi_pad = kiln_clampi(kiln_ceil_div(in + pe - t.start, d), t.lo_pad, k);
  return t;
}

static __device__ __forceinline__ void kiln_pool(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in) {
  constexpr kiln_idx_t kOutPlane = (kiln_idx_t)kOut0 * kOut1 * kOut2;
  constexpr kiln_idx_t kInPlane = (kiln_idx_t)kIn0 * kIn1 * kIn2;
  constexpr kiln_idx_t kTotal = kOutPlane * kPlanes * kC;
  for (kiln_idx_t i = (kiln_idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < kTotal;
       i += (kiln_idx_t)gridDim.x * blockDim.x) {
    const int c = kC == 1 ? 0 : (int)(i % kC);
    const kiln_idx_t i0 = kC == 1 ? i : i / kC;
    const int ow = (int)(i0 % kOut2);
    const kiln_idx_t t1 = i0 / kOut2;
    const int oh = (int)(t1 % kOut1);
    const kiln_idx_t t2 = t1 / kOut1;
    const int od = (int)(t2 % kOut0);
    const kiln_idx_t plane = t2 / kOut0;
    const kiln_in_t* p = in + plane * kInPlane * kC + c;
    const kiln_taps d = kiln_window(od, kIn0, kK0, kS0, kD0, kPb0, kPe0);
    const kiln_taps h = kiln_window(oh, kIn1, kK1, kS1, kD1, kPb1, kPe1);
    const kiln_taps w = kiln_window(ow, kIn2, kK2, kS2, kD2, kPb2, kPe2);
    float acc = kIsMax ? -__int_as_float(0x7f800000) : 0.f;
    for (int td = d.lo; td < d.hi; ++td) {
      const int id = d.start + td * kD0;
      for (int th = h.lo; th < h.hi; ++th) {
        const kiln_in_t* row = p + ((kiln_idx_t)id * kIn1 + h.start + th * kD1) * kIn2 * kC;
        for (int tw = w.lo; tw < w.hi; ++tw) {
          const float v = kiln_load(row, (w.start + tw * kD2) * kC);
          if (kIsMax) {
            acc = (v > acc || v != v) ? v : acc;
          } else {
            acc += v;
          }
        }
      }
    }
    if (!kIsMax) {
      const int count = kCountPad ? (d.hi_pad - d.lo_pad) * (h.hi_pad - h.lo_pad) * (w.hi_pad - w.lo_pad)
                                  : (d.hi - d.lo) * (h.hi - h.lo) * (w.hi - w.lo);
      acc = count > 0 ? acc / (float)count : 0.f;
    }
    kiln_store(out, i, acc);
  }
}
