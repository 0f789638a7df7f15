/*
** ATTENTION and ATTENTION_BACKWARD on CUDA: fused scaled-dot-product attention
** with an online softmax (FlashAttention-2, Dao 2023) and a backward that
** recomputes the probabilities from the saved row logsumexp.
** Shapes (src/core/op_attention.c makes them; the math is written out in
** src/backend_cpu/cpu_attention.c): N = N0*N1, L queries, S keys,
**   q [N,L,E], k [N,S,E], v [N,S,Ev], out/dout [N,L,Ev], the gradients as q, k, v,
**   each read and written through its strides over (N0, N1, row) (cu_attn_lay; element
**   stride 1: heads split from a [N0,T,3,N1,E] projection read in place), lse [N,L] contiguous
**   (float; double for f64), mask [N0,N1,L,S] any strides (bool: false = -inf;
**   the input dtype: added), dropout z_ij = keep_ij / (1 - p) from Philox element
**   (n L + i) S + j of (seed, offset), td_dropout's rule.
** Kernels (any float dtype, E and Ev <= 128; compute in float, double for f64):
**   attn_fwd    a thread per query row, BR key rows staged in shared memory at a
**               time; acc, the running max m and sum l per thread
**   attn_dkdv   a thread per key row, query rows (q, dout, lse, D_i = dout_i.out_i)
**               staged: dk_j = scale sum_i ds_ij q_i, dv_j = sum_i p_ij z_ij dout_i
**   attn_dq     a thread per query row, keys staged: dq_i = scale sum_j ds_ij k_j
** with ds_ij = p_ij (z_ij dout_i.v_j - D_i). Every output element has one
** writer (no atomics), so results do not depend on scheduling.
** Which path takes which (TRIDENT_CUDA_ATTN_MMA=0 forces these generic kernels), masks,
** causal and dropout included everywhere:
**   f16/bf16 with E == Ev in {32, 64, 128} and 16-byte aligned rows: the
**     mma.sync forward of cu_ops_attention_fa.cu and backward of cu_ops_attention_fa_bwd.cu;
**   f32 with E == Ev in {64, 128}: the 3xTF32 mma.sync forward of cu_ops_attention_tf32.cu and backward of
**     cu_ops_attention_tf32_bwd.cu (TRIDENT_CUDA_ATTN_F32_CFG picks a tile configuration, =wmma: the next line);
**   f32 with E == Ev in {32, 64, 128}: the 3xTF32 WMMA forward of cu_ops_attention_mma.cu
**     and backward of cu_ops_attention_mma_bwd.cu (TRIDENT_CUDA_ATTN_TF32=0: generic);
**   f64 and other head dims: the kernels here.
** Before all of them, cuDNN's fused flash attention (cu_attention_cudnn.c) takes f16/bf16 with E == Ev in
** {32, 64, 128}, no mask and no dropout, when libcudnn.so.9 loads (TRIDENT_CUDA_ATTN=own|cudnn forces one).
*/
#include <math.h>

#include "cu_attention.cuh"
#include "cu_attention_tf32.cuh"
#include "cu_cudnn.h"
#include "cu_kernels.cuh"

