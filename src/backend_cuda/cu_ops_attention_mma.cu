/*
** The tensor-core forward of ATTENTION for f16/bf16 with E == Ev in {32, 64, 128} and no dropout (the
** generic kernel of cu_ops_attention.cu takes every other case and the backward). FlashAttention-2's loop
** with WMMA 16x16x16 tiles (fp32 accumulation):
**   a block of 4 warps owns BQ = 64 query rows (16 per warp), Q staged once in shared memory;
**   per tile of BK = 64 keys (K, V staged):  S_w = Q_w K^T (16 x 64, fp32)            (tensor cores)
**     two lanes per row: s = S * scale + mask, m_new = max(m, rowmax s), alpha = exp(m - m_new),
**     P = exp(s - m_new) (rounded to the input dtype), l = l alpha + rowsum P, O_w *= alpha
**   O_w += P V (16 x E, fp32 in shared memory)                                         (tensor cores)
**   out = O / l, lse = m + log l (a row without keys: 0 and -inf), as the generic kernel.
** Shapes: q [N,L,E], k [N,S,E], v [N,S,E], out [N,L,E], lse [N,L] float; see cu_ops_attention.cu.
*/
#include <mma.h>
#include <stdlib.h>
#include <string.h>

#include "cu_attention.cuh"

namespace {

using namespace nvcuda;

constexpr int BQ = 64, BK = 64, WARPS = 4;

template <typename T> __device__ __forceinline__ T to_t(float x);
template <> __device__ __forceinline__ __half to_t<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 to_t<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* rows [r0, r0 + 64) of a [rows, D] matrix into sm [64][D], zeros past rows */
template <typename T, int D> __device__ __forceinline__ void stage(T *sm, const T *x, int64_t r0, int64_t rows) {
    for (int e = threadIdx.x; e < BQ * D; e += blockDim.x) {
        int64_t r = r0 + e / D;
        sm[e] = r < rows ? x[r * D + e % D] : to_t<T>(0.0f);
    }
}

/* dynamic shared memory: Qs, Ks, Vs [64][D] T; per warp Sf [16][64] f32, Ph [16][64] T, Of [16][D] f32 */
template <typename T, int D> constexpr size_t smem_bytes() {
    return 3 * BQ * D * sizeof(T) + WARPS * (16 * BK * 4 + 16 * BK * sizeof(T) + 16 * D * 4);
}

template <typename T, int D>
__global__ void __launch_bounds__(WARPS * 32)
    attn_fwd_mma(cu_attn_args a, const T *q, const T *k, const T *v, T *out, float *lse) {
    extern __shared__ __align__(32) unsigned char smem[];
    T *Qs = (T *)smem, *Ks = Qs + BQ * D, *Vs = Ks + BK * D;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *Sf = (float *)(Vs + BK * D) + w * (16 * BK + 16 * D), *Of = Sf + 16 * BK;
    T *Ph = (T *)((float *)(Vs + BK * D) + WARPS * (16 * BK + 16 * D)) + w * 16 * BK;
    int r = lane / 2, h = lane % 2; /* this lane's row of the warp's 16, and which half of the columns */
    int64_t nqb = (a.L + BQ - 1) / BQ;
    for (int64_t task = blockIdx.x; task < a.N * nqb; task += gridDim.x) {
        int64_t n = task / nqb, i0 = (task % nqb) * BQ, i = i0 + w * 16 + r;
        int64_t iend = i0 + BQ < a.L ? i0 + BQ : a.L, jend = a.causal ? (iend < a.S ? iend : a.S) : a.S;
        __syncthreads(); /* the previous task is done with the tiles */
        stage<T, D>(Qs, q + n * a.L * D, i0, a.L);
        for (int c = lane; c < 16 * D; c += 32) Of[c] = 0;
        __syncwarp();
        float m = -INFINITY, l = 0;
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            __syncthreads();
            stage<T, D>(Ks, k + n * a.S * D, j0, a.S);
            stage<T, D>(Vs, v + n * a.S * D, j0, a.S);
            __syncthreads();
            /* S_w = Q_w K^T: K [64][D] row-major is K^T column-major */
            for (int nt = 0; nt < BK / 16; nt++) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::fill_fragment(acc, 0.0f);
                for (int kk = 0; kk < D / 16; kk++) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
                    wmma::load_matrix_sync(fa, Qs + w * 16 * D + kk * 16, D);
                    wmma::load_matrix_sync(fb, Ks + nt * 16 * D + kk * 16, D);
                    wmma::mma_sync(acc, fa, fb, acc);
                }
                wmma::store_matrix_sync(Sf + nt * 16, acc, BK, wmma::mem_row_major);
            }
            __syncwarp();
            /* online softmax of row r over this tile's keys; lanes 2r and 2r+1 take 32 columns each */
            float mx = -INFINITY;
            for (int c = h * 32; c < h * 32 + 32; c++) {
                int64_t j = j0 + c;
                float s =
                    j < jend && i < a.L ? Sf[r * BK + c] * a.scale_f + cu_attn_mask<T, float>(a, n, i, j) : -INFINITY;
                Sf[r * BK + c] = s;
                mx = fmaxf(mx, s);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            float m_new = fmaxf(m, mx), alpha = m_new == -INFINITY ? 1.0f : __expf(m - m_new), sum = 0;
            for (int c = h * 32; c < h * 32 + 32; c++) {
                float s = Sf[r * BK + c], p = s == -INFINITY ? 0.0f : __expf(s - m_new);
                sum += p;
                Ph[r * BK + c] = to_t<T>(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            l = l * alpha + sum;
            m = m_new;
            for (int c = h * (D / 2); c < (h + 1) * (D / 2); c++) Of[r * D + c] *= alpha;
            __syncwarp();
            /* O_w += P V */
            for (int ct = 0; ct < D / 16; ct++) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::load_matrix_sync(acc, Of + ct * 16, D, wmma::mem_row_major);
                for (int kk = 0; kk < BK / 16; kk++) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                    wmma::load_matrix_sync(fa, Ph + kk * 16, BK);
                    wmma::load_matrix_sync(fb, Vs + kk * 16 * D + ct * 16, D);
                    wmma::mma_sync(acc, fa, fb, acc);
                }
                wmma::store_matrix_sync(Of + ct * 16, acc, D, wmma::mem_row_major);
            }
            __syncwarp();
        }
        if (i < a.L) {                           /* a row without keys: out 0, lse -inf */
            float inv = l > 0 ? 1.0f / l : 0.0f; /* and a row without keys never reads Of */
            for (int c = h * (D / 2); c < (h + 1) * (D / 2); c++)
                out[(n * a.L + i) * D + c] = to_t<T>(l > 0 ? Of[r * D + c] * inv : 0.0f);
            if (h == 0) lse[n * a.L + i] = l > 0 ? m + logf(l) : -INFINITY;
        }
    }
}

