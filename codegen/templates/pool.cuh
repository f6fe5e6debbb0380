// Windowed pooling template (codegen/ops/pool.cc): X [planes, spatial..., kC] lifted
// to 3 spatial dims: NCHW is planes = N * C with kC = 1, channels_last NHWC is
// planes = N with the kC channels innermost. One thread per output element, or in
// NHWC per kVec adjacent channels of one output position (kVec * element <= 16
// bytes, one vector load per tap; kC % kVec == 0), adjacent threads taking adjacent
// channels. The generated prefix defines kiln_in_t, kiln_out_t, kiln_idx_t,
// kPlanes, kC, kVec, kIn{0,1,2}, kOut{0,1,2}, kK{0,1,2}, kS{0,1,2} (strides),
// kD{0,1,2} (dilations), kPb{0,1,2}, kPe{0,1,2} (pads), kIsMax, kCountPad,
// kiln_load(p, i) -> float, kiln_store(p, i, float); vector.cuh comes before it.
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

// V channels per thread (V divides kC; V > 1 needs both pointers V-element aligned).
template <int V>
static __device__ __forceinline__ void kiln_pool_v(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in,
                                                   kiln_idx_t planes) {
  constexpr int kCV = kC / V;
  constexpr kiln_idx_t kOutPlane = (kiln_idx_t)kOut0 * kOut1 * kOut2;
  constexpr kiln_idx_t kInPlane = (kiln_idx_t)kIn0 * kIn1 * kIn2;
  const kiln_idx_t total = kOutPlane * planes * kCV;
  for (kiln_idx_t i = (kiln_idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (kiln_idx_t)gridDim.x * blockDim.x) {
    const int c = kCV == 1 ? 0 : (int)(i % kCV) * V;
    const kiln_idx_t i0 = kCV == 1 ? i : i / kCV;
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
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = kIsMax ? -__int_as_float(0x7f800000) : 0.f;
    for (int td = d.lo; td < d.hi; ++td) {
      const int id = d.start + td * kD0;
      for (int th = h.lo; th < h.hi; ++th) {
        const kiln_in_t* row = p + ((kiln_idx_t)id * kIn1 + h.start + th * kD1) * kIn2 * kC;
        for (int tw = w.lo; tw < w.hi; ++tw) {
          const kiln_vec_pack<kiln_in_t, V> x = kiln_vec_ld<V>(row + (w.start + tw * kD2) * kC);
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const float v = kiln_load(x.v, j);
            if (kIsMax) {
              acc[j] = (v > acc[j] || v != v) ? v : acc[j];
            } else {
              acc[j] += v;
            }
          }
        }
      }
    }
    kiln_vec_pack<kiln_out_t, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float r = acc[j];
      if (!kIsMax) {
        const int count = kCountPad ? (d.hi_pad - d.lo_pad) * (h.hi_pad - h.lo_pad) * (w.hi_pad - w.lo_pad)
                                    : (d.hi - d.lo) * (h.hi - h.lo) * (w.hi - w.lo);
        r = count > 0 ? r / (float)count : 0.f;
      }
      kiln_store(y.v, j, r);
    }
    kiln_vec_st<V>(out + i * V, y);
  }
}

// `planes`: kPlanes, or fewer (a dynamic bundle's run, read from its kiln_dims).
static __device__ __forceinline__ void kiln_pool(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in,
                                                 kiln_idx_t planes) {
  if (kVec > 1 && kiln_vec_aligned(out, kVec * sizeof(kiln_out_t)) && kiln_vec_aligned(in, kVec * sizeof(kiln_in_t))) {
    kiln_pool_v<kVec>(out, in, planes);
  } else {
    kiln_pool_v<1>(out, in, planes);
  }
}
