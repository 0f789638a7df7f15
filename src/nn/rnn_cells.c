/*
** The fused recurrent cells: custom ops (include/trident/kernel.h) that do a
** step's gate math in one launch on every backend, forward and backward, and
** join autograd as one node. The GEMMs stay outside (rnn.c): gx = x W_ih^T +
** b_ih for all steps at once, gh = h W_hh^T (+ b_hh) per step.
**
** B batch, H hidden. Gate order is torch's.
**   rnn.lstm_cell (c [B,H], gx [B,4H], gh [B,4H]) -> (h' [B,H], c' [B,H])
**     i, f, o = sigmoid(gx + gh), g = tanh(gx + gh);  c' = f c + i g;  h' = o tanh(c')
**   rnn.gru_cell (h [B,H], gx [B,3H], gh [B,3H]) -> h' [B,H]
**     r, z = sigmoid(gx + gh);  n = tanh(gx_n + r gh_n);  h' = (1 - z) n + z h
**     (gh includes b_hh, so torch's b_hn sits inside r * (...))
** Each backward is a second custom op (rnn.lstm_cell_backward,
** rnn.gru_cell_backward) without a backward of its own. The GPU kernels are
** src/nn/kernels/{lstm_cell,lstm_cell_backward,gru_cell,gru_cell_backward}.comp
** (float32) and rnn_cells.cu (float32 and float64), embedded at build time;
** the CPU kernels below compute in float32 or float64. The ops are
** registered on first use (td__rnn_cells_init).
*/
#include <math.h>
#include <pthread.h>

#include "rnn_internal.h"
#include "trident/kernel.h"

/* embedded by CMakeLists.txt from src/nn/kernels/ */
extern const char td_rnn_lstm_cell_comp[], td_rnn_lstm_cell_backward_comp[], td_rnn_gru_cell_comp[],
    td_rnn_gru_cell_backward_comp[], td_rnn_rnn_cells_cu[];

enum { LSTM_FWD, LSTM_BWD, GRU_FWD, GRU_BWD, N_CELL_OPS };
static td_custom_op *cell_ops[N_CELL_OPS];
static pthread_once_t cells_once = PTHREAD_ONCE_INIT;
static td_status cells_status;

/* ---- CPU kernels: contiguous host data of c->dtype; one item per (b, j) of [B, H] ---- */

typedef struct cell_job {
    const td_custom_call *c;
    const void *const *in;
    void *const *out;
} cell_job;

