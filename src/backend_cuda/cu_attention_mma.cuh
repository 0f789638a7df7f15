/*
** Shared by the f32 tensor-core attention kernels (cu_ops_attention_mma.cu, cu_ops_attention_mma_bwd.cu): tiles of
** 64 rows staged in padded shared memory and one k-step of a 16x16 WMMA product:
**   WMMA 16x16x8 TF32 in three products (3xTF32, x = hi + lo with hi = tf32(x), lo = tf32(x - hi):
**   a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi), fp32 accumulation: close to f32's rounding, not TF32's.
** (f16/bf16 take the mma.sync kernels of cu_ops_attention_fa*.cu.)
** defines: mma_t (the traits), MMA_ROWS, mma_ldt, mma_to, mma_stage, cu_attn_mma_dtype.
*/
#ifndef TRIDENT_CU_ATTENTION_MMA_CUH
#define TRIDENT_CU_ATTENTION_MMA_CUH

#include <mma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cu_attention.cuh"

constexpr int MMA_ROWS = 64; /* rows of a staged tile (queries or keys) */

/* the leading dimension of a staged [64][D] tile, padded against bank conflicts */
template <int D> __host__ __device__ constexpr int mma_ldt() { return D + 8; }

template <typename T> __device__ __forceinline__ T mma_to(float x);
template <> __device__ __forceinline__ float mma_to<float>(float x) { return x; }

/* KS: the k of one step; acc: the 16x16 fp32 accumulator; step: acc += A B for A [16][KS], B [KS][16] in shared
** memory (B given row- or column-major by LB), lda/ldb in elements */
template <typename T> struct mma_t;
template <> struct mma_t<float> {
    static constexpr int KS = 8;
    using acc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float>;
    template <typename F> __device__ static void split(F &hi, F &lo) {
#pragma unroll
        for (int t = 0; t < hi.num_elements; t++) {
            float x = hi.x[t], h = nvcuda::wmma::__float_to_tf32(x);
            hi.x[t] = h, lo.x[t] = nvcuda::wmma::__float_to_tf32(x - h);
        }
    }
    template <typename LB> __device__ static void step(acc &c, const float *A, int lda, const float *B, int ldb) {
        using namespace nvcuda;
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ah, al;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LB> bh, bl;
        wmma::load_matrix_sync(ah, A, lda);
        wmma::load_matrix_sync(bh, B, ldb);
        split(ah, al);
        split(bh, bl);
        wmma::mma_sync(c, al, bh, c);
        wmma::mma_sync(c, ah, bl, c);
        wmma::mma_sync(c, ah, bh, c);
    }
};

/* rows [r0, r0 + 64) of a [rows, D] matrix x (row stride ld) into sm [64][mma_ldt], zeros past rows; 16-byte
** copies when every row is aligned */
template <typename T, int D>
__device__ __forceinline__ void mma_stage(T *sm, const T *x, int64_t r0, int64_t rows, int64_t ld) {
    constexpr int LT = mma_ldt<D>();
    if (((uintptr_t)x & 15) == 0 && (ld * (int64_t)sizeof(T)) % 16 == 0) {
        constexpr int V = 16 / sizeof(T), DV = D / V;
        for (int e = threadIdx.x; e < MMA_ROWS * DV; e += blockDim.x) {
            int64_t r = r0 + e / DV;
            uint4 w = r < rows ? ((const uint4 *)(x + r * ld))[e % DV] : make_uint4(0, 0, 0, 0);
            ((uint4 *)(sm + (e / DV) * LT))[e % DV] = w;
        }
        return;
    }
    for (int e = threadIdx.x; e < MMA_ROWS * D; e += blockDim.x) {
        int64_t r = r0 + e / D;
        sm[(e / D) * LT + e % D] = r < rows ? x[r * ld + e % D] : mma_to<T>(0.0f);
    }
}

/* Whether the tensor-core kernels take dtype dt: f32 unless TRIDENT_CUDA_ATTN_TF32=0 (3xTF32 off: f32 then runs the
** generic kernels). */
static inline bool cu_attn_mma_dtype(td_dtype dt) {
    static int f32_off = -1;
    if (f32_off < 0) f32_off = getenv("TRIDENT_CUDA_ATTN_TF32") && !strcmp(getenv("TRIDENT_CUDA_ATTN_TF32"), "0");
    return dt == TD_F32 && !f32_off;
}

#endif /* TRIDENT_CU_ATTENTION_MMA_CUH */
