// Ampere-class (sm_80 and later) tensor-core primitives shared by kiln's kernel
// templates: cp.async copies into shared memory, ldmatrix, mma.sync m16n8k16 (and
// m16n8k8 .tf32) with fp32 accumulators, and fp32 -> f16x2/bf16x2 packing. No
// macros: the element type is a template argument (BF16 = true for bfloat16 inputs,
// false for fp16), so a template that includes this text configures nothing here.
// Used by gemm_sm80.cuh, attention_sm80.cuh and (its cp.async) gemm_simt.cuh;
// codegen/ops/gemm_source.cc and attention.cc put it first.

typedef unsigned short kiln_mma_t;  // fp16 or bf16 bits

static __device__ __forceinline__ unsigned kiln_mma_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Global -> shared copies of 16 bytes (through L2) or 4 (through L1) to a shared-memory
// address (kiln_mma_smem_addr's) or pointer; bytes past src_bytes are zero-filled.
static __device__ __forceinline__ void kiln_mma_cp16_at(unsigned smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes));
}
static __device__ __forceinline__ void kiln_mma_cp4_at(unsigned smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes));
}
static __device__ __forceinline__ void kiln_mma_cp16(void* smem, const void* gmem, int src_bytes) {
  kiln_mma_cp16_at(kiln_mma_smem_addr(smem), gmem, src_bytes);
}
static __device__ __forceinline__ void kiln_mma_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N>
static __device__ __forceinline__ void kiln_mma_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices; lane l supplies the address of row l % 8 of matrix l / 8.
static __device__ __forceinline__ void kiln_mma_ldsm_x4(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(kiln_mma_smem_addr(smem)));
}
static __device__ __forceinline__ void kiln_mma_ldsm_x4_trans(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(kiln_mma_smem_addr(smem)));
}

// d += a * b for one m16n8k16 fragment (A row-major 16x16, B column-major 16x8).
// Fragment layouts (g = lane / 4, t = lane % 4): a[0] = A[g][2t..2t+1], a[1] =
// A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]; b0 = B[2t..2t+1][g],
// b1 = B[2t+8..][g]; d[0..1] = D[g][2t..2t+1], d[2..3] = D[g+8][2t..2t+1].
template <bool BF16>
static __device__ __forceinline__ void kiln_mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                         unsigned b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// d += a * b for one m16n8k8 fragment of tf32 operands (fp32 bits, of which the tensor
// cores read the top 19: sign, exponent and 10 mantissa bits). Its fragments hold the same
// bytes as m16n8k16's for 16-bit elements, a 32-bit element being two of those:
// a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4]; b0 = B[t][g],
// b1 = B[t+4][g]; d as m16n8k16's. So the ldmatrix addressing of a K-major tile of
// 16-bit elements loads a K-major fp32 tile's fragments unchanged.
static __device__ __forceinline__ void kiln_mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                             unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An element of the tensor-core type as fp32, and fp32 as its bits.
template <bool BF16>
static __device__ __forceinline__ float kiln_mma_to_f32(kiln_mma_t bits) {
  if constexpr (BF16) {
    return kiln_bf16_to_f32(bits);
  } else {
    return kiln_f16_to_f32(bits);
  }
}
template <bool BF16>
static __device__ __forceinline__ kiln_mma_t kiln_mma_from_f32(float v) {
  if constexpr (BF16) {
    return kiln_f32_to_bf16(v);
  } else {
    return kiln_f32_to_f16(v);
  }
}