namespace {

/* keys or queries staged per block (= threads per block) */
template <typename C> struct attn_rows { static constexpr int BR = sizeof(C) == 8 ? 16 : 32; };

template <typename C> __device__ __forceinline__ C c_exp(C x) { return exp(x); }
template <> __device__ __forceinline__ float c_exp<float>(float x) { return __expf(x); }

/* The start of a one-thread-per-query-row kernel: BR rows a block, the key and
** value tiles ks, vs, t this thread's row in its tile, nqb the tiles of a
** sequence, sc the scale in C. */
#define ATTN_QROWS_SETUP(C, DP)                                                                                        \
    constexpr int BR = attn_rows<C>::BR;                                                                               \
    __shared__ C ks[BR][DP], vs[BR][DP];                                                                               \
    int t = threadIdx.x;                                                                                               \
    int64_t nqb = (a.L + BR - 1) / BR;                                                                                 \
    C sc = sizeof(C) == 8 ? (C)a.scale : (C)a.scale_f

/* ---- forward: one thread per query row ---- */
template <typename T, typename C, int DP>
__global__ void __launch_bounds__(attn_rows<C>::BR)
    attn_fwd(cu_attn_args a, const T *q, const T *k, const T *v, T *out, C *lse) {
    ATTN_QROWS_SETUP(C, DP);
    for (int64_t task = blockIdx.x; task < a.N * nqb; task += gridDim.x) {
        int64_t n = task / nqb, i0 = (task % nqb) * BR, i = i0 + t;
        bool valid = i < a.L;
        int64_t iend = i0 + BR < a.L ? i0 + BR : a.L, jend = a.causal ? (iend < a.S ? iend : a.S) : a.S;
        C qr[DP], acc[DP], m = cu_attn_neg_inf<C>(), l = 0;
#pragma unroll
        for (int e = 0; e < DP; e++) {
            qr[e] = valid && e < a.E ? cu_to<C>(q[cu_attn_at(a, a.q, n) + i * a.q.r + e]) : (C)0;
            acc[e] = 0;
        }
        const T *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
        for (int64_t j0 = 0; j0 < jend; j0 += BR) {
            __syncthreads(); /* the previous tile is consumed */
            int64_t js = j0 + t;
            if (js < a.S) {
                for (int e = 0; e < a.E; e++) ks[t][e] = cu_to<C>(kn[js * a.k.r + e]);
                for (int e = 0; e < a.Ev; e++) vs[t][e] = cu_to<C>(vn[js * a.v.r + e]);
            }
            __syncthreads();
            if (!valid) continue;
            int jn = (int)(jend - j0 < BR ? jend - j0 : BR);
            for (int jj = 0; jj < jn; jj++) {
                int64_t j = j0 + jj;
                C d = 0;
#pragma unroll
                for (int e = 0; e < DP; e++)
                    if (e < a.E) d += qr[e] * ks[jj][e];
                C s = d * sc + cu_attn_mask<T, C>(a, n, i, j);
                if (s == cu_attn_neg_inf<C>()) continue;
                if (s > m) { /* the max grows: rescale the running sums by exp(m_old - m_new) <= 1 */
                    C alpha = c_exp(m - s);
                    l *= alpha;
#pragma unroll
                    for (int e = 0; e < DP; e++) acc[e] *= alpha;
                    m = s;
                }
                C p = c_exp(s - m);
                l += p;
                p *= cu_attn_drop<C>(a, n, i, j);
#pragma unroll
                for (int e = 0; e < DP; e++)
                    if (e < a.Ev) acc[e] += p * vs[jj][e];
            }
        }
        if (valid) { /* a row without keys: out 0, lse -inf */
            C inv = l > 0 ? (C)1 / l : (C)0;
#pragma unroll
            for (int e = 0; e < DP; e++)
                if (e < a.Ev) out[cu_attn_at(a, a.o, n) + i * a.o.r + e] = cu_from<T>(acc[e] * inv);
            lse[n * a.L + i] = l > 0 ? m + log(l) : cu_attn_neg_inf<C>();
        }
    }
}

/* ---- backward, dk and dv: one thread per key row ---- */
template <typename T, typename C, int DP>
__global__ void __launch_bounds__(attn_rows<C>::BR) attn_dkdv(cu_attn_args a, const T *dout, const T *q, const T *k,
                                                              const T *v, const T *out, const C *lse, T *dk, T *dv) {
    constexpr int BR = attn_rows<C>::BR;
    __shared__ C qs[BR][DP], gs[BR][DP], ls[BR], Ds[BR];
    int t = threadIdx.x;
    int64_t nkb = (a.S + BR - 1) / BR;
    C sc = sizeof(C) == 8 ? (C)a.scale : (C)a.scale_f;
    for (int64_t task = blockIdx.x; task < a.N * nkb; task += gridDim.x) {
        int64_t n = task / nkb, j0 = (task % nkb) * BR, j = j0 + t;
        bool valid = j < a.S;
        C kr[DP], vr[DP], dkr[DP], dvr[DP];
#pragma unroll
        for (int e = 0; e < DP; e++) {
            kr[e] = valid && e < a.E ? cu_to<C>(k[cu_attn_at(a, a.k, n) + j * a.k.r + e]) : (C)0;
            vr[e] = valid && e < a.Ev ? cu_to<C>(v[cu_attn_at(a, a.v, n) + j * a.v.r + e]) : (C)0;
            dkr[e] = dvr[e] = 0;
        }
        const T *qn = q + cu_attn_at(a, a.q, n), *gn = dout + cu_attn_at(a, a.g, n), *on = out + cu_attn_at(a, a.o, n);
        for (int64_t i0 = a.causal ? j0 : 0; i0 < a.L; i0 += BR) {
            __syncthreads();
            int64_t is = i0 + t;
            if (is < a.L) {
                C D = 0;
                for (int e = 0; e < a.E; e++) qs[t][e] = cu_to<C>(qn[is * a.q.r + e]);
                for (int e = 0; e < a.Ev; e++) {
                    C g = cu_to<C>(gn[is * a.g.r + e]);
                    gs[t][e] = g;
                    D += g * cu_to<C>(on[is * a.o.r + e]);
                }
                ls[t] = lse[n * a.L + is];
                Ds[t] = D;
            }
            __syncthreads();
            if (!valid) continue;
            int in = (int)(a.L - i0 < BR ? a.L - i0 : BR);
            for (int ii = 0; ii < in; ii++) {
                int64_t i = i0 + ii;
                if (ls[ii] == cu_attn_neg_inf<C>()) continue; /* a row without keys passes no gradient */
                C d = 0, dp = 0;
#pragma unroll
                for (int e = 0; e < DP; e++) {
                    if (e < a.E) d += qs[ii][e] * kr[e];
                    if (e < a.Ev) dp += gs[ii][e] * vr[e];
                }
                C s = d * sc + cu_attn_mask<T, C>(a, n, i, j);
                if (s == cu_attn_neg_inf<C>()) continue;
                C p = c_exp(s - ls[ii]), z = cu_attn_drop<C>(a, n, i, j), pz = p * z, ds = p * (dp * z - Ds[ii]) * sc;
#pragma unroll
                for (int e = 0; e < DP; e++) {
                    if (e < a.E) dkr[e] += ds * qs[ii][e];
                    if (e < a.Ev) dvr[e] += pz * gs[ii][e];
                }
            }
        }
        if (valid) {
#pragma unroll
            for (int e = 0; e < DP; e++) {
                if (e < a.E) dk[cu_attn_at(a, a.dk, n) + j * a.dk.r + e] = cu_from<T>(dkr[e]);
                if (e < a.Ev) dv[cu_attn_at(a, a.dv, n) + j * a.dv.r + e] = cu_from<T>(dvr[e]);
            }
        }
    }
}

/* ---- backward, dq: one thread per query row ---- */
template <typename T, typename C, int DP>
__global__ void __launch_bounds__(attn_rows<C>::BR)
    attn_dq(cu_attn_args a, const T *dout, const T *q, const T *k, const T *v, const T *out, const C *lse, T *dq) {
    ATTN_QROWS_SETUP(C, DP);
    for (int64_t task = blockIdx.x; task < a.N * nqb; task += gridDim.x) {
        int64_t n = task / nqb, i0 = (task % nqb) * BR, i = i0 + t;
        bool valid = i < a.L;
        int64_t iend = i0 + BR < a.L ? i0 + BR : a.L, jend = a.causal ? (iend < a.S ? iend : a.S) : a.S;
        C qr[DP], gr[DP], dqr[DP], D = 0, lse_i = valid ? lse[n * a.L + i] : cu_attn_neg_inf<C>();
#pragma unroll
        for (int e = 0; e < DP; e++) {
            qr[e] = valid && e < a.E ? cu_to<C>(q[cu_attn_at(a, a.q, n) + i * a.q.r + e]) : (C)0;
            gr[e] = valid && e < a.Ev ? cu_to<C>(dout[cu_attn_at(a, a.g, n) + i * a.g.r + e]) : (C)0;
            if (valid && e < a.Ev) D += gr[e] * cu_to<C>(out[cu_attn_at(a, a.o, n) + i * a.o.r + e]);
            dqr[e] = 0;
        }
        const T *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
        for (int64_t j0 = 0; j0 < jend; j0 += BR) {
            __syncthreads();
            int64_t js = j0 + t;
            if (js < a.S) {
                for (int e = 0; e < a.E; e++) ks[t][e] = cu_to<C>(kn[js * a.k.r + e]);
                for (int e = 0; e < a.Ev; e++) vs[t][e] = cu_to<C>(vn[js * a.v.r + e]);
            }
            __syncthreads();
            if (!valid || lse_i == cu_attn_neg_inf<C>()) continue;
            int jn = (int)(jend - j0 < BR ? jend - j0 : BR);
            for (int jj = 0; jj < jn; jj++) {
                int64_t j = j0 + jj;
                C d = 0, dp = 0;
#pragma unroll
                for (int e = 0; e < DP; e++) {
                    if (e < a.E) d += qr[e] * ks[jj][e];
                    if (e < a.Ev) dp += gr[e] * vs[jj][e];
                }
                C s = d * sc + cu_attn_mask<T, C>(a, n, i, j);
                if (s == cu_attn_neg_inf<C>()) continue;
                C p = c_exp(s - lse_i), ds = p * (dp * cu_attn_drop<C>(a, n, i, j) - D) * sc;
#pragma unroll
                for (int e = 0; e < DP; e++)
                    if (e < a.E) dqr[e] += ds * ks[jj][e];
            }
        }
        if (valid) {
#pragma unroll
            for (int e = 0; e < DP; e++)
                if (e < a.E) dq[cu_attn_at(a, a.dq, n) + i * a.dq.r + e] = cu_from<T>(dqr[e]);
        }
    }
}

/* DP: the smallest of 32, 64, 128 holding E and Ev */
#define ATTN_SWITCH_DP(a, ...)                                                                                         \
    do {                                                                                                               \
        int64_t dmax_ = (a).E > (a).Ev ? (a).E : (a).Ev;                                                               \
        if (dmax_ <= 32) {                                                                                             \
            constexpr int DP = 32;                                                                                     \
            __VA_ARGS__                                                                                                \
        } else if (dmax_ <= 64) {                                                                                      \
            constexpr int DP = 64;                                                                                     \
            __VA_ARGS__                                                                                                \
        } else {                                                                                                       \
            constexpr int DP = 128;                                                                                    \
            __VA_ARGS__                                                                                                \
        }                                                                                                              \
    } while (0)

template <typename T> using compute_t = typename cu_compute<T>::type;

} // namespace

