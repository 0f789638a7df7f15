/*
** The tensor-core backward of ATTENTION_BACKWARD for f32 with E == Ev in {32, 64, 128} (masks, causal and
** dropout included; f16/bf16 take cu_ops_attention_fa_bwd.cu, f64 and other head dims the generic kernels of
** cu_ops_attention.cu). FlashAttention-2's backward with 3xTF32 WMMA 16x16x8 tiles (cu_attention_mma.cuh; fp32
** accumulation), D_i = dout_i . out_i and
**   p_ij = exp(q_i.k_j scale + mask_ij - lse_i),  ds_ij = p_ij (z_ij dout_i.v_j - D_i):
**   attn_dkdv_mma  a block of 4 warps owns BK = 64 keys (16 per warp), K and V staged; per tile of BQ = 64
**                  queries (q, dout, lse, D staged):
**                    P^T_w = exp(K_w Q^T scale + mask - lse)   dV_w += (P^T z) dout     (tensor cores)
**                    dP^T_w = V_w dout^T, dS^T = P^T (z dP^T - D)   dK_w += dS^T Q      (tensor cores)
**                  dK_w, dV_w stay in accumulator fragments; dk = scale dK.
**   attn_dq_mma    a block owns BQ = 64 queries (16 per warp), q, dout staged; per tile of 64 keys:
**                    S_w = Q_w K^T, dP_w = dout_w V^T, dS = P (z dP - D)   dQ_w += dS K  (tensor cores)
**                  dq = scale dQ.
** Every output element has one writer (no atomics): results are the same run to run.
** Shapes: as cu_ops_attention.cu: q, k, v, dout, out, dq, dk, dv [N,rows,D] each through its strides (a.q .. a.dv:
** head offset cu_attn_at, row stride .r), lse [N,L] float contiguous.
*/

#include "cu_attention_mma.cuh"

namespace {

constexpr int BT = MMA_ROWS, WARPS = 4; /* rows per tile (queries or keys), warps per block (16 rows each) */
/* leading dimensions in shared memory, padded against bank conflicts: [64][D] T (mma_ldt), [16][64] T, f32 */
constexpr int LDP = BT + 8, LDF = BT + 4;
template <int D> __host__ __device__ constexpr int ldt() { return mma_ldt<D>(); }

/* this warp's 16 rows [i0 + 16w, +16): Dw[r] = dout_i . out_i (dout from shared memory; out: head n's row 0, row
** stride ld), lw[r] = lse_i */
template <typename T, int D>
__device__ __forceinline__ void row_terms(float *Dw, float *lw, const T *dos_w, const T *out, int64_t ld,
                                          const float *lse, int64_t n, int64_t iw, int64_t L) {
    int lane = threadIdx.x % 32;
    for (int r = 0; r < 16; r++) {
        int64_t i = iw + r;
        float s = 0;
        if (i < L)
            for (int e = lane; e < D; e += 32) s += (float)dos_w[r * ldt<D>() + e] * (float)out[i * ld + e];
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) Dw[r] = s, lw[r] = i < L ? lse[n * L + i] : -INFINITY;
    }
}

/* p = exp(s scale + mask - lse) of (n, i, j), 0 outside [0, L) x [0, S) or where masked */
template <typename T>
__device__ __forceinline__ float prob(const cu_attn_args &a, float s, float lse_i, int64_t n, int64_t i, int64_t j) {
    if (i >= a.L || j >= a.S || lse_i == -INFINITY) return 0.0f;
    float x = s * a.scale_f + cu_attn_mask<T, float>(a, n, i, j);
    return x == -INFINITY ? 0.0f : __expf(x - lse_i);
}

/* dynamic shared memory: 4 tiles [64][ldt] T; per warp 2 x [16][LDF] f32 and 2 x [16][LDP] T; lse, D [64] f32 */
template <typename T, int D> constexpr size_t smem_bytes() {
    return 4 * BT * ldt<D>() * sizeof(T) + WARPS * 2 * 16 * (LDF * 4 + LDP * sizeof(T)) + 2 * BT * 4;
}

