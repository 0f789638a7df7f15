/*
** A whole LSTM layer (one direction) on the CPU as one custom op and one
** autograd node, as torch's CPU LSTM: no per-step nodes, tensors or launches.
** rnn.c projects the inputs first (gx = x W_ih^T + b for all steps, one GEMM).
**
** T steps, B batch, H hidden; gates i f g o (torch's order).
**   rnn.lstm_layer (gx [T,B,4H], h0 [B,H], c0 [B,H], w_hh [4H,H]; p0 = reverse)
**     -> (y [T,B,H], cs [T,B,H], acts [T,B,4H])
**     per step t (T-1 down to 0 when reversed), h, c the previous step's:
**       a = gx_t + h w_hh^T                      (one GEMM into acts_t)
**       i, f, o = sigmoid(a), g = tanh(a);  c_t = f c + i g;  y_t = o tanh(c_t)
**     acts keeps i f g o, cs every c_t, for the backward.
**   rnn.lstm_layer_backward (w_hh, h0, c0, y, cs, acts, dy, dcs)
**     -> (dgx [T,B,4H], dh0, dc0, dw_hh), steps in the opposite order:
**       dh = dy_t + dG_{next} w_hh,  dc = dcs_t + dct_{next} f_{next}
**       dct = dc + dh o (1 - tanh(c_t)^2)
**       dG_t = (dct g i(1-i), dct c f(1-f), dct i (1-g^2), dh tanh(c_t) o(1-o))
**     then dw_hh = sum_t dG_t^T h_prev(t): one GEMM over every step at the end.
** Each step is one parallel pass over blocks of hidden units (the 4 gate GEMMs
** of the block's columns, then its cells); the backward's dh is a second pass
** over column blocks. Blocks depend on the shape only (never the thread count),
** so 1 and 64 threads give the same bits. Float32 and float64.
*/
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend_cpu/cpu_ew.h"
#include "backend_cpu/cpu_gemm.h"
#include "backend_cpu/cpu_lstm.h"
#include "rnn_internal.h"
#include "trident/kernel.h"

enum { LAYER_FWD, LAYER_BWD, N_LAYER_OPS };
static td_custom_op *layer_ops[N_LAYER_OPS];
static pthread_once_t layer_once = PTHREAD_ONCE_INIT;
static td_status layer_status;

/* Hidden units (or rows) per block: n cut into at most 16 blocks of a multiple of 16. */
static int64_t unit_block(int64_t n) {
    int64_t u = (n + 15) / 16;
    return u < 16 ? 16 : (u + 15) / 16 * 16;
}

typedef struct layer_job {
    int64_t T, B, H, ub, t, tp; /* tp: the step before t in processing order, -1 for the first */
    bool f64, rev;
    const void *gx, *h0, *c0, *w, *dy, *dcs;
    void *y, *cs, *acts, *dgx, *dh, *dc, *dw;
} layer_job;