/* q, k, v of either op: in[0..2] of ATTENTION, in[1..3] of ATTENTION_BACKWARD; mask next */
static cu_attn_args attn_args(const td_op *op) {
    const td_operand *x = &op->in[op->kind == TD_OP_ATTENTION_BACKWARD];
    double p = op->p.attn.dropout_p;
    cu_attn_args a = {};
    a.N = x[0].shape[0] * x[0].shape[1], a.n1 = x[0].shape[1];
    a.L = x[0].shape[2], a.S = x[1].shape[2], a.E = x[0].shape[3], a.Ev = x[2].shape[3];
    a.scale = op->p.attn.scale, a.scale_f = (float)a.scale;
    a.zs = 1.0 / (1.0 - p), a.zs_f = (float)a.zs;
    a.threshold = (uint32_t)ceil(p * 16777216.0), a.dropout = p > 0;
    a.seed = op->p.attn.seed, a.offset = op->p.attn.offset, a.causal = op->p.attn.causal;
    if (x[3].buf) {
        a.mask = cu_data(&x[3]), a.mask_bool = x[3].dtype == TD_BOOL;
        for (int d = 0; d < 4; d++) a.ms[d] = x[3].strides[d];
    }
    a.q = cu_attn_lay_of(&x[0]), a.k = cu_attn_lay_of(&x[1]), a.v = cu_attn_lay_of(&x[2]);
    if (op->kind == TD_OP_ATTENTION)
        a.o = cu_attn_lay_of(&op->out[0]);
    else {
        a.g = cu_attn_lay_of(&op->in[0]), a.o = cu_attn_lay_of(&op->in[5]);
        a.dq = cu_attn_lay_of(&op->out[0]), a.dk = cu_attn_lay_of(&op->out[1]), a.dv = cu_attn_lay_of(&op->out[2]);
    }
    return a;
}

