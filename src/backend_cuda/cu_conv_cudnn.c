/*
** CONV2D, CONV2D_BACKWARD_INPUT and CONV2D_BACKWARD_WEIGHT on cuDNN: one convolution node of cuDNN's backend graph
** API (cu_cudnn.c) per call, NCHW contiguous tensors, groups given by the weight's dim 1 (depthwise included),
** stride, padding and dilation as the op's; ConvTranspose2d reaches it as CONV2D_BACKWARD_INPUT and Conv1d as a
** conv2d with H = 1 (both built so in src/core and src/nn). The bias of CONV2D is added by cu_ops_conv.cu.
**   forward:          y = conv(x, w)          backward data: dx = conv^T(dy, w)      backward filter: dw(x, dy)
** Padding: pre = the op's; post = pre when the output size follows from it (floor((X + 2p - d(k-1) - 1)/s) + 1),
** else the exact post padding the output size needs (a transposed conv's output_padding), else the call declines.
** Plans are chosen once per (device, direction, dtype, TF32, shapes, stride, padding, dilation) by cuDNN's
** heuristics (mode A, then the fallback list: no timing runs, as torch's benchmark=False) and cached; engines
** with these numerical notes are skipped: REDUCED_PRECISION_REDUCTION (accumulation below fp32), NONDETERMINISTIC
** only under TRIDENT_CUDA_CONV_DETERMINISTIC=1 (atomics; torch's default allows them too), and DOWN_CONVERT_INPUTS for
** float data unless the op carries TD_OP_FLAG_TF32 ("high" matmul precision), and for f32 without it TENSOR_CORE
** (an f32 engine on tensor cores computes in TF32 without saying DOWN_CONVERT_INPUTS): f32 is strict by default.
** f16/bf16 compute in fp32; f64 in double. Workspace: the plugin's stream-ordered scratch (cu_temp_alloc), on the
** device's stream. While the device captures a CUDA graph only plans built before the capture run (a shape first
** met during a capture takes the im2col path).
** TRIDENT_CUDA_CONV=own never takes a call; =cudnn makes a call cuDNN does not take fail with the reason instead of
** falling back; unset: cuDNN where it takes the call. TRIDENT_CUDA_ATTN_DEBUG=1 (cu_dnn_log) prints each decision
** once. td_cuda_conv_counts (exported, found with td_backend_symbol) tells tests which path ran.
*/
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_cudnn.h"

/* calls taken by cuDNN, calls left to the im2col path */
static _Atomic int64_t counts[2];

/* For tests: the two counters above into out[2]. */
__attribute__((visibility("default"))) void td_cuda_conv_counts(int64_t out[2]) {
    for (int i = 0; i < 2; i++) out[i] = atomic_load(&counts[i]);
}

/* 0: cuDNN where it takes the call, 1: own (TRIDENT_CUDA_CONV=own), 2: cuDNN or an error (=cudnn) */
static int conv_mode(void) {
    const char *e = getenv("TRIDENT_CUDA_CONV");
    return !e ? 0 : !strcmp(e, "own") ? 1 : !strcmp(e, "cudnn") ? 2 : 0;
}

/* Engines with atomics (NONDETERMINISTIC: sums in any order) run by default, as torch's cudnn.deterministic=False
** allows: W7 on an H100 takes 5.7 ms with them against 11.2 without. TRIDENT_CUDA_CONV_DETERMINISTIC=1 keeps them
** out (the same bits run to run); read once. */
static bool conv_nondeterministic(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TRIDENT_CUDA_CONV_DETERMINISTIC");
        v = !(e && !strcmp(e, "1"));
    }
    return v == 1;
}

static const char *op_name(const td_op *op) {
    return op->kind == TD_OP_CONV2D                  ? "conv2d"
           : op->kind == TD_OP_CONV2D_BACKWARD_INPUT ? "conv2d_backward_input"
                                                     : "conv2d_backward_weight";
}

/* The call's outcome when cuDNN did not run it (no: why): false (the im2col path), or true with an error under
** TRIDENT_CUDA_CONV=cudnn. */
static bool declined(const td_op *op, const char *no, td_status *st) {
    atomic_fetch_add(&counts[1], 1);
    if (conv_mode() != 2) return false;
    *st = td_error_set(TD_ERR_UNSUPPORTED, "%s: TRIDENT_CUDA_CONV=cudnn, but cuDNN does not take this call: %s",
                       op_name(op), no);
    return true;
}

