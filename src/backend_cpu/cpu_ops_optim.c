/*
** The CPU backend's optimizer ops: the ADAM/SGD/RMSPROP steps and AMP_UNSCALE.
*/
#include <math.h>

#include "cpu.h"
#include "cpu_convert.h"
#include "cpu_optim.h"

/*
** Fused optimizer updates, in place: ADAM_STEP, SGD_STEP, RMSPROP_STEP.
** in = (grad, lr?); out = (param, state..., Adam's step?, Adam's low?), all contiguous [n]
** of one float dtype; absent optional state has buf == NULL. A present lr (0-d,
** f64 for f64, else f32) replaces params' lr; a present step (0-d f32, the
** steps done) replaces params' step with step + 1 and is advanced after the
** update: the constants come from them exactly as from params, so the
** capturable optimizer's path equals the host one. f32 computes in float (Adam with
** AVX2 when the CPU has it), f64 in double, f16/bf16 load to float and store
** back rounded; Adam's low (f16/bf16 beside an f32 param, autocast's shadow)
** takes each block of the updated param rounded, while it is in cache. Adam's
** formula is in cpu_optim.h; SGD and RMSprop are below.
** Elements are independent, so the work is split into blocks over threads.
*/

#define BLOCK 4096

/* Pointer to element 0 of an optional operand, or NULL when absent. */
static void *opt_ptr(const td_operand *v) { return v->buf ? cpu_ptr(v) : NULL; }

/* The lr read from in[1] into *lr when the op has one (else *lr unchanged). */
static void device_lr(const td_op *op, double *lr) {
    if (op->n_in < 2 || !op->in[1].buf) return;
    const void *x = cpu_ptr(&op->in[1]);
    *lr = op->in[1].dtype == TD_F64 ? *(const double *)x : (double)*(const float *)x;
}

/* Run ELEM(i) for i in [0, n) over threads; f16/bf16 operands go through
** float locals named like the arrays. */
#define FOR_ELEMENTS_(n, ...)                                                                                          \
    do {                                                                                                               \
        int nt_ = cpu_threads_for((n), 16);                                                                            \
        _Pragma("omp parallel for num_threads(nt_)") for (int64_t i = 0; i < (n); i++) { __VA_ARGS__; }                \
    } while (0)

/* Load element i of an optional half array into float x (0 when absent). */
#define LOAD_(TO_F, arr, i) ((arr) ? TO_F(((const uint16_t *)(arr))[i]) : 0.0f)
#define STORE_(FROM_F, arr, i, x)                                                                                      \
    do {                                                                                                               \
        if (arr) ((uint16_t *)(arr))[i] = FROM_F(x);                                                                   \
    } while (0)

/* ---- Adam ---- */

#define ADAM_HALF_(TO_F, FROM_F)                                                                                       \
    FOR_ELEMENTS_(n, {                                                                                                 \
        float pf = LOAD_(TO_F, p, i), mf = LOAD_(TO_F, m, i), vf = LOAD_(TO_F, v, i), xf = LOAD_(TO_F, vmax, i);       \
        pf = cpu_adam_elem_float(pf, LOAD_(TO_F, g, i), &mf, &vf, &xf, &kf);                                           \
        STORE_(FROM_F, p, i, pf);                                                                                      \
        STORE_(FROM_F, m, i, mf);                                                                                      \
        STORE_(FROM_F, v, i, vf);                                                                                      \
        STORE_(FROM_F, vmax, i, xf);                                                                                   \
    })