/* The four kernels in type T with exp EXP and tanh TANH; the math is the .cu file's, line for line. */
#define CELL_KERNELS(T, EXP, TANH)                                                                                     \
    static inline T sig_##T(T x) { return (T)1 / ((T)1 + EXP(-x)); }                                                   \
    static void lstm_fwd_##T(const cell_job *jb, int64_t begin, int64_t end) {                                         \
        const int64_t H = jb->c->args.cols;                                                                            \
        const T *c = jb->in[0], *gx = jb->in[1], *gh = jb->in[2];                                                      \
        T *hn = jb->out[0], *cn = jb->out[1];                                                                          \
        for (int64_t t = begin; t < end; t++) {                                                                        \
            int64_t k = (t / H) * 4 * H + t % H;                                                                       \
            T i = sig_##T(gx[k] + gh[k]), f = sig_##T(gx[k + H] + gh[k + H]);                                          \
            T g = TANH(gx[k + 2 * H] + gh[k + 2 * H]), o = sig_##T(gx[k + 3 * H] + gh[k + 3 * H]);                     \
            T cc = f * c[t] + i * g;                                                                                   \
            cn[t] = cc;                                                                                                \
            hn[t] = o * TANH(cc);                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    /* dc_total = dc' + dh' o (1 - tanh(c')^2); d_i = dc_total g i(1-i), d_f = dc_total c f(1-f), */                   \
    /* d_g = dc_total i (1-g^2), d_o = dh' tanh(c') o(1-o); dc = dc_total f */                                         \
    static void lstm_bwd_##T(const cell_job *jb, int64_t begin, int64_t end) {                                         \
        const int64_t H = jb->c->args.cols;                                                                            \
        const T *c = jb->in[0], *gx = jb->in[1], *gh = jb->in[2], *dhn = jb->in[3], *dcn = jb->in[4];                  \
        T *dc = jb->out[0], *dg = jb->out[1];                                                                          \
        for (int64_t t = begin; t < end; t++) {                                                                        \
            int64_t k = (t / H) * 4 * H + t % H;                                                                       \
            T i = sig_##T(gx[k] + gh[k]), f = sig_##T(gx[k + H] + gh[k + H]);                                          \
            T g = TANH(gx[k + 2 * H] + gh[k + 2 * H]), o = sig_##T(gx[k + 3 * H] + gh[k + 3 * H]);                     \
            T tc = TANH(f * c[t] + i * g);                                                                             \
            T dct = dcn[t] + dhn[t] * o * ((T)1 - tc * tc);                                                            \
            dg[k] = dct * g * i * ((T)1 - i);                                                                          \
            dg[k + H] = dct * c[t] * f * ((T)1 - f);                                                                   \
            dg[k + 2 * H] = dct * i * ((T)1 - g * g);                                                                  \
            dg[k + 3 * H] = dhn[t] * tc * o * ((T)1 - o);                                                              \
            dc[t] = dct * f;                                                                                           \
        }                                                                                                              \
    }                                                                                                                  \
    static void gru_fwd_##T(const cell_job *jb, int64_t begin, int64_t end) {                                          \
        const int64_t H = jb->c->args.cols;                                                                            \
        const T *h = jb->in[0], *gx = jb->in[1], *gh = jb->in[2];                                                      \
        T *hn = jb->out[0];                                                                                            \
        for (int64_t t = begin; t < end; t++) {                                                                        \
            int64_t k = (t / H) * 3 * H + t % H;                                                                       \
            T r = sig_##T(gx[k] + gh[k]), z = sig_##T(gx[k + H] + gh[k + H]);                                          \
            T n = TANH(gx[k + 2 * H] + r * gh[k + 2 * H]);                                                             \
            hn[t] = ((T)1 - z) * n + z * h[t];                                                                         \
        }                                                                                                              \
    }                                                                                                                  \
    /* d_n = dh' (1-z)(1-n^2): dgx_n = d_n, dgh_n = d_n r; d_r = d_n gh_n r(1-r), d_z = dh' (h-n) z(1-z) */            \
    /* go to both dgx and dgh; dh = dh' z */                                                                           \
    static void gru_bwd_##T(const cell_job *jb, int64_t begin, int64_t end) {                                          \
        const int64_t H = jb->c->args.cols;                                                                            \
        const T *h = jb->in[0], *gx = jb->in[1], *gh = jb->in[2], *dhn = jb->in[3];                                    \
        T *dh = jb->out[0], *dgx = jb->out[1], *dgh = jb->out[2];                                                      \
        for (int64_t t = begin; t < end; t++) {                                                                        \
            int64_t k = (t / H) * 3 * H + t % H;                                                                       \
            T r = sig_##T(gx[k] + gh[k]), z = sig_##T(gx[k + H] + gh[k + H]);                                          \
            T n = TANH(gx[k + 2 * H] + r * gh[k + 2 * H]);                                                             \
            T dn = dhn[t] * ((T)1 - z) * ((T)1 - n * n);                                                               \
            T dr = dn * gh[k + 2 * H] * r * ((T)1 - r);                                                                \
            T dz = dhn[t] * (h[t] - n) * z * ((T)1 - z);                                                               \
            dgx[k] = dgh[k] = dr;                                                                                      \
            dgx[k + H] = dgh[k + H] = dz;                                                                              \
            dgx[k + 2 * H] = dn;                                                                                       \
            dgh[k + 2 * H] = dn * r;                                                                                   \
            dh[t] = dhn[t] * z;                                                                                        \
        }                                                                                                              \
    }