template <typename T, int D> static void launch(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    size_t sm = smem_bytes<T, D>();
    cudaFuncSetAttribute(attn_fwd_mma<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    unsigned grid = cu_grid(d, a->N * ((a->L + BQ - 1) / BQ) * 32, 32);
    attn_fwd_mma<T, D><<<grid, WARPS * 32, sm, d->stream>>>(
        *a, (const T *)cu_data(&op->in[0]), (const T *)cu_data(&op->in[1]), (const T *)cu_data(&op->in[2]),
        (T *)cu_data(&op->out[0]), (float *)cu_data(&op->out[1]));
}

template <typename T> static bool launch_d(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    switch (a->E) {
    case 32: launch<T, 32>(d, op, a); return true;
    case 64: launch<T, 64>(d, op, a); return true;
    case 128: launch<T, 128>(d, op, a); return true;
    default: return false;
    }
}

} // namespace

extern "C" bool cu_attn_mma_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    static int off = -1; /* TRIDENT_CUDA_ATTN_MMA=0: the generic kernel only (for comparisons) */
    if (off < 0) off = getenv("TRIDENT_CUDA_ATTN_MMA") && !strcmp(getenv("TRIDENT_CUDA_ATTN_MMA"), "0");
    td_dtype dt = op->in[0].dtype;
    if (off || a->dropout || a->E != a->Ev || d->cc_major < 8 || (dt != TD_F16 && dt != TD_BF16)) return false;
    return dt == TD_F16 ? launch_d<__half>(d, op, a) : launch_d<__nv_bfloat16>(d, op, a);
}
