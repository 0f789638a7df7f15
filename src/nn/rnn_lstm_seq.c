/*
** One LSTM layer direction on a GPU backend (Vulkan) as one autograd node
** built from dispatches, with no copies, concatenations or gradient adds
** between steps. T steps, B batch, H hidden; gx [T, B, 4H] = x W_ih^T + b
** for every step comes in (rnn.c's pass 1). Two modes:
** fused (the default; W6 on an H100's Vulkan 20.8 ms/step against the gemm
** mode's 22.6 and the composed cells' 91.4): one dispatch per step each way,
** the recurrent GEMM inside the step kernel (a workgroup per 16 batch rows by
** 8 hidden units)
**   forward, per step t (T-1 down to 0 when reverse), tp the step before:
**     lstm_seq_fused.comp            gh = h_tp W_hh^T for its (b, j), then
**                                    the cell on gx_t + gh: h_t, c_t and the
**                                    activated gates into y, cs [T, B, H] and
**                                    acts [T, B, 4H]
**   backward, per step in reverse order, tn the step after t:
**     lstm_seq_fused_backward.comp   dh = dG_tn W_hh for its (b, j), then the
**                                    cell backward: adds dy_t, dcs_t and the
**                                    carried dc, writes dG_t into dG
**                                    [T, B, 4H], carries dc
** TRIDENT_VK_LSTM=gemm: two per step each way, the GEMM as the backend's op
**   forward:  gh = h_tp W_hh^T (linear, on a view of y), then
**             lstm_seq_step.comp (the cell, the same buffers)
**   backward: lstm_seq_step_backward.comp (dh from the GEMM before it), then
**             dh = dG_t W_hh (matmul)
** Both then once: dh0 = dG_first W_hh where h0 needs it, dgx = dG (the whole
** buffer), dW_hh = dG^T H_prev over all steps in one GEMM (linear_wgrad),
** H_prev = [h0, y_0 .. y_{T-2}] in step order (reverse: [y_1 .. y_{T-1}, h0]).
** The CPU has its own layer op (rnn_lstm_cpu.c) and CUDA uses cuDNN
** (rnn_cudnn.c). The step kernels are GLSL launched with td_kernel_launch on
** whole buffers, the steps in push constants; the profiler records them under
** their file names (rnn.lstm_seq_fused, ...).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/linear_wgrad.h"
#include "core/profile_rec.h"
#include "rnn_internal.h"
#include "trident/kernel.h"

/* embedded by CMakeLists.txt from src/nn/kernels/ */
extern const char td_rnn_lstm_seq_step_comp[], td_rnn_lstm_seq_step_backward_comp[], td_rnn_lstm_seq_fused_comp[],
    td_rnn_lstm_seq_fused_backward_comp[];

/* The shaders' push-constant block seq_args. */
typedef struct seq_args {
    uint32_t n;  /* B * H */
    uint32_t H;  /* hidden */
    uint32_t t;  /* this step */
    uint32_t tp; /* the previous step, NO_PREV: none (h0, c0) */
    uint32_t tn; /* the fused backward: the next step (done before this one), NO_PREV: none */
} seq_args;
_Static_assert(sizeof(seq_args) == 20 && sizeof(seq_args) <= 128, "seq_args mirrors the shaders' push block");

#define NO_PREV 0xFFFFFFFFu
#define BLOCK   256u /* the step kernels' TD_BLOCK */
#define FUSED_B 16u  /* the fused kernels' workgroup: BT batch rows by JT units */
#define FUSED_J 8u

enum { STEP_FWD, STEP_BWD, FUSED_FWD, FUSED_BWD, N_KINDS };
static const char *const step_names[N_KINDS] = {"rnn.lstm_seq_step", "rnn.lstm_seq_step_backward", "rnn.lstm_seq_fused",
                                                "rnn.lstm_seq_fused_backward"};
static const char *const step_files[N_KINDS] = {"lstm_seq_step.comp", "lstm_seq_step_backward.comp",
                                                "lstm_seq_fused.comp", "lstm_seq_fused_backward.comp"};

/* Compiled step kernels per (which, device, dtype), kept for the process (as registered custom ops are). */
typedef struct step_kernel {
    int which;
    td_device dev;
    td_dtype dt;
    td_user_kernel *k;
} step_kernel;
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static step_kernel kernels[32];
static int n_kernels;

static td_status kernel_get(int which, td_device dev, td_dtype dt, td_user_kernel **out) {
    td_status st = TD_OK;
    pthread_mutex_lock(&kernels_lock);
    *out = NULL;
    for (int i = 0; i < n_kernels && !*out; i++)
        if (kernels[i].which == which && kernels[i].dt == dt && td_device_equal(kernels[i].dev, dev))
            *out = kernels[i].k;
    if (!*out && n_kernels == (int)(sizeof kernels / sizeof kernels[0])) {
        st = TD_ERR(TD_ERR_STATE, "LSTM: more than %d step kernels compiled", n_kernels);
    } else if (!*out) {
        const char *defs[2] = {"scalar_t=double", "TD_F64"};
        td_kernel_options o = {.defines = defs, .n_defines = dt == TD_F64 ? 2 : 0, .name = step_files[which]};
        const char *const srcs[N_KINDS] = {td_rnn_lstm_seq_step_comp, td_rnn_lstm_seq_step_backward_comp,
                                           td_rnn_lstm_seq_fused_comp, td_rnn_lstm_seq_fused_backward_comp};
        const char *src = srcs[which];
        char log[512];
        st = td_kernel_compile(dev, TD_KERNEL_GLSL, src, NULL, &o, out, log, sizeof log);
        if (st == TD_OK) kernels[n_kernels++] = (step_kernel){which, dev, dt, *out};
    }
    pthread_mutex_unlock(&kernels_lock);
    return st;
}

