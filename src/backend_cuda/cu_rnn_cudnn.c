/*
** RNN, LSTM and GRU on cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8),
** the entry points src/nn/rnn_cudnn.c finds with td_backend_symbol; the contract is include/trident/rnn_cudnn.h. cuDNN is
** the library cu_cudnn.c loads (dlopen at first use, the per-device handle); the RNN symbols are resolved here from
** libcudnn.so.9, whose cuDNN 9 shim forwards them to libcudnn_adv.so.9.
** Letters: T steps, B batch, I input, H hidden, L layers, D directions, G gates.
** Per configuration (device, mode, L, D, bias, TF32, T, B, I, H) a plan is made once and cached: the RNN descriptor
** (standard algo, float32 data and math, CUDNN_FMA_MATH: strict fp32, or CUDNN_DEFAULT_MATH (TF32 tensor cores)
** where the args allow TF32; linear input;
** dropout 0), the x/y RNN-data descriptors (sequence-major, every length T), the h/c tensor descriptors
** [L*D, B, H], the sequence lengths on the device (uploaded once), the weight-space, workspace and reserve sizes,
** and the copy list between torch's parameters and cuDNN's weight space.
** Weight space: per pseudo-layer (l*D + d) cuDNN keeps G input matrices [H, in] (linLayerID 0..G-1), G recurrent
** ones [H, H] (G..2G-1) and their bias vectors [H]. Its gate order equals torch's: LSTM i, f, g (cuDNN's "new
** memory" c'), o; GRU r, z, n (h'); RNN the one. So torch's weight_ih [G*H, in] is the G input matrices stacked,
** weight_hh the recurrent ones, bias_ih and bias_hh the two bias sets (cuDNN's double bias). The copy list has one
** entry per (parameter, gate), merged where both sides are contiguous (usually one copy per parameter). The
** forward packs with cudaMemcpyAsync (device to device, on the stream); the backward unpacks dw the same way.
** The backward: BackwardData (dx, dhx, dcx; it rewrites the reserve space, so a forward serves one backward), then
** BackwardWeights into dw, zeroed first (cuDNN only adds: CUDNN_WGRAD_MODE_ADD).
** Workspace comes from the plugin's stream-ordered scratch. Plans are not built while capturing a CUDA graph;
** a plan built before runs inside the capture.
*/
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cu_cudnn.h"
#include "trident/rnn_cudnn.h"

/* cuDNN forward calls, backward calls: for tests (td_cuda_rnn_counts) */
static _Atomic int64_t counts[2];

__attribute__((visibility("default"))) void td_cuda_rnn_counts(int64_t out[2]) {
    for (int i = 0; i < 2; i++) out[i] = atomic_load(&counts[i]);
}

#ifndef TRIDENT_HAVE_CUDNN
__attribute__((visibility("default"))) td_status td_cuda_rnn_prepare(const td_rnn_dnn_args *a, size_t *wbytes,
                                                                     size_t *reserve_bytes) {
    (void)a, (void)wbytes, (void)reserve_bytes;
    return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: the plugin was built without cuDNN's headers");
}

__attribute__((visibility("default"))) td_status td_cuda_rnn_forward(const td_rnn_dnn_args *a,
                                                                     const td_rnn_dnn_ptrs *p) {
    (void)a, (void)p;
    return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: the plugin was built without cuDNN's headers");
}

__attribute__((visibility("default"))) td_status td_cuda_rnn_backward(const td_rnn_dnn_args *a,
                                                                      const td_rnn_dnn_ptrs *p) {
    (void)a, (void)p;
    return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: the plugin was built without cuDNN's headers");
}
#else
#include <cudnn_adv.h>
#include <dlfcn.h>
#include <stdlib.h>

