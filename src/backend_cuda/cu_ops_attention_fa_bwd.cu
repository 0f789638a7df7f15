/*
** The mma.sync backward of ATTENTION_BACKWARD for f16/bf16 with E == Ev in {32, 64, 128} (masks, causal,
** dropout), FlashAttention-2's backward with every accumulator in registers (cu_attention_fa.cuh):
**   p_ij = 2^(s_ij - lse_i log2e), s_ij = (q_i.k_j scale + mask_ij) log2e,  ds_ij = p_ij (z_ij dout_i.v_j - D_i)
**   attn_rowdot   a warp per query row: D_i = dout_i . out_i (float, a scratch [N, L])
**   attn_dkdv_fa  a block of 4 warps owns 64 keys (16 per warp); per tile of 64 queries (q, dout, lse, D staged
**                 by cp.async, double-buffered), causal: from the tile holding query j0 on:
**                   S^T_w = K_w Q^T, P^T = 2^(S^T - lse)                                  (tensor cores)
**                   dV_w += (P^T z) dout                                                 (tensor cores)
**                   dP^T_w = V_w dout^T, dS^T = P^T (z dP^T - D)                         (tensor cores)
**                   dK_w += dS^T Q                                                       (tensor cores)
**                 dk = scale dK, dv = dV.
**   attn_dq_fa    a block owns 64 queries (16 per warp, Q_w, dout_w as A fragments); per tile of 64 keys:
**                   S_w = Q_w K^T, dP_w = dout_w V^T, dS = P (z dP - D), dQ_w += dS K      (tensor cores)
**                 dq = scale dQ.
** Every output element has one writer (no atomics): results are the same run to run.
** Shapes: as cu_ops_attention.cu: q, k, v, dout, out, dq, dk, dv [N,rows,D] each through its strides (a.q .. a.dv:
** head offset cu_attn_at, row stride .r, a multiple of 8 elements), lse [N,L] float contiguous.
*/
#include "cu_attention_fa.cuh"

namespace {

constexpr int B = FA_ROWS, NT = B / 8;

/* D [N L] = rowsum(dout * out), dout and out [N, L, Ev] (a.g, a.o) */
template <typename T> __global__ void attn_rowdot(cu_attn_args a, const T *dout, const T *out, float *Dv) {
    int lane = threadIdx.x % 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < a.N * a.L;
         r += (int64_t)gridDim.x * blockDim.x / 32) {
        int64_t n = r / a.L, i = r % a.L;
        const T *g = dout + cu_attn_at(a, a.g, n) + i * a.g.r, *o = out + cu_attn_at(a, a.o, n) + i * a.o.r;
        float s = 0;
        for (int64_t e = lane; e < a.Ev; e += 32) s += cu_to<float>(g[e]) * cu_to<float>(o[e]);
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) Dv[r] = s;
    }
}

/* this lane's element (nt, c) of a 16 x 64 score tile: row offset g + 8 (c / 2), column nt * 8 + 2 t + c % 2 */
__device__ __forceinline__ int frag_row(int c) { return threadIdx.x % 32 / 4 + (c / 2) * 8; }
__device__ __forceinline__ int frag_col(int nt, int c) { return nt * 8 + 2 * (threadIdx.x % 4) + c % 2; }

/* p of (n, i, j) from the raw score x = q_i.k_j: 0 outside [0, L) x [0, S), where masked or lse_i = -inf;
** l2: lse_i log2e; edge: whether the mask (or the ends of L and S) may matter here */
template <typename T>
__device__ __forceinline__ float prob(const cu_attn_args &a, float x, float l2, int64_t n, int64_t i, int64_t j,
                                      bool edge) {
    x *= a.scale_f * FA_LOG2E;
    if (edge) {
        if (i >= a.L || j >= a.S) return 0.0f;
        x += cu_attn_mask<T, float>(a, n, i, j) * FA_LOG2E;
    }
    return l2 == -INFINITY ? 0.0f : exp2f(x - l2);
}

/* dynamic shared memory: K, V [64][ld]; Q, dout [2][64][ld]; lse log2e, D [2][64] float */
template <typename T, int D> constexpr size_t smem_dkdv() {
    return 6 * B * fa_ld<D>() * sizeof(T) + 4 * B * sizeof(float);
}