template <typename T> using frag_acc = typename mma_t<T>::acc;

/* C [16][64] f32 (ld LDF) = A [16][D] . B^T, B [64][D] row-major (both ld ldt) */
template <typename T, int D> __device__ __forceinline__ void mm_abt(float *C, const T *A, const T *B) {
    constexpr int KS = mma_t<T>::KS;
#pragma unroll
    for (int nt = 0; nt < BT / 16; nt++) {
        frag_acc<T> acc;
        nvcuda::wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < D / KS; kk++)
            mma_t<T>::template step<nvcuda::wmma::col_major>(acc, A + kk * KS, ldt<D>(),
                                                             B + nt * 16 * ldt<D>() + kk * KS, ldt<D>());
        nvcuda::wmma::store_matrix_sync(C + nt * 16, acc, LDF, nvcuda::wmma::mem_row_major);
    }
}

/* acc[ct] (16 x D in 16-column fragments) += A [16][64] (ld LDP) . B [64][D] row-major (ld ldt) */
template <typename T, int D> __device__ __forceinline__ void mm_acc(frag_acc<T> *acc, const T *A, const T *B) {
    constexpr int KS = mma_t<T>::KS;
#pragma unroll
    for (int kk = 0; kk < BT / KS; kk++)
#pragma unroll
        for (int ct = 0; ct < D / 16; ct++)
            mma_t<T>::template step<nvcuda::wmma::row_major>(acc[ct], A + kk * KS, LDP,
                                                             B + kk * KS * ldt<D>() + ct * 16, ldt<D>());
}

/* rows [r0, r0 + 16) of a [rows, D] T matrix x (row stride ld) = scale acc, through the warp's f32 scratch (>= 16 D
** floats) */
template <typename T, int D>
__device__ __forceinline__ void store_rows(T *x, int64_t ld, frag_acc<T> *acc, float *scratch, float scale, int64_t r0,
                                           int64_t rows) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int ct = 0; ct < D / 16; ct++)
        nvcuda::wmma::store_matrix_sync(scratch + ct * 16, acc[ct], D, nvcuda::wmma::mem_row_major);
    __syncwarp();
    for (int c = lane; c < 16 * D; c += 32)
        if (r0 + c / D < rows) x[(r0 + c / D) * ld + c % D] = mma_to<T>(scratch[c] * scale);
    __syncwarp();
}

/* the shared-memory layout of both kernels */
template <typename T, int D> struct tiles {
    T *Ks, *Vs, *Qs, *Gs; /* [64][ldt]: k, v, q, dout */
    float *Sf, *Pf;       /* this warp's [16][LDF] f32: scores then probabilities, dP (together >= 16 D floats) */
    T *Pt, *St;           /* this warp's [16][LDP] T: P z, dS */
    float *ls, *Ds;       /* [64]: lse_i, D_i of the staged queries */
    __device__ tiles(unsigned char *smem, int w) {
        Ks = (T *)smem, Vs = Ks + BT * ldt<D>(), Qs = Vs + BT * ldt<D>(), Gs = Qs + BT * ldt<D>();
        float *f = (float *)(Gs + BT * ldt<D>());
        Sf = f + w * 2 * 16 * LDF, Pf = Sf + 16 * LDF;
        T *h = (T *)(f + WARPS * 2 * 16 * LDF);
        Pt = h + w * 2 * 16 * LDP, St = Pt + 16 * LDP;
        ls = (float *)(h + WARPS * 2 * 16 * LDP), Ds = ls + BT;
    }
};

