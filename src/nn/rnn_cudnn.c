/*
** The recurrent layers' cuDNN path: on a CUDA device a whole RNN/LSTM/GRU (every layer and direction) runs as one
** cudnnRNNForward and its backward as one cudnnRNNBackwardData_v8 + cudnnRNNBackwardWeights_v8, through the CUDA
** plugin's entry points (src/backend_cuda/cu_rnn_cudnn.c, contract in include/trident/rnn_cudnn.h). The layer is one autograd
** node (td_function_apply) over x, h0, c0 and the parameters; it saves x, h0, c0, y, cuDNN's packed weight space
** and the reserve space for the backward.
** Math: strict float32 (CUDNN_FMA_MATH) under td_set_float32_matmul_precision("highest"), the default, as our
** GEMMs; "high" or "medium" allow cuDNN's TF32 tensor cores (CUDNN_DEFAULT_MATH, torch's cudnn.allow_tf32 default).
** Taken when: the device is CUDA, x, the states and every parameter are float32 on it, no autocast scope is open,
** no ONNX trace records the layer, there are at most 61 parameters (the node's 64 inputs), inter-layer dropout is
** off (eval, p = 0 or one layer: cuDNN's dropout mask would differ from ours), and the plugin's cuDNN takes the
** configuration. Otherwise rnn.c's own path runs.
** TRIDENT_CUDA_RNN=own never takes it; TRIDENT_CUDA_RNN=cudnn makes a CUDA call that cuDNN does not take fail with
** the reason instead of falling back; TRIDENT_CUDA_RNN_DEBUG=1 prints the reason of each fallback (when it changes).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trident/rnn_cudnn.h"
#include "rnn_internal.h"
#include "trident/amp.h"
#include "trident/autograd.h"
#include "trident/device.h"

/* What the node keeps: the configuration and where its inputs sit. */
typedef struct dnn_node {
    td_rnn_dnn_args a;
    bool has_h0, has_c0;
    int first_param, n_params;
    size_t wbytes, reserve;
    td_rnn_dnn_forward_fn fwd;
    td_rnn_dnn_backward_fn bwd;
} dnn_node;

static uint64_t addr(td_tensor *t) { return t ? td_tensor_device_address(t) : 0; }
#define PTR(t) ((void *)(uintptr_t)addr(t))

/* A float32 scratch tensor of at least bytes bytes on dev (one element when bytes is 0). */
static td_tensor *bytes_tensor(size_t bytes, td_device dev) {
    int64_t n = (int64_t)((bytes + 3) / 4);
    return td_empty(1, (int64_t[]){n ? n : 1}, TD_F32, dev);
}

static td_status dnn_forward(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in;
    const dnn_node *nd = td_ctx_user(ctx);
    const td_rnn_dnn_args *a = &nd->a;
    td_device dev = td_tensor_device(in[0]);
    int64_t T = a->T, B = a->B, H = a->H, LD = (int64_t)a->layers * a->dirs;
    out[0] = td_empty(3, (int64_t[]){T, B, a->dirs * H}, TD_F32, dev);
    for (int j = 1; j < n_out; j++) out[j] = td_empty(3, (int64_t[]){LD, B, H}, TD_F32, dev);
    td_tensor *w = bytes_tensor(nd->wbytes, dev), *reserve = a->training ? bytes_tensor(nd->reserve, dev) : NULL;
    const void *params[64];
    for (int i = 0; i < nd->n_params; i++) params[i] = PTR(in[nd->first_param + i]);
    td_tensor *h0 = nd->has_h0 ? in[1] : NULL, *c0 = nd->has_c0 ? in[1 + nd->has_h0] : NULL;
    td_status st = TD_OK;
    bool made = w && (!a->training || reserve);
    for (int j = 0; j < n_out; j++) made = made && out[j];
    if (!made) {
        st = td_last_status();
        goto fail;
    }
    td_rnn_dnn_ptrs p = {.x = PTR(in[0]),
                         .hx = PTR(h0),
                         .cx = PTR(c0),
                         .y = PTR(out[0]),
                         .hy = PTR(out[1]),
                         .cy = n_out > 2 ? PTR(out[2]) : NULL,
                         .w = PTR(w),
                         .reserve = PTR(reserve),
                         .params = params};
    if ((st = nd->fwd(a, &p)) != TD_OK) goto fail;
    if (a->training) {
        dnn_node *keep = malloc(sizeof *keep);
        if (!keep) {
            st = TD_ERR(TD_ERR_OOM, "RNN: out of host memory");
            goto fail;
        }
        *keep = *nd;
        td_ctx_set_data(ctx, keep, free);
        /* saved: 0 x, 1 h0 (or x), 2 c0 (or x), 3 y, 4 w, 5 reserve */
        td_tensor *saved[6] = {in[0], h0 ? h0 : in[0], c0 ? c0 : in[0], out[0], w, reserve};
        st = td_ctx_save_for_backward(ctx, 6, saved);
    }
    return st; /* every tensor made here belongs to td_function_apply's scope: never released here */
fail:
    return st != TD_OK ? st : TD_ERR(TD_ERR_OOM, "RNN: no device memory for cuDNN's weight or reserve space");
}