template <typename T, int D>
__global__ void __launch_bounds__(FA_THREADS)
    attn_dkdv_fa(cu_attn_args a, const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *Dv,
                 T *dk, T *dv) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = fa_ld<D>(), KT = D / 16;
    T *Ks = (T *)smem, *Vs = Ks + B * LD, *Qs = Vs + B * LD, *Gs = Qs + 2 * B * LD;
    float *ls = (float *)(Gs + 2 * B * LD), *Ds = ls + 2 * B;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    int64_t n, j0;
    fa_order(a, (a.S + B - 1) / B, false, &n, &j0); /* causal: the first keys see the most queries */
    int64_t jw = j0 + w * 16, ist = a.causal ? j0 : 0;
    int nit = ist < a.L ? (int)((a.L - ist + B - 1) / B) : 0;
    const T *qn = q + cu_attn_at(a, a.q, n), *gn = dout + cu_attn_at(a, a.g, n);
    fa_load<T, D>(Ks, k + cu_attn_at(a, a.k, n), j0, a.S, a.k.r);
    fa_load<T, D>(Vs, v + cu_attn_at(a, a.v, n), j0, a.S, a.v.r);
    auto stage = [&](int it) { /* query tile it into buffer it % 2 */
                               int64_t i0 = ist + (int64_t)it * B;
                               fa_load<T, D>(Qs + (it % 2) * B * LD, qn, i0, a.L, a.q.r);
                               fa_load<T, D>(Gs + (it % 2) * B * LD, gn, i0, a.L, a.g.r);
                               for (int r = threadIdx.x; r < B; r += FA_THREADS) {
                                   bool ok = i0 + r < a.L;
                                   ls[(it % 2) * B + r] = ok ? lse[n * a.L + i0 + r] * FA_LOG2E : -INFINITY;
                                   Ds[(it % 2) * B + r] = ok ? Dv[n * a.L + i0 + r] : 0.0f;
                               }
    };
    if (nit > 0) stage(0);
    fa_commit();
    float dK[D / 8][4] = {}, dV[D / 8][4] = {};
    for (int it = 0; it < nit; it++) {
        int64_t i0 = ist + (int64_t)it * B;
        if (it + 1 < nit) stage(it + 1);
        fa_commit();
        fa_wait<1>();
        __syncthreads();
        const T *Qt = Qs + (it % 2) * B * LD, *Gt = Gs + (it % 2) * B * LD;
        const float *lt = ls + (it % 2) * B, *Dt = Ds + (it % 2) * B;
        /* S^T_w = K_w Q^T, dP^T_w = V_w dout^T (16 keys x 64 queries) */
        float st[NT][4] = {}, dpt[NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            uint32_t ka[4], va[4];
            fa_lda(ka, Ks + w * 16 * LD + kk * 16, LD);
            fa_lda(va, Vs + w * 16 * LD + kk * 16, LD);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                fa_mma_nk<T>(st + 2 * np, ka, Qt + np * 16 * LD + kk * 16, LD);
                fa_mma_nk<T>(dpt + 2 * np, va, Gt + np * 16 * LD + kk * 16, LD);
            }
        }
        /* P^T, then P^T z into st and dS^T into dpt; element (key jw + row, query i0 + col) */
        bool edge = a.mask || i0 + B > a.L || jw + 16 > a.S || (a.causal && jw + 15 > i0);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int64_t j = jw + frag_row(c), i = i0 + frag_col(nt, c);
                float p = prob<T>(a, st[nt][c], lt[frag_col(nt, c)], n, i, j, edge);
                float z = a.dropout && p != 0.0f ? cu_attn_drop<float>(a, n, i, j) : 1.0f;
                st[nt][c] = p * z;
                dpt[nt][c] = p * (z * dpt[nt][c] - Dt[frag_col(nt, c)]);
            }
            /* dV_w += (P^T z) dout, dK_w += dS^T Q: B = dout, Q [query][e] row-major */
#pragma unroll
        for (int kk = 0; kk < B / 16; kk++) {
            uint32_t pa[4], sa[4];
            fa_a_from_c<T>(pa, st, kk);
            fa_a_from_c<T>(sa, dpt, kk);
#pragma unroll
            for (int ep = 0; ep < D / 16; ep++) {
                fa_mma_kn<T>(dV + 2 * ep, pa, Gt + kk * 16 * LD + ep * 16, LD);
                fa_mma_kn<T>(dK + 2 * ep, sa, Qt + kk * 16 * LD + ep * 16, LD);
            }
        }
        __syncthreads(); /* every warp is done with this buffer */
    }
    /* dk = scale dK, dv = dV through this warp's rows of Ks and Vs (16-byte stores) */
    fa_wait<0>();
    __syncthreads(); /* K, V landed (without query tiles no barrier saw them), in any thread's copies */
    T *Kw = Ks + w * 16 * LD, *Vw = Vs + w * 16 * LD;
