/*
** The f32 forward of ATTENTION on mma.sync m16n8k8 TF32 in three products (3xTF32, cu_attention_tf32.cuh) for
** E == Ev in {64, 128} (masks, causal, dropout), FlashAttention-2's loop (Dao 2023) with every accumulator in
** registers, the structure of cu_ops_attention_fa.cu:
**   a block of W warps owns 16 W query rows (16 a warp; Q staged once in shared memory, its A fragments read per
**   tile: in registers, with the accumulators and 3xTF32's hi/lo pairs, they spill at D = 128); per tile of T keys
**   (K, V staged by cp.async into one of two buffers while the other is used; "pre" configurations split them once
**   into hi and lo planes, tf32_split_tile, before the barrier that publishes them; "qreg" ones hold the warp's Q
**   A fragments split once in registers at D = 64):
**     S_w = Q_w K^T (16 x T fp32)                                                           (tensor cores)
**     s = S scale log2e + mask log2e (only on tiles that need it: a mask, the causal diagonal, the last keys)
**     m_new = max(m, rowmax s) (quad shuffles), alpha = 2^(m - m_new), P = 2^(s - m_new),
**     l = l alpha + rowsum P (per lane, summed over the quad at the end), O_w = O_w alpha
**     O_w += (P z) V, P z as the A operand straight from the C registers (permuted k order)   (tensor cores)
**   out = O / l, lse = (m + log2 l) ln 2; a row without keys: out 0, lse -inf (as the generic kernel).
**   Causal: a block stops after the key tile holding its last query, a warp skips tiles wholly above its rows;
**   blocks start heaviest first.
** Also the reader of TRIDENT_CUDA_ATTN_F32_CFG (cu_attn_tf32_cfg).
** Shapes: q [N,L,E], k [N,S,E], v [N,S,E], out [N,L,E], each through its strides (a.q, a.k, a.v, a.o: head
** offset cu_attn_at, row stride .r, a multiple of 4), lse [N,L] float contiguous; see cu_ops_attention.cu.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_attention_tf32.cuh"

int cu_attn_tf32_cfg(void) {
    const char *mma = getenv("TRIDENT_CUDA_ATTN_MMA"), *tf = getenv("TRIDENT_CUDA_ATTN_TF32"),
               *e = getenv("TRIDENT_CUDA_ATTN_F32_CFG");
    if ((mma && !strcmp(mma, "0")) || (tf && !strcmp(tf, "0"))) return -1;
    if (!e || !*e) return TF32_CFG_DEFAULT;
    if (!strcmp(e, "wmma")) return -1;
    if (e[0] >= '0' && e[0] < '0' + TF32_CFGS && !e[1]) return e[0] - '0';
    static bool warned = false;
    if (!warned) {
        warned = true;
        fprintf(stderr, "trident: TRIDENT_CUDA_ATTN_F32_CFG='%s' is not 0..%d or wmma; using %d\n", e, TF32_CFGS - 1,
                TF32_CFG_DEFAULT);
    }
    return TF32_CFG_DEFAULT;
}

namespace {

constexpr float LOG2E = 1.4426950408889634f;

/* dynamic shared memory: Q [16 W][LD], K and V [2][T][LD]; PRE: their lo planes [T][LD] */
template <int D, int W, int T, bool PRE> constexpr size_t smem_fwd() {
    return (16 * W + (PRE ? 6 : 4) * T) * tf32_ld<D>() * sizeof(float);
}