#ifndef TRIDENT_HAVE_CUDNN
bool cu_dnn_conv(cu_dev *d, const td_op *op, td_status *st) {
    (void)d;
    if (conv_mode() == 1) return atomic_fetch_add(&counts[1], 1), false;
    return declined(op, "the plugin was built without cudnn_graph.h", st);
}
#else

/* uids of the three tensors */
enum { U_X = 1, U_W, U_Y };

typedef struct conv_key {
    int dev, dir, tf32;
    td_dtype dt;
    int64_t x[4], w[4], y[4]; /* (N,C,H,W), (O,C/G,kh,kw), (N,O,Ho,Wo) */
    int64_t stride[2], pre[2], post[2], dil[2];
} conv_key;

typedef struct conv_plan {
    conv_key key;
    bool failed;    /* cuDNN refused the graph or failed to run it: the im2col path takes this key */
    cu_dnn_graph g; /* its descriptors stay alive with the plan */
    cudnnBackendDescriptor_t plan;
    int64_t ws; /* the plan's workspace bytes */
} conv_plan;

#define PLANS 512
static conv_plan plans[PLANS];
static int nplans;
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER; /* a handle runs one call at a time */

static cudnnDataType_t dnn_type(td_dtype dt) {
    return dt == TD_F64    ? CUDNN_DATA_DOUBLE
           : dt == TD_F16  ? CUDNN_DATA_HALF
           : dt == TD_BF16 ? CUDNN_DATA_BFLOAT16
                           : CUDNN_DATA_FLOAT;
}