static td_tensor *like(td_tensor *t) { return td_empty(td_ndim(t), td_shape(t), TD_F32, td_tensor_device(t)); }

static int gates(int mode) { return mode == TD_RNN_DNN_LSTM ? 4 : mode == TD_RNN_DNN_GRU ? 3 : 1; }

/* Parameter i's gradient, empty, of the parameter's shape: per layer l and direction, weight_ih [G*H, in_l],
** weight_hh [G*H, H], bias_ih and bias_hh [G*H]. */
static td_tensor *param_grad(const td_rnn_dnn_args *a, int i, td_device dev) {
    int per = a->bias ? 4 : 2, k = i % per, l = i / per / a->dirs;
    int64_t shape[2] = {gates(a->mode) * a->H, k == 1 ? a->H : l ? a->dirs * a->H : a->I};
    return td_empty(k >= 2 ? 1 : 2, shape, TD_F32, dev);
}

/* The node's backward: one cuDNN backward fills every gradient. */
static td_status dnn_backward(td_function_ctx *ctx, int n_out, td_tensor *const *gout, int n_in, td_tensor **gin) {
    const dnn_node *nd = td_ctx_data(ctx);
    const td_rnn_dnn_args *a = &nd->a;
    td_tensor *x = td_ctx_saved(ctx, 0), *y = td_ctx_saved(ctx, 3), *w = td_ctx_saved(ctx, 4);
    td_tensor *reserve = td_ctx_saved(ctx, 5);
    td_tensor *h0 = nd->has_h0 ? td_ctx_saved(ctx, 1) : NULL, *c0 = nd->has_c0 ? td_ctx_saved(ctx, 2) : NULL;
    td_device dev = td_tensor_device(x);
    td_tensor *dy = td_contiguous(gout[0]), *dhy = td_contiguous(gout[1]);
    td_tensor *dcy = n_out > 2 ? td_contiguous(gout[2]) : NULL;
    td_tensor *dx = like(x), *dhx = h0 ? like(h0) : NULL, *dcx = c0 ? like(c0) : NULL;
    td_tensor *dw = bytes_tensor(nd->wbytes, dev);
    td_tensor *pg[64];
    void *dparams[64];
    bool ok = x && y && w && reserve && dy && dhy && (n_out < 3 || dcy) && dx && (!h0 || dhx) && (!c0 || dcx) && dw;
    for (int i = 0; i < nd->n_params; i++) {
        pg[i] = param_grad(a, i, dev);
        ok = ok && pg[i];
        dparams[i] = PTR(pg[i]);
    }
    if (!ok) return td_last_status() != TD_OK ? td_last_status() : TD_ERR(TD_ERR_OOM, "RNN: backward out of memory");
    td_rnn_dnn_ptrs p = {.x = PTR(x),
                         .hx = PTR(h0),
                         .cx = PTR(c0),
                         .y = PTR(y),
                         .w = PTR(w),
                         .reserve = PTR(reserve),
                         .dy = PTR(dy),
                         .dhy = PTR(dhy),
                         .dcy = PTR(dcy),
                         .dx = PTR(dx),
                         .dhx = PTR(dhx),
                         .dcx = PTR(dcx),
                         .dw = PTR(dw),
                         .dparams = dparams};
    td_status st = nd->bwd(a, &p);
    if (st != TD_OK) return st;
    /* the tensors made here belong to the engine's scope: handed over, never released */
    gin[0] = td_ctx_needs_input_grad(ctx, 0) ? dx : NULL;
    if (nd->has_h0) gin[1] = td_ctx_needs_input_grad(ctx, 1) ? dhx : NULL;
    if (nd->has_c0) gin[1 + nd->has_h0] = td_ctx_needs_input_grad(ctx, 1 + nd->has_h0) ? dcx : NULL;
    for (int i = 0; i < nd->n_params && nd->first_param + i < n_in; i++)
        gin[nd->first_param + i] = td_ctx_needs_input_grad(ctx, nd->first_param + i) ? pg[i] : NULL;
    return TD_OK;
}

static const td_function dnn_fn = {.name = "RNN (cuDNN)", .forward = dnn_forward, .backward = dnn_backward};

static bool f32_on(td_tensor *t, td_device dev) {
    return !t || (td_tensor_dtype(t) == TD_F32 && td_device_equal(td_tensor_device(t), dev));
}

