/*
** Shared by the mma.sync attention kernels (cu_ops_attention_fa.cu forward, cu_ops_attention_fa_bwd.cu backward),
** f16/bf16 with head dim D in {32, 64, 128}: PTX wrappers and the staging of 64-row tiles.
**   mma.sync.m16n8k16 (fp32 accumulation), lane = 4 g + t (g = lane / 4, t = lane % 4):
**     A 16x16 row-major, 4 regs of 2 elements: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
**     B 16x8 (k x n),   2 regs: b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g)
**     C 16x8 f32,       4 regs: c0, c1 (g, 2t and 2t+1), c2, c3 (g+8, 2t and 2t+1)
**   so the C of two adjacent n-tiles, rounded to pairs, is the A of the next product (FlashAttention-2's P).
**   ldmatrix.x4: lanes 8m..8m+7 give the row addresses of 8x8 matrix m, register m gets (g, 2t..2t+1) of it
**     (.trans: (2t..2t+1, g)).
** A tile is 64 rows of D elements in shared memory, rows padded to FA_LD(D) = D + 8 elements (the 8 row addresses
** of an ldmatrix fall in distinct 16-byte bank groups), staged with cp.async (16 bytes; rows past the end zero).
** defines: FA_ROWS, FA_THREADS, FA_LOG2E, fa_ld, fa_ldsm4, fa_ldsm4t, fa_mma, fa_pack, fa_load, fa_commit, fa_wait,
**          fa_lda, fa_ldb_nk, fa_ldb_kn, fa_mma_nk, fa_mma_kn, fa_a_from_c, fa_order, cu_attn_fa_takes.
*/
#ifndef TRIDENT_CU_ATTENTION_FA_CUH
#define TRIDENT_CU_ATTENTION_FA_CUH

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cu_attention.cuh"

constexpr int FA_ROWS = 64, FA_THREADS = 128; /* rows of a tile; 4 warps of 16 rows each */
constexpr float FA_LOG2E = 1.4426950408889634f;

template <int D> __host__ __device__ constexpr int fa_ld() { return D + 8; }

__device__ __forceinline__ uint32_t fa_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* r[m] = this lane's pair of 8x8 matrix m; p: this lane's row address */
__device__ __forceinline__ void fa_ldsm4(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p)));
}
__device__ __forceinline__ void fa_ldsm4t(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem(p)));
}

/* c (16x8 f32) += A (16x16) B (16x8) */
template <typename T> __device__ __forceinline__ void fa_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void fa_mma<__half>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void fa_mma<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* (lo, hi) rounded to T, lo in the low half (the lower column of a fragment pair) */
template <typename T> __device__ __forceinline__ uint32_t fa_pack(float lo, float hi);
template <> __device__ __forceinline__ uint32_t fa_pack<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}
template <> __device__ __forceinline__ uint32_t fa_pack<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&h;
}

/* A operand pair kk (k = 16 kk .. 16 kk + 15) from the C tiles 2 kk and 2 kk + 1 of a 16-row product */
template <typename T> __device__ __forceinline__ void fa_a_from_c(uint32_t *a, const float (*c)[4], int kk) {
    a[0] = fa_pack<T>(c[2 * kk][0], c[2 * kk][1]);
    a[1] = fa_pack<T>(c[2 * kk][2], c[2 * kk][3]);
    a[2] = fa_pack<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[3] = fa_pack<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

__device__ __forceinline__ void fa_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fa_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* sm [64][fa_ld] = rows [r0, r0 + 64) of x [rows][D] (row stride ld, a multiple of 8), zeros past rows
** (asynchronous: fa_commit, fa_wait) */
template <typename T, int D>
__device__ __forceinline__ void fa_load(T *sm, const T *x, int64_t r0, int64_t rows, int64_t ld) {
    constexpr int C = D / 8; /* 16-byte chunks per row */
    for (int c = threadIdx.x; c < FA_ROWS * C; c += FA_THREADS) {
        int r = c / C, e = (c % C) * 8;
        bool ok = r0 + r < rows;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem(sm + r * fa_ld<D>() + e)),
                     "l"(x + (ok ? (r0 + r) * ld + e : 0)), "r"(ok ? 16 : 0));
    }
}