static td_status adam_run(const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    void *p = cpu_ptr(&op->out[0]), *m = cpu_ptr(&op->out[1]), *v = cpu_ptr(&op->out[2]), *vmax = opt_ptr(&op->out[3]);
    const void *g = cpu_ptr(&op->in[0]);
    cpu_adam_k_float kf = cpu_adam_consts_float(op);
    const td_operand *low = op->n_out > 5 && op->out[5].buf ? &op->out[5] : NULL;
    switch (op->out[0].dtype) {
    case TD_F32: {
        bool avx2 = __builtin_cpu_supports("avx2");
        uint16_t *lo = low ? cpu_ptr(low) : NULL;
        int nt = cpu_threads_for(n, 16);
#pragma omp parallel for num_threads(nt)
        for (int64_t b = 0; b < n; b += BLOCK) {
            int64_t len = n - b < BLOCK ? n - b : BLOCK;
            float *pb = (float *)p + b, *mb = (float *)m + b, *vb = (float *)v + b,
                  *xb = vmax ? (float *)vmax + b : NULL;
            const float *gb = (const float *)g + b;
            if (avx2)
                cpu_adam_f32_avx2(len, pb, gb, mb, vb, xb, &kf);
            else
                for (int64_t i = 0; i < len; i++)
                    pb[i] = cpu_adam_elem_float(pb[i], gb[i], &mb[i], &vb[i], xb ? &xb[i] : NULL, &kf);
            if (lo) cpu_f32_to_half(low->dtype, len, lo + b, pb, false);
        }
        break;
    }
    case TD_F64: {
        cpu_adam_k_double kd = cpu_adam_consts_double(op);
        double *pd = p, *md = m, *vd = v, *xd = vmax;
        const double *gd = g;
        FOR_ELEMENTS_(n, pd[i] = cpu_adam_elem_double(pd[i], gd[i], &md[i], &vd[i], xd ? &xd[i] : NULL, &kd));
        break;
    }
    case TD_F16: ADAM_HALF_(cpu_f16_to_f32, cpu_f32_to_f16); break;
    case TD_BF16: ADAM_HALF_(cpu_bf16_to_f32, cpu_f32_to_bf16); break;
    default: return td_error_set(TD_ERR_UNSUPPORTED, "adam_step: dtype %s", td_dtype_name(op->out[0].dtype));
    }
    return TD_OK;
}

/* The update with params' lr and step replaced by the device's: t = floor(step) + 1, then step += 1. */
td_status cpu_op_ADAM_STEP(const td_op *op) {
    if (op->n_out > 5 && op->out[5].buf && (op->out[0].dtype != TD_F32 || op->out[5].dtype == TD_F32))
        return td_error_set(TD_ERR_UNSUPPORTED, "adam_step: a %s low copy of a %s param",
                            td_dtype_name(op->out[5].dtype), td_dtype_name(op->out[0].dtype));
    td_op o = *op;
    device_lr(op, &o.p.adam.lr);
    float *step = op->n_out > 4 ? opt_ptr(&op->out[4]) : NULL;
    if (step) o.p.adam.step = (int64_t)floorf(*step) + 1;
    td_status st = adam_run(&o);
    if (st == TD_OK && step) *step += 1.0f;
    return st;
}

/* ---- SGD (torch.optim.SGD, foreach=False) ----
**   g = maximize ? -grad : grad;  g += wd * p
**   momentum != 0: buf = first_step ? g : momentum * buf + (1 - dampening) * g
**                  g = nesterov ? g + momentum * buf : buf
**   p += -lr * g */
#define SGD_ELEM_(T)                                                                                                   \
    typedef struct sgd_k_##T {                                                                                         \
        T neg_lr, momentum, one_damp, wd;                                                                              \
        bool nesterov, first, maximize;                                                                                \
    } sgd_k_##T;                                                                                                       \
    static inline sgd_k_##T sgd_consts_##T(const td_op *op) {                                                          \
        return (sgd_k_##T){(T)-op->p.sgd.lr,          (T)op->p.sgd.momentum, (T)(1 - op->p.sgd.dampening),             \
                           (T)op->p.sgd.weight_decay, op->p.sgd.nesterov,    op->p.sgd.first_step,                     \
                           op->p.sgd.maximize};                                                                        \
    }                                                                                                                  \
    static inline T sgd_elem_##T(T p, T g, T *buf, const sgd_k_##T *k) {                                               \
        if (k->maximize) g = -g;                                                                                       \
        if (k->wd != 0) g += k->wd * p;                                                                                \
        if (buf) {                                                                                                     \
            *buf = k->first ? g : *buf * k->momentum + k->one_damp * g;                                                \
            g = k->nesterov ? g + k->momentum * *buf : *buf;                                                           \
        }                                                                                                              \
        return p + k->neg_lr * g;                                                                                      \
    }
SGD_ELEM_(float)
SGD_ELEM_(double)

