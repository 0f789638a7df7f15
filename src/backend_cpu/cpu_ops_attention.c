/*
** ATTENTION and ATTENTION_BACKWARD: fused scaled-dot-product attention, blocked,
** with an online softmax (FlashAttention-2, Dao 2023), no [L, S] buffer.
** Shapes (src/core/op_attention.c makes them): N = N0*N1 batch*heads, L queries,
** S keys, E q/k features, Ev v features.
**   q [N,L,E], k [N,S,E], v [N,S,Ev], out [N,L,Ev] contiguous; lse [N,L];
**   mask [N0,N1,L,S] any strides (bool: false = -inf; float: added), or absent.
** Forward, per query row i of batch n:
**   s_ij  = scale q_i.k_j + m_ij   (-inf where causal and j > i, or mask false)
**   lse_i = log sum_j exp(s_ij)                                   (-inf: no key)
**   p_ij  = exp(s_ij - lse_i),  z_ij = keep_ij / (1 - p_drop)  (1 without dropout)
**   out_i = sum_j p_ij z_ij v_j                                    (0: no key)
** keep_ij is td_dropout's rule on element (n L + i) S + j of the Philox stream.
** The online softmax keeps per row the running max m, the sum l of exp(s - m)
** and acc = sum exp(s - m) z v, rescaling both by exp(m_old - m_new) when the max
** grows, so every exp() is <= 1 and nothing overflows.
** Backward (D_i = dout_i . out_i = sum_j p_ij dp_ij):
**   dp_ij = z_ij dout_i.v_j,  ds_ij = p_ij (dp_ij - D_i)
**   dv_j = sum_i p_ij z_ij dout_i,  dk_j = scale sum_i ds_ij q_i,  dq_i = scale sum_j ds_ij k_j
** p is recomputed from lse. Pass 1 gives each task a block of keys (dk, dv), pass
** 2 a block of queries (dq): every output element has one writer and a fixed
** summation order, so any thread count gives the same bits. The block products
** (q k^T, p v, dout v^T, (p z)^T dout, ds^T q, ds k) are single-threaded GEMMs
** (cpu_gemm.h) of shapes that depend on the sizes only.
** f32 and f64 run in their own type; f16/bf16 go through f32 copies.
*/
#include <stdlib.h>

#include "cpu.h"
#include "cpu_gemm.h"

#define BQ 32 /* queries per forward/dq task */
#define BK 64 /* keys per forward block and per dk/dv task */

typedef struct attn_geom {
    int64_t n0, n1, L, S, E, Ev;
    double scale, p_drop;
    uint64_t seed, offset;
    uint32_t threshold; /* keep when (w >> 8) >= threshold */
    bool causal;
    const void *mask; /* element (n0, n1, 0, 0); NULL: none */
    td_dtype mask_dt;
    int64_t ms[4]; /* mask strides */
} attn_geom;

/* Philox words of the last counter asked, so consecutive keys share one call. */
typedef struct philox_cache {
    uint64_t counter;
    uint32_t w[4];
    bool valid;
} philox_cache;

static inline bool attn_keep(const attn_geom *g, philox_cache *pc, uint64_t idx) {
    uint64_t c = g->offset + idx / 4;
    if (!pc->valid || pc->counter != c) {
        td_philox4x32(g->seed, c, pc->w);
        pc->counter = c, pc->valid = true;
    }
    return (pc->w[idx % 4] >> 8) >= g->threshold;
}

/* The additive mask term of (n, i, j): 0, -inf or the float mask's value. */
static inline double attn_mask_at(const attn_geom *g, int64_t n, int64_t i, int64_t j) {
    if (g->causal && j > i) return -INFINITY;
    if (!g->mask) return 0;
    int64_t off = (n / g->n1) * g->ms[0] + (n % g->n1) * g->ms[1] + i * g->ms[2] + j * g->ms[3];
    if (g->mask_dt == TD_BOOL) return ((const uint8_t *)g->mask)[off] ? 0 : -INFINITY;
    return cpu_load(g->mask, off, g->mask_dt);
}