/* head dims (E of q, Ev of v) up to 128: the kernels keep a row of each in registers */
static bool attn_head_dims_ok(const td_op *op) {
    const td_operand *x = &op->in[op->kind == TD_OP_ATTENTION_BACKWARD];
    return x[0].shape[3] <= 128 && x[2].shape[3] <= 128;
}

/* the call as cuDNN sees it (cu_cudnn.h) */
static cu_dnn_attn dnn_args(const td_op *op, const cu_attn_args &a) {
    const td_operand *x = &op->in[op->kind == TD_OP_ATTENTION_BACKWARD];
    cu_dnn_attn c = {};
    c.op = op, c.n0 = x[0].shape[0], c.n1 = x[0].shape[1], c.L = a.L, c.S = a.S, c.E = a.E, c.Ev = a.Ev;
    c.dt = x[0].dtype, c.causal = a.causal, c.mask = a.mask != NULL, c.dropout = a.dropout, c.scale = a.scale_f;
    return c;
}

/* Every kernel here and in cu_ops_attention_{fa,tf32,mma}*.cu reads and writes through the strides (cu_attn_lay),
** the tensor-core ones with 16-byte vector copies: strided operands are taken where each last dim's stride is 1 and
** every row is 16-byte aligned (cu_attn_aligned), lse contiguous. Elsewhere (a row stride not a multiple of 16
** bytes) this declines: the core's contiguous copies then feed the tensor-core kernels, which would otherwise
** decline and leave the rows to the generic kernels. */
extern "C" bool cu_attn_own_takes(const td_op *op) {
    if (td_attn_dense(op)) return true;
    bool bwd = op->kind == TD_OP_ATTENTION_BACKWARD;
    int mask = bwd ? 4 : 3, lse = bwd ? 6 : -1;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const td_operand *x = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (i == mask || !x->buf) continue;
        if (i == lse || (!bwd && i == op->n_in + 1)) {
            if (!td_operand_is_contiguous(x)) return false;
            continue;
        }
        if ((x->shape[3] > 1 && x->strides[3] != 1) || !cu_attn_aligned(x)) return false;
    }
    return true;
}

