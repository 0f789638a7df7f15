/*
** ATTENTION and ATTENTION_BACKWARD on cuDNN's fused flash attention, as the operation graphs that cuDNN's
** fused-attention engines match (the pattern cudnn-frontend's SDPA nodes expand into), built with the backend C API
** (cu_cudnn.c). Letters: B = n0, H = n1, L queries, S keys, E the head dim (E == Ev); q, out, dout, dq [B,H,L,E]
** and k, v, dk, dv [B,H,S,E] with the strides of the op's operands (the last dim's 1; heads split from a [B,S,3,H,E]
** projection read in place, out written [B,L,H,E] in memory); lse [B,H,L,1] float contiguous; virtual tensors are
** float unless said.
** Forward (one fused kernel):
**   s = (q @ k^T) * scale;  causal: s_ij = i >= j ? s_ij : -inf  (GEN_INDEX row, col; CMP_GE; BINARY_SELECT)
**   m = max_j s;  e = exp(s - m);  z = sum_j e;  lse = m + log z  (Stats: the natural-log logsumexp, our lse)
**   p = e / z (in the input dtype);  out = p @ v
** Backward (dQ accumulated in float in the workspace, then copied out):
**   D = sum_e dout * out (softmax_sum, float, workspace);  p = exp(s - lse) with s and the mask as above
**   dv = p^T @ dout;  ds = p * (dout @ v^T - D) * scale;  dk = ds^T @ q;  dq = ds @ k
** lse has our kernels' meaning (cu_ops_attention.cu), so a forward by one implementation and a backward by the other
** agree. Taken: f16/bf16, E == Ev in {32, 64, 128}, no mask tensor, no dropout, 16-byte aligned operands; causal is
** top-left (key j masked for j > i) as ours, for any L and S. Plans are cached per (device, direction, dtype, causal,
** B, H, L, S, E, the operands' strides); strided operands also need strides in multiples of 8 elements. scale is a
*by-value scalar given at execution, so it is not part of the key. Workspace comes from
** the plugin's stream-ordered scratch (cu_temp_alloc). While the device captures a CUDA graph only plans built
** before the capture run (a shape first met during a capture takes our kernels; test_attention_cudnn captured checks
** the replays against eager calls); TRIDENT_CUDA_ATTN_CUDNN_CAPTURE=0 keeps captures on our kernels.
** TRIDENT_CUDA_ATTN=own|cudnn picks one (default: cuDNN where it is taken); TRIDENT_CUDA_ATTN_DEBUG=1 prints
** each decision and each cuDNN failure once. td_cuda_attn_counts and td_cuda_cudnn_status (exported, found with
** td_backend_symbol) tell tests which implementation ran.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_cudnn.h"

/* fwd cuDNN, fwd own, bwd cuDNN, bwd own: the calls that reached cu_dnn_attn_fwd/bwd */
static _Atomic int64_t counts[4];

/* For tests: the four counters above into out[4]. */
__attribute__((visibility("default"))) void td_cuda_attn_counts(int64_t out[4]) {
    for (int i = 0; i < 4; i++) out[i] = atomic_load(&counts[i]);
}

#ifndef TRIDENT_HAVE_CUDNN
__attribute__((visibility("default"))) const char *td_cuda_cudnn_status(void) {
    return "the plugin was built without cudnn_graph.h";
}

bool cu_dnn_attn_takes_strided(cu_dev *d, const td_op *op) {
    (void)d, (void)op;
    return false;
}

bool cu_dnn_attn_fwd(cu_dev *d, const cu_dnn_attn *a, const void *q, const void *k, const void *v, void *out,
                     float *lse, td_status *st) {
    (void)d, (void)a, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)st;
    atomic_fetch_add(&counts[1], 1);
    return false;
}

bool cu_dnn_attn_bwd(cu_dev *d, const cu_dnn_attn *a, const void *dout, const void *q, const void *k, const void *v,
                     const void *out, const float *lse, void *dq, void *dk, void *dv, td_status *st) {
    (void)d, (void)a, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)dq, (void)dk, (void)dv;
    (void)st;
    atomic_fetch_add(&counts[3], 1);
    return false;
}
#else

/* For tests: NULL when cuDNN loads, else why not. */
__attribute__((visibility("default"))) const char *td_cuda_cudnn_status(void) {
    const char *why;
    return cu_dnn_load(&why) ? NULL : why;
}