#define LAYER_KERNELS(T_, sfx, EXP, TANH)                                                                              \
    static inline T_ sig_##sfx(T_ x) { return (T_)1 / ((T_)1 + EXP(-x)); }                                             \
    /* units [u0, u1) of step t: acts_t[:, q H + u] = gx_t[:, q H + u] + h w_hh[q H + u, :]^T per gate q; cells */     \
    static void fwd_units_##sfx(const layer_job *j, int64_t u0, int64_t u1) {                                          \
        const int64_t B = j->B, H = j->H, G = 4 * H;                                                                   \
        const T_ *w = j->w, *h = j->tp < 0 ? (const T_ *)j->h0 : (const T_ *)j->y + j->tp * B * H;                     \
        const T_ *cp = j->tp < 0 ? (const T_ *)j->c0 : (const T_ *)j->cs + j->tp * B * H;                              \
        T_ *a = (T_ *)j->acts + j->t * B * G, *c = (T_ *)j->cs + j->t * B * H, *y = (T_ *)j->y + j->t * B * H;         \
        const T_ *gx = (const T_ *)j->gx + j->t * B * G;                                                               \
        for (int64_t b = 0; b < B; b++)                                                                                \
            for (int q = 0; q < 4; q++)                                                                                \
                memcpy(a + b * G + q * H + u0, gx + b * G + q * H + u0, (size_t)(u1 - u0) * sizeof(T_));               \
        for (int q = 0; q < 4; q++)                                                                                    \
            cpu_gemm_##sfx(false, true, B, u1 - u0, H, h, H, w + (q * H + u0) * H, H, a + q * H + u0, G);              \
        for (int64_t b = 0; b < B; b++) {                                                                              \
            T_ *ab = a + b * G;                                                                                        \
            int64_t u = u0 + fwd_fast_##sfx(u1 - u0, H, ab + u0, cp + b * H + u0, c + b * H + u0, y + b * H + u0);     \
            for (; u < u1; u++) {                                                                                      \
                T_ i = sig_##sfx(ab[u]), f = sig_##sfx(ab[u + H]), g = TANH(ab[u + 2 * H]);                            \
                T_ o = sig_##sfx(ab[u + 3 * H]), cc = f * cp[b * H + u] + i * g;                                       \
                ab[u] = i, ab[u + H] = f, ab[u + 2 * H] = g, ab[u + 3 * H] = o;                                        \
                c[b * H + u] = cc;                                                                                     \
                y[b * H + u] = o * TANH(cc);                                                                           \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    /* units [u0, u1) of step t's gate gradients; dc (running) becomes dct f, dh is read only */                       \
    static void bwd_units_##sfx(const layer_job *j, int64_t u0, int64_t u1) {                                          \
        const int64_t B = j->B, H = j->H, G = 4 * H, o_t = j->t * B * H;                                               \
        const T_ *a = (const T_ *)j->acts + j->t * B * G, *c = (const T_ *)j->cs + o_t;                                \
        const T_ *cp = j->tp < 0 ? (const T_ *)j->c0 : (const T_ *)j->cs + j->tp * B * H;                              \
        const T_ *dy = (const T_ *)j->dy + o_t, *dcs = (const T_ *)j->dcs + o_t, *dh = j->dh;                          \
        T_ *dg = (T_ *)j->dgx + j->t * B * G, *dc = j->dc;                                                             \
        for (int64_t b = 0; b < B; b++)                                                                                \
            for (int64_t u =                                                                                           \
                     u0 + bwd_fast_##sfx(u1 - u0, H, a + b * G + u0, c + b * H + u0, cp + b * H + u0, dy + b * H + u0, \
                                         dh + b * H + u0, dcs + b * H + u0, dc + b * H + u0, dg + b * G + u0);         \
                 u < u1; u++) {                                                                                        \
                int64_t k = b * G + u, s = b * H + u;                                                                  \
                T_ i = a[k], f = a[k + H], g = a[k + 2 * H], o = a[k + 3 * H], tc = TANH(c[s]);                        \
                T_ dhs = dy[s] + dh[s], dct = dcs[s] + dc[s] + dhs * o * ((T_)1 - tc * tc);                            \
                dg[k] = dct * g * i * ((T_)1 - i);                                                                     \
                dg[k + H] = dct * cp[s] * f * ((T_)1 - f);                                                             \
                dg[k + 2 * H] = dct * i * ((T_)1 - g * g);                                                             \
                dg[k + 3 * H] = dhs * tc * o * ((T_)1 - o);                                                            \
                dc[s] = dct * f;                                                                                       \
            }                                                                                                          \
    }                                                                                                                  \
    /* columns [u0, u1) of dh = dG_t w_hh */                                                                           \
    static void dh_units_##sfx(const layer_job *j, int64_t u0, int64_t u1) {                                           \
        const int64_t B = j->B, H = j->H, G = 4 * H;                                                                   \
        T_ *dh = j->dh;                                                                                                \
        for (int64_t b = 0; b < B; b++) memset(dh + b * H + u0, 0, (size_t)(u1 - u0) * sizeof(T_));                    \
        cpu_gemm_##sfx(false, false, B, u1 - u0, G, (const T_ *)j->dgx + j->t * B * G, G, (const T_ *)j->w + u0, H,    \
                       dh + u0, H);                                                                                    \
    }                                                                                                                  \
    /* rows [r0, r1) of dw_hh = sum_t dG_t^T h_prev(t): the steps whose h_prev is a y, then the one whose is h0 */     \
    static void dw_rows_##sfx(const layer_job *j, int64_t r0, int64_t r1) {                                            \
        const int64_t T = j->T, B = j->B, H = j->H, G = 4 * H;                                                         \
        const T_ *dg = j->dgx, *y = j->y;                                                                              \
        T_ *dw = (T_ *)j->dw + r0 * H;                                                                                 \
        memset(dw, 0, (size_t)((r1 - r0) * H) * sizeof(T_));                                                           \
        bool rev = j->rev;                                                                                             \
        const T_ *dgy = rev ? dg : dg + B * G, *yp = rev ? y + B * H : y;                                              \
        if (T > 1) cpu_gemm_##sfx(true, false, r1 - r0, H, (T - 1) * B, dgy + r0, G, yp, H, dw, H);                    \
        cpu_gemm_##sfx(true, false, r1 - r0, H, B, dg + (rev ? (T - 1) * B * G : 0) + r0, G, j->h0, H, dw, H);         \
    }
