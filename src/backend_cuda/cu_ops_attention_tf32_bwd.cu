/*
** The f32 backward of ATTENTION_BACKWARD on mma.sync m16n8k8 TF32 in three products (3xTF32,
** cu_attention_tf32.cuh) for E == Ev in {64, 128} (masks, causal, dropout), FlashAttention-2's backward with every
** accumulator in registers, the structure of cu_ops_attention_fa_bwd.cu:
**   p_ij = 2^(s_ij - lse_i log2e), s_ij = (q_i.k_j scale + mask_ij) log2e,  ds_ij = p_ij (z_ij dout_i.v_j - D_i)
**   attn_rowdot_f32  a warp per query row: D_i = dout_i . out_i (a scratch [N, L] contiguous)
**   attn_dkdv_tf32   a block of W warps owns 16 W keys (16 a warp; K, V staged once); per tile of T queries
**                    (q, dout, lse log2e, D staged by cp.async, double-buffered), causal: from query j0 on:
**                      S^T_w = K_w Q^T, P^T = 2^(S^T - lse)                                (tensor cores)
**                      dP^T_w = V_w dout^T, dS^T = P^T (z dP^T - D)
**                      dV_w += (P^T z) dout, dK_w += dS^T Q (C registers as A, permuted k) (tensor cores)
**                    dk = scale dK, dv = dV.
**   attn_dq_tf32     a block owns 16 W queries (Q, dout staged once); per tile of T keys (K, V double-buffered):
**                      S_w = Q_w K^T, dP_w = dout_w V^T, dS = P (z dP - D), dQ_w += dS K    (tensor cores)
**                    dq = scale dQ. Every output element has one writer: results are the same run to run.
**   or, "fused" (TRIDENT_CUDA_ATTN_F32_BWD, cu_attention_tf32.cuh), dq inside attn_dkdv_tf32 (FlashAttention-2's
**   way, no second S and dP): per query tile, scale dS^T to shared memory, then the block's T x D product
**                      dq_tile += (scale dS) K_block (k over the block's 16 W keys)      (tensor cores)
**                    split over the warps (16-row by NE 8-column pieces), added to dq (its rows zeroed first by
**                    attn_zero_f32, in its layout) by f32 atomics.
**   "pre" variants (fused, D = 64): K split into hi and lo planes once a block, scale dS^T stored split, each
**   warp's V A fragments split once into registers, and (all but 9: "preq") each Q and dout tile split once a
**   tile (tf32_split_tile, by the threads that staged it): no split in those fragment reads, one more plane each
**   in shared memory (2 blocks of 4 warps an SM). dq_tile's key steps alternate between two accumulators.
** Also the reader of TRIDENT_CUDA_ATTN_F32_BWD (cu_attn_tf32_bwd_cfg).
** Shapes: as cu_ops_attention.cu: q, k, v, dout, out, dq, dk, dv [N,rows,D] each through its strides (a.q .. a.dv:
** head offset cu_attn_at, row stride .r, a multiple of 4 floats), lse [N,L] float contiguous.
*/
#include <stdio.h>
#include <stdlib.h>

#include "cu_attention_tf32.cuh"

int cu_attn_tf32_bwd_cfg(void) {
    const char *e = getenv("TRIDENT_CUDA_ATTN_F32_BWD");
    if (!e || !*e) return TF32_BWD_DEFAULT;
    char *end;
    long b = strtol(e, &end, 10);
    if (e[0] >= '0' && e[0] <= '9' && !*end && b < TF32_BWD_CFGS) return (int)b;
    static bool warned = false;
    if (!warned) {
        warned = true;
        fprintf(stderr, "trident: TRIDENT_CUDA_ATTN_F32_BWD='%s' is not 0..%d; using %d\n", e, TF32_BWD_CFGS - 1,
                TF32_BWD_DEFAULT);
    }
    return TF32_BWD_DEFAULT;
}

