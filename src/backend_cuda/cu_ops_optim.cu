/*
** Fused optimizer updates, in place: ADAM_STEP, SGD_STEP, RMSPROP_STEP,
** AMP_UNSCALE (the GradScaler's), and the multi-tensor Adam, SGD and unscale
** of cu_optim.h (references:
** src/backend_cpu/cpu_optim.c and cpu_optim.h, whose formulas these are).
**   in = (grad, lr?); out = (param, state..., Adam's step?, Adam's low?), each
**   contiguous [n] of one float dtype; absent state has buf == NULL. Adam's low
**   (f16 or bf16 beside an f32 param: autocast's shadow, core/shadow.c) takes
**   the updated param rounded to nearest even, stored with it. lr (0-d, f64 for
**   f64, else f32) and step (0-d f32, the steps done) are the capturable
**   optimizer's: read from device memory by each block (functor at()), so a
**   replayed graph sees the lr set since and counts t = step + 1; a second,
**   one-block launch then advances every step of the table (step = t), after
**   all blocks have read it.
** Every step runs optim_kernel over a table of up to OPT_MAX_TENSORS
** parameters (the kernel's argument): block b updates chunk b - first[i] of
** tensor i, chunk elements each. A single op is a table of one. Where all of a
** tensor's operands are 16-byte aligned, each thread moves 16 bytes of every
** operand per load/store. The scalar factors are computed on the host in
** double and rounded once to the compute type (float for f32/f16/bf16, double
** for f64), as the CPU does; f16/bf16 values load to float and store back
** rounded to nearest even.
*/
#include <math.h>
#include <string.h>

#include "cu_optim.h"
#include "cu_reduce.cuh"

#define OPT_MAX_TENSORS 48 /* tensors per launch: the table stays under the 4 KiB kernel-argument limit */
#define OPT_SLOTS       5  /* grad, param, state 1..3 */

/* Parameters of one launch: ptr[s][i] is slot s of tensor i (NULL when absent). */
typedef struct opt_table {
    void *ptr[OPT_SLOTS][OPT_MAX_TENSORS];
    int64_t n[OPT_MAX_TENSORS];     /* elements, > 0 */
    int first[OPT_MAX_TENSORS + 1]; /* first block of each tensor; first[count] = total */
    float *step[OPT_MAX_TENSORS];   /* Adam's step count on the device, or NULL */
    void *low[OPT_MAX_TENSORS];     /* Adam's low copy of an f32 param, or NULL */
    bool low_bf16[OPT_MAX_TENSORS]; /* low is bf16 (else f16) */
    int count;
    int64_t chunk; /* elements per block, a multiple of 16 */
} opt_table;

/* Device pointer of out[k] of op, or NULL when absent or not `used`. */
static void *opt_out(const td_op *op, int k, bool used) { return used && k < op->n_out ? cu_data(&op->out[k]) : NULL; }

/* The device lr of op (in[1]), or NULL when it has none. */
static const void *opt_lr(const td_op *op) { return op->n_in > 1 ? cu_data(&op->in[1]) : NULL; }

/* Adam's low output (out[5]), or NULL when absent */
static const td_operand *opt_low(const td_op *op) {
    return op->kind == TD_OP_ADAM_STEP && op->n_out > 5 && op->out[5].buf ? &op->out[5] : NULL;
}

/* every present output of out[0..3] of grad's size; out[0..n_state] (param
** and the states every step updates) present; a present lr or out[4] (step)
** of one element; a present low of grad's size, f16/bf16 beside an f32 param
** (dtypes: the dispatcher checked the rest) */
static bool opt_operands_ok(const td_op *op, int n_state) {
    const td_operand *low = opt_low(op);
    if ((op->n_in > 1 && op->in[1].buf && td_operand_numel(&op->in[1]) != 1) ||
        (op->n_out > 4 && op->out[4].buf && td_operand_numel(&op->out[4]) != 1) ||
        (low &&
         (op->out[0].dtype != TD_F32 || low->dtype == TD_F32 || td_operand_numel(low) != td_operand_numel(&op->in[0]))))
        return false;
    for (int i = 0; i < op->n_out && i < 4; i++) {
        const td_operand *o = &op->out[i];
        if ((i <= n_state && !o->buf) || (o->buf && td_operand_numel(o) != td_operand_numel(&op->in[0]))) return false;
    }
    return true;
}