/* ---- the RNN entry points ---- */
static struct {
    cudnnStatus_t (*create_rnn)(cudnnRNNDescriptor_t *);
    cudnnStatus_t (*set_rnn)(cudnnRNNDescriptor_t, cudnnRNNAlgo_t, cudnnRNNMode_t, cudnnRNNBiasMode_t,
                             cudnnDirectionMode_t, cudnnRNNInputMode_t, cudnnDataType_t, cudnnDataType_t,
                             cudnnMathType_t, int32_t, int32_t, int32_t, int32_t, cudnnDropoutDescriptor_t, uint32_t);
    cudnnStatus_t (*create_data)(cudnnRNNDataDescriptor_t *);
    cudnnStatus_t (*set_data)(cudnnRNNDataDescriptor_t, cudnnDataType_t, cudnnRNNDataLayout_t, int, int, int,
                              const int[], void *);
    cudnnStatus_t (*create_tensor)(cudnnTensorDescriptor_t *);
    cudnnStatus_t (*set_tensor)(cudnnTensorDescriptor_t, cudnnDataType_t, int, const int[], const int[]);
    cudnnStatus_t (*destroy_tensor)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*create_dropout)(cudnnDropoutDescriptor_t *);
    cudnnStatus_t (*set_dropout)(cudnnDropoutDescriptor_t, cudnnHandle_t, float, void *, size_t, unsigned long long);
    cudnnStatus_t (*weight_space_size)(cudnnHandle_t, cudnnRNNDescriptor_t, size_t *);
    cudnnStatus_t (*temp_sizes)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnForwardMode_t, cudnnRNNDataDescriptor_t,
                                size_t *, size_t *);
    cudnnStatus_t (*weight_params)(cudnnHandle_t, cudnnRNNDescriptor_t, int32_t, size_t, const void *, int32_t,
                                   cudnnTensorDescriptor_t, void **, cudnnTensorDescriptor_t, void **);
    cudnnStatus_t (*forward)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnForwardMode_t, const int32_t[],
                             cudnnRNNDataDescriptor_t, const void *, cudnnRNNDataDescriptor_t, void *,
                             cudnnTensorDescriptor_t, const void *, void *, cudnnTensorDescriptor_t, const void *,
                             void *, size_t, const void *, size_t, void *, size_t, void *);
    cudnnStatus_t (*backward_data)(cudnnHandle_t, cudnnRNNDescriptor_t, const int32_t[], cudnnRNNDataDescriptor_t,
                                   const void *, const void *, cudnnRNNDataDescriptor_t, void *,
                                   cudnnTensorDescriptor_t, const void *, const void *, void *, cudnnTensorDescriptor_t,
                                   const void *, const void *, void *, size_t, const void *, size_t, void *, size_t,
                                   void *);
    cudnnStatus_t (*backward_weights)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnWgradMode_t, const int32_t[],
                                      cudnnRNNDataDescriptor_t, const void *, cudnnTensorDescriptor_t, const void *,
                                      cudnnRNNDataDescriptor_t, const void *, size_t, void *, size_t, void *, size_t,
                                      void *);
} R;
static const char *rnn_why = "not loaded";
static char rnn_msg[256];
static pthread_once_t rnn_once = PTHREAD_ONCE_INIT;

static void load_rnn(void) {
    const char *why;
    if (!cu_dnn_load(&why)) {
        snprintf(rnn_msg, sizeof rnn_msg, "%s", why);
        rnn_why = rnn_msg;
        return;
    }
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL); /* loaded already: a second reference */
    if (!lib) {
        snprintf(rnn_msg, sizeof rnn_msg, "dlopen libcudnn.so.9 (the RNN API): %s", dlerror());
        rnn_why = rnn_msg;
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&R.create_rnn, "cudnnCreateRNNDescriptor"},
        {(void **)&R.set_rnn, "cudnnSetRNNDescriptor_v8"},
        {(void **)&R.create_data, "cudnnCreateRNNDataDescriptor"},
        {(void **)&R.set_data, "cudnnSetRNNDataDescriptor"},
        {(void **)&R.create_tensor, "cudnnCreateTensorDescriptor"},
        {(void **)&R.set_tensor, "cudnnSetTensorNdDescriptor"},
        {(void **)&R.destroy_tensor, "cudnnDestroyTensorDescriptor"},
        {(void **)&R.create_dropout, "cudnnCreateDropoutDescriptor"},
        {(void **)&R.set_dropout, "cudnnSetDropoutDescriptor"},
        {(void **)&R.weight_space_size, "cudnnGetRNNWeightSpaceSize"},
        {(void **)&R.temp_sizes, "cudnnGetRNNTempSpaceSizes"},
        {(void **)&R.weight_params, "cudnnGetRNNWeightParams"},
        {(void **)&R.forward, "cudnnRNNForward"},
        {(void **)&R.backward_data, "cudnnRNNBackwardData_v8"},
        {(void **)&R.backward_weights, "cudnnRNNBackwardWeights_v8"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(lib, syms[i].name))) {
            snprintf(rnn_msg, sizeof rnn_msg, "cuDNN has no symbol %s", syms[i].name);
            rnn_why = rnn_msg;
            return;
        }
    rnn_why = NULL;
}