namespace {

constexpr float LOG2E = 1.4426950408889634f;

/* D [N L] = rowsum(dout * out), dout and out [N, L, Ev] (a.g, a.o) */
__global__ void attn_rowdot_f32(cu_attn_args a, const float *dout, const float *out, float *Dv) {
    int lane = threadIdx.x % 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < a.N * a.L;
         r += (int64_t)gridDim.x * blockDim.x / 32) {
        int64_t n = r / a.L, i = r % a.L;
        const float *g = dout + cu_attn_at(a, a.g, n) + i * a.g.r, *o = out + cu_attn_at(a, a.o, n) + i * a.o.r;
        float s = 0;
        for (int64_t e = lane; e < a.Ev; e += 32) s += g[e] * o[e];
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) Dv[r] = s;
    }
}

/* dq [N, L, D] (a.dq) = 0, a float4 a thread */
template <int D> __global__ void attn_zero_f32(cu_attn_args a, float *dq) {
    constexpr int C = D / 4;
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < a.N * a.L * C;
         x += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = x / C, n = r / a.L, i = r % a.L;
        *(float4 *)(dq + cu_attn_at(a, a.dq, n) + i * a.dq.r + (x % C) * 4) = make_float4(0, 0, 0, 0);
    }
}

/* p of (n, i, j) from the raw score x = q_i.k_j: 0 outside [0, L) x [0, S), where masked or lse_i = -inf;
** l2: lse_i log2e; edge: whether the mask (or the ends of L and S) may matter here */
__device__ __forceinline__ float prob(const cu_attn_args &a, float x, float l2, int64_t n, int64_t i, int64_t j,
                                      bool edge) {
    x *= a.scale_f * LOG2E;
    if (edge) {
        if (i >= a.L || j >= a.S) return 0.0f;
        x += cu_attn_mask<float, float>(a, n, i, j) * LOG2E;
    }
    return l2 == -INFINITY ? 0.0f : tf32_exp2(x - l2);
}

/* row stride of the fused variant's scale dS^T [16 W][T + 4]: T + 4 = 4 (mod 16), so its reads (2t, g) land in
** banks 8t + g */
template <int T> __host__ __device__ constexpr int ds_ld() { return T + 4; }

/* dynamic shared memory: K, V [16 W][LD]; Q, dout [2][T][LD]; lse log2e, D [2][T]; fused: scale dS^T [16 W][T + 4];
** PRE (fused only): the lo planes of K [16 W][LD] and scale dS^T [16 W][T + 4]; PREQ: of Q and dout [T][LD] */
template <int D, int W, int T, bool FUSED, bool PRE, bool PREQ> constexpr size_t smem_dkdv() {
    return ((2 + PRE) * 16 * W + (PREQ ? 6 : 4) * T) * tf32_ld<D>() * sizeof(float) + 4 * T * sizeof(float) +
           (FUSED ? (1 + PRE) * 16 * W * ds_ld<T>() * sizeof(float) : 0);
}

/* dq [i][2e, 2e + 1] += (x, y) */
__device__ __forceinline__ void add2(float *p, float x, float y) {
#if __CUDA_ARCH__ >= 900
    atomicAdd((float2 *)p, make_float2(x, y));
#else
    atomicAdd(p, x), atomicAdd(p + 1, y);
#endif
}