CELL_KERNELS(float, expf, tanhf)
CELL_KERNELS(double, exp, tanh)

#define CELL_RANGE(name)                                                                                               \
    static void name##_range(void *user, int64_t begin, int64_t end) {                                                 \
        const cell_job *jb = user;                                                                                     \
        if (jb->c->dtype == TD_F64)                                                                                    \
            name##_double(jb, begin, end);                                                                             \
        else                                                                                                           \
            name##_float(jb, begin, end);                                                                              \
    }                                                                                                                  \
    static td_status name##_cpu(const td_custom_call *c, const void *const *in, void *const *out) {                    \
        cell_job jb = {c, in, out};                                                                                    \
        td_parallel_for(c->args.n, 40, name##_range, &jb);                                                             \
        return TD_OK;                                                                                                  \
    }
CELL_RANGE(lstm_fwd)
CELL_RANGE(lstm_bwd)
CELL_RANGE(gru_fwd)
CELL_RANGE(gru_bwd)

/* ---- shapes ---- */

/* input 0 (the state) [B, H] and inputs 1, 2 (gx, gh) [B, G*H]: out[j] gets the state's shape, or [B, G*H] for
** the outputs from first_wide on (the gate gradients). */
static td_status cell_shape(const td_custom_call *c, td_custom_meta *out, int64_t gates, int first_wide) {
    td_tensor *s = c->inputs[0];
    if (td_ndim(s) != 2) return TD_ERR(TD_ERR_SHAPE, "the state must be [batch, hidden], got %d dims", td_ndim(s));
    int64_t b = td_size(s, 0), h = td_size(s, 1);
    for (int i = 1; i < c->n_in; i++) {
        int64_t want = i < 3 ? gates * h : h;
        if (td_ndim(c->inputs[i]) != 2 || td_size(c->inputs[i], 0) != b || td_size(c->inputs[i], 1) != want) {
            char got[96];
            return TD_ERR(TD_ERR_SHAPE, "input %d must be [%lld, %lld], got %s", i, (long long)b, (long long)want,
                          td__shape_str(td_ndim(c->inputs[i]), td_shape(c->inputs[i]), got, sizeof got));
        }
    }
    for (int j = 0; j < c->n_out; j++) {
        out[j].ndim = 2;
        out[j].shape[0] = b;
        out[j].shape[1] = j >= first_wide ? gates * h : h;
    }
    return TD_OK;
}
static td_status lstm_fwd_shape(const td_custom_call *c, td_custom_meta *out) { return cell_shape(c, out, 4, 2); }
static td_status lstm_bwd_shape(const td_custom_call *c, td_custom_meta *out) { return cell_shape(c, out, 4, 1); }
static td_status gru_fwd_shape(const td_custom_call *c, td_custom_meta *out) { return cell_shape(c, out, 3, 1); }
static td_status gru_bwd_shape(const td_custom_call *c, td_custom_meta *out) { return cell_shape(c, out, 3, 1); }

/* ---- backwards: one launch of the backward op each ---- */

/* (c, gx, gh) -> (h', c'): d(gx) = d(gh) = dgates, dc from the kernel */
static td_status lstm_cell_bw(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    td_tensor *in[5] = {c->inputs[0], c->inputs[1], c->inputs[2], dy[0], dy[1]}, *out[2];
    td_status st = td_custom_op_call(cell_ops[LSTM_BWD], 5, in, 0, NULL, 2, out);
    if (st != TD_OK) return st;
    dx[0] = td_custom_needs_grad(c, 0) ? out[0] : NULL;
    dx[1] = td_custom_needs_grad(c, 1) ? out[1] : NULL;
    dx[2] = td_custom_needs_grad(c, 2) ? out[1] : NULL;
    return TD_OK;
}

