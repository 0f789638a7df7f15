/*
** The tensor-core forward of ATTENTION for f32 with E == Ev in {32, 64, 128}, masks, causal and dropout
** (f16/bf16 take the mma.sync forward of cu_ops_attention_fa.cu; f64 and other head dims the generic kernel of
** cu_ops_attention.cu; the f32 backward is cu_ops_attention_mma_bwd.cu). FlashAttention-2's loop
** with 3xTF32 WMMA 16x16x8 tiles (cu_attention_mma.cuh; fp32 accumulation):
**   a block of 4 warps owns BQ = 64 query rows (16 per warp), Q staged once in shared memory;
**   per tile of BK = 64 keys (K, V staged):  S_w = Q_w K^T (16 x 64, fp32)            (tensor cores)
**     two lanes per row: s = S * scale + mask, m_new = max(m, rowmax s), alpha = exp(m - m_new),
**     P = exp(s - m_new), l = l alpha + rowsum P, O_w *= alpha; P z (dropout)
**   O_w += (P z) V (16 x E, fp32 in shared memory)                                       (tensor cores)
**   out = O / l, lse = m + log l (a row without keys: 0 and -inf), as the generic kernel.
** Shapes: q [N,L,E], k [N,S,E], v [N,S,E], out [N,L,E], each through its strides (a.q, a.k, a.v, a.o: head
** offset cu_attn_at, row stride .r), lse [N,L] float contiguous; see cu_ops_attention.cu.
*/
#include "cu_attention_mma.cuh"