/* The vectorized start of a row of units (cpu_lstm.h): f32 with AVX2, none for f64. Returns the units done. */
static bool use_avx2;
static int64_t fwd_fast_f32(int64_t n, int64_t H, float *a, const float *cp, float *c, float *y) {
    return use_avx2 ? cpu_lstm_cell_f32_avx2(n, H, a, cp, c, y) : 0;
}
static int64_t bwd_fast_f32(int64_t n, int64_t H, const float *a, const float *c, const float *cp, const float *dy,
                            const float *dh, const float *dcs, float *dc, float *dg) {
    return use_avx2 ? cpu_lstm_cell_backward_f32_avx2(n, H, a, c, cp, dy, dh, dcs, dc, dg) : 0;
}
static int64_t fwd_fast_f64(int64_t n, int64_t H, double *a, const double *cp, double *c, double *y) {
    (void)n, (void)H, (void)a, (void)cp, (void)c, (void)y;
    return 0;
}
static int64_t bwd_fast_f64(int64_t n, int64_t H, const double *a, const double *c, const double *cp, const double *dy,
                            const double *dh, const double *dcs, double *dc, double *dg) {
    (void)n, (void)H, (void)a, (void)c, (void)cp, (void)dy, (void)dh, (void)dcs, (void)dc, (void)dg;
    return 0;
}

LAYER_KERNELS(float, f32, expf, tanhf)
LAYER_KERNELS(double, f64, exp, tanh)

/* td_parallel_for bodies: items are blocks of j->ub units (or rows for dw) */
#define LAYER_RANGE(name, width)                                                                                       \
    static void name##_range(void *user, int64_t begin, int64_t end) {                                                 \
        const layer_job *j = user;                                                                                     \
        int64_t n = (width), lo = begin * j->ub, hi = end * j->ub < n ? end * j->ub : n;                               \
        if (j->f64)                                                                                                    \
            name##_f64(j, lo, hi);                                                                                     \
        else                                                                                                           \
            name##_f32(j, lo, hi);                                                                                     \
    }
LAYER_RANGE(fwd_units, j->H)
LAYER_RANGE(bwd_units, j->H)
LAYER_RANGE(dh_units, j->H)
LAYER_RANGE(dw_rows, 4 * j->H)

static int64_t blocks(int64_t n, int64_t ub) { return (n + ub - 1) / ub; }

static td_status layer_fwd_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    td_tensor *gx = c->inputs[0];
    int64_t T = td_size(gx, 0), B = td_size(gx, 1), H = td_size(gx, 2) / 4;
    bool rev = c->args.p[0] != 0, f64 = c->dtype == TD_F64;
    layer_job j = {.T = T,
                   .B = B,
                   .H = H,
                   .ub = unit_block(H),
                   .f64 = f64,
                   .gx = in[0],
                   .h0 = in[1],
                   .c0 = in[2],
                   .w = in[3],
                   .y = out[0],
                   .cs = out[1],
                   .acts = out[2]};
    int64_t nb = blocks(H, j.ub), cost = B * 4 * H * j.ub * 2;
    for (int64_t s = 0; s < T; s++) {
        j.t = rev ? T - 1 - s : s;
        j.tp = s == 0 ? -1 : rev ? j.t + 1 : j.t - 1;
        td_parallel_for(nb, cost, fwd_units_range, &j);
    }
    return TD_OK;
}

static td_status layer_bwd_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    td_tensor *y = c->inputs[3];
    int64_t T = td_size(y, 0), B = td_size(y, 1), H = td_size(y, 2);
    bool rev = c->args.p[0] != 0, f64 = c->dtype == TD_F64;
    size_t es = f64 ? 8 : 4;
    layer_job j = {.T = T,
                   .B = B,
                   .H = H,
                   .ub = unit_block(H),
                   .f64 = f64,
                   .w = in[0],
                   .h0 = in[1],
                   .c0 = in[2],
                   .y = (void *)in[3],
                   .cs = (void *)in[4],
                   .acts = (void *)in[5],
                   .dy = in[6],
                   .dcs = in[7],
                   .dgx = out[0],
                   .dh = out[1],
                   .dc = out[2],
                   .dw = out[3]};
    memset(j.dh, 0, (size_t)(B * H) * es);
    memset(j.dc, 0, (size_t)(B * H) * es);
    int64_t nb = blocks(H, j.ub);
    for (int64_t s = T - 1; s >= 0; s--) {
        j.t = rev ? T - 1 - s : s;
        j.tp = s == 0 ? -1 : rev ? j.t + 1 : j.t - 1;
        td_parallel_for(nb, B * j.ub * 64, bwd_units_range, &j);
        td_parallel_for(nb, B * 4 * H * j.ub * 2, dh_units_range, &j);
    }
    j.rev = rev;
    j.ub = unit_block(4 * H); /* rows of dw_hh per block: each block packs all of y once */
    td_parallel_for(blocks(4 * H, j.ub), T * B * H * j.ub * 2, dw_rows_range, &j);
    return TD_OK;
}