/* A fragment (16 rows from row 0 of p, 16 columns from column 0) of a row-major tile with leading dim ld */
template <typename T> __device__ __forceinline__ void fa_lda(uint32_t *a, const T *p, int ld) {
    int lane = threadIdx.x % 32;
    fa_ldsm4(a, p + (lane % 16) * ld + (lane / 16) * 8);
}
/* B fragments of two n-tiles (b[0..1]: rows 0..7, b[2..3]: rows 8..15 of p) when B^T = p [n][k] is row-major */
template <typename T> __device__ __forceinline__ void fa_ldb_nk(uint32_t *b, const T *p, int ld) {
    int lane = threadIdx.x % 32;
    fa_ldsm4(b, p + (lane % 8 + (lane / 16) * 8) * ld + ((lane / 8) % 2) * 8);
}
/* B fragments of two n-tiles (b[0..1]: columns 0..7, b[2..3]: columns 8..15 of p) when B = p [k][n] is row-major */
template <typename T> __device__ __forceinline__ void fa_ldb_kn(uint32_t *b, const T *p, int ld) {
    int lane = threadIdx.x % 32;
    fa_ldsm4t(b, p + (lane % 8 + ((lane / 8) % 2) * 8) * ld + (lane / 16) * 8);
}

/* c[0], c[1] (two n-tiles: 16 columns) += a B, the 16x16 B tile at p loaded by fa_ldb_nk / fa_ldb_kn */
template <typename T> __device__ __forceinline__ void fa_mma_nk(float (*c)[4], const uint32_t *a, const T *p, int ld) {
    uint32_t b[4];
    fa_ldb_nk(b, p, ld);
    fa_mma<T>(c[0], a, b[0], b[1]);
    fa_mma<T>(c[1], a, b[2], b[3]);
}
template <typename T> __device__ __forceinline__ void fa_mma_kn(float (*c)[4], const uint32_t *a, const T *p, int ld) {
    uint32_t b[4];
    fa_ldb_kn(b, p, ld);
    fa_mma<T>(c[0], a, b[0], b[1]);
    fa_mma<T>(c[1], a, b[2], b[3]);
}

/* task -> (n, tile): tiles in the order given by first (the heaviest first), n fastest */
__device__ __forceinline__ void fa_order(const cu_attn_args &a, int64_t tiles, bool reverse, int64_t *n, int64_t *r0) {
    int64_t task = blockIdx.x, tile = task / a.N;
    *n = task % a.N;
    *r0 = (reverse ? tiles - 1 - tile : tile) * FA_ROWS;
}

/* Whether these kernels take the op (dtype dt): f16/bf16, E == Ev in {32, 64, 128}, sm_80 or newer, a grid of
** N ceil(L / 64) (or S) blocks within limits; TRIDENT_CUDA_ATTN_MMA=0 leaves every attention to the generic
** kernels (for comparisons). The launchers also ask for 16-byte aligned rows (cu_attn_aligned). */
static inline bool cu_attn_fa_takes(const cu_dev *d, const cu_attn_args *a, td_dtype dt) {
    static int off = -1;
    if (off < 0) off = getenv("TRIDENT_CUDA_ATTN_MMA") && !strcmp(getenv("TRIDENT_CUDA_ATTN_MMA"), "0");
    int64_t rows = a->L > a->S ? a->L : a->S;
    return !off && (dt == TD_F16 || dt == TD_BF16) && d->cc_major >= 8 && a->E == a->Ev &&
           (a->E == 32 || a->E == 64 || a->E == 128) && a->N * ((rows + FA_ROWS - 1) / FA_ROWS) <= INT32_MAX;
}

#endif /* TRIDENT_CU_ATTENTION_FA_CUH */