/* ---- the updates: per element in the compute type C (operator()), and
** their host side: make (constants), same (hyper-parameters), supports,
** slots (grad, param, state 1..3 pointers), step (the device step count);
** and at(step): the constants from the device lr and step, where present ---- */

/* Adam/AdamW (torch.optim.Adam/AdamW, foreach=False), step t >= 1; states m, v, vmax:
**   g = maximize ? -grad : grad
**   g += wd * p                          (Adam's L2 penalty, !decoupled)
**   p *= 1 - lr * wd                     (AdamW, decoupled)
**   m = b1 * m + (1 - b1) * g
**   v = b2 * v + (1 - b2) * g * g
**   vmax = max(vmax, v)                  (amsgrad; then v below means vmax; NaN propagates)
**   p += -(lr / (1 - b1^t)) * (m / (sqrt(v) / sqrt(1 - b2^t) + eps)) */
template <typename C> struct opt_adam {
    C b1, one_b1, b2, one_b2, wd, decay, neg_step, bc2_sqrt, eps;
    bool l2, decoupled, amsgrad, maximize;
    const C *lr;                        /* device lr, or NULL */
    double lr_h, t_h, b1_d, b2_d, wd_d; /* params' lr and t, and the doubles at() rounds from */
    /* decay, neg_step and bc2_sqrt from lr = *lr and t = floor(*step) + 1 where
    ** present, in double and rounded once, as make() does on the host */
    __device__ opt_adam at(const float *step) const {
        opt_adam k = *this;
        if (!lr && !step) return k;
        double l = lr ? (double)*lr : lr_h, t = step ? floor((double)*step) + 1 : t_h;
        k.decay = (C)(1 - l * wd_d);
        k.neg_step = (C)(-l / (1 - pow(b1_d, t)));
        k.bc2_sqrt = (C)sqrt(1 - pow(b2_d, t));
        return k;
    }
    __device__ void operator()(C &p, C g, C &m, C &v, C &vmax) const {
        if (maximize) g = -g;
        if (l2) g += wd * p;
        if (decoupled) p *= decay;
        m = m * b1 + one_b1 * g;
        v = v * b2 + one_b2 * g * g;
        C vv = v;
        if (amsgrad) vv = vmax = (vmax != vmax || vmax > vv) ? vmax : vv;
        p = p + neg_step * (m / (sqrt(vv) / bc2_sqrt + eps));
    }
    static opt_adam make(const td_op *op) {
        const td_op_params *q = &op->p;
        double b1 = q->adam.beta1, b2 = q->adam.beta2, lr = q->adam.lr, wd = q->adam.weight_decay;
        double t = (double)q->adam.step;
        return {(C)b1,
                (C)(1 - b1),
                (C)b2,
                (C)(1 - b2),
                (C)wd,
                (C)(1 - lr * wd),
                (C)(-lr / (1 - pow(b1, t))),
                (C)sqrt(1 - pow(b2, t)),
                (C)q->adam.eps,
                wd != 0 && !q->adam.decoupled,
                q->adam.decoupled,
                q->adam.amsgrad,
                q->adam.maximize,
                (const C *)opt_lr(op),
                lr,
                t,
                b1,
                b2,
                wd};
    }
    static bool same(const td_op_params *a, const td_op_params *b) {
        return a->adam.lr == b->adam.lr && a->adam.beta1 == b->adam.beta1 && a->adam.beta2 == b->adam.beta2 &&
               a->adam.eps == b->adam.eps && a->adam.weight_decay == b->adam.weight_decay &&
               a->adam.step == b->adam.step && a->adam.decoupled == b->adam.decoupled &&
               a->adam.amsgrad == b->adam.amsgrad && a->adam.maximize == b->adam.maximize;
    }
    static bool supports(const td_op *op) { return opt_operands_ok(op, 2) && (!op->p.adam.amsgrad || op->out[3].buf); }
    static void slots(const td_op *op, void **s) {
        s[0] = cu_data(&op->in[0]), s[1] = opt_out(op, 0, true), s[2] = opt_out(op, 1, true);
        s[3] = opt_out(op, 2, true), s[4] = opt_out(op, 3, op->p.adam.amsgrad);
    }
    static float *step(const td_op *op) { return (float *)opt_out(op, 4, true); }
};