/* uids of the non-virtual tensors (virtual ones count up from 100) */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_DO, U_DQ, U_DK, U_DV, U_ONE, U_DSUM, U_DQ_ACC };

/* the strided operands, in plan_key.st */
enum { S_Q, S_K, S_V, S_O, S_DO, S_DQ, S_DK, S_DV, S_COUNT };

typedef struct plan_key {
    int dev, bwd, causal;
    td_dtype dt;
    int64_t n0, n1, L, S, E;
    int64_t st[S_COUNT][4]; /* strides of q, k, v, out (dout, dq, dk, dv in the backward; 0 in the forward) */
} plan_key;

typedef struct plan_entry {
    plan_key key;
    bool failed;    /* cuDNN refused the graph: our kernels take this key */
    cu_dnn_graph g; /* its descriptors stay alive with the plan */
    cudnnBackendDescriptor_t plan;
    int64_t ws; /* the plan's workspace bytes */
} plan_entry;

#define PLANS 64
static plan_entry plans[PLANS];
static int nplans;
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER; /* a handle runs one call at a time */

static void strides_of(const int64_t dims[4], int64_t st[4]) {
    st[3] = 1;
    for (int i = 2; i >= 0; i--) st[i] = st[i + 1] * dims[i + 1];
}

/* a [B,H,r,c] tensor, row-major */
static cudnnBackendDescriptor_t t4(cu_dnn_graph *g, int64_t uid, cudnnDataType_t dt, int64_t B, int64_t H, int64_t r,
                                   int64_t c) {
    int64_t dims[4] = {B, H, r, c}, st[4];
    strides_of(dims, st);
    return cu_dnn_tensor(g, uid, dt, dims, st, false);
}

/* [B,H,c,r] seen transposed: the memory of a row-major [B,H,r,c] */
static cudnnBackendDescriptor_t t4_transposed(cu_dnn_graph *g, int64_t uid, cudnnDataType_t dt, int64_t B, int64_t H,
                                              int64_t r, int64_t c) {
    int64_t dims[4] = {B, H, c, r}, st[4] = {H * r * c, r * c, 1, c};
    return cu_dnn_tensor(g, uid, dt, dims, st, false);
}

/* operand slot of key as [B,H,r,c], its own strides */
static cudnnBackendDescriptor_t io4(cu_dnn_graph *g, const plan_key *k, int64_t uid, cudnnDataType_t dt, int slot,
                                    int64_t r, int64_t c) {
    int64_t dims[4] = {k->n0, k->n1, r, c};
    return cu_dnn_tensor(g, uid, dt, dims, k->st[slot], false);
}

/* operand slot of key ([B,H,r,c]) seen transposed as [B,H,c,r] */
static cudnnBackendDescriptor_t io4_t(cu_dnn_graph *g, const plan_key *k, int64_t uid, cudnnDataType_t dt, int slot,
                                      int64_t r, int64_t c) {
    const int64_t *s = k->st[slot];
    int64_t dims[4] = {k->n0, k->n1, c, r}, st[4] = {s[0], s[1], s[3], s[2]};
    return cu_dnn_tensor(g, uid, dt, dims, st, false);
}

static cudnnBackendDescriptor_t scalar(cu_dnn_graph *g, int64_t uid) {
    int64_t one[4] = {1, 1, 1, 1};
    return cu_dnn_tensor(g, uid, CUDNN_DATA_FLOAT, one, one, true);
}

#define F CUDNN_DATA_FLOAT

/* s -> s with -inf where key j > query i (top-left causal) */
static cudnnBackendDescriptor_t causal_mask(cu_dnn_graph *g, const plan_key *k, cudnnBackendDescriptor_t s,
                                            cudnnBackendDescriptor_t neg_inf) {
    cudnnBackendDescriptor_t row = t4(g, 0, CUDNN_DATA_INT32, k->n0, k->n1, k->L, k->S);
    cudnnBackendDescriptor_t col = t4(g, 0, CUDNN_DATA_INT32, k->n0, k->n1, k->L, k->S);
    cudnnBackendDescriptor_t keep = t4(g, 0, CUDNN_DATA_BOOLEAN, k->n0, k->n1, k->L, k->S);
    cudnnBackendDescriptor_t out = t4(g, 0, F, k->n0, k->n1, k->L, k->S);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, F, 2, s, NULL, NULL, row);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, F, 3, s, NULL, NULL, col);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, 0, row, col, NULL, keep);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, F, 0, s, neg_inf, keep, out); /* keep ? s : -inf */
    return out;
}