/* FUSED's dq rows [0, rows) of this query tile (at dq, row stride ld) += (scale dS) K over the first kw warps'
** keys (the others saw none of the tile's queries: causal), after the barrier that publishes Ps; warp w owns
** rows 16 (w % MT) .. 16 (w % MT) + 15 and columns 8 e0 .. 8 (e0 + NE) - 1. A = scale dS [query][key] read
** from Ps [key][query] in tf32_b_kn's k order (k = t: key 2t, t + 4: key 2t + 1), B = K [key][e] (tf32_b_kn).
** PRE: Ps and Ks presplit, their lo planes at Pl and Kl. */
template <int D, int W, int T, bool PRE>
__device__ __forceinline__ void dq_tile(const float *Ks, const float *Kl, const float *Ps, const float *Pl, float *dq,
                                        int64_t ld, int64_t rows, int kw) {
    constexpr int LD = tf32_ld<D>(), PLD = ds_ld<T>(), MT = T / 16, NE = D / 8 / (W / MT);
    static_assert(T % 16 == 0 && W % MT == 0 && (D / 8) % (W / MT) == 0, "dq_tile: the warps split T x D evenly");
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, mt = w % MT, e0 = (w / MT) * NE;
    __syncthreads();          /* Ps holds every active warp's rows */
    float acc[2][NE][4] = {}; /* even and odd key steps: two independent mma chains a column block */
    const float *P = Ps + mt * 16;
    for (int k2 = 0; k2 < kw; k2++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int ks = 2 * k2 + h, o = (ks * 8 + 2 * t) * PLD, oa[4] = {o + g, o + g + 8, o + PLD + g, o + PLD + g + 8};
            tf32_frag_a sa;
            if constexpr (PRE) {
#pragma unroll
                for (int r = 0; r < 4; r++)
                    sa.h[r] = __float_as_uint(P[oa[r]]), sa.l[r] = __float_as_uint(P[Pl - Ps + oa[r]]);
            } else
                sa = tf32_a_regs(P[oa[0]], P[oa[1]], P[oa[2]], P[oa[3]]);
#pragma unroll
            for (int e = 0; e < NE; e++)
                tf32_mma3(acc[h][e], sa, tf32_b_kn<PRE>(Ks + ks * 8 * LD + (e0 + e) * 8, LD, Kl - Ks));
        }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int i = mt * 16 + g + 8 * r;
        if (i >= rows) continue;
#pragma unroll
        for (int e = 0; e < NE; e++)
            add2(dq + i * ld + (e0 + e) * 8 + 2 * t, acc[0][e][2 * r] + acc[1][e][2 * r],
                 acc[0][e][2 * r + 1] + acc[1][e][2 * r + 1]);
    }
}