/* SGD (torch.optim.SGD, foreach=False); state buf when momentum != 0:
**   g = maximize ? -grad : grad;  g += wd * p
**   momentum != 0: buf = first_step ? g : momentum * buf + (1 - dampening) * g
**                  g = nesterov ? g + momentum * buf : buf
**   p += -lr * g */
template <typename C> struct opt_sgd {
    C neg_lr, momentum, one_damp, wd;
    bool has_buf, nesterov, first, maximize;
    const C *lr; /* device lr, or NULL */
    __device__ opt_sgd at(const float *) const {
        opt_sgd k = *this;
        if (lr) k.neg_lr = (C)(-(double)*lr);
        return k;
    }
    __device__ void operator()(C &p, C g, C &buf, C &, C &) const {
        if (maximize) g = -g;
        if (wd != 0) g += wd * p;
        if (has_buf) {
            buf = first ? g : buf * momentum + one_damp * g;
            g = nesterov ? g + momentum * buf : buf;
        }
        p = p + neg_lr * g;
    }
    static opt_sgd make(const td_op *op) {
        const td_op_params *q = &op->p;
        return {(C)-q->sgd.lr,          (C)q->sgd.momentum,   (C)(1 - q->sgd.dampening),
                (C)q->sgd.weight_decay, q->sgd.momentum != 0, q->sgd.nesterov,
                q->sgd.first_step,      q->sgd.maximize,      (const C *)opt_lr(op)};
    }
    static bool same(const td_op_params *a, const td_op_params *b) {
        return a->sgd.lr == b->sgd.lr && a->sgd.momentum == b->sgd.momentum && a->sgd.dampening == b->sgd.dampening &&
               a->sgd.weight_decay == b->sgd.weight_decay && a->sgd.nesterov == b->sgd.nesterov &&
               a->sgd.first_step == b->sgd.first_step && a->sgd.maximize == b->sgd.maximize;
    }
    static bool supports(const td_op *op) {
        return opt_operands_ok(op, 0) && (op->p.sgd.momentum == 0 || op->out[1].buf);
    }
    static void slots(const td_op *op, void **s) {
        s[0] = cu_data(&op->in[0]), s[1] = opt_out(op, 0, true), s[2] = opt_out(op, 1, op->p.sgd.momentum != 0);
        s[3] = s[4] = NULL;
    }
    static float *step(const td_op *) { return NULL; }
};

/* RMSprop (torch.optim.RMSprop, foreach=False); states sq, buf (momentum > 0), gavg (centered):
**   g = maximize ? -grad : grad;  g += wd * p
**   sq = alpha * sq + (1 - alpha) * g * g
**   centered: gavg = alpha * gavg + (1 - alpha) * g;  avg = sqrt(sq - gavg * gavg) + eps
**   else:     avg = sqrt(sq) + eps
**   momentum > 0: buf = momentum * buf + g / avg;  p += -lr * buf
**   else:         p += -lr * (g / avg) */
template <typename C> struct opt_rmsprop {
    C neg_lr, alpha, one_alpha, eps, wd, momentum;
    bool has_buf, centered, maximize;
    const C *lr; /* device lr, or NULL */
    __device__ opt_rmsprop at(const float *) const {
        opt_rmsprop k = *this;
        if (lr) k.neg_lr = (C)(-(double)*lr);
        return k;
    }
    __device__ void operator()(C &p, C g, C &sq, C &buf, C &gavg) const {
        if (maximize) g = -g;
        if (wd != 0) g += wd * p;
        sq = sq * alpha + one_alpha * g * g;
        C avg;
        if (centered) {
            gavg = gavg * alpha + one_alpha * g;
            avg = sqrt(sq - gavg * gavg) + eps;
        } else {
            avg = sqrt(sq) + eps;
        }
        if (has_buf) {
            buf = buf * momentum + g / avg;
            p = p + neg_lr * buf;
        } else {
            p = p + neg_lr * (g / avg);
        }
    }
    static opt_rmsprop make(const td_op *op) {
        const td_op_params *q = &op->p;
        double a = q->rmsprop.alpha;
        return {(C)-q->rmsprop.lr,
                (C)a,
                (C)(1 - a),
                (C)q->rmsprop.eps,
                (C)q->rmsprop.weight_decay,
                (C)q->rmsprop.momentum,
                q->rmsprop.momentum > 0,
                q->rmsprop.centered,
                q->rmsprop.maximize,
                (const C *)opt_lr(op)};
    }
    static bool same(const td_op_params *a, const td_op_params *b) {
        return a->rmsprop.lr == b->rmsprop.lr && a->rmsprop.alpha == b->rmsprop.alpha &&
               a->rmsprop.eps == b->rmsprop.eps && a->rmsprop.weight_decay == b->rmsprop.weight_decay &&
               a->rmsprop.momentum == b->rmsprop.momentum && a->rmsprop.centered == b->rmsprop.centered &&
               a->rmsprop.maximize == b->rmsprop.maximize;
    }
    static bool supports(const td_op *op) {
        return opt_operands_ok(op, 1) && (op->p.rmsprop.momentum <= 0 || op->out[2].buf) &&
               (!op->p.rmsprop.centered || op->out[3].buf);
    }
    static void slots(const td_op *op, void **s) {
        s[0] = cu_data(&op->in[0]), s[1] = opt_out(op, 0, true), s[2] = opt_out(op, 1, true);
        s[3] = opt_out(op, 2, op->p.rmsprop.momentum > 0), s[4] = opt_out(op, 3, op->p.rmsprop.centered);
    }
    static float *step(const td_op *) { return NULL; }
};