namespace {

using namespace nvcuda;

constexpr int BQ = MMA_ROWS, BK = MMA_ROWS, WARPS = 4;
/* leading dimensions in shared memory, padded against bank conflicts: [64][D] T, [16][D] f32, [16][64] f32 and T */
template <int D> __host__ __device__ constexpr int ldt() { return mma_ldt<D>(); }
template <int D> __host__ __device__ constexpr int ldo() { return D + 4; }
constexpr int LDF = BK + 4, LDP = BK + 8;

/* dynamic shared memory: Qs, Ks, Vs [64][ldt] T; per warp Sf [16][LDF] f32, Of [16][ldo] f32, Ph [16][LDP] T */
template <typename T, int D> constexpr size_t smem_bytes() {
    return 3 * BQ * ldt<D>() * sizeof(T) + WARPS * (16 * LDF * 4 + 16 * ldo<D>() * 4 + 16 * LDP * sizeof(T));
}

template <typename T, int D>
__global__ void __launch_bounds__(WARPS * 32)
    attn_fwd_mma(cu_attn_args a, const T *q, const T *k, const T *v, T *out, float *lse) {
    extern __shared__ __align__(32) unsigned char smem[];
    constexpr int LT = ldt<D>(), LO = ldo<D>(), KS = mma_t<T>::KS;
    T *Qs = (T *)smem, *Ks = Qs + BQ * LT, *Vs = Ks + BK * LT;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *Sf = (float *)(Vs + BK * LT) + w * (16 * LDF + 16 * LO), *Of = Sf + 16 * LDF;
    T *Ph = (T *)((float *)(Vs + BK * LT) + WARPS * (16 * LDF + 16 * LO)) + w * 16 * LDP;
    int r = lane / 2, h = lane % 2; /* this lane's row of the warp's 16, and which half of the columns */
    int64_t nqb = (a.L + BQ - 1) / BQ;
    for (int64_t task = blockIdx.x; task < a.N * nqb; task += gridDim.x) {
        int64_t n = task / nqb, i0 = (task % nqb) * BQ, i = i0 + w * 16 + r;
        int64_t iend = i0 + BQ < a.L ? i0 + BQ : a.L, jend = a.causal ? (iend < a.S ? iend : a.S) : a.S;
        __syncthreads(); /* the previous task is done with the tiles */
        mma_stage<T, D>(Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
        for (int c = lane; c < 16 * LO; c += 32) Of[c] = 0;
        __syncwarp();
        float m = -INFINITY, l = 0;
        for (int64_t j0 = 0; j0 < jend; j0 += BK) {
            __syncthreads();
            mma_stage<T, D>(Ks, k + cu_attn_at(a, a.k, n), j0, a.S, a.k.r);
            mma_stage<T, D>(Vs, v + cu_attn_at(a, a.v, n), j0, a.S, a.v.r);
            __syncthreads();
            /* S_w = Q_w K^T: K [64][D] row-major is K^T column-major */
#pragma unroll
            for (int nt = 0; nt < BK / 16; nt++) {
                typename mma_t<T>::acc acc;
                wmma::fill_fragment(acc, 0.0f);
#pragma unroll
                for (int kk = 0; kk < D / KS; kk++)
                    mma_t<T>::template step<wmma::col_major>(acc, Qs + w * 16 * LT + kk * KS, LT,
                                                             Ks + nt * 16 * LT + kk * KS, LT);
                wmma::store_matrix_sync(Sf + nt * 16, acc, LDF, wmma::mem_row_major);
            }
            __syncwarp();
            /* online softmax of row r over this tile's keys; lanes 2r and 2r+1 take 32 columns each */
            float mx = -INFINITY;
            for (int c = h * 32; c < h * 32 + 32; c++) {
                int64_t j = j0 + c;
                float s =
                    j < jend && i < a.L ? Sf[r * LDF + c] * a.scale_f + cu_attn_mask<T, float>(a, n, i, j) : -INFINITY;
                Sf[r * LDF + c] = s;
                mx = fmaxf(mx, s);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            float m_new = fmaxf(m, mx), alpha = m_new == -INFINITY ? 1.0f : __expf(m - m_new), sum = 0;
            for (int c = h * 32; c < h * 32 + 32; c++) {
                float s = Sf[r * LDF + c], p = s == -INFINITY ? 0.0f : __expf(s - m_new);
                sum += p;
                Ph[r * LDP + c] = mma_to<T>(p == 0.0f ? 0.0f : p * cu_attn_drop<float>(a, n, i, j0 + c));
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            l = l * alpha + sum;
            m = m_new;
            for (int c = h * (D / 2); c < (h + 1) * (D / 2); c++) Of[r * LO + c] *= alpha;
            __syncwarp();
            /* O_w += P V */
#pragma unroll
            for (int ct = 0; ct < D / 16; ct++) {
                typename mma_t<T>::acc acc;
                wmma::load_matrix_sync(acc, Of + ct * 16, LO, wmma::mem_row_major);
#pragma unroll
                for (int kk = 0; kk < BK / KS; kk++)
                    mma_t<T>::template step<wmma::row_major>(acc, Ph + kk * KS, LDP, Vs + kk * KS * LT + ct * 16, LT);
                wmma::store_matrix_sync(Of + ct * 16, acc, LO, wmma::mem_row_major);
            }
            __syncwarp();
        }
        if (i < a.L) {                           /* a row without keys: out 0, lse -inf */
            float inv = l > 0 ? 1.0f / l : 0.0f; /* and a row without keys never reads Of */
            for (int c = h * (D / 2); c < (h + 1) * (D / 2); c++)
                out[cu_attn_at(a, a.o, n) + i * a.o.r + c] = mma_to<T>(l > 0 ? Of[r * LO + c] * inv : 0.0f);
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
    return cu_attn_head_dim(a->E, [&](auto dim) { launch<T, decltype(dim)::value>(d, op, a); });
}

} // namespace

extern "C" bool cu_attn_mma_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    static int off = -1; /* TRIDENT_CUDA_ATTN_MMA=0: the generic kernel only (for comparisons) */
    if (off < 0) off = getenv("TRIDENT_CUDA_ATTN_MMA") && !strcmp(getenv("TRIDENT_CUDA_ATTN_MMA"), "0");
    td_dtype dt = op->in[0].dtype;
    if (off || a->E != a->Ev || d->cc_major < 8 || !cu_attn_mma_dtype(dt)) return false;
    return launch_d<float>(d, op, a);
}