CU_SUPPORTS(ATTENTION) { return attn_head_dims_ok(op) && (cu_attn_own_takes(op) || cu_dnn_attn_takes_strided(d, op)); }
CU_SUPPORTS(ATTENTION_BACKWARD) {
    return attn_head_dims_ok(op) && (cu_attn_own_takes(op) || cu_dnn_attn_takes_strided(d, op));
}

/* in = (q, k, v, mask?), out = (out, lse) */
extern "C" td_status cu_op_ATTENTION(cu_dev *d, const td_op *op) {
    cu_attn_args a = attn_args(op);
    if (a.N * a.L == 0) return TD_OK;
    cu_dnn_attn c = dnn_args(op, a);
    td_status st = TD_OK;
    if (cu_dnn_attn_fwd(d, &c, cu_data(&op->in[0]), cu_data(&op->in[1]), cu_data(&op->in[2]), cu_data(&op->out[0]),
                        (float *)cu_data(&op->out[1]), &st))
        return st;
    if (cu_attn_fa_fwd(d, op, &a)) return CU_LAUNCHED("attention (mma)");
    if (cu_attn_tf32_fwd(d, op, &a)) return CU_LAUNCHED("attention (3xTF32 mma)");
    if (cu_attn_mma_fwd(d, op, &a)) return CU_LAUNCHED("attention (tensor cores)");
    CU_SWITCH_FLOAT(op->in[0].dtype, {
        using C = compute_t<T>;
        constexpr int BR = attn_rows<C>::BR;
        unsigned grid = cu_grid(d, a.N * ((a.L + BR - 1) / BR) * BR, BR);
        ATTN_SWITCH_DP(a, attn_fwd<T, C, DP><<<grid, BR, 0, d->stream>>>(
                              a, (const T *)cu_data(&op->in[0]), (const T *)cu_data(&op->in[1]),
                              (const T *)cu_data(&op->in[2]), (T *)cu_data(&op->out[0]), (C *)cu_data(&op->out[1])););
    })
    return CU_LAUNCHED("attention");
}