/* ---- plans ---- */

/* One run of bytes between parameter param (at byte src) and the weight space (at byte dst). */
typedef struct wcopy {
    int param;
    size_t src, dst, bytes;
} wcopy;

typedef struct rnn_plan {
    td_rnn_dnn_args key; /* training cleared: one plan serves both */
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    int32_t *seq; /* device [B], every entry T */
    size_t wbytes, ws_train, ws_infer, reserve;
    wcopy *copies;
    int ncopies;
    td_status failed; /* TD_OK, or cuDNN refused the configuration: the error, kept with its message */
    char err[512];
} rnn_plan;

#define PLANS 32
static rnn_plan *plans[PLANS];
static int nplans;
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER; /* the device's handle runs one call at a time */

static td_status dnn_fail(cudnnStatus_t s, const char *what) {
    char buf[512];
    cu_dnn_describe(s, what, buf, sizeof buf);
    return td_error_set(s == CUDNN_STATUS_NOT_SUPPORTED ? TD_ERR_UNSUPPORTED : TD_ERR_DEVICE, "cuDNN RNN: %s", buf);
}

#define DNN(call)                                                                                                      \
    do {                                                                                                               \
        cudnnStatus_t dnn_s_ = (call);                                                                                 \
        if (dnn_s_ != CUDNN_STATUS_SUCCESS) return dnn_fail(dnn_s_, #call);                                            \
    } while (0)

static int gates_of(int mode) { return mode == TD_RNN_DNN_LSTM ? 4 : mode == TD_RNN_DNN_GRU ? 3 : 1; }

/* Append (param, src, dst, bytes), merged into the previous entry when it continues it on both sides. */
static void add_copy(rnn_plan *p, int param, size_t src, size_t dst, size_t bytes) {
    wcopy *last = p->ncopies ? &p->copies[p->ncopies - 1] : NULL;
    if (last && last->param == param && last->src + last->bytes == src && last->dst + last->bytes == dst) {
        last->bytes += bytes;
        return;
    }
    p->copies[p->ncopies++] = (wcopy){param, src, dst, bytes};
}

/* The copy list: where each gate's matrix and bias of each parameter lies in the weight space. ws is a weight space
** of p->wbytes (its addresses only are used). */
static td_status map_weights(cudnnHandle_t h, rnn_plan *p, const char *ws) {
    const td_rnn_dnn_args *a = &p->key;
    int G = gates_of(a->mode), per = a->bias ? 4 : 2;
    p->copies = malloc(sizeof(wcopy) * (size_t)(a->layers * a->dirs * per * G));
    if (!p->copies) return td_error_set(TD_ERR_OOM, "cuDNN RNN: out of host memory");
    cudnnTensorDescriptor_t md = NULL, bd = NULL;
    DNN(R.create_tensor(&md));
    cudnnStatus_t s = R.create_tensor(&bd);
    for (int l = 0; l < a->layers && s == CUDNN_STATUS_SUCCESS; l++)
        for (int d = 0; d < a->dirs && s == CUDNN_STATUS_SUCCESS; d++) {
            int pl = l * a->dirs + d, base = pl * per;
            size_t in = (size_t)(l ? a->dirs * a->H : a->I), H = (size_t)a->H;
            for (int k = 0; k < per && s == CUDNN_STATUS_SUCCESS; k++) /* w_ih, w_hh, b_ih, b_hh */
                for (int g = 0; g < G && s == CUDNN_STATUS_SUCCESS; g++) {
                    void *m = NULL, *b = NULL;
                    int hh = k & 1; /* the recurrent half: linLayerID G..2G-1 */
                    s = R.weight_params(h, p->rnn, pl, p->wbytes, ws, hh * G + g, md, &m, bd, &b);
                    size_t bytes = H * (k >= 2 ? 1 : hh ? H : in) * sizeof(float);
                    if (s == CUDNN_STATUS_SUCCESS)
                        add_copy(p, base + k, g * bytes, (size_t)((k >= 2 ? (char *)b : (char *)m) - ws), bytes);
                }
        }
    R.destroy_tensor(md);
    if (bd) R.destroy_tensor(bd);
    return s == CUDNN_STATUS_SUCCESS ? TD_OK : dnn_fail(s, "cudnnGetRNNWeightParams");
}

/* Build p's descriptors and sizes on device d's handle h. */
static td_status build(cu_dev *d, cudnnHandle_t h, rnn_plan *p) {
    const td_rnn_dnn_args *a = &p->key;
    static const cudnnRNNMode_t modes[] = {CUDNN_RNN_TANH, CUDNN_RNN_RELU, CUDNN_LSTM, CUDNN_GRU};
    if (a->T > INT32_MAX || a->B > INT32_MAX || a->I > INT32_MAX || a->H > INT32_MAX ||
        a->layers * a->dirs * a->B * a->H > INT32_MAX)
        return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: sizes beyond int32");
    DNN(R.create_dropout(&p->drop));
    DNN(R.set_dropout(p->drop, h, 0.0f, NULL, 0, 0));
    DNN(R.create_rnn(&p->rnn));
    DNN(R.set_rnn(p->rnn, CUDNN_RNN_ALGO_STANDARD, modes[a->mode], a->bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                  a->dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                  CUDNN_DATA_FLOAT, a->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH, (int32_t)a->I, (int32_t)a->H,
                  (int32_t)a->H, a->layers, p->drop, CUDNN_RNN_PADDED_IO_DISABLED));
    int B = (int)a->B, T = (int)a->T;
    int *lens = malloc(sizeof(int) * (size_t)B);
    if (!lens) return td_error_set(TD_ERR_OOM, "cuDNN RNN: out of host memory");
    for (int b = 0; b < B; b++) lens[b] = T;
    cudnnStatus_t s = R.create_data(&p->xd);
    if (s == CUDNN_STATUS_SUCCESS)
        s = R.set_data(p->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, (int)a->I, lens, NULL);
    if (s == CUDNN_STATUS_SUCCESS) s = R.create_data(&p->yd);
    if (s == CUDNN_STATUS_SUCCESS)
        s = R.set_data(p->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B, (int)(a->dirs * a->H),
                       lens, NULL);
    td_status st = TD_OK;
    if (s == CUDNN_STATUS_SUCCESS) { /* the lengths on the device, once (a plan is never built while capturing) */
        st = cu_status(cudaMalloc((void **)&p->seq, sizeof(int32_t) * (size_t)B), "cudaMalloc (cuDNN RNN lengths)");
        if (st == TD_OK)
            st = cu_status(cudaMemcpy(p->seq, lens, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice),
                           "cudaMemcpy (cuDNN RNN lengths)");
    }
    free(lens);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, "cudnnSetRNNDataDescriptor");
    if (st != TD_OK) return st;
    int dims[3] = {a->layers * a->dirs, B, (int)a->H}, strides[3] = {B * (int)a->H, (int)a->H, 1};
    DNN(R.create_tensor(&p->hd));
    DNN(R.set_tensor(p->hd, CUDNN_DATA_FLOAT, 3, dims, strides));
    DNN(R.weight_space_size(h, p->rnn, &p->wbytes));
    DNN(R.temp_sizes(h, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd, &p->ws_train, &p->reserve));
    size_t unused;
    DNN(R.temp_sizes(h, p->rnn, CUDNN_FWD_MODE_INFERENCE, p->xd, &p->ws_infer, &unused));
    void *ws = NULL;
    if ((st = cu_temp_alloc(d, p->wbytes, &ws)) != TD_OK) return st;
    st = map_weights(h, p, ws);
    cu_temp_free(d, ws);
    return st;
}