typedef struct step_launch {
    td_user_kernel *k;
    bool fused;
    int n;
    td_tensor *const *ts;
    const seq_args *a;
} step_launch;

static td_status step_run(void *user) {
    const step_launch *l = user;
    uint32_t blocks = (l->a->n + BLOCK - 1) / BLOCK; /* past 65535 the grid turns 2-D; td_global_id folds it */
    uint32_t grid[3] = {blocks < 65535 ? blocks : 65535, (blocks + 65534) / 65535, 1};
    if (l->fused) /* (units, batch rows) */
        grid[0] = (l->a->H + FUSED_J - 1) / FUSED_J, grid[1] = (l->a->n / l->a->H + FUSED_B - 1) / FUSED_B;
    return td__kernel_launch(l->k, grid, NULL, 0, l->n, l->ts, l->a, sizeof *l->a);
}

/* Launch step kernel which over ts (n_in inputs, then n_out outputs; whole contiguous buffers) for args a. */
static td_status step(int which, int n_in, int n_out, td_tensor *const *ts, const seq_args *a) {
    step_launch l = {NULL, which >= FUSED_FWD, n_in + n_out, ts, a};
    td_status st = kernel_get(which, td_tensor_device(ts[0]), td_tensor_dtype(ts[0]), &l.k);
    if (st != TD_OK) return st;
    if (!__builtin_expect(td__profiling, 0)) return step_run(&l);
    /* recorded with step t's slices of the [T, ...] buffers, so that its bytes are the step's */
    td_tensor *views[8];
    td_scope_begin();
    for (int i = 0; i < n_in + n_out; i++) views[i] = td_ndim(ts[i]) == 3 ? td_select(ts[i], 0, a->t) : ts[i];
    st = td__profile_custom(step_names[which], n_in, n_out, views, step_run, &l);
    td_scope_end();
    return st;
}

/* t contiguous from element 0 (kernels bind whole buffers), or NULL. */
static td_tensor *bound(td_tensor *t) {
    t = td_contiguous(t);
    return t && td_storage_offset(t) != 0 ? td_clone(t) : t;
}

/* The step order: step s's time index, its predecessor's and its successor's (NO_PREV for none). */
static void step_at(int64_t s, int64_t T, bool rev, seq_args *a) {
    a->t = (uint32_t)(rev ? T - 1 - s : s);
    a->tp = s == 0 ? NO_PREV : (uint32_t)(rev ? a->t + 1 : a->t - 1);
    a->tn = s == T - 1 ? NO_PREV : (uint32_t)(rev ? a->t - 1 : a->t + 1);
}

/* A call's mode: the direction, and whether the recurrent GEMM runs inside the step kernels. */
typedef struct seq_mode {
    bool rev, fused;
} seq_mode;

/* (gx, h0, c0, w_hh) -> (y, cs); saves h0, c0, w_hh, y, cs, acts */
static td_status seq_forward(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    seq_mode md = *(const seq_mode *)td_ctx_user(ctx);
    td_tensor *gx = bound(in[0]), *h0 = bound(in[1]), *c0 = bound(in[2]), *w = bound(in[3]);
    if (!gx || !h0 || !c0 || !w) return td_last_status();
    int64_t T = td_size(gx, 0), B = td_size(gx, 1), H = td_size(gx, 2) / 4;
    td_dtype dt = td_tensor_dtype(gx);
    td_device dev = td_tensor_device(gx);
    td_tensor *y = td_empty(3, (int64_t[]){T, B, H}, dt, dev), *cs = td_empty(3, (int64_t[]){T, B, H}, dt, dev);
    td_tensor *acts = td_empty(3, (int64_t[]){T, B, 4 * H}, dt, dev);
    if (!y || !cs || !acts) return td_last_status();
    seq_args a = {(uint32_t)(B * H), (uint32_t)H, 0, 0, 0};
    for (int64_t s = 0; s < T; s++) {
        step_at(s, T, md.rev, &a);
        if (md.fused) {
            td_status st = step(FUSED_FWD, 4, 3, (td_tensor *[]){gx, w, h0, c0, y, cs, acts}, &a);
            if (st != TD_OK) return st;
            continue;
        }
        td_scope_begin(); /* the step's gh and view go when the step is queued */
        td_tensor *gh = bound(td_linear(a.tp == NO_PREV ? h0 : td_select(y, 0, a.tp), w, NULL));
        td_status st = gh ? step(STEP_FWD, 3, 3, (td_tensor *[]){gx, gh, c0, y, cs, acts}, &a) : td_last_status();
        td_scope_end();
        if (st != TD_OK) return st;
    }
    out[0] = y, out[1] = cs;
    return td_ctx_save_for_backward(ctx, 6, (td_tensor *[]){h0, c0, w, y, cs, acts});
}