static void build_fwd(cu_dnn_graph *g, const plan_key *k, cudnnDataType_t io) {
    int64_t B = k->n0, H = k->n1, L = k->L, S = k->S, E = k->E;
    cudnnBackendDescriptor_t q = io4(g, k, U_Q, io, S_Q, L, E), kt = io4_t(g, k, U_K, io, S_K, S, E);
    cudnnBackendDescriptor_t v = io4(g, k, U_V, io, S_V, S, E), o = io4(g, k, U_O, io, S_O, L, E);
    cudnnBackendDescriptor_t stats = t4(g, U_STATS, F, B, H, L, 1), scale = scalar(g, U_SCALE);
    /* s = q k^T * scale, masked */
    cudnnBackendDescriptor_t s0 = t4(g, 0, F, B, H, L, S), s = t4(g, 0, F, B, H, L, S);
    cu_dnn_matmul(g, q, kt, s0);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, s0, scale, NULL, s);
    if (k->causal) s = causal_mask(g, k, s, scalar(g, U_NEG_INF));
    /* softmax with stats */
    cudnnBackendDescriptor_t m = t4(g, 0, F, B, H, L, 1), sub = t4(g, 0, F, B, H, L, S), e = t4(g, 0, F, B, H, L, S);
    cudnnBackendDescriptor_t z = t4(g, 0, F, B, H, L, 1), logz = t4(g, 0, F, B, H, L, 1);
    cudnnBackendDescriptor_t p = t4(g, 0, io, B, H, L, S);
    cu_dnn_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, m);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, 0, s, m, NULL, sub);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_EXP, F, 0, sub, NULL, NULL, e);
    cu_dnn_reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, z);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_LOG, F, 0, z, NULL, NULL, logz);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_ADD, F, 0, m, logz, NULL, stats);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_DIV, F, 0, e, z, NULL, p);
    cu_dnn_matmul(g, p, v, o);
}

static void build_bwd(cu_dnn_graph *g, const plan_key *k, cudnnDataType_t io) {
    int64_t B = k->n0, H = k->n1, L = k->L, S = k->S, E = k->E;
    cudnnBackendDescriptor_t q = io4(g, k, U_Q, io, S_Q, L, E), kt = io4_t(g, k, U_K, io, S_K, S, E);
    cudnnBackendDescriptor_t vt = io4_t(g, k, U_V, io, S_V, S, E), o = io4(g, k, U_O, io, S_O, L, E);
    cudnnBackendDescriptor_t dout = io4(g, k, U_DO, io, S_DO, L, E), stats = t4(g, U_STATS, F, B, H, L, 1);
    cudnnBackendDescriptor_t dq = io4(g, k, U_DQ, io, S_DQ, L, E), dk = io4(g, k, U_DK, io, S_DK, S, E);
    cudnnBackendDescriptor_t dv = io4(g, k, U_DV, io, S_DV, S, E), scale = scalar(g, U_SCALE), one = scalar(g, U_ONE);
    cudnnBackendDescriptor_t dsum = t4(g, U_DSUM, F, B, H, L, 1), dq_acc = t4(g, U_DQ_ACC, F, B, H, L, E);
    /* D = sum_e dout * out (times 1: no dropout scale) */
    cudnnBackendDescriptor_t prod = t4(g, 0, F, B, H, L, E), rsum = t4(g, 0, F, B, H, L, 1);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, dout, o, NULL, prod);
    cu_dnn_reduce(g, CUDNN_REDUCE_TENSOR_ADD, prod, rsum);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, rsum, one, NULL, dsum);
    /* p = exp(q k^T * scale - lse), masked */
    cudnnBackendDescriptor_t s0 = t4(g, 0, F, B, H, L, S), s1 = t4(g, 0, F, B, H, L, S), s = t4(g, 0, F, B, H, L, S);
    cu_dnn_matmul(g, q, kt, s0);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, s0, scale, NULL, s1);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, 0, s1, stats, NULL, s);
    if (k->causal) s = causal_mask(g, k, s, scalar(g, U_NEG_INF));
    cudnnBackendDescriptor_t p = t4(g, 0, F, B, H, L, S), pt = t4_transposed(g, 0, io, B, H, L, S);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_EXP, F, 0, s, NULL, NULL, p);
    /* dv = p^T dout */
    cu_dnn_reshape(g, p, pt);
    cu_dnn_matmul(g, pt, dout, dv);
    /* ds = p * (dout v^T - D) * scale */
    cudnnBackendDescriptor_t dp = t4(g, 0, F, B, H, L, S), d1 = t4(g, 0, F, B, H, L, S), d2 = t4(g, 0, F, B, H, L, S);
    cudnnBackendDescriptor_t ds = t4(g, 0, F, B, H, L, S), dst = t4_transposed(g, 0, io, B, H, L, S);
    cu_dnn_matmul(g, dout, vt, dp);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, 0, dp, dsum, NULL, d1);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, d1, p, NULL, d2);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, 0, d2, scale, NULL, ds);
    /* dk = ds^T q */
    cu_dnn_reshape(g, ds, dst);
    cu_dnn_matmul(g, dst, q, dk);
    /* dq = ds k (k as [B,H,S,E], float as the frontend declares it), accumulated in float, then copied */
    cudnnBackendDescriptor_t kr = t4(g, 0, F, B, H, S, E);
    cu_dnn_reshape(g, kt, kr);
    cu_dnn_matmul(g, ds, kr, dq_acc);
    cu_dnn_pointwise(g, CUDNN_POINTWISE_IDENTITY, F, 0, dq_acc, NULL, NULL, dq);
}
#undef F