template <int D, int W, int T, bool FUSED, bool PRE, bool PREQ>
__global__ void __launch_bounds__(W * 32)
    attn_dkdv_tf32(cu_attn_args a, const float *dout, const float *q, const float *k, const float *v, const float *lse,
                   const float *Dv, float *dk, float *dv, float *dq) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = tf32_ld<D>(), BK = 16 * W, NT = T / 8, KT = D / 8;
    float *Ks = (float *)smem, *Vs = Ks + BK * LD, *Qs = Vs + BK * LD, *Gs = Qs + 2 * T * LD;
    float *ls = Gs + 2 * T * LD, *Ds = ls + 2 * T, *Ps = Ds + 2 * T; /* Ps: FUSED's scale dS^T [16 W][ds_ld] */
    float *Pl = Ps + BK * ds_ld<T>(), *Kl = Pl + BK * ds_ld<T>(), *Ql = Kl + BK * LD, *Gl = Ql + T * LD; /* PRE's */
    static_assert(!PRE || (FUSED && D == 64), "the presplit backward is the fused one at D = 64");
    static_assert(PRE || !PREQ, "Q and dout presplit with K");
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int64_t n, j0;
    tf32_order(a, a.S, BK, false, &n, &j0); /* causal: the first keys see the most queries */
    int64_t jw = j0 + w * 16, ist = a.causal ? j0 : 0;
    int nit = ist < a.L ? (int)((a.L - ist + T - 1) / T) : 0;
    const float *qn = q + cu_attn_at(a, a.q, n), *gn = dout + cu_attn_at(a, a.g, n);
    auto stage = [&](int it) { /* query tile it into buffer it % 2 */
                               int64_t i0 = ist + (int64_t)it * T;
                               tf32_load<D, T, W * 32>(Qs + (it % 2) * T * LD, qn, i0, a.L, a.q.r);
                               tf32_load<D, T, W * 32>(Gs + (it % 2) * T * LD, gn, i0, a.L, a.g.r);
                               for (int r = threadIdx.x; r < T; r += W * 32) {
                                   bool ok = i0 + r < a.L;
                                   ls[(it % 2) * T + r] = ok ? lse[n * a.L + i0 + r] * LOG2E : -INFINITY;
                                   Ds[(it % 2) * T + r] = ok ? Dv[n * a.L + i0 + r] : 0.0f;
                               }
    };
    if (nit > 0) {
        tf32_load<D, BK, W * 32>(Ks, k + cu_attn_at(a, a.k, n), j0, a.S, a.k.r);
        tf32_load<D, BK, W * 32>(Vs, v + cu_attn_at(a, a.v, n), j0, a.S, a.v.r);
        stage(0);
    }
    tf32_commit();
    float dK[KT][4] = {}, dV[KT][4] = {};
    tf32_frag_a vf[PRE ? KT : 1]; /* PRE: the warp's V A fragments split once, in registers (64 of them) */
    if constexpr (PRE) {
        tf32_wait<0>(); /* the first tile's group too: the loop's first wait is then a no-op */
        __syncthreads();
        tf32_a_split_rows(vf, Vs + w * 16 * LD, LD);
    }
    for (int it = 0; it < nit; it++) {
        int64_t i0 = ist + (int64_t)it * T;
        if (it + 1 < nit) stage(it + 1);
        tf32_commit();
        tf32_wait<1>();
        float *Qt = Qs + (it % 2) * T * LD, *Gt = Gs + (it % 2) * T * LD;
        if constexpr (PRE) { /* the lo planes are free: the last iteration ended on a barrier */
            if (it == 0) tf32_split_tile<D, BK, W * 32>(Ks, Kl);
            if constexpr (PREQ) tf32_split_tile<D, T, W * 32>(Qt, Ql), tf32_split_tile<D, T, W * 32>(Gt, Gl);
        }
        __syncthreads();
        const float *lt = ls + (it % 2) * T, *Dt = Ds + (it % 2) * T;
        if (!(a.causal && i0 + T - 1 < jw)) { /* else every query of the tile is before this warp's keys */
            /* S^T_w = K_w Q^T, dP^T_w = V_w dout^T (16 keys x T queries): B^T = Q, dout [query][e] */
            float st[NT][4] = {}, dpt[NT][4] = {};
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                tf32_frag_a ka, va;
                if constexpr (PRE) {
                    va = vf[kk];
                    ka = tf32_a_pre(Ks + w * 16 * LD + kk * 8, LD, Kl - Ks);
                } else {
                    va = tf32_a_ld(Vs + w * 16 * LD + kk * 8, LD);
                    ka = tf32_a_ld(Ks + w * 16 * LD + kk * 8, LD);
                }
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    tf32_mma3(st[nt], ka, tf32_b_nk<PREQ>(Qt + nt * 8 * LD + kk * 8, LD, Ql - Qt));
                    tf32_mma3(dpt[nt], va, tf32_b_nk<PREQ>(Gt + nt * 8 * LD + kk * 8, LD, Gl - Gt));
                }
            }
            /* P^T z into st, dS^T into dpt; element (nt, c): key jw + g + 8 (c / 2), query i0 + 8 nt + 2 t + c % 2 */
            bool edge = a.mask || i0 + T > a.L || jw + 16 > a.S || (a.causal && jw + 15 > i0);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int col = nt * 8 + 2 * t + c % 2;
                    int64_t j = jw + g + (c / 2) * 8, i = i0 + col;
                    float p = prob(a, st[nt][c], lt[col], n, i, j, edge);
                    float z = a.dropout && p != 0.0f ? cu_attn_drop<float>(a, n, i, j) : 1.0f;
                    st[nt][c] = p * z;
                    dpt[nt][c] = p * (z * dpt[nt][c] - Dt[col]);
                }
            if constexpr (FUSED) { /* this warp's rows of scale dS^T: keys g, g + 8, queries 8 nt + 2t, + 1 */
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        int o = (w * 16 + g + 8 * r) * ds_ld<T>() + nt * 8 + 2 * t;
                        float x = dpt[nt][2 * r] * a.scale_f, y = dpt[nt][2 * r + 1] * a.scale_f;
                        if constexpr (PRE) { /* split here, once, for every warp's dq_tile */
                            uint32_t xh, xl, yh, yl;
                            tf32_split(x, xh, xl), tf32_split(y, yh, yl);
                            *(float2 *)(Ps + o) = make_float2(__uint_as_float(xh), __uint_as_float(yh));
                            *(float2 *)(Pl + o) = make_float2(__uint_as_float(xl), __uint_as_float(yl));
                        } else
                            *(float2 *)(Ps + o) = make_float2(x, y);
                    }
            }
            /* dV_w += (P^T z) dout, dK_w += dS^T Q: B = dout, Q [query][e] */