/* AMP_UNSCALE (the GradScaler's unscale; out = (grad, found_inf f32 [1]), in
** place; cpu_amp.c): found = 1 if grad is inf or NaN (checked before the
** product; every writer stores 1, so the race is benign); grad *= inv_scale.
** The ops of one batch share found_inf (td_amp_unscale_ passes one), so it
** travels in the functor, from ops[0]. The gradient takes the param slot. */
template <typename C> struct opt_unscale {
    C inv_scale;
    float *found;
    __device__ opt_unscale at(const float *) const { return *this; }
    __device__ void operator()(C &g, C, C &, C &, C &) const {
        if (!isfinite(g)) *found = 1.0f;
        g = g * inv_scale;
    }
    static opt_unscale make(const td_op *op) { return {(C)op->p.amp.inv_scale, (float *)cu_data(&op->out[1])}; }
    static bool same(const td_op_params *a, const td_op_params *b) { return a->amp.inv_scale == b->amp.inv_scale; }
    static bool supports(const td_op *op) { return op->out[1].buf && td_operand_numel(&op->out[1]) == 1; }
    static void slots(const td_op *op, void **s) {
        s[1] = opt_out(op, 0, true);
        s[0] = s[2] = s[3] = s[4] = NULL;
    }
    static float *step(const td_op *) { return NULL; }
};

static_assert(sizeof(opt_table) + sizeof(opt_adam<double>) <= 4096,
              "optim_kernel's arguments must fit the 4 KiB kernel-parameter limit");

/* ---- the kernel ---- */

/* low[j] = p rounded to bf16 or f16: the f32 param's low copy (other param types have none) */
template <typename C> __device__ __forceinline__ void opt_low_store(void *low, bool bf16, int64_t j, C p) {
    if (bf16)
        ((__nv_bfloat16 *)low)[j] = cu_from<__nv_bfloat16>((float)p);
    else
        ((__half *)low)[j] = cu_from<__half>((float)p);
}

/* Update element j of the slots (grad, param, states) through f; the param's low copy too. */
template <typename T, class F>
__device__ __forceinline__ void opt_elem(const F &f, T *const *ptr, void *low, bool bf16, int64_t j) {
    typedef typename cu_compute<T>::type C;
    C x[OPT_SLOTS];
#pragma unroll
    for (int s = 0; s < OPT_SLOTS; s++) x[s] = ptr[s] ? cu_to<C>(ptr[s][j]) : (C)0;
    f(x[1], x[0], x[2], x[3], x[4]);
#pragma unroll
    for (int s = 1; s < OPT_SLOTS; s++)
        if (ptr[s]) ptr[s][j] = cu_from<T>(x[s]);
    if (low) opt_low_store(low, bf16, j, x[1]);
}

/* Update vector v (16 bytes of every slot, all aligned) through f; the param's low copy (V
** elements, aligned) too. */
template <typename T, class F>
__device__ __forceinline__ void opt_vec(const F &f, T *const *ptr, void *low, bool bf16, int64_t v) {
    typedef typename cu_compute<T>::type C;
    const int V = cu_vec<T>::N;
    cu_vec<T> x[OPT_SLOTS];
#pragma unroll
    for (int s = 0; s < OPT_SLOTS; s++)
        if (ptr[s]) x[s] = ((const cu_vec<T> *)ptr[s])[v];
#pragma unroll
    for (int e = 0; e < V; e++) {
        C c[OPT_SLOTS];
#pragma unroll
        for (int s = 0; s < OPT_SLOTS; s++) c[s] = ptr[s] ? cu_to<C>(x[s].v[e]) : (C)0;
        f(c[1], c[0], c[2], c[3], c[4]);
#pragma unroll
        for (int s = 1; s < OPT_SLOTS; s++) x[s].v[e] = cu_from<T>(c[s]);
        if (low) opt_low_store(low, bf16, v * V + e, c[1]);
    }
#pragma unroll
    for (int s = 1; s < OPT_SLOTS; s++)
        if (ptr[s]) ((cu_vec<T> *)ptr[s])[v] = x[s];
}