#pragma unroll
    for (int et = 0; et < D / 8; et++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int off = (frag_row(2 * r)) * LD + frag_col(et, 0);
            *(uint32_t *)(Kw + off) = fa_pack<T>(dK[et][2 * r] * a.scale_f, dK[et][2 * r + 1] * a.scale_f);
            *(uint32_t *)(Vw + off) = fa_pack<T>(dV[et][2 * r], dV[et][2 * r + 1]);
        }
    __syncwarp();
    for (int c = lane; c < 16 * (D / 8); c += 32) {
        int rr = c / (D / 8), e = (c % (D / 8)) * 8;
        if (jw + rr < a.S) {
            *(uint4 *)(dk + cu_attn_at(a, a.dk, n) + (jw + rr) * a.dk.r + e) = *(const uint4 *)(Kw + rr * LD + e);
            *(uint4 *)(dv + cu_attn_at(a, a.dv, n) + (jw + rr) * a.dv.r + e) = *(const uint4 *)(Vw + rr * LD + e);
        }
    }
}

/* dynamic shared memory: Q, dout [64][ld]; K, V [2][64][ld] */
template <typename T, int D> constexpr size_t smem_dq() { return 6 * B * fa_ld<D>() * sizeof(T); }

template <typename T, int D>
__global__ void __launch_bounds__(FA_THREADS) attn_dq_fa(cu_attn_args a, const T *dout, const T *q, const T *k,
                                                         const T *v, const float *lse, const float *Dv, T *dq) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = fa_ld<D>(), KT = D / 16;
    T *Qs = (T *)smem, *Gs = Qs + B * LD, *Ks = Gs + B * LD, *Vs = Ks + 2 * B * LD;
    int w = threadIdx.x / 32;
    int64_t n, i0;
    fa_order(a, (a.L + B - 1) / B, true, &n, &i0);
    int64_t iw = i0 + w * 16, iend = i0 + B < a.L ? i0 + B : a.L, jend = a.causal && iend < a.S ? iend : a.S;
    int nkt = (int)((jend + B - 1) / B);
    const T *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
    fa_load<T, D>(Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
    fa_load<T, D>(Gs, dout + cu_attn_at(a, a.g, n), i0, a.L, a.g.r);
    if (nkt > 0) fa_load<T, D>(Ks, kn, 0, a.S, a.k.r), fa_load<T, D>(Vs, vn, 0, a.S, a.v.r);
    fa_commit();
    float l2[2], Dr[2]; /* this lane's rows iw + g and iw + g + 8 */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int64_t i = iw + frag_row(2 * r);
        l2[r] = i < a.L ? lse[n * a.L + i] * FA_LOG2E : -INFINITY;
        Dr[r] = i < a.L ? Dv[n * a.L + i] : 0.0f;
    }
    float dQ[D / 8][4] = {};
    uint32_t qf[KT][4], gf[KT][4];
    for (int jt = 0; jt < nkt; jt++) {
        int64_t j0 = (int64_t)jt * B;
        if (jt + 1 < nkt) {
            fa_load<T, D>(Ks + ((jt + 1) % 2) * B * LD, kn, j0 + B, a.S, a.k.r);
            fa_load<T, D>(Vs + ((jt + 1) % 2) * B * LD, vn, j0 + B, a.S, a.v.r);
        }
        fa_commit();
        fa_wait<1>();
        __syncthreads();
        const T *Kt = Ks + (jt % 2) * B * LD, *Vt = Vs + (jt % 2) * B * LD;
        if (jt == 0)
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                fa_lda(qf[kk], Qs + w * 16 * LD + kk * 16, LD);
                fa_lda(gf[kk], Gs + w * 16 * LD + kk * 16, LD);
            }
        /* S_w = Q_w K^T, dP_w = dout_w V^T: B = K^T, V^T with K, V [key][e] row-major */
        float s[NT][4] = {}, dp[NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < KT; kk++)
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                fa_mma_nk<T>(s + 2 * np, qf[kk], Kt + np * 16 * LD + kk * 16, LD);
                fa_mma_nk<T>(dp + 2 * np, gf[kk], Vt + np * 16 * LD + kk * 16, LD);
            }
        /* dS into s; element (query iw + row, key j0 + col) */
        bool edge = a.mask || iw + 16 > a.L || j0 + B > a.S || (a.causal && j0 + B - 1 > iw);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int64_t i = iw + frag_row(c), j = j0 + frag_col(nt, c);
                float p = prob<T>(a, s[nt][c], l2[c / 2], n, i, j, edge);
                float z = a.dropout && p != 0.0f ? cu_attn_drop<float>(a, n, i, j) : 1.0f;
                s[nt][c] = p * (z * dp[nt][c] - Dr[c / 2]);
            }
            /* dQ_w += dS K: B = K [key][e] row-major */