#pragma unroll
            for (int kk = 0; kk < NT; kk++) {
                tf32_frag_a pa = tf32_a_from_c(st, kk), sa = tf32_a_from_c(dpt, kk);
#pragma unroll
                for (int et = 0; et < KT; et++) {
                    tf32_mma3(dV[et], pa, tf32_b_kn<PREQ>(Gt + kk * 8 * LD + et * 8, LD, Gl - Gt));
                    tf32_mma3(dK[et], sa, tf32_b_kn<PREQ>(Qt + kk * 8 * LD + et * 8, LD, Ql - Qt));
                }
            }
        }
        if constexpr (FUSED) {
            int64_t kw = a.causal ? (i0 + T - 1 - j0) / 16 + 1 : W; /* warps that saw the tile: a prefix */
            dq_tile<D, W, T, PRE>(Ks, Kl, Ps, Pl, dq + cu_attn_at(a, a.dq, n) + i0 * a.dq.r, a.dq.r, a.L - i0,
                                  kw < W ? (int)kw : W);
        }
        __syncthreads(); /* every warp is done with this buffer */
    }
    tf32_wait<0>();
    /* dk = scale dK, dv = dV (this lane: columns 8 et + 2t, 2t + 1 of keys g, g + 8); zeros for keys no query sees */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int64_t j = jw + g + 8 * r;
        if (j >= a.S) continue;
        float *krow = dk + cu_attn_at(a, a.dk, n) + j * a.dk.r + 2 * t,
              *vrow = dv + cu_attn_at(a, a.dv, n) + j * a.dv.r + 2 * t;
#pragma unroll
        for (int et = 0; et < KT; et++) {
            *(float2 *)(krow + et * 8) = make_float2(dK[et][2 * r] * a.scale_f, dK[et][2 * r + 1] * a.scale_f);
            *(float2 *)(vrow + et * 8) = make_float2(dV[et][2 * r], dV[et][2 * r + 1]);
        }
    }
}

/* dynamic shared memory: Q, dout [16 W][LD]; K, V [2][T][LD] */
template <int D, int W, int T> constexpr size_t smem_dq() {
    return (2 * 16 * W + 4 * T) * tf32_ld<D>() * sizeof(float);
}