/* a contiguous NCHW tensor */
static cudnnBackendDescriptor_t nchw(cu_dnn_graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dims[4]) {
    int64_t st[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return cu_dnn_tensor(g, uid, dt, dims, st, false);
}

/* The key of op, or why cuDNN cannot take it. */
static const char *key_of(cu_dev *d, const td_op *op, conv_key *k) {
    memset(k, 0, sizeof *k); /* compared with memcmp: padding zeroed */
    const td_operand *x, *w, *y;
    if (op->kind == TD_OP_CONV2D)
        k->dir = 0, x = &op->in[0], w = &op->in[1], y = &op->out[0];
    else if (op->kind == TD_OP_CONV2D_BACKWARD_INPUT)
        k->dir = 1, x = &op->out[0], w = &op->in[1], y = &op->in[0];
    else
        k->dir = 2, x = &op->in[1], w = &op->out[0], y = &op->in[0];
    k->dev = d->index, k->dt = op->out[0].dtype;
    if (k->dt != TD_F32 && k->dt != TD_F64 && k->dt != TD_F16 && k->dt != TD_BF16) return "dtype";
    k->tf32 = k->dt == TD_F32 && (op->flags & TD_OP_FLAG_TF32) != 0;
    memcpy(k->x, x->shape, sizeof k->x), memcpy(k->w, w->shape, sizeof k->w), memcpy(k->y, y->shape, sizeof k->y);
    for (int i = 0; i < 2; i++) {
        int64_t s = op->p.conv.stride[i], p = op->p.conv.padding[i], dl = op->p.conv.dilation[i];
        int64_t X = k->x[2 + i], K = k->w[2 + i], Y = k->y[2 + i], span = dl * (K - 1) + 1;
        int64_t post = p; /* pre = post when the output size follows from it, else the exact post padding */
        if ((X + 2 * p - span) / s + 1 != Y || X + 2 * p < span) post = (Y - 1) * s + span - X - p;
        if (post < 0) return "the output size needs a negative post padding";
        k->stride[i] = s, k->pre[i] = p, k->post[i] = post, k->dil[i] = dl;
    }
    return NULL;
}

/* The cached plan of key (built on first use, not while capturing); NULL with the reason in why. */
static conv_plan *get_plan(cu_dev *d, const conv_key *key, char *why, size_t n) {
    pthread_mutex_lock(&plans_lock);
    conv_plan *p = NULL;
    for (int i = 0; i < nplans && !p; i++)
        if (!memcmp(&plans[i].key, key, sizeof *key)) p = &plans[i];
    if (p && p->failed) { /* refused before: the same reason */
        snprintf(why, n, "%s", p->g.err);
        p = NULL;
        goto out;
    }
    if (p) goto out;
    if (d->capturing) {
        snprintf(why, n, "no plan for this shape yet, and none is built while capturing");
        goto out;
    }
    if (nplans == PLANS) {
        snprintf(why, n, "the plan cache holds %d shapes already", PLANS);
        goto out;
    }
    cudnnHandle_t h = cu_dnn_handle(d, why, n);
    if (!h) goto out;
    p = &plans[nplans++];
    memset(p, 0, sizeof *p);
    p->key = *key;
    p->g.api = cu_dnn_load(NULL);
    p->g.next_virtual_uid = 100;
    cudnnDataType_t io = dnn_type(key->dt), comp = key->dt == TD_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t x = nchw(&p->g, U_X, io, key->x), w = nchw(&p->g, U_W, io, key->w);
    cudnnBackendDescriptor_t y = nchw(&p->g, U_Y, io, key->y);
    cu_dnn_convolution(&p->g, key->dir, comp, key->pre, key->post, key->stride, key->dil, x, w, y);
    unsigned avoid = 1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    if (!conv_nondeterministic()) avoid |= 1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    if ((key->dt == TD_F32 && !key->tf32) || key->dt == TD_F64) avoid |= 1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    if (key->dt == TD_F32 && !key->tf32)
        avoid |= 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE; /* f32 on tensor cores: TF32 */
    if (p->g.st == CUDNN_STATUS_SUCCESS) p->plan = cu_dnn_plan_avoiding(&p->g, h, avoid, &p->ws);
    if (!p->plan) { /* remembered, so the graph is not built again */
        p->failed = true;
        cu_dnn_graph_free(&p->g);
        snprintf(why, n, "%s", p->g.err);
        p = NULL;
    }
out:
    pthread_mutex_unlock(&plans_lock);
    return p;
}

static void log_choice(const td_op *op, const conv_key *k, const char *why) {
    cu_dnn_log("%s x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld] %s%s: %s%s", op_name(op), (long long)k->x[0],
               (long long)k->x[1], (long long)k->x[2], (long long)k->x[3], (long long)k->w[0], (long long)k->w[1],
               (long long)k->w[2], (long long)k->w[3], td_dtype_name(k->dt), k->tf32 ? " tf32" : "",
               why ? "im2col: " : "cuDNN", why ? why : "");
}

bool cu_dnn_conv(cu_dev *d, const td_op *op, td_status *st) {
    if (conv_mode() == 1) return atomic_fetch_add(&counts[1], 1), false;
    conv_key key;
    const char *no = key_of(d, op, &key);
    /* x, w, y in uid order */
    const td_operand *ops[3] = {key.dir == 1   ? &op->out[0]
                                : key.dir == 2 ? &op->in[1]
                                               : &op->in[0],
                                key.dir == 2 ? &op->out[0] : &op->in[1], key.dir == 0 ? &op->out[0] : &op->in[0]};
    void *ptrs[3];
    for (int i = 0; i < 3; i++) {
        ptrs[i] = cu_data(ops[i]);
        if (!no && ((uintptr_t)ptrs[i] & 15)) no = "an operand is not 16-byte aligned";
    }
    char why[512];
    conv_plan *p = NULL;
    if (!no && !(p = get_plan(d, &key, why, sizeof why))) no = why;
    void *ws = NULL;
    if (!no && p->ws && cu_temp_alloc(d, (size_t)p->ws, &ws) != TD_OK) no = "no memory for cuDNN's workspace";
    cudnnHandle_t h = NULL;
    if (!no && !(h = cu_dnn_handle(d, why, sizeof why))) no = why;
    if (!no) {
        const cu_dnn_api *api = cu_dnn_load(NULL);
        static const int64_t uids[3] = {U_X, U_W, U_Y};
        pthread_mutex_lock(&exec_lock);
        cudnnStatus_t s = api->set_stream(h, d->stream);
        if (s != CUDNN_STATUS_SUCCESS)
            cu_dnn_describe(s, "cudnnSetStream", why, sizeof why);
        else
            s = cu_dnn_execute(api, h, p->plan, 3, uids, ptrs, ws, why, sizeof why);
        pthread_mutex_unlock(&exec_lock);
        if (s != CUDNN_STATUS_SUCCESS) { /* kept: later calls of this shape go to the im2col path without trying */
            pthread_mutex_lock(&plans_lock);
            p->failed = true;
            snprintf(p->g.err, sizeof p->g.err, "%s", why);
            pthread_mutex_unlock(&plans_lock);
            no = why;
        }
    }
    if (ws) cu_temp_free(d, ws);
    log_choice(op, &key, no);
    if (no) return declined(op, no, st);
    atomic_fetch_add(&counts[0], 1);
    *st = cu_status(cudaGetLastError(), op_name(op));
    return true;
}
#endif