/* The cached plan of key (built on first use, not while capturing); NULL with the reason in why. */
static plan_entry *get_plan(cu_dev *d, const plan_key *key, char *why, size_t n) {
    pthread_mutex_lock(&plans_lock);
    plan_entry *p = NULL;
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
    cudnnDataType_t io = key->dt == TD_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    if (key->bwd)
        build_bwd(&p->g, key, io);
    else
        build_fwd(&p->g, key, io);
    if (p->g.st == CUDNN_STATUS_SUCCESS) p->plan = cu_dnn_plan(&p->g, h, &p->ws);
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

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Whether this call may go to cuDNN; NULL, or why not. */
static const char *declined(cu_dev *d, const cu_dnn_attn *a, const void *const *ptrs, int n) {
    const char *mode = getenv("TRIDENT_CUDA_ATTN");
    if (mode && !strcmp(mode, "own")) return "TRIDENT_CUDA_ATTN=own";
    if (a->dt != TD_F16 && a->dt != TD_BF16) return "dtype is not f16 or bf16";
    if (a->E != a->Ev || (a->E != 32 && a->E != 64 && a->E != 128)) return "head dims are not E == Ev in {32, 64, 128}";
    if (a->mask) return "a mask tensor";
    if (a->dropout) return "dropout";
    if (a->L < 1 || a->S < 1) return "an empty sequence";
    for (int i = 0; i < n; i++)
        if (!aligned16(ptrs[i])) return "an operand is not 16-byte aligned";
    if (d->capturing) {
        const char *e = getenv("TRIDENT_CUDA_ATTN_CUDNN_CAPTURE");
        if (e && !strcmp(e, "0")) return "capturing a CUDA graph (TRIDENT_CUDA_ATTN_CUDNN_CAPTURE=0)";
    }
    return NULL;
}

/* the operands of op in plan_key.st's slots (NULL where the direction has none) */
static void slots_of(const td_op *op, const td_operand *s[S_COUNT]) {
    const td_operand *in = op->in, *o = op->out;
    bool bwd = op->kind == TD_OP_ATTENTION_BACKWARD;
    const td_operand *fwd[S_COUNT] = {&in[0], &in[1], &in[2], &o[0], NULL, NULL, NULL, NULL};
    const td_operand *back[S_COUNT] = {&in[1], &in[2], &in[3], &in[5], &in[0], &o[0], &o[1], &o[2]};
    for (int i = 0; i < S_COUNT; i++) s[i] = bwd ? back[i] : fwd[i];
}

static plan_key key_of(cu_dev *d, const cu_dnn_attn *a, int bwd) {
    plan_key k;
    memset(&k, 0, sizeof k); /* the key is compared with memcmp: padding zeroed */
    k.dev = d->index, k.bwd = bwd, k.causal = a->causal, k.dt = a->dt;
    k.n0 = a->n0, k.n1 = a->n1, k.L = a->L, k.S = a->S, k.E = a->E;
    const td_operand *s[S_COUNT];
    slots_of(a->op, s);
    for (int i = 0; i < S_COUNT; i++) /* a size-1 dim's stride is free: the packed one */
        for (int j = 3; s[i] && j >= 0; j--)
            k.st[i][j] = j == 3 ? 1 : s[i]->shape[j] == 1 ? k.st[i][j + 1] * s[i]->shape[j + 1] : s[i]->strides[j];
    return k;
}

/* strides cuDNN reads: the last dim's 1, the others positive multiples of 8 elements (16-byte rows) */
static bool strides_ok(const td_operand *x) {
    if (x->ndim != 4 || x->strides[3] != 1 || (x->offset & 7)) return false;
    for (int j = 0; j < 3; j++)
        if (x->shape[j] != 1 && (x->strides[j] <= 0 || (x->strides[j] & 7))) return false;
    return true;
}

/* a's fields from op alone (cu_ops_attention.cu's dnn_args has them from its own argument parsing) */
static cu_dnn_attn attn_of(const td_op *op) {
    bool bwd = op->kind == TD_OP_ATTENTION_BACKWARD;
    const td_operand *x = &op->in[bwd];
    cu_dnn_attn a = {.op = op, .n0 = x[0].shape[0], .n1 = x[0].shape[1], .L = x[0].shape[2], .S = x[1].shape[2]};
    a.E = x[0].shape[3], a.Ev = x[2].shape[3], a.dt = x[0].dtype, a.causal = op->p.attn.causal;
    a.mask = x[3].buf != NULL, a.dropout = op->p.attn.dropout_p > 0, a.scale = (float)op->p.attn.scale;
    return a;
}

bool cu_dnn_attn_takes_strided(cu_dev *d, const td_op *op) {
    if (!cu_dnn_load(NULL)) return false;
    cu_dnn_attn a = attn_of(op);
    const td_operand *s[S_COUNT];
    slots_of(op, s);
    const void *none[1] = {NULL};
    if (declined(d, &a, none, 0)) return false;
    for (int i = 0; i < S_COUNT; i++)
        if (s[i] && !strides_ok(s[i])) return false;
    char why[512];
    plan_key key = key_of(d, &a, op->kind == TD_OP_ATTENTION_BACKWARD);
    return get_plan(d, &key, why, sizeof why) != NULL;
}

static void log_choice(const cu_dnn_attn *a, const char *dir, const char *why) {
    cu_dnn_log("attention %s [%lld,%lld,%lld,%lld] S %lld %s%s: %s%s", dir, (long long)a->n0, (long long)a->n1,
               (long long)a->L, (long long)a->E, (long long)a->S, td_dtype_name(a->dt), a->causal ? " causal" : "",
               why ? "own kernels: " : "cuDNN", why ? why : "");
}

/* -inf for the causal mask (cuDNN before 9.10 wants the lowest float instead, as cudnn-frontend gives it) */
static float neg_inf_value(void) { return cu_dnn_load(NULL)->version < 91000 ? -3.402823466e38f : -INFINITY; }

/* Runs plan p with n (uid, pointer) pairs on d's stream; the workspace ws holds extra bytes of the graph's own float
** tensors (their pointers already in ptrs) and then the plan's. False, with the reason logged, when cuDNN fails. */
static bool run(cu_dev *d, const cu_dnn_attn *a, const char *dir, plan_entry *p, int n, const int64_t *uids,
                void *const *ptrs, char *ws, size_t extra, td_status *st) {
    char why[512];
    cudnnHandle_t h = cu_dnn_handle(d, why, sizeof why);
    if (!h) return log_choice(a, dir, why), false;
    const cu_dnn_api *api = cu_dnn_load(NULL);
    pthread_mutex_lock(&exec_lock);
    cudnnStatus_t s = api->set_stream(h, d->stream);
    if (s != CUDNN_STATUS_SUCCESS)
        cu_dnn_describe(s, "cudnnSetStream", why, sizeof why);
    else
        s = cu_dnn_execute(api, h, p->plan, n, uids, ptrs, p->ws ? ws + extra : NULL, why, sizeof why);
    pthread_mutex_unlock(&exec_lock);
    if (s != CUDNN_STATUS_SUCCESS) { /* kept: later calls of this shape go to our kernels without trying */
        pthread_mutex_lock(&plans_lock);
        p->failed = true;
        snprintf(p->g.err, sizeof p->g.err, "%s", why);
        pthread_mutex_unlock(&plans_lock);
        return log_choice(a, dir, why), false;
    }
    *st = cu_status(cudaGetLastError(), dir);
    log_choice(a, dir, NULL);
    return true;
}

static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }

#define PUSH(uid, ptr) (uids[n] = (uid), ptrs[n++] = (void *)(ptr))

bool cu_dnn_attn_fwd(cu_dev *d, const cu_dnn_attn *a, const void *q, const void *k, const void *v, void *out,
                     float *lse, td_status *st) {
    const void *ops[5] = {q, k, v, out, lse};
    const char *no = declined(d, a, ops, 5);
    char why[512];
    plan_entry *p = NULL;
    if (!no) {
        plan_key key = key_of(d, a, 0);
        if (!(p = get_plan(d, &key, why, sizeof why))) no = why;
    }
    void *ws = NULL;
    if (!no && p->ws && cu_temp_alloc(d, (size_t)p->ws, &ws) != TD_OK) no = "no memory for cuDNN's workspace";
    bool ok = false;
    if (!no) {
        float scale = a->scale, neg_inf = neg_inf_value();
        int64_t uids[7];
        void *ptrs[7];
        int n = 0;
        PUSH(U_Q, q), PUSH(U_K, k), PUSH(U_V, v), PUSH(U_O, out), PUSH(U_STATS, lse), PUSH(U_SCALE, &scale);
        if (a->causal) PUSH(U_NEG_INF, &neg_inf);
        ok = run(d, a, "forward", p, n, uids, ptrs, ws, 0, st);
    }
    if (ws) cu_temp_free(d, ws);
    if (no) log_choice(a, "forward", no);
    atomic_fetch_add(&counts[ok ? 0 : 1], 1);
    if (!ok && !cu_attn_own_takes(a->op)) /* strided operands our kernels do not take */
        return *st = td_error_set(TD_ERR_UNSUPPORTED, "attention: cuDNN failed on strided operands (%s)",
                                  no ? no : "at run time"),
               true;
    return ok;
}