template <int D, int W, int T>
__global__ void __launch_bounds__(W * 32)
    attn_dq_tf32(cu_attn_args a, const float *dout, const float *q, const float *k, const float *v, const float *lse,
                 const float *Dv, float *dq) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = tf32_ld<D>(), BQ = 16 * W, NT = T / 8, KT = D / 8;
    float *Qs = (float *)smem, *Gs = Qs + BQ * LD, *Ks = Gs + BQ * LD, *Vs = Ks + 2 * T * LD;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int64_t n, i0;
    tf32_order(a, a.L, BQ, true, &n, &i0);
    int64_t iw = i0 + w * 16, iend = i0 + BQ < a.L ? i0 + BQ : a.L, jend = a.causal && iend < a.S ? iend : a.S;
    int nkt = (int)((jend + T - 1) / T);
    const float *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
    tf32_load<D, BQ, W * 32>(Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
    tf32_load<D, BQ, W * 32>(Gs, dout + cu_attn_at(a, a.g, n), i0, a.L, a.g.r);
    if (nkt > 0) tf32_load<D, T, W * 32>(Ks, kn, 0, a.S, a.k.r), tf32_load<D, T, W * 32>(Vs, vn, 0, a.S, a.v.r);
    tf32_commit();
    float l2[2], Dr[2]; /* this lane's rows iw + g and iw + g + 8 */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int64_t i = iw + g + 8 * r;
        l2[r] = i < a.L ? lse[n * a.L + i] * LOG2E : -INFINITY;
        Dr[r] = i < a.L ? Dv[n * a.L + i] : 0.0f;
    }
    float dQ[KT][4] = {};
    for (int jt = 0; jt < nkt; jt++) {
        int64_t j0 = (int64_t)jt * T;
        if (jt + 1 < nkt) {
            tf32_load<D, T, W * 32>(Ks + ((jt + 1) % 2) * T * LD, kn, j0 + T, a.S, a.k.r);
            tf32_load<D, T, W * 32>(Vs + ((jt + 1) % 2) * T * LD, vn, j0 + T, a.S, a.v.r);
        }
        tf32_commit();
        tf32_wait<1>();
        __syncthreads();
        const float *Kt = Ks + (jt % 2) * T * LD, *Vt = Vs + (jt % 2) * T * LD;
        if (!(a.causal && j0 > iw + 15)) { /* else every key of the tile is above this warp's rows */
            /* S_w = Q_w K^T, dP_w = dout_w V^T: B^T = K, V [key][e] */
            float s[NT][4] = {}, dp[NT][4] = {};
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                tf32_frag_a qa = tf32_a_ld(Qs + w * 16 * LD + kk * 8, LD),
                            ga = tf32_a_ld(Gs + w * 16 * LD + kk * 8, LD);
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    tf32_mma3(s[nt], qa, tf32_b_nk(Kt + nt * 8 * LD + kk * 8, LD));
                    tf32_mma3(dp[nt], ga, tf32_b_nk(Vt + nt * 8 * LD + kk * 8, LD));
                }
            }
            /* dS into s; element (nt, c): query iw + g + 8 (c / 2), key j0 + 8 nt + 2 t + c % 2 */
            bool edge = a.mask || iw + 16 > a.L || j0 + T > a.S || (a.causal && j0 + T - 1 > iw);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    int64_t i = iw + g + (c / 2) * 8, j = j0 + nt * 8 + 2 * t + c % 2;
                    float p = prob(a, s[nt][c], l2[c / 2], n, i, j, edge);
                    float z = a.dropout && p != 0.0f ? cu_attn_drop<float>(a, n, i, j) : 1.0f;
                    s[nt][c] = p * (z * dp[nt][c] - Dr[c / 2]);
                }
                /* dQ_w += dS K: B = K [key][e] */
#pragma unroll
            for (int kk = 0; kk < NT; kk++) {
                tf32_frag_a sa = tf32_a_from_c(s, kk);
#pragma unroll
                for (int et = 0; et < KT; et++) tf32_mma3(dQ[et], sa, tf32_b_kn(Kt + kk * 8 * LD + et * 8, LD));
            }
        }
        __syncthreads();
    }
    tf32_wait<0>();
    /* dq = scale dQ (this lane: columns 8 et + 2t, 2t + 1 of rows g, g + 8) */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int64_t i = iw + g + 8 * r;
        if (i >= a.L) continue;
        float *qrow = dq + cu_attn_at(a, a.dq, n) + i * a.dq.r + 2 * t;
#pragma unroll
        for (int et = 0; et < KT; et++)
            *(float2 *)(qrow + et * 8) = make_float2(dQ[et][2 * r] * a.scale_f, dQ[et][2 * r + 1] * a.scale_f);
    }
}