/* tab: up to OPT_MAX_TENSORS tensors [n_i] of T; block b updates elements
** [c * chunk, (c + 1) * chunk) of tensor i, first[i] <= b < first[i+1], c = b - first[i] */
template <typename T, class F>
__global__ void __launch_bounds__(256) optim_kernel(const __grid_constant__ opt_table tab, const F f0) {
    int b = blockIdx.x, lo = 0, hi = tab.count - 1;
    while (lo < hi) { /* the last tensor whose first block is <= b */
        int mid = (lo + hi + 1) / 2;
        if (tab.first[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const F f = f0.at(tab.step[lo]);
    T *ptr[OPT_SLOTS];
    void *low = tab.low[lo];
    bool bf16 = tab.low_bf16[lo];
    uintptr_t align = 0;
#pragma unroll
    for (int s = 0; s < OPT_SLOTS; s++) ptr[s] = (T *)tab.ptr[s][lo], align |= (uintptr_t)ptr[s];
    int64_t start = (b - tab.first[lo]) * tab.chunk, end = start + tab.chunk;
    if (end > tab.n[lo]) end = tab.n[lo];
    const int V = cu_vec<T>::N;
    int64_t j0 = start;
    if (align % 16 == 0) { /* start is a multiple of V: whole vectors, then the tensor's tail */
        for (int64_t v = start / V + threadIdx.x; v < end / V; v += blockDim.x) opt_vec<T>(f, ptr, low, bf16, v);
        j0 = end / V * V;
    }
    for (int64_t j = j0 + threadIdx.x; j < end; j += blockDim.x) opt_elem<T>(f, ptr, low, bf16, j);
}

/* step[i] = t (the count read by optim_kernel, + 1) for each tensor i of tab
** that has a device step; one block, launched after optim_kernel */
__global__ void optim_step_kernel(const __grid_constant__ opt_table tab) {
    for (int i = threadIdx.x; i < tab.count; i += blockDim.x)
        if (tab.step[i]) *tab.step[i] += 1.0f;
}

/* ---- host ---- */

/* Launch f over the non-empty ops of dtype dt, OPT_MAX_TENSORS per table. */
template <typename T, template <typename> class F>
static td_status opt_launch(cu_dev *d, int n, const td_op *ops, td_dtype dt, const char *name) {
    F<typename cu_compute<T>::type> f = F<typename cu_compute<T>::type>::make(&ops[0]);
    for (int i = 0; i < n;) {
        opt_table tab;
        memset(&tab, 0, sizeof tab);
        int64_t total = 0;
        bool steps = false;
        for (; i < n && tab.count < OPT_MAX_TENSORS; i++) {
            int64_t numel = td_operand_numel(&ops[i].out[0]);
            if (ops[i].out[0].dtype != dt || numel == 0) continue;
            void *s[OPT_SLOTS];
            F<float>::slots(&ops[i], s);
            for (int k = 0; k < OPT_SLOTS; k++) tab.ptr[k][tab.count] = s[k];
            tab.step[tab.count] = F<float>::step(&ops[i]);
            const td_operand *low = opt_low(&ops[i]);
            tab.low[tab.count] = low ? cu_data(low) : NULL;
            tab.low_bf16[tab.count] = low && low->dtype == TD_BF16;
            steps = steps || tab.step[tab.count];
            tab.n[tab.count++] = numel;
            total += numel;
        }
        if (tab.count == 0) continue;
        /* chunks of 2048..65536 elements: about 8 blocks per SM over the table */
        int64_t want = total / (8 * (int64_t)d->sm_count);
        tab.chunk = want <= 2048 ? 2048 : want >= 65536 ? 65536 : (want + 2047) / 2048 * 2048;
        int64_t blocks = 0;
        for (int k = 0; k < tab.count; k++) {
            tab.first[k] = (int)blocks;
            blocks += (tab.n[k] + tab.chunk - 1) / tab.chunk;
        }
        if (blocks > INT32_MAX)
            return td_error_set(TD_ERR_UNSUPPORTED, "cuda %s: %lld elements in one table is more than a launch takes",
                                name, (long long)total);
        tab.first[tab.count] = (int)blocks;
        optim_kernel<T><<<(unsigned)blocks, 256, 0, d->stream>>>(tab, f);
        td_status st = CU_LAUNCHED(name);
        if (st == TD_OK && steps) {
            optim_step_kernel<<<1, OPT_MAX_TENSORS, 0, d->stream>>>(tab);
            st = CU_LAUNCHED(name);
        }
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* Check every op (kind, operands, the hyper-parameters of ops[0]) before
** launching anything, then run each run of ops with one device lr (or none),
** each dtype present. */
template <template <typename> class F>
static td_status opt_run(cu_dev *d, int n, const td_op *ops, td_op_kind kind, const char *name) {
    if (n < 0 || (n > 0 && !ops))
        return td_error_set(TD_ERR_MISUSE, "cuda %s: %d ops%s", name, n, ops ? "" : " and ops NULL");
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != kind)
            return td_error_set(TD_ERR_MISUSE, "cuda %s: op %d is %s, not %s", name, i, td_op_name(ops[i].kind),
                                td_op_name(kind));
        if (!F<float>::supports(&ops[i]))
            return td_error_set(TD_ERR_UNSUPPORTED,
                                "cuda %s: op %d has operands the kernel does not take (dtype %s, %d outputs)", name, i,
                                td_dtype_name(ops[i].out[0].dtype), ops[i].n_out);
        if (!F<float>::same(&ops[i].p, &ops[0].p))
            return td_error_set(TD_ERR_MISUSE, "cuda %s: op %d has other hyper-parameters than op 0", name, i);
    }
    const td_dtype dts[4] = {TD_F32, TD_F64, TD_F16, TD_BF16};
    for (int a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && opt_lr(&ops[b]) == opt_lr(&ops[a]);) b++;
        for (int k = 0; k < 4; k++) {
            td_status st = TD_OK;
            CU_SWITCH_FLOAT(dts[k], st = (opt_launch<T, F>(d, b - a, ops + a, dts[k], name)));
            if (st != TD_OK) return st;
        }
    }
    return TD_OK;
}

extern "C" td_status cu_adam_step_multi(cu_dev *d, int n, const td_op *ops) {
    return opt_run<opt_adam>(d, n, ops, TD_OP_ADAM_STEP, "adam_step");
}
extern "C" td_status cu_sgd_step_multi(cu_dev *d, int n, const td_op *ops) {
    return opt_run<opt_sgd>(d, n, ops, TD_OP_SGD_STEP, "sgd_step");
}

extern "C" td_status cu_amp_unscale_multi(cu_dev *d, int n, const td_op *ops) {
    for (int i = 1; i < n; i++)
        if (ops[i].out[1].buf != ops[0].out[1].buf || ops[i].out[1].offset != ops[0].out[1].offset)
            return td_error_set(TD_ERR_MISUSE, "cuda amp_unscale: op %d has another found_inf than op 0", i);
    return opt_run<opt_unscale>(d, n, ops, TD_OP_AMP_UNSCALE, "amp_unscale");
}
CU_SUPPORTS(AMP_UNSCALE) { return opt_unscale<float>::supports(op); }
extern "C" td_status cu_op_AMP_UNSCALE(cu_dev *d, const td_op *op) { return cu_amp_unscale_multi(d, 1, op); }

CU_SUPPORTS(ADAM_STEP) { return opt_adam<float>::supports(op); }
extern "C" td_status cu_op_ADAM_STEP(cu_dev *d, const td_op *op) { return cu_adam_step_multi(d, 1, op); }
CU_SUPPORTS(SGD_STEP) { return opt_sgd<float>::supports(op); }
extern "C" td_status cu_op_SGD_STEP(cu_dev *d, const td_op *op) { return cu_sgd_step_multi(d, 1, op); }
CU_SUPPORTS(RMSPROP_STEP) { return opt_rmsprop<float>::supports(op); }
extern "C" td_status cu_op_RMSPROP_STEP(cu_dev *d, const td_op *op) {
    return opt_run<opt_rmsprop>(d, 1, op, TD_OP_RMSPROP_STEP, "rmsprop_step");
}