/* Field by field: the struct has padding. */
static bool same_key(const td_rnn_dnn_args *x, const td_rnn_dnn_args *y) {
    return x->device == y->device && x->mode == y->mode && x->layers == y->layers && x->dirs == y->dirs &&
           x->bias == y->bias && x->tf32 == y->tf32 && x->T == y->T && x->B == y->B && x->I == y->I && x->H == y->H;
}

/* The cached plan of a on device d, made on first use: NULL with the error set. */
static rnn_plan *get_plan(cu_dev *d, const td_rnn_dnn_args *a, cudnnHandle_t *h) {
    td_rnn_dnn_args key = *a;
    key.training = 0;
    char why[512];
    if (!(*h = cu_dnn_handle(d, why, sizeof why))) return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: %s", why), NULL;
    pthread_mutex_lock(&plans_lock);
    rnn_plan *p = NULL;
    for (int i = 0; i < nplans && !p; i++)
        if (same_key(&plans[i]->key, &key)) p = plans[i];
    if (p && p->failed != TD_OK) { /* refused before: the same error, without trying again */
        td_error_set(p->failed, "%s", p->err);
        p = NULL;
    } else if (!p && d->capturing) {
        td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: no plan for this shape yet, and none is built while capturing");
    } else if (!p && nplans == PLANS) {
        td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: the plan cache holds %d configurations already", PLANS);
    } else if (!p && (p = calloc(1, sizeof *p))) {
        p->key = key;
        plans[nplans++] = p;
        if (build(d, *h, p) != TD_OK) { /* kept as refused; its descriptors stay with it */
            p->failed = td_last_status();
            snprintf(p->err, sizeof p->err, "%s", td_last_error());
            p = NULL;
        }
    } else if (!p) {
        td_error_set(TD_ERR_OOM, "cuDNN RNN: out of host memory");
    }
    pthread_mutex_unlock(&plans_lock);
    return p;
}