template <int D, int B> static td_status launch(cu_dev *d, const td_op *op, const cu_attn_args *a, const float *Dv) {
    constexpr int W = tf32_bwd_warps(B), T = tf32_bwd_tile(B, D);
    /* PRE at D = 128 would spill (V's fragments in registers): its non-presplit twin runs there */
    constexpr bool FUSED = tf32_bwd_fused(B), PRE = tf32_bwd_pre(B) && D == 64, PREQ = PRE && tf32_bwd_preq(B);
    const td_operand *in = op->in, *o = op->out;
    const float *dout = (const float *)cu_data(&in[0]), *q = (const float *)cu_data(&in[1]),
                *k = (const float *)cu_data(&in[2]), *v = (const float *)cu_data(&in[3]),
                *lse = (const float *)cu_data(&in[6]);
    float *dq = (float *)cu_data(&o[0]);
    size_t s1 = smem_dkdv<D, W, T, FUSED, PRE, PREQ>();
    if (FUSED) {
        attn_zero_f32<D><<<cu_grid(d, a->N * a->L * (D / 4), 256), 256, 0, d->stream>>>(*a, dq);
        td_status st = CU_LAUNCHED("attention_backward dq = 0 (3xTF32 mma)");
        if (st != TD_OK) return st;
    }
    cudaFuncSetAttribute(attn_dkdv_tf32<D, W, T, FUSED, PRE, PREQ>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)s1);
    attn_dkdv_tf32<D, W, T, FUSED, PRE, PREQ>
        <<<(unsigned)(a->N * ((a->S + 16 * W - 1) / (16 * W))), W * 32, s1, d->stream>>>(
            *a, dout, q, k, v, lse, Dv, (float *)cu_data(&o[1]), (float *)cu_data(&o[2]), dq);
    td_status st =
        CU_LAUNCHED(FUSED ? "attention_backward dq, dk, dv (3xTF32 mma)" : "attention_backward dk, dv (3xTF32 mma)");
    if (st != TD_OK || FUSED) return st;
    size_t s2 = smem_dq<D, W, T>();
    cudaFuncSetAttribute(attn_dq_tf32<D, W, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2);
    attn_dq_tf32<D, W, T><<<(unsigned)(a->N * ((a->L + 16 * W - 1) / (16 * W))), W * 32, s2, d->stream>>>(
        *a, dout, q, k, v, lse, Dv, dq);
    return CU_LAUNCHED("attention_backward dq (3xTF32 mma)");
}

} // namespace

/* in = (dout, q, k, v, mask?, out, lse), out = (dq, dk, dv); *st: the launches' status */
extern "C" bool cu_attn_tf32_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a, td_status *st) {
    int cfg;
    if (!tf32_takes(d, a, op->in[1].dtype, &cfg)) return false;
    for (int k = 0; k < 4; k++)
        if (!cu_attn_aligned(&op->in[k])) return false;
    for (int k = 0; k < 3; k++)
        if (!cu_attn_aligned(&op->out[k])) return false;
    void *Dv = NULL;
    *st = cu_temp_alloc(d, (size_t)(a->N * a->L) * sizeof(float), &Dv);
    if (*st != TD_OK) return true;
    attn_rowdot_f32<<<cu_grid(d, a->N * a->L * 32, 256), 256, 0, d->stream>>>(
        *a, (const float *)cu_data(&op->in[0]), (const float *)cu_data(&op->in[5]), (float *)Dv);
    *st = CU_LAUNCHED("attention_backward rowsum(dout out)");
    if (*st == TD_OK) /* tf32_takes admitted E */
        tf32_dispatch<TF32_BWD_CFGS>(a->E, cu_attn_tf32_bwd_cfg(), [&](auto dim, auto c) {
            *st = launch<decltype(dim)::value, decltype(c)::value>(d, op, a, (const float *)Dv);
        });
    cu_temp_free(d, Dv);
    return true;
}