/* (h, gx, gh) -> h': dh (direct path), dgx, dgh from the kernel */
static td_status gru_cell_bw(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    td_tensor *in[4] = {c->inputs[0], c->inputs[1], c->inputs[2], dy[0]}, *out[3];
    td_status st = td_custom_op_call(cell_ops[GRU_BWD], 4, in, 0, NULL, 3, out);
    if (st != TD_OK) return st;
    for (int i = 0; i < 3; i++) dx[i] = td_custom_needs_grad(c, i) ? out[i] : NULL;
    return TD_OK;
}

/* ---- registration ---- */

static void cells_register(void) {
    const uint32_t f32_f64 = 1u << TD_F32 | 1u << TD_F64;
    const char *cu = td_rnn_rnn_cells_cu;
    const td_custom_op_def defs[N_CELL_OPS] = {
        [LSTM_FWD] = {.name = "rnn.lstm_cell",
                      .n_in = 3,
                      .n_out = 2,
                      .shape = lstm_fwd_shape,
                      .backward = lstm_cell_bw,
                      .cpu = {.cpu = lstm_fwd_cpu, .dtypes = f32_f64},
                      .cuda = {.source = cu, .entry = "lstm_cell", .dtypes = f32_f64},
                      .vulkan = {.source = td_rnn_lstm_cell_comp}},
        [LSTM_BWD] = {.name = "rnn.lstm_cell_backward",
                      .n_in = 5,
                      .n_out = 2,
                      .shape = lstm_bwd_shape,
                      .cpu = {.cpu = lstm_bwd_cpu, .dtypes = f32_f64},
                      .cuda = {.source = cu, .entry = "lstm_cell_backward", .dtypes = f32_f64},
                      .vulkan = {.source = td_rnn_lstm_cell_backward_comp}},
        [GRU_FWD] = {.name = "rnn.gru_cell",
                     .n_in = 3,
                     .n_out = 1,
                     .shape = gru_fwd_shape,
                     .backward = gru_cell_bw,
                     .cpu = {.cpu = gru_fwd_cpu, .dtypes = f32_f64},
                     .cuda = {.source = cu, .entry = "gru_cell", .dtypes = f32_f64},
                     .vulkan = {.source = td_rnn_gru_cell_comp}},
        [GRU_BWD] = {.name = "rnn.gru_cell_backward",
                     .n_in = 4,
                     .n_out = 3,
                     .shape = gru_bwd_shape,
                     .cpu = {.cpu = gru_bwd_cpu, .dtypes = f32_f64},
                     .cuda = {.source = cu, .entry = "gru_cell_backward", .dtypes = f32_f64},
                     .vulkan = {.source = td_rnn_gru_cell_backward_comp}},
    };
    for (int i = 0; i < N_CELL_OPS && cells_status == TD_OK; i++)
        cells_status = td_custom_op_register(&defs[i], &cell_ops[i]);
}

td_status td__rnn_cells_init(void) {
    pthread_once(&cells_once, cells_register);
    return cells_status == TD_OK
               ? TD_OK
               : TD_ERR(cells_status, "rnn: the fused cells could not be registered (%s)", td_status_str(cells_status));
}

td_tensor *td__lstm_cell(td_tensor *c, td_tensor *gx, td_tensor *gh, td_tensor **c_out) {
    *c_out = NULL;
    td_tensor *in[3] = {c, gx, gh}, *out[2];
    if (td__rnn_cells_init() != TD_OK || td_custom_op_call(cell_ops[LSTM_FWD], 3, in, 0, NULL, 2, out) != TD_OK)
        return NULL;
    *c_out = out[1];
    return out[0];
}

td_tensor *td__gru_cell(td_tensor *h, td_tensor *gx, td_tensor *gh) {
    td_tensor *in[3] = {h, gx, gh};
    if (td__rnn_cells_init() != TD_OK) return NULL;
    return td_custom_op_apply(cell_ops[GRU_FWD], 3, in, 0, NULL);
}