/* TRIDENT_CUDA_RNN_DEBUG=1: print why a CUDA call runs our path, each time the reason changes. */
static void debug_decline(const char *why) {
    static _Thread_local char last[256];
    const char *e = getenv("TRIDENT_CUDA_RNN_DEBUG");
    if (!e || !strcmp(e, "0") || !strcmp(last, why)) return;
    snprintf(last, sizeof last, "%s", why);
    fprintf(stderr, "trident rnn: our kernels, not cuDNN: %s\n", why);
}

/* NULL when cuDNN may take the call, else why not. */
static const char *declined(const td__rnn_dnn_call *c, td_tensor *x, td_tensor *h0, td_tensor *c0) {
    td_device dev = td_tensor_device(x);
    td_dtype amp;
    if (td_tensor_dtype(x) != TD_F32) return "x is not float32";
    if (!f32_on(h0, dev) || !f32_on(c0, dev)) return "h0 or c0 is not float32 on x's device";
    if (td_autocast_enabled(TD_DEVICE_CUDA, &amp)) return "an autocast scope is open";
    if (c->training && c->dropout > 0 && c->layers > 1) return "inter-layer dropout in training";
    if (c->n_params > 61) return "more than 61 parameters";
    for (int i = 0; i < c->n_params; i++)
        if (!f32_on(c->params[i], dev) || !td_is_contiguous(c->params[i]))
            return "a parameter is not contiguous float32 on x's device";
    return NULL;
}

int td__rnn_cudnn(const td__rnn_dnn_call *c, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **y, td_tensor **h_n,
                  td_tensor **c_n) {
    if (!x) return 0;
    const char *env = getenv("TRIDENT_CUDA_RNN");
    if (td_tensor_device(x).type != TD_DEVICE_CUDA || (env && !strcmp(env, "own"))) return 0;
    bool forced = env && !strcmp(env, "cudnn");
    const char *no = declined(c, x, h0, c0);
    dnn_node nd = {.has_h0 = h0 != NULL, .has_c0 = c0 != NULL, .n_params = c->n_params};
    if (!no) {
        nd.fwd = (td_rnn_dnn_forward_fn)td_backend_symbol(TD_DEVICE_CUDA, TD_CUDA_RNN_FORWARD);
        nd.bwd = (td_rnn_dnn_backward_fn)td_backend_symbol(TD_DEVICE_CUDA, TD_CUDA_RNN_BACKWARD);
        if (!nd.fwd || !nd.bwd) no = "the CUDA plugin has no cuDNN RNN entry points";
    }
    bool grad = td_requires_grad(x) || (h0 && td_requires_grad(h0)) || (c0 && td_requires_grad(c0));
    for (int i = 0; i < c->n_params; i++) grad |= td_requires_grad(c->params[i]);
    nd.a = (td_rnn_dnn_args){.device = td_tensor_device(x).index,
                             .mode = c->mode,
                             .layers = c->layers,
                             .dirs = c->dirs,
                             .bias = c->bias,
                             .training = grad && td_grad_enabled(),
                             .tf32 = strcmp(td_get_float32_matmul_precision(), "highest") != 0,
                             .T = td_size(x, 0),
                             .B = td_size(x, 1),
                             .I = td_size(x, 2),
                             .H = c->hidden};
    if (!no) {
        td_rnn_dnn_prepare_fn prep = (td_rnn_dnn_prepare_fn)td_backend_symbol(TD_DEVICE_CUDA, TD_CUDA_RNN_PREPARE);
        if (!prep || prep(&nd.a, &nd.wbytes, &nd.reserve) != TD_OK) no = prep ? td_last_error() : "no prepare entry";
    }
    if (no) {
        char why[256]; /* no may be td_last_error()'s buffer, which TD_ERR rewrites */
        snprintf(why, sizeof why, "%s", no);
        debug_decline(why);
        if (!forced) return td_clear_error(), 0;
        TD_ERR(TD_ERR_UNSUPPORTED, "%s: TRIDENT_CUDA_RNN=cudnn, but cuDNN does not take this call: %s",
               c->mode == TD_RNN_DNN_LSTM  ? "LSTM"
               : c->mode == TD_RNN_DNN_GRU ? "GRU"
                                           : "RNN",
               why);
        return -1;
    }
    td_tensor *in[64] = {x}; /* x, h0, c0 where given, the parameters (at most 61: declined()) */
    int n = 1;
    if (h0) in[n++] = h0 = td_contiguous(h0);
    if (c0) in[n++] = c0 = td_contiguous(c0);
    nd.first_param = n;
    for (int i = 0; i < c->n_params; i++) in[n++] = c->params[i];
    td_tensor *out[3] = {NULL, NULL, NULL};
    int n_out = c->mode == TD_RNN_DNN_LSTM ? 3 : 2;
    if (td_function_apply(&dnn_fn, &nd, n, in, n_out, out) != TD_OK) return -1;
    *y = out[0], *h_n = out[1];
    if (n_out > 2) *c_n = out[2];
    return 1;
}