/* in = (dout, q, k, v, mask?, out, lse), out = (dq, dk, dv) */
extern "C" td_status cu_op_ATTENTION_BACKWARD(cu_dev *d, const td_op *op) {
    cu_attn_args a = attn_args(op);
    if (a.N * a.L == 0 || a.S == 0) return TD_OK; /* the front-end zero-fills these */
    td_status st = TD_OK;
    cu_dnn_attn c = dnn_args(op, a);
    const td_operand *in = op->in, *o = op->out;
    if (cu_dnn_attn_bwd(d, &c, cu_data(&in[0]), cu_data(&in[1]), cu_data(&in[2]), cu_data(&in[3]), cu_data(&in[5]),
                        (const float *)cu_data(&in[6]), cu_data(&o[0]), cu_data(&o[1]), cu_data(&o[2]), &st))
        return st;
    if (cu_attn_fa_bwd(d, op, &a, &st)) return st;
    if (cu_attn_tf32_bwd(d, op, &a, &st)) return st;
    if (cu_attn_mma_bwd(d, op, &a)) return CU_LAUNCHED("attention_backward (tensor cores)");
    CU_SWITCH_FLOAT(in[1].dtype, {
        using C = compute_t<T>;
        constexpr int BR = attn_rows<C>::BR;
        const T *dout = (const T *)cu_data(&in[0]), *q = (const T *)cu_data(&in[1]), *k = (const T *)cu_data(&in[2]),
                *v = (const T *)cu_data(&in[3]), *out = (const T *)cu_data(&in[5]);
        const C *lse = (const C *)cu_data(&in[6]);
        unsigned gk = cu_grid(d, a.N * ((a.S + BR - 1) / BR) * BR, BR);
        unsigned gq = cu_grid(d, a.N * ((a.L + BR - 1) / BR) * BR, BR);
        ATTN_SWITCH_DP(a, {
            attn_dkdv<T, C, DP>
                <<<gk, BR, 0, d->stream>>>(a, dout, q, k, v, out, lse, (T *)cu_data(&o[1]), (T *)cu_data(&o[2]));
            attn_dq<T, C, DP><<<gq, BR, 0, d->stream>>>(a, dout, q, k, v, out, lse, (T *)cu_data(&o[0]));
        });
    })
    return CU_LAUNCHED("attention_backward");
}