/* (dy, dcs) -> (dgx, dh0, dc0, dw_hh) */
static td_status seq_backward(td_function_ctx *ctx, int n_out, td_tensor *const *gout, int n_in, td_tensor **gin) {
    (void)n_out, (void)n_in;
    seq_mode md = *(const seq_mode *)td_ctx_user(ctx);
    td_tensor *h0 = td_ctx_saved(ctx, 0), *c0 = bound(td_ctx_saved(ctx, 1)), *w = bound(td_ctx_saved(ctx, 2));
    td_tensor *y = bound(td_ctx_saved(ctx, 3)), *cs = bound(td_ctx_saved(ctx, 4)), *acts = bound(td_ctx_saved(ctx, 5));
    td_tensor *dy = bound(gout[0]), *dcs = bound(gout[1]);
    if (!h0 || !c0 || !w || !y || !cs || !acts || !dy || !dcs) return td_last_status();
    int64_t T = td_size(y, 0), B = td_size(y, 1), H = td_size(y, 2);
    td_dtype dt = td_tensor_dtype(y);
    td_device dev = td_tensor_device(y);
    td_tensor *dg = td_empty(3, (int64_t[]){T, B, 4 * H}, dt, dev);
    td_tensor *dh = td_zeros(2, (int64_t[]){B, H}, dt, dev), *dc = td_zeros(2, (int64_t[]){B, H}, dt, dev);
    if (!dg || !dh || !dc) return td_last_status();
    bool need_dh0 = td_ctx_needs_input_grad(ctx, 1);
    seq_args a = {(uint32_t)(B * H), (uint32_t)H, 0, 0, 0};
    for (int64_t s = T - 1; s >= 0; s--) {
        step_at(s, T, md.rev, &a);
        td_status st = md.fused ? step(FUSED_BWD, 6, 2, (td_tensor *[]){acts, cs, c0, dy, dcs, w, dc, dg}, &a)
                                : step(STEP_BWD, 6, 2, (td_tensor *[]){acts, cs, c0, dy, dcs, dh, dc, dg}, &a);
        if (st != TD_OK) return st;
        if (s == 0 ? !need_dh0 : md.fused) continue; /* fused: the next kernel computes its dh */
        td_scope_begin(); /* the step's view goes; the new dh moves to the backward's scope */
        dh = td__scope_end_keep(bound(td_matmul(td_select(dg, 0, a.t), w)));
        if (!dh) return td_last_status();
    }
    gin[0] = dg, gin[1] = need_dh0 ? dh : NULL, gin[2] = dc, gin[3] = NULL;
    if (td_ctx_needs_input_grad(ctx, 3)) {
        /* dW_hh = sum_t dG_t^T h_prev(t): one GEMM over [T*B] rows */
        td_tensor *h0r = td_unsqueeze(h0, 0), *hp = h0r;
        if (T > 1) {
            td_tensor *ys = td_slice(y, 0, md.rev ? 1 : 0, md.rev ? T : T - 1, 1);
            hp = td_cat(2, md.rev ? (td_tensor *[]){ys, h0r} : (td_tensor *[]){h0r, ys}, 0);
        }
        if (!hp) return td_last_status();
        td_status st = td__linear_wgrad(dg, hp, false, &gin[3], NULL);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static const td_function seq_fn = {.name = "LSTM (layer)", .forward = seq_forward, .backward = seq_backward};

bool td__lstm_layer_seq_takes(td_tensor *gx) {
    td_dtype dt = td_tensor_dtype(gx);
    /* the shaders index with 32-bit unsigned ints */
    return td_tensor_device(gx).type == TD_DEVICE_VULKAN && (dt == TD_F32 || dt == TD_F64) &&
           td_numel(gx) < (int64_t)UINT32_MAX;
}

td_tensor *td__lstm_layer_seq(td_tensor *gx, td_tensor *h0, td_tensor *c0, td_tensor *w_hh, bool reverse,
                              td_tensor **h_last, td_tensor **c_last) {
    static const seq_mode modes[2][2] = {{{false, false}, {false, true}}, {{true, false}, {true, true}}};
    const char *env = getenv("TRIDENT_VK_LSTM");
    bool fused = !env || strcmp(env, "gemm") != 0;
    *h_last = *c_last = NULL;
    td_tensor *out[2];
    if (td_function_apply(&seq_fn, (void *)&modes[reverse][fused], 4, (td_tensor *[]){gx, h0, c0, w_hh}, 2, out) !=
        TD_OK)
        return NULL;
    int64_t last = reverse ? 0 : td_size(gx, 0) - 1;
    *h_last = td_select(out[0], 0, last);
    *c_last = td_select(out[1], 0, last);
    return out[0];
}