bool cu_dnn_attn_bwd(cu_dev *d, const cu_dnn_attn *a, const void *dout, const void *q, const void *k, const void *v,
                     const void *out, const float *lse, void *dq, void *dk, void *dv, td_status *st) {
    const void *ops[9] = {dout, q, k, v, out, lse, dq, dk, dv};
    const char *no = declined(d, a, ops, 9);
    char why[512];
    plan_entry *p = NULL;
    if (!no) {
        plan_key key = key_of(d, a, 1);
        if (!(p = get_plan(d, &key, why, sizeof why))) no = why;
    }
    /* workspace: dq's float accumulator [B,H,L,E], then D [B,H,L,1]; the plan's own workspace after them */
    int64_t nl = a->n0 * a->n1 * a->L;
    size_t acc_bytes = round256((size_t)(nl * a->E) * sizeof(float)), extra = acc_bytes + round256((size_t)nl * 4);
    char *ws = NULL;
    if (!no && cu_temp_alloc(d, extra + (size_t)p->ws, (void **)&ws) != TD_OK) no = "no memory for cuDNN's workspace";
    bool ok = false;
    if (!no && cu_dnn_load(NULL)->version < 90600 && /* cuDNN before 9.6 expects a zeroed dq accumulator */
        cu_status(cudaMemsetAsync(ws, 0, acc_bytes, d->stream), "cudaMemsetAsync (cuDNN dq accumulator)") != TD_OK)
        no = "cudaMemsetAsync of the dq accumulator failed";
    if (!no) {
        float scale = a->scale, one = 1, neg_inf = neg_inf_value();
        int64_t uids[14];
        void *ptrs[14];
        int n = 0;
        PUSH(U_Q, q), PUSH(U_K, k), PUSH(U_V, v), PUSH(U_O, out), PUSH(U_STATS, lse), PUSH(U_DO, dout);
        PUSH(U_DQ, dq), PUSH(U_DK, dk), PUSH(U_DV, dv), PUSH(U_SCALE, &scale), PUSH(U_ONE, &one);
        PUSH(U_DQ_ACC, ws), PUSH(U_DSUM, ws + acc_bytes);
        if (a->causal) PUSH(U_NEG_INF, &neg_inf);
        ok = run(d, a, "backward", p, n, uids, ptrs, ws, extra, st);
    }
    if (ws) cu_temp_free(d, ws);
    if (no) log_choice(a, "backward", no);
    atomic_fetch_add(&counts[ok ? 2 : 3], 1);
    if (!ok && !cu_attn_own_takes(a->op))
        return *st = td_error_set(TD_ERR_UNSUPPORTED, "attention_backward: cuDNN failed on strided operands (%s)",
                                  no ? no : "at run time"),
               true;
    return ok;
}
#undef PUSH
#endif