/* Keys a row i may see at most: all, or j <= i when causal. */
static inline int64_t attn_key_end(const attn_geom *g, int64_t i) {
    return g->causal ? (i + 1 < g->S ? i + 1 : g->S) : g->S;
}

#define ATTN_KERNELS_(T, EXP, LOG, GEMM)                                                                               \
    /* s[r][jj] = scale q_i.k_j + m_ij for rows i = i0 + r (< i1) and keys j = j0 + jj (< j0 + jb): a GEMM, then       \
    ** the mask, row by row (ld BK) */                                                                                 \
    static void attn_scores_##T(const attn_geom *g, const T *q, const T *k, int64_t n, int64_t i0, int64_t i1,         \
                                int64_t j0, int64_t jb, T *s) {                                                        \
        for (int64_t e = 0; e < (i1 - i0) * BK; e++) s[e] = 0;                                                         \
        GEMM(false, true, i1 - i0, jb, g->E, q + (n * g->L + i0) * g->E, g->E, k + (n * g->S + j0) * g->E, g->E, s,    \
             BK);                                                                                                      \
        for (int64_t i = i0; i < i1; i++)                                                                              \
            for (int64_t jj = 0; jj < jb; jj++)                                                                        \
                s[(i - i0) * BK + jj] = s[(i - i0) * BK + jj] * (T)g->scale + (T)attn_mask_at(g, n, i, j0 + jj);       \
    }                                                                                                                  \
    /* forward: one task per (n, block of BQ queries); out [N,L,Ev], lse [N,L]. Every task (here and in the            \
    ** backward passes) keeps its two BQ x BK tiles on its stack: 32 KiB in double. */                                 \
    static void attn_fwd_##T(const attn_geom *g, const T *q, const T *k, const T *v, T *out, T *lse) {                 \
        int64_t N = g->n0 * g->n1, L = g->L, S = g->S, Ev = g->Ev, nqb = (L + BQ - 1) / BQ;                            \
        T zs = (T)(1.0 / (1.0 - g->p_drop));                                                                           \
        int nt = cpu_threads_for(N * nqb, BQ * S * (g->E + Ev) * 2);                                                   \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t t = 0; t < N * nqb; t++) {                            \
            int64_t n = t / nqb, i0 = (t % nqb) * BQ, i1 = i0 + BQ < L ? i0 + BQ : L;                                  \
            T m[BQ], l[BQ], s[2 * BQ * BK], *p = s + BQ * BK, *acc = out + (n * L + i0) * Ev;                          \
            philox_cache pc = {0};                                                                                     \
            for (int64_t i = i0; i < i1; i++) m[i - i0] = -INFINITY, l[i - i0] = 0;                                    \
            for (int64_t e = 0; e < (i1 - i0) * Ev; e++) acc[e] = 0;                                                   \
            int64_t jend = attn_key_end(g, i1 - 1);                                                                    \
            for (int64_t j0 = 0; j0 < jend; j0 += BK) { /* one block of keys, every row of the task */                 \
                int64_t jb = j0 + BK < jend ? BK : jend - j0;                                                          \
                attn_scores_##T(g, q, k, n, i0, i1, j0, jb, s);                                                        \
                for (int64_t i = i0; i < i1; i++) {                                                                    \
                    T *si = s + (i - i0) * BK, *pi = p + (i - i0) * BK, *ai = acc + (i - i0) * Ev, mx = m[i - i0];     \
                    for (int64_t jj = 0; jj < jb; jj++) mx = si[jj] > mx ? si[jj] : mx;                                \
                    if (mx == -INFINITY) { /* every key so far masked */                                               \
                        for (int64_t jj = 0; jj < jb; jj++) pi[jj] = 0;                                                \
                        continue;                                                                                      \
                    }                                                                                                  \
                    T alpha = EXP(m[i - i0] - mx), lsum = 0; /* rescale the running sums to the new max */             \
                    for (int64_t e = 0; e < Ev; e++) ai[e] *= alpha;                                                   \
                    for (int64_t jj = 0; jj < jb; jj++) {                                                              \
                        T pj = EXP(si[jj] - mx);                                                                       \
                        lsum += pj;                                                                                    \
                        if (g->p_drop > 0)                                                                             \
                            pj = attn_keep(g, &pc, (uint64_t)((n * L + i) * S + j0 + jj)) ? pj * zs : 0;               \
                        pi[jj] = pj;                                                                                   \
                    }                                                                                                  \
                    l[i - i0] = l[i - i0] * alpha + lsum;                                                              \
                    m[i - i0] = mx;                                                                                    \
                }                                                                                                      \
                /* acc += p v */                                                                                       \
                GEMM(false, false, i1 - i0, Ev, jb, p, BK, v + (n * S + j0) * Ev, Ev, acc, Ev);                        \
            }                                                                                                          \
            for (int64_t i = i0; i < i1; i++) { /* normalize; a row without keys stays 0 */                            \
                T li = l[i - i0], inv = li > 0 ? 1 / li : 0;                                                           \
                for (int64_t e = 0; e < Ev; e++) acc[(i - i0) * Ev + e] *= inv;                                        \
                lse[n * L + i] = li > 0 ? m[i - i0] + LOG(li) : (T)-INFINITY;                                          \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* Rows i0..i1 against keys j0 + [0, jb): s (scores) -> pz = p z, dp (dout.v) -> ds = scale p (dp z - D), ld BK;   \
    ** p is recomputed from lse (0 for a row without keys) */                                                          \
    static void attn_pds_##T(const attn_geom *g, philox_cache *pc, const T *dout, const T *v, const T *lse,            \
                             const T *D, int64_t n, int64_t i0, int64_t i1, int64_t j0, int64_t jb, T *s, T *dp) {     \
        T zs = (T)(1.0 / (1.0 - g->p_drop));                                                                           \
        for (int64_t e = 0; e < (i1 - i0) * BK; e++) dp[e] = 0;                                                        \
        GEMM(false, true, i1 - i0, jb, g->Ev, dout + (n * g->L + i0) * g->Ev, g->Ev, v + (n * g->S + j0) * g->Ev,      \
             g->Ev, dp, BK);                                                                                           \
        for (int64_t i = i0; i < i1; i++) {                                                                            \
            T lse_i = lse[n * g->L + i], D_i = D[n * g->L + i], *si = s + (i - i0) * BK, *di = dp + (i - i0) * BK;     \
            for (int64_t jj = 0; jj < jb; jj++) {                                                                      \
                T p = lse_i == -INFINITY ? 0 : EXP(si[jj] - lse_i);                                                    \
                T z = g->p_drop > 0 ? (attn_keep(g, pc, (uint64_t)((n * g->L + i) * g->S + j0 + jj)) ? zs : 0) : 1;    \
                si[jj] = p * z;                                                                                        \
                di[jj] = p * (di[jj] * z - D_i) * (T)g->scale;                                                         \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static bool attn_bwd_##T(const attn_geom *g, const T *dout, const T *q, const T *k, const T *v, const T *out,      \
                             const T *lse, T *dq, T *dk, T *dv) {                                                      \
        int64_t N = g->n0 * g->n1, L = g->L, S = g->S, E = g->E, Ev = g->Ev;                                           \
        T *D = malloc((size_t)(N * L > 0 ? N * L : 1) * sizeof(T));                                                    \
        if (!D) return false;                                                                                          \
        for (int64_t r = 0; r < N * L; r++) { /* pass 0: D_i = dout_i . out_i */                                       \
            T d = 0;                                                                                                   \
            for (int64_t e = 0; e < Ev; e++) d += dout[r * Ev + e] * out[r * Ev + e];                                  \
            D[r] = d;                                                                                                  \
        }                                                                                                              \
        int64_t nkb = (S + BK - 1) / BK, nqb = (L + BQ - 1) / BQ;                                                      \
        int nt = cpu_threads_for(N * nkb, BK * L * (E + Ev) * 3);                                                      \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t t = 0; t < N * nkb; t++) { /* pass 1: dk, dv */       \
            int64_t n = t / nkb, j0 = (t % nkb) * BK, jb = j0 + BK < S ? BK : S - j0;                                  \
            T s[2 * BQ * BK], *dp = s + BQ * BK;                                                                       \
            philox_cache pc = {0};                                                                                     \
            T *dk0 = dk + (n * S + j0) * E, *dv0 = dv + (n * S + j0) * Ev;                                             \
            for (int64_t e = 0; e < jb * E; e++) dk0[e] = 0;                                                           \
            for (int64_t e = 0; e < jb * Ev; e++) dv0[e] = 0;                                                          \
            for (int64_t i0 = g->causal ? j0 / BQ * BQ : 0; i0 < L; i0 += BQ) {                                        \
                int64_t i1 = i0 + BQ < L ? i0 + BQ : L;                                                                \
                attn_scores_##T(g, q, k, n, i0, i1, j0, jb, s);                                                        \
                attn_pds_##T(g, &pc, dout, v, lse, D, n, i0, i1, j0, jb, s, dp);                                       \
                /* dv += (p z)^T dout, dk += ds^T q */                                                                 \
                GEMM(true, false, jb, Ev, i1 - i0, s, BK, dout + (n * L + i0) * Ev, Ev, dv0, Ev);                      \
                GEMM(true, false, jb, E, i1 - i0, dp, BK, q + (n * L + i0) * E, E, dk0, E);                            \
            }                                                                                                          \
        }                                                                                                              \
        nt = cpu_threads_for(N * nqb, BQ * S * (E + Ev) * 3);                                                          \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t t = 0; t < N * nqb; t++) { /* pass 2: dq */           \
            int64_t n = t / nqb, i0 = (t % nqb) * BQ, i1 = i0 + BQ < L ? i0 + BQ : L;                                  \
            T s[2 * BQ * BK], *dp = s + BQ * BK;                                                                       \
            philox_cache pc = {0};                                                                                     \
            for (int64_t e = 0; e < (i1 - i0) * E; e++) dq[(n * L + i0) * E + e] = 0;                                  \
            int64_t jend = attn_key_end(g, i1 - 1);                                                                    \
            for (int64_t j0 = 0; j0 < jend; j0 += BK) {                                                                \
                int64_t jb = j0 + BK < jend ? BK : jend - j0;                                                          \
                attn_scores_##T(g, q, k, n, i0, i1, j0, jb, s);                                                        \
                attn_pds_##T(g, &pc, dout, v, lse, D, n, i0, i1, j0, jb, s, dp);                                       \
                /* dq += ds k */                                                                                       \
                GEMM(false, false, i1 - i0, E, jb, dp, BK, k + (n * S + j0) * E, E, dq + (n * L + i0) * E, E);         \
            }                                                                                                          \
        }                                                                                                              \
        free(D);                                                                                                       \
        return true;                                                                                                   \
    }
ATTN_KERNELS_(float, expf, logf, cpu_gemm_f32)
ATTN_KERNELS_(double, exp, log, cpu_gemm_f64)

static attn_geom attn_geom_of(const td_op *op) {
    const td_operand *q = &op->in[1 - (op->kind == TD_OP_ATTENTION)], *k = q + 1, *v = q + 2, *m = q + 3;
    attn_geom g = {.n0 = q->shape[0],
                   .n1 = q->shape[1],
                   .L = q->shape[2],
                   .S = k->shape[2],
                   .E = q->shape[3],
                   .Ev = v->shape[3],
                   .scale = op->p.attn.scale,
                   .p_drop = op->p.attn.dropout_p,
                   .seed = op->p.attn.seed,
                   .offset = op->p.attn.offset,
                   .threshold = (uint32_t)ceil(op->p.attn.dropout_p * 16777216.0),
                   .causal = op->p.attn.causal};
    if (m->buf) {
        g.mask = cpu_ptr(m), g.mask_dt = m->dtype;
        for (int d = 0; d < 4; d++) g.ms[d] = m->strides[d];
    }
    return g;
}

/* f16/bf16 operands as f32 copies (NULL on failure; free() them). */
static float *attn_to_f32(const td_operand *x) {
    int64_t n = td_operand_numel(x);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    const void *p = cpu_ptr(x);
    if (f)
        for (int64_t i = 0; i < n; i++) f[i] = (float)cpu_load(p, i, x->dtype);
    return f;
}
static void attn_from_f32(const float *f, const td_operand *x) {
    int64_t n = td_operand_numel(x);
    void *p = cpu_ptr(x);
    for (int64_t i = 0; i < n; i++) cpu_store(p, i, x->dtype, f[i]);
}

/* in = (q, k, v, mask?), out = (out, lse) */
td_status cpu_op_ATTENTION(const td_op *op) {
    attn_geom g = attn_geom_of(op);
    td_dtype dt = op->in[0].dtype;
    if (dt == TD_F64) {
        attn_fwd_double(&g, cpu_ptr(&op->in[0]), cpu_ptr(&op->in[1]), cpu_ptr(&op->in[2]), cpu_ptr(&op->out[0]),
                        cpu_ptr(&op->out[1]));
        return TD_OK;
    }
    if (dt == TD_F32) {
        attn_fwd_float(&g, cpu_ptr(&op->in[0]), cpu_ptr(&op->in[1]), cpu_ptr(&op->in[2]), cpu_ptr(&op->out[0]),
                       cpu_ptr(&op->out[1]));
        return TD_OK;
    }
    float *f[4] = {attn_to_f32(&op->in[0]), attn_to_f32(&op->in[1]), attn_to_f32(&op->in[2]),
                   malloc((size_t)(td_operand_numel(&op->out[0]) + 1) * sizeof(float))};
    td_status st = f[0] && f[1] && f[2] && f[3] ? TD_OK : td_error_set(TD_ERR_OOM, "attention: out of host memory");
    if (st == TD_OK) {
        attn_fwd_float(&g, f[0], f[1], f[2], f[3], cpu_ptr(&op->out[1]));
        attn_from_f32(f[3], &op->out[0]);
    }
    for (int i = 0; i < 4; i++) free(f[i]);
    return st;
}

/* in = (dout, q, k, v, mask?, out, lse), out = (dq, dk, dv) */
td_status cpu_op_ATTENTION_BACKWARD(const td_op *op) {
    attn_geom g = attn_geom_of(op);
    td_dtype dt = op->in[0].dtype;
    const td_operand *in = op->in, *o = op->out;
    if (dt == TD_F64 || dt == TD_F32) {
        bool ok;
        if (dt == TD_F64)
            ok = attn_bwd_double(&g, cpu_ptr(&in[0]), cpu_ptr(&in[1]), cpu_ptr(&in[2]), cpu_ptr(&in[3]),
                                 cpu_ptr(&in[5]), cpu_ptr(&in[6]), cpu_ptr(&o[0]), cpu_ptr(&o[1]), cpu_ptr(&o[2]));
        else
            ok = attn_bwd_float(&g, cpu_ptr(&in[0]), cpu_ptr(&in[1]), cpu_ptr(&in[2]), cpu_ptr(&in[3]), cpu_ptr(&in[5]),
                                cpu_ptr(&in[6]), cpu_ptr(&o[0]), cpu_ptr(&o[1]), cpu_ptr(&o[2]));
        return ok ? TD_OK : td_error_set(TD_ERR_OOM, "attention_backward: out of host memory");
    }
    float *f[8] = {attn_to_f32(&in[0]),
                   attn_to_f32(&in[1]),
                   attn_to_f32(&in[2]),
                   attn_to_f32(&in[3]),
                   attn_to_f32(&in[5]),
                   NULL,
                   NULL,
                   NULL};
    for (int i = 0; i < 3; i++) f[5 + i] = malloc((size_t)(td_operand_numel(&o[i]) + 1) * sizeof(float));
    td_status st = TD_OK;
    for (int i = 0; i < 8; i++)
        if (!f[i]) st = td_error_set(TD_ERR_OOM, "attention_backward: out of host memory");
    if (st == TD_OK && !attn_bwd_float(&g, f[0], f[1], f[2], f[3], f[4], cpu_ptr(&in[6]), f[5], f[6], f[7]))
        st = td_error_set(TD_ERR_OOM, "attention_backward: out of host memory");
    if (st == TD_OK) {
        for (int i = 0; i < 3; i++) attn_from_f32(f[5 + i], &o[i]);
    }
    for (int i = 0; i < 8; i++) free(f[i]);
    return st;
}