#define SGD_HALF_(TO_F, FROM_F)                                                                                        \
    FOR_ELEMENTS_(n, {                                                                                                 \
        float bf = LOAD_(TO_F, buf, i);                                                                                \
        float pf = sgd_elem_float(LOAD_(TO_F, p, i), LOAD_(TO_F, g, i), buf ? &bf : NULL, &kf);                        \
        STORE_(FROM_F, p, i, pf);                                                                                      \
        STORE_(FROM_F, buf, i, bf);                                                                                    \
    })

static td_status sgd_run(const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    void *p = cpu_ptr(&op->out[0]), *buf = op->p.sgd.momentum != 0 ? opt_ptr(&op->out[1]) : NULL;
    const void *g = cpu_ptr(&op->in[0]);
    sgd_k_float kf = sgd_consts_float(op);
    switch (op->out[0].dtype) {
    case TD_F32: {
        float *pf = p, *bf = buf;
        const float *gf = g;
        FOR_ELEMENTS_(n, pf[i] = sgd_elem_float(pf[i], gf[i], bf ? &bf[i] : NULL, &kf));
        break;
    }
    case TD_F64: {
        sgd_k_double kd = sgd_consts_double(op);
        double *pd = p, *bd = buf;
        const double *gd = g;
        FOR_ELEMENTS_(n, pd[i] = sgd_elem_double(pd[i], gd[i], bd ? &bd[i] : NULL, &kd));
        break;
    }
    case TD_F16: SGD_HALF_(cpu_f16_to_f32, cpu_f32_to_f16); break;
    case TD_BF16: SGD_HALF_(cpu_bf16_to_f32, cpu_f32_to_bf16); break;
    default: return td_error_set(TD_ERR_UNSUPPORTED, "sgd_step: dtype %s", td_dtype_name(op->out[0].dtype));
    }
    return TD_OK;
}

td_status cpu_op_SGD_STEP(const td_op *op) {
    td_op o = *op;
    device_lr(op, &o.p.sgd.lr);
    return sgd_run(&o);
}

/* ---- RMSprop (torch.optim.RMSprop, foreach=False) ----
**   g = maximize ? -grad : grad;  g += wd * p
**   sq = alpha * sq + (1 - alpha) * g * g
**   centered: gavg = alpha * gavg + (1 - alpha) * g;  avg = sqrt(sq - gavg * gavg) + eps
**   else:     avg = sqrt(sq) + eps
**   momentum > 0: buf = momentum * buf + g / avg;  p += -lr * buf
**   else:         p += -lr * (g / avg) */
#define RMSPROP_ELEM_(T, SQRT)                                                                                         \
    typedef struct rms_k_##T {                                                                                         \
        T neg_lr, alpha, one_alpha, eps, wd, momentum;                                                                 \
        bool maximize;                                                                                                 \
    } rms_k_##T;                                                                                                       \
    static inline rms_k_##T rms_consts_##T(const td_op *op) {                                                          \
        return (rms_k_##T){(T)-op->p.rmsprop.lr,  (T)op->p.rmsprop.alpha,        (T)(1 - op->p.rmsprop.alpha),         \
                           (T)op->p.rmsprop.eps,  (T)op->p.rmsprop.weight_decay, (T)op->p.rmsprop.momentum,            \
                           op->p.rmsprop.maximize};                                                                    \
    }                                                                                                                  \
    static inline T rms_elem_##T(T p, T g, T *sq, T *buf, T *gavg, const rms_k_##T *k) {                               \
        if (k->maximize) g = -g;                                                                                       \
        if (k->wd != 0) g += k->wd * p;                                                                                \
        *sq = *sq * k->alpha + k->one_alpha * g * g;                                                                   \
        T avg;                                                                                                         \
        if (gavg) {                                                                                                    \
            *gavg = *gavg * k->alpha + k->one_alpha * g;                                                               \
            avg = SQRT(*sq - *gavg * *gavg) + k->eps;                                                                  \
        } else {                                                                                                       \
            avg = SQRT(*sq) + k->eps;                                                                                  \
        }                                                                                                              \
        if (!buf) return p + k->neg_lr * (g / avg);                                                                    \
        *buf = *buf * k->momentum + g / avg;                                                                           \
        return p + k->neg_lr * *buf;                                                                                   \
    }
RMSPROP_ELEM_(float, sqrtf)
RMSPROP_ELEM_(double, sqrt)