template <int D, int W, int T, bool PRE, bool QREG>
__global__ void __launch_bounds__(W * 32)
    attn_fwd_tf32(cu_attn_args a, const float *q, const float *k, const float *v, float *out, float *lse) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = tf32_ld<D>(), BQ = 16 * W, NT = T / 8, KT = D / 8;
    float *Qs = (float *)smem, *Ks = Qs + BQ * LD, *Vs = Ks + 2 * T * LD; /* Q [BQ][LD], K and V [2][T][LD] */
    float *Kl = Vs + 2 * T * LD, *Vl = Kl + T * LD;                       /* PRE: lo planes [T][LD] */
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int64_t n, i0;
    tf32_order(a, a.L, BQ, true, &n, &i0);
    int64_t iw = i0 + w * 16, iend = i0 + BQ < a.L ? i0 + BQ : a.L, jend = a.causal && iend < a.S ? iend : a.S;
    int nkt = (int)((jend + T - 1) / T);
    const float *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
    tf32_load<D, BQ, W * 32>(Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
    if (nkt > 0) tf32_load<D, T, W * 32>(Ks, kn, 0, a.S, a.k.r), tf32_load<D, T, W * 32>(Vs, vn, 0, a.S, a.v.r);
    tf32_commit();
    const float sl2 = a.scale_f * LOG2E;
    float o[KT][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
    tf32_frag_a qf[QREG ? KT : 1]; /* QREG: the warp's Q A fragments split once, in registers (64 at D = 64) */
    if constexpr (QREG) {
        tf32_wait<0>(); /* the first K, V tiles too: the loop's first wait is then a no-op */
        __syncthreads();
        tf32_a_split_rows(qf, Qs + w * 16 * LD, LD);
    }
    for (int jt = 0; jt < nkt; jt++) {
        int64_t j0 = (int64_t)jt * T;
        if (jt + 1 < nkt) { /* the next tile into the other buffer, freed by the last iteration's barrier */
            tf32_load<D, T, W * 32>(Ks + ((jt + 1) % 2) * T * LD, kn, j0 + T, a.S, a.k.r);
            tf32_load<D, T, W * 32>(Vs + ((jt + 1) % 2) * T * LD, vn, j0 + T, a.S, a.v.r);
        }
        tf32_commit();
        tf32_wait<1>();
        float *Kt = Ks + (jt % 2) * T * LD, *Vt = Vs + (jt % 2) * T * LD;
        if constexpr (PRE) /* the lo planes are free: the last iteration ended on a barrier */
            tf32_split_tile<D, T, W * 32>(Kt, Kl), tf32_split_tile<D, T, W * 32>(Vt, Vl);
        __syncthreads();
        if (!(a.causal && j0 > iw + 15)) { /* else every key of the tile is above this warp's rows */
            /* S_w = Q_w K^T: B^T = K [key][e] */
            float s[NT][4] = {};
#pragma unroll
            for (int kk = 0; kk < KT; kk++) {
                tf32_frag_a qa;
                if constexpr (QREG)
                    qa = qf[kk];
                else
                    qa = tf32_a_ld(Qs + w * 16 * LD + kk * 8, LD);
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    tf32_mma3(s[nt], qa, tf32_b_nk<PRE>(Kt + nt * 8 * LD + kk * 8, LD, Kl - Kt));
            }
            /* scores in the log2 domain; element (nt, c): row iw + g + 8 (c / 2), key j0 + 8 nt + 2 t + c % 2 */
            bool edge = a.mask || j0 + T > a.S || (a.causal && j0 + T - 1 > iw);
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    float x = s[nt][c] * sl2;
                    if (edge) {
                        int64_t i = iw + g + (c / 2) * 8, j = j0 + nt * 8 + 2 * t + c % 2;
                        x = j >= a.S ? -INFINITY : i < a.L ? x + cu_attn_mask<float, float>(a, n, i, j) * LOG2E : x;
                    }
                    s[nt][c] = x;
                    mx[c / 2] = fmaxf(mx[c / 2], x);
                }
            float base[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                base[r] = mx[r] == -INFINITY ? 0.0f : mx[r]; /* a row with no key yet: every p is 0 */
                float alpha = tf32_exp2(m[r] - base[r]);
                m[r] = mx[r];
                l[r] *= alpha;
#pragma unroll
                for (int et = 0; et < KT; et++) o[et][2 * r] *= alpha, o[et][2 * r + 1] *= alpha;
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    float p = tf32_exp2(s[nt][c] - base[c / 2]);
                    l[c / 2] += p;
                    if (a.dropout) p *= cu_attn_drop<float>(a, n, iw + g + (c / 2) * 8, j0 + nt * 8 + 2 * t + c % 2);
                    s[nt][c] = p;
                }
                /* O_w += (P z) V: B = V [key][e] */
#pragma unroll
            for (int kk = 0; kk < NT; kk++) {
                tf32_frag_a pa = tf32_a_from_c(s, kk);
#pragma unroll
                for (int et = 0; et < KT; et++)
                    tf32_mma3(o[et], pa, tf32_b_kn<PRE>(Vt + kk * 8 * LD + et * 8, LD, Vl - Vt));
            }
        }
        __syncthreads(); /* every warp is done with this buffer */
    }
    tf32_wait<0>();
    /* out = O / l (this lane: columns 8 et + 2t, 2t + 1 of rows g, g + 8), lse */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        int64_t i = iw + g + 8 * r;
        if (i >= a.L) continue;
        float *orow = out + cu_attn_at(a, a.o, n) + i * a.o.r + 2 * t;
#pragma unroll
        for (int et = 0; et < KT; et++)
            *(float2 *)(orow + et * 8) = make_float2(o[et][2 * r] * inv, o[et][2 * r + 1] * inv);
        if (t == 0) lse[n * a.L + i] = l[r] > 0 ? m[r] * 0.6931471805599453f + logf(l[r]) : -INFINITY;
    }
}

template <int D, int CFG> static void launch(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    constexpr int W = tf32_warps(CFG), T = tf32_tile(CFG, D);
    constexpr bool PRE = tf32_pre(CFG), QREG = tf32_qreg(CFG) && D == 64; /* at D = 128 Q's 128 registers spill */
    size_t sm = smem_fwd<D, W, T, PRE>();
    cudaFuncSetAttribute(attn_fwd_tf32<D, W, T, PRE, QREG>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    unsigned grid = (unsigned)(a->N * ((a->L + 16 * W - 1) / (16 * W)));
    attn_fwd_tf32<D, W, T, PRE, QREG><<<grid, W * 32, sm, d->stream>>>(
        *a, (const float *)cu_data(&op->in[0]), (const float *)cu_data(&op->in[1]), (const float *)cu_data(&op->in[2]),
        (float *)cu_data(&op->out[0]), (float *)cu_data(&op->out[1]));
}

} // namespace

extern "C" bool cu_attn_tf32_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    int cfg;
    if (!tf32_takes(d, a, op->in[0].dtype, &cfg)) return false;
    for (int k = 0; k < 3; k++)
        if (!cu_attn_aligned(&op->in[k])) return false;
    if (!cu_attn_aligned(&op->out[0])) return false;
    return tf32_dispatch(a->E, cfg,
                         [&](auto dim, auto c) { launch<decltype(dim)::value, decltype(c)::value>(d, op, a); });
}