#pragma unroll
        for (int kk = 0; kk < B / 16; kk++) {
            uint32_t sa[4];
            fa_a_from_c<T>(sa, s, kk);
#pragma unroll
            for (int ep = 0; ep < D / 16; ep++) {
                fa_mma_kn<T>(dQ + 2 * ep, sa, Kt + kk * 16 * LD + ep * 16, LD);
            }
        }
        __syncthreads();
    }
    /* dq = scale dQ through this warp's rows of Qs (16-byte stores) */
    fa_wait<0>();
    __syncthreads(); /* Q landed, in any thread's copies */
    T *Qw = Qs + w * 16 * LD;
#pragma unroll
    for (int et = 0; et < D / 8; et++)
#pragma unroll
        for (int r = 0; r < 2; r++)
            *(uint32_t *)(Qw + frag_row(2 * r) * LD + frag_col(et, 0)) =
                fa_pack<T>(dQ[et][2 * r] * a.scale_f, dQ[et][2 * r + 1] * a.scale_f);
    __syncwarp();
    for (int c = threadIdx.x % 32; c < 16 * (D / 8); c += 32) {
        int rr = c / (D / 8), e = (c % (D / 8)) * 8;
        if (iw + rr < a.L)
            *(uint4 *)(dq + cu_attn_at(a, a.dq, n) + (iw + rr) * a.dq.r + e) = *(const uint4 *)(Qw + rr * LD + e);
    }
}

template <typename T, int D>
static td_status launch(cu_dev *d, const td_op *op, const cu_attn_args *a, const float *Dv) {
    const td_operand *in = op->in, *o = op->out;
    const T *dout = (const T *)cu_data(&in[0]), *q = (const T *)cu_data(&in[1]), *k = (const T *)cu_data(&in[2]),
            *v = (const T *)cu_data(&in[3]);
    const float *lse = (const float *)cu_data(&in[6]);
    size_t s1 = smem_dkdv<T, D>(), s2 = smem_dq<T, D>();
    cudaFuncSetAttribute(attn_dkdv_fa<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s1);
    cudaFuncSetAttribute(attn_dq_fa<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2);
    attn_dkdv_fa<T, D><<<(unsigned)(a->N * ((a->S + B - 1) / B)), FA_THREADS, s1, d->stream>>>(
        *a, dout, q, k, v, lse, Dv, (T *)cu_data(&o[1]), (T *)cu_data(&o[2]));
    td_status st = CU_LAUNCHED("attention_backward dk, dv (mma)");
    if (st != TD_OK) return st;
    attn_dq_fa<T, D><<<(unsigned)(a->N * ((a->L + B - 1) / B)), FA_THREADS, s2, d->stream>>>(*a, dout, q, k, v, lse, Dv,
                                                                                             (T *)cu_data(&o[0]));
    return CU_LAUNCHED("attention_backward dq (mma)");
}

template <typename T> static td_status launch_t(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    void *Dv = NULL;
    td_status st = cu_temp_alloc(d, (size_t)(a->N * a->L) * sizeof(float), &Dv);
    if (st != TD_OK) return st;
    attn_rowdot<T><<<cu_grid(d, a->N * a->L * 32, 256), 256, 0, d->stream>>>(
        *a, (const T *)cu_data(&op->in[0]), (const T *)cu_data(&op->in[5]), (float *)Dv);
    st = CU_LAUNCHED("attention_backward rowsum(dout out)");
    if (st == TD_OK) /* cu_attn_fa_takes admitted E */
        cu_attn_head_dim(a->E, [&](auto dim) { st = launch<T, decltype(dim)::value>(d, op, a, (const float *)Dv); });
    cu_temp_free(d, Dv);
    return st;
}

} // namespace

/* in = (dout, q, k, v, mask?, out, lse), out = (dq, dk, dv); *st: the launches' status */
extern "C" bool cu_attn_fa_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a, td_status *st) {
    td_dtype dt = op->in[1].dtype;
    if (!cu_attn_fa_takes(d, a, dt)) return false;
    for (int k = 0; k < 4; k++)
        if (!cu_attn_aligned(&op->in[k])) return false;
    for (int k = 0; k < 3; k++)
        if (!cu_attn_aligned(&op->out[k])) return false;
    *st = dt == TD_F16 ? launch_t<__half>(d, op, a) : launch_t<__nv_bfloat16>(d, op, a);
    return true;
}