static td_status checked(const td_rnn_dnn_args *a, cu_dev **d) {
    if (a->mode < TD_RNN_DNN_TANH || a->mode > TD_RNN_DNN_GRU || a->dirs < 1 || a->dirs > 2 || a->layers < 1)
        return td_error_set(TD_ERR_MISUSE, "cuDNN RNN: bad configuration");
    pthread_once(&rnn_once, load_rnn);
    if (rnn_why) return td_error_set(TD_ERR_UNSUPPORTED, "cuDNN RNN: %s", rnn_why);
    if (!(*d = cu_get(a->device))) return TD_ERR_UNAVAILABLE;
    return TD_OK;
}

__attribute__((visibility("default"))) td_status td_cuda_rnn_prepare(const td_rnn_dnn_args *a, size_t *wbytes,
                                                                     size_t *reserve_bytes) {
    cu_dev *d = NULL;
    cudnnHandle_t h;
    td_status st = checked(a, &d);
    if (st != TD_OK) return st;
    rnn_plan *p = get_plan(d, a, &h);
    if (!p) return td_last_status();
    *wbytes = p->wbytes;
    *reserve_bytes = a->training ? p->reserve : 0;
    return TD_OK;
}

/* Device-to-device copies of the list: pack (params -> w) or unpack (w -> dparams). */
static td_status copy_weights(cu_dev *d, const rnn_plan *p, char *w, const void *const *params, void *const *dparams) {
    for (int i = 0; i < p->ncopies; i++) {
        const wcopy *c = &p->copies[i];
        void *dst = params ? (void *)(w + c->dst) : (void *)((char *)dparams[c->param] + c->src);
        const void *src = params ? (const void *)((const char *)params[c->param] + c->src) : (const void *)(w + c->dst);
        CU_TRY(cudaMemcpyAsync(dst, src, c->bytes, cudaMemcpyDeviceToDevice, d->stream));
    }
    return TD_OK;
}