/* ---- shapes ---- */

static td_status layer_fwd_shape(const td_custom_call *c, td_custom_meta *out) {
    td_tensor *gx = c->inputs[0];
    if (td_ndim(gx) != 3 || td_size(gx, 2) % 4)
        return TD_ERR(TD_ERR_SHAPE, "gx must be [steps, batch, 4 hidden], got %d dims", td_ndim(gx));
    int64_t T = td_size(gx, 0), B = td_size(gx, 1), H = td_size(gx, 2) / 4;
    for (int i = 1; i < 4; i++) {
        int64_t r = i < 3 ? B : 4 * H;
        if (td_ndim(c->inputs[i]) != 2 || td_size(c->inputs[i], 0) != r || td_size(c->inputs[i], 1) != H)
            return TD_ERR(TD_ERR_SHAPE, "input %d must be [%lld, %lld]", i, (long long)r, (long long)H);
    }
    for (int j = 0; j < 3; j++) {
        out[j].dtype = c->dtype;
        out[j].ndim = 3;
        out[j].shape[0] = T, out[j].shape[1] = B, out[j].shape[2] = j == 2 ? 4 * H : H;
    }
    return TD_OK;
}

/* (w_hh, h0, c0, y, cs, acts, dy, dcs) -> (dgx like acts, dh0 like h0, dc0 like c0, dw_hh like w_hh) */
static td_status layer_bwd_shape(const td_custom_call *c, td_custom_meta *out) {
    static const int like[4] = {5, 1, 2, 0};
    for (int j = 0; j < 4; j++) {
        td_tensor *s = c->inputs[like[j]];
        out[j].dtype = c->dtype;
        out[j].ndim = td_ndim(s);
        memcpy(out[j].shape, td_shape(s), sizeof(int64_t) * (size_t)td_ndim(s));
    }
    return TD_OK;
}

/* (gx, h0, c0, w_hh) -> (y, cs, acts): one launch of the backward op for all four gradients */
static td_status layer_bw(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    td_tensor *in[8] = {c->inputs[3],  c->inputs[1],  c->inputs[2], c->outputs[0],
                        c->outputs[1], c->outputs[2], dy[0],        dy[1]},
              *out[4];
    td_status st = td_custom_op_call(layer_ops[LAYER_BWD], 8, in, 1, c->args.p, 4, out);
    if (st != TD_OK) return st;
    for (int i = 0; i < 4; i++) dx[i] = td_custom_needs_grad(c, i) ? out[i] : NULL; /* dgx, dh0, dc0, dw_hh */
    return TD_OK;
}

static void layer_register(void) {
    use_avx2 = cpu_has_avx2();
    const uint32_t f32_f64 = 1u << TD_F32 | 1u << TD_F64;
    const td_custom_op_def defs[N_LAYER_OPS] = {
        [LAYER_FWD] = {.name = "rnn.lstm_layer",
                       .n_in = 4,
                       .n_out = 3,
                       .shape = layer_fwd_shape,
                       .backward = layer_bw,
                       .cpu = {.cpu = layer_fwd_cpu, .dtypes = f32_f64}},
        [LAYER_BWD] = {.name = "rnn.lstm_layer_backward",
                       .n_in = 8,
                       .n_out = 4,
                       .shape = layer_bwd_shape,
                       .cpu = {.cpu = layer_bwd_cpu, .dtypes = f32_f64}},
    };
    for (int i = 0; i < N_LAYER_OPS && layer_status == TD_OK; i++)
        layer_status = td_custom_op_register(&defs[i], &layer_ops[i]);
}

td_tensor *td__lstm_layer_cpu(td_tensor *gx, td_tensor *h0, td_tensor *c0, td_tensor *w_hh, bool reverse,
                              td_tensor **h_last, td_tensor **c_last) {
    *h_last = *c_last = NULL;
    pthread_once(&layer_once, layer_register);
    if (layer_status != TD_OK)
        TD_FAIL_NULL(layer_status, "LSTM: the CPU layer op could not be registered (%s)", td_status_str(layer_status));
    td_tensor *in[4] = {gx, h0, c0, w_hh}, *out[3];
    float p = reverse ? 1.0f : 0.0f;
    if (td_custom_op_call(layer_ops[LAYER_FWD], 4, in, 1, &p, 3, out) != TD_OK) return NULL;
    int64_t last = reverse ? 0 : td_size(gx, 0) - 1;
    *h_last = td_select(out[0], 0, last);
    *c_last = td_select(out[1], 0, last);
    return out[0];
}