template <typename T, int D>
__global__ void __launch_bounds__(WARPS * 32) attn_dkdv_mma(cu_attn_args a, const T *dout, const T *q, const T *k,
                                                            const T *v, const T *out, const float *lse, T *dk, T *dv) {
    extern __shared__ __align__(32) unsigned char smem[];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    tiles<T, D> t(smem, w);
    int64_t nkb = (a.S + BT - 1) / BT;
    for (int64_t task = blockIdx.x; task < a.N * nkb; task += gridDim.x) {
        int64_t n = task / nkb, j0 = (task % nkb) * BT, jw = j0 + w * 16;
        __syncthreads(); /* the previous task is done with the tiles */
        mma_stage<T, D>(t.Ks, k + cu_attn_at(a, a.k, n), j0, a.S, a.k.r);
        mma_stage<T, D>(t.Vs, v + cu_attn_at(a, a.v, n), j0, a.S, a.v.r);
        frag_acc<T> dK[D / 16], dV[D / 16];
#pragma unroll
        for (int ct = 0; ct < D / 16; ct++)
            nvcuda::wmma::fill_fragment(dK[ct], 0.0f), nvcuda::wmma::fill_fragment(dV[ct], 0.0f);
        for (int64_t i0 = a.causal ? j0 : 0; i0 < a.L; i0 += BT) {
            __syncthreads(); /* the previous query tile is consumed */
            mma_stage<T, D>(t.Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
            mma_stage<T, D>(t.Gs, dout + cu_attn_at(a, a.g, n), i0, a.L, a.g.r);
            __syncthreads();
            row_terms<T, D>(t.Ds + w * 16, t.ls + w * 16, t.Gs + w * 16 * ldt<D>(), out + cu_attn_at(a, a.o, n), a.o.r,
                            lse, n, i0 + w * 16, a.L);
            mm_abt<T, D>(t.Sf, t.Ks + w * 16 * ldt<D>(), t.Qs); /* S^T_w = K_w Q^T */
            __syncthreads();                                    /* every warp's lse, D are in */
            for (int c = lane; c < 16 * BT; c += 32) {          /* row = key j, column = query i */
                int64_t j = jw + c / BT, i = i0 + c % BT;
                float p = prob<T>(a, t.Sf[c / BT * LDF + c % BT], t.ls[c % BT], n, i, j);
                t.Sf[c / BT * LDF + c % BT] = p;
                t.Pt[c / BT * LDP + c % BT] = mma_to<T>(p == 0.0f ? 0.0f : p * cu_attn_drop<float>(a, n, i, j));
            }
            __syncwarp();
            mm_acc<T, D>(dV, t.Pt, t.Gs);                       /* dV_w += (P^T z) dout */
            mm_abt<T, D>(t.Pf, t.Vs + w * 16 * ldt<D>(), t.Gs); /* dP^T_w = V_w dout^T */
            __syncwarp();
            for (int c = lane; c < 16 * BT; c += 32) {
                int64_t j = jw + c / BT, i = i0 + c % BT;
                float p = t.Sf[c / BT * LDF + c % BT];
                t.St[c / BT * LDP + c % BT] = mma_to<T>(
                    p == 0.0f ? 0.0f
                              : p * (cu_attn_drop<float>(a, n, i, j) * t.Pf[c / BT * LDF + c % BT] - t.Ds[c % BT]));
            }
            __syncwarp();
            mm_acc<T, D>(dK, t.St, t.Qs); /* dK_w += dS^T Q */
        }
        store_rows<T, D>(dk + cu_attn_at(a, a.dk, n), a.dk.r, dK, t.Sf, a.scale_f, jw, a.S);
        store_rows<T, D>(dv + cu_attn_at(a, a.dv, n), a.dv.r, dV, t.Sf, 1.0f, jw, a.S);
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(WARPS * 32) attn_dq_mma(cu_attn_args a, const T *dout, const T *q, const T *k,
                                                          const T *v, const T *out, const float *lse, T *dq) {
    extern __shared__ __align__(32) unsigned char smem[];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    tiles<T, D> t(smem, w);
    int64_t nqb = (a.L + BT - 1) / BT;
    for (int64_t task = blockIdx.x; task < a.N * nqb; task += gridDim.x) {
        int64_t n = task / nqb, i0 = (task % nqb) * BT, iw = i0 + w * 16;
        int64_t iend = i0 + BT < a.L ? i0 + BT : a.L, jend = a.causal ? (iend < a.S ? iend : a.S) : a.S;
        __syncthreads();
        mma_stage<T, D>(t.Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
        mma_stage<T, D>(t.Gs, dout + cu_attn_at(a, a.g, n), i0, a.L, a.g.r);
        __syncthreads();
        row_terms<T, D>(t.Ds + w * 16, t.ls + w * 16, t.Gs + w * 16 * ldt<D>(), out + cu_attn_at(a, a.o, n), a.o.r, lse,
                        n, iw, a.L);
        frag_acc<T> dQ[D / 16];
#pragma unroll
        for (int ct = 0; ct < D / 16; ct++) nvcuda::wmma::fill_fragment(dQ[ct], 0.0f);
        for (int64_t j0 = 0; j0 < jend; j0 += BT) {
            __syncthreads();
            mma_stage<T, D>(t.Ks, k + cu_attn_at(a, a.k, n), j0, a.S, a.k.r);
            mma_stage<T, D>(t.Vs, v + cu_attn_at(a, a.v, n), j0, a.S, a.v.r);
            __syncthreads();
            mm_abt<T, D>(t.Sf, t.Qs + w * 16 * ldt<D>(), t.Ks); /* S_w = Q_w K^T */
            mm_abt<T, D>(t.Pf, t.Gs + w * 16 * ldt<D>(), t.Vs); /* dP_w = dout_w V^T */
            __syncwarp();
            for (int c = lane; c < 16 * BT; c += 32) { /* row = query i (this warp's), column = key j */
                int64_t i = iw + c / BT, j = j0 + c % BT;
                float p = prob<T>(a, t.Sf[c / BT * LDF + c % BT], t.ls[w * 16 + c / BT], n, i, j);
                t.St[c / BT * LDP + c % BT] = mma_to<T>(
                    p == 0.0f
                        ? 0.0f
                        : p * (cu_attn_drop<float>(a, n, i, j) * t.Pf[c / BT * LDF + c % BT] - t.Ds[w * 16 + c / BT]));
            }
            __syncwarp();
            mm_acc<T, D>(dQ, t.St, t.Ks); /* dQ_w += dS K */
        }
        store_rows<T, D>(dq + cu_attn_at(a, a.dq, n), a.dq.r, dQ, t.Sf, a.scale_f, iw, a.L);
    }
}

template <typename T, int D> static void launch(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    size_t sm = smem_bytes<T, D>();
    cudaFuncSetAttribute(attn_dkdv_mma<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    cudaFuncSetAttribute(attn_dq_mma<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    const td_operand *in = op->in, *o = op->out;
    const T *dout = (const T *)cu_data(&in[0]), *q = (const T *)cu_data(&in[1]), *k = (const T *)cu_data(&in[2]),
            *v = (const T *)cu_data(&in[3]), *out = (const T *)cu_data(&in[5]);
    const float *lse = (const float *)cu_data(&in[6]);
    unsigned gk = cu_grid(d, a->N * ((a->S + BT - 1) / BT) * 32, 32);
    unsigned gq = cu_grid(d, a->N * ((a->L + BT - 1) / BT) * 32, 32);
    attn_dkdv_mma<T, D>
        <<<gk, WARPS * 32, sm, d->stream>>>(*a, dout, q, k, v, out, lse, (T *)cu_data(&o[1]), (T *)cu_data(&o[2]));
    attn_dq_mma<T, D><<<gq, WARPS * 32, sm, d->stream>>>(*a, dout, q, k, v, out, lse, (T *)cu_data(&o[0]));
}

template <typename T> static bool launch_d(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    return cu_attn_head_dim(a->E, [&](auto dim) { launch<T, decltype(dim)::value>(d, op, a); });
}

} // namespace

extern "C" bool cu_attn_mma_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    static int off = -1; /* TRIDENT_CUDA_ATTN_MMA=0: the generic kernels only (for comparisons) */
    if (off < 0) off = getenv("TRIDENT_CUDA_ATTN_MMA") && !strcmp(getenv("TRIDENT_CUDA_ATTN_MMA"), "0");
    td_dtype dt = op->in[1].dtype;
    if (off || a->E != a->Ev || d->cc_major < 8 || !cu_attn_mma_dtype(dt)) return false;
    return launch_d<float>(d, op, a);
}