#define RMS_HALF_(TO_F, FROM_F)                                                                                        \
    FOR_ELEMENTS_(n, {                                                                                                 \
        float sf = LOAD_(TO_F, sq, i), bf = LOAD_(TO_F, buf, i), af = LOAD_(TO_F, gavg, i);                            \
        float pf =                                                                                                     \
            rms_elem_float(LOAD_(TO_F, p, i), LOAD_(TO_F, g, i), &sf, buf ? &bf : NULL, gavg ? &af : NULL, &kf);       \
        STORE_(FROM_F, p, i, pf);                                                                                      \
        STORE_(FROM_F, sq, i, sf);                                                                                     \
        STORE_(FROM_F, buf, i, bf);                                                                                    \
        STORE_(FROM_F, gavg, i, af);                                                                                   \
    })

static td_status rmsprop_run(const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    void *p = cpu_ptr(&op->out[0]), *sq = cpu_ptr(&op->out[1]);
    void *buf = op->p.rmsprop.momentum > 0 ? opt_ptr(&op->out[2]) : NULL;
    void *gavg = op->p.rmsprop.centered ? opt_ptr(&op->out[3]) : NULL;
    const void *g = cpu_ptr(&op->in[0]);
    rms_k_float kf = rms_consts_float(op);
    switch (op->out[0].dtype) {
    case TD_F32: {
        float *pf = p, *sf = sq, *bf = buf, *af = gavg;
        const float *gf = g;
        FOR_ELEMENTS_(n, pf[i] = rms_elem_float(pf[i], gf[i], &sf[i], bf ? &bf[i] : NULL, af ? &af[i] : NULL, &kf));
        break;
    }
    case TD_F64: {
        rms_k_double kd = rms_consts_double(op);
        double *pd = p, *sd = sq, *bd = buf, *ad = gavg;
        const double *gd = g;
        FOR_ELEMENTS_(n, pd[i] = rms_elem_double(pd[i], gd[i], &sd[i], bd ? &bd[i] : NULL, ad ? &ad[i] : NULL, &kd));
        break;
    }
    case TD_F16: RMS_HALF_(cpu_f16_to_f32, cpu_f32_to_f16); break;
    case TD_BF16: RMS_HALF_(cpu_bf16_to_f32, cpu_f32_to_bf16); break;
    default: return td_error_set(TD_ERR_UNSUPPORTED, "rmsprop_step: dtype %s", td_dtype_name(op->out[0].dtype));
    }
    return TD_OK;
}

td_status cpu_op_RMSPROP_STEP(const td_op *op) {
    td_op o = *op;
    device_lr(op, &o.p.rmsprop.lr);
    return rmsprop_run(&o);
}

/*
** AMP_UNSCALE, the GradScaler's unscale with its inf/NaN check, in place:
**   out = (grad [n], found_inf [1] f32)
**   found_inf = 1 if any grad[i] is inf or NaN (left as it is otherwise)
**   grad[i] *= inv_scale
** The check reads grad before the product (torch's
** _amp_foreach_non_finite_check_and_unscale_). f32 multiplies in float, f64
** in double, f16/bf16 through float.
*/

td_status cpu_op_AMP_UNSCALE(const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    void *g = cpu_ptr(&op->out[0]);
    float *found = cpu_ptr(&op->out[1]);
    double inv = op->p.amp.inv_scale;
    td_dtype dt = op->out[0].dtype;
    int bad = 0;
    int nt = cpu_threads_for(n, 16);
    if (dt == TD_F32) {
        float *x = g, s = (float)inv;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            bad |= !isfinite(x[i]);
            x[i] *= s;
        }
    } else if (dt == TD_F64) {
        double *x = g;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            bad |= !isfinite(x[i]);
            x[i] *= inv;
        }
    } else if (dt == TD_F16 || dt == TD_BF16) {
        uint16_t *x = g;
        float s = (float)inv;
        bool half = dt == TD_F16;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            float v = half ? cpu_f16_to_f32(x[i]) : cpu_bf16_to_f32(x[i]);
            bad |= !isfinite(v);
            x[i] = half ? cpu_f32_to_f16(v * s) : cpu_f32_to_bf16(v * s);
        }
    } else {
        return td_error_set(TD_ERR_UNSUPPORTED, "amp_unscale: dtype %s", td_dtype_name(dt));
    }
    if (bad) found[0] = 1.0f;
    return TD_OK;
}