__attribute__((visibility("default"))) td_status td_cuda_rnn_forward(const td_rnn_dnn_args *a,
                                                                     const td_rnn_dnn_ptrs *x) {
    cu_dev *d = NULL;
    cudnnHandle_t h;
    td_status st = checked(a, &d);
    if (st != TD_OK) return st;
    rnn_plan *p = get_plan(d, a, &h);
    if (!p) return td_last_status();
    if ((st = copy_weights(d, p, x->w, x->params, NULL)) != TD_OK) return st;
    size_t wsb = a->training ? p->ws_train : p->ws_infer;
    void *ws = NULL;
    if (wsb && (st = cu_temp_alloc(d, wsb, &ws)) != TD_OK) return st;
    pthread_mutex_lock(&exec_lock);
    cudnnStatus_t s = cu_dnn_load(NULL)->set_stream(h, d->stream);
    bool lstm = a->mode == TD_RNN_DNN_LSTM;
    if (s == CUDNN_STATUS_SUCCESS)
        s = R.forward(h, p->rnn, a->training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, p->seq, p->xd, x->x,
                      p->yd, x->y, p->hd, x->hx, x->hy, p->hd, lstm ? x->cx : NULL, lstm ? x->cy : NULL, p->wbytes,
                      x->w, wsb, ws, a->training ? p->reserve : 0, a->training ? x->reserve : NULL);
    pthread_mutex_unlock(&exec_lock);
    if (ws) cu_temp_free(d, ws);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, "cudnnRNNForward");
    atomic_fetch_add(&counts[0], 1);
    return CU_LAUNCHED("cudnnRNNForward");
}

__attribute__((visibility("default"))) td_status td_cuda_rnn_backward(const td_rnn_dnn_args *a,
                                                                      const td_rnn_dnn_ptrs *x) {
    cu_dev *d = NULL;
    cudnnHandle_t h;
    td_status st = checked(a, &d);
    if (st != TD_OK) return st;
    rnn_plan *p = get_plan(d, a, &h);
    if (!p) return td_last_status();
    if (!a->training) return td_error_set(TD_ERR_MISUSE, "cuDNN RNN: a backward needs a training forward");
    void *ws = NULL;
    if (p->ws_train && (st = cu_temp_alloc(d, p->ws_train, &ws)) != TD_OK) return st;
    st = cu_status(cudaMemsetAsync(x->dw, 0, p->wbytes, d->stream), "cudaMemsetAsync (cuDNN RNN dw)");
    bool lstm = a->mode == TD_RNN_DNN_LSTM;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    const char *what = "cudnnSetStream";
    if (st == TD_OK) {
        pthread_mutex_lock(&exec_lock);
        s = cu_dnn_load(NULL)->set_stream(h, d->stream);
        /* data first: it leaves in the reserve space what the weight gradient reads */
        if (s == CUDNN_STATUS_SUCCESS)
            what = "cudnnRNNBackwardData_v8",
            s = R.backward_data(h, p->rnn, p->seq, p->yd, x->y, x->dy, p->xd, x->dx, p->hd, x->hx, x->dhy, x->dhx,
                                p->hd, lstm ? x->cx : NULL, lstm ? x->dcy : NULL, lstm ? x->dcx : NULL, p->wbytes, x->w,
                                p->ws_train, ws, p->reserve, x->reserve);
        if (s == CUDNN_STATUS_SUCCESS)
            what = "cudnnRNNBackwardWeights_v8",
            s = R.backward_weights(h, p->rnn, CUDNN_WGRAD_MODE_ADD, p->seq, p->xd, x->x, p->hd, x->hx, p->yd, x->y,
                                   p->wbytes, x->dw, p->ws_train, ws, p->reserve, x->reserve);
        pthread_mutex_unlock(&exec_lock);
    }
    if (ws) cu_temp_free(d, ws);
    if (st != TD_OK) return st;
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, what);
    if ((st = CU_LAUNCHED("cudnnRNNBackward")) != TD_OK) return st;
    atomic_fetch_add(&counts[1], 1);
    return copy_weights(d, p, x->dw, NULL, x->dparams);
}
#endif
