/*
** The CPU backend's softmax ops: SOFTMAX, LOG_SOFTMAX, their backward, and the cross-entropy
** loss (its forward and fused backward) built on the same row kernels.
*/
#include <stdlib.h>

#include "cpu_nn.h"
#include "cpu_rows.h"

/*
** SOFTMAX and LOG_SOFTMAX over the last dim.
**   x is (R, C) contiguous (R = product of the leading dims), y is (R, C).
**   softmax:     y[r,j] = exp(x[r,j] - m_r) / s_r
**   log_softmax: y[r,j] = x[r,j] - m_r - log(s_r)
** with m_r = max_j x[r,j] and s_r = sum_j exp(x[r,j] - m_r). Subtracting the
** row max keeps every exp() in (0, 1], so nothing overflows; s_r >= 1.
** Rows run in parallel. f32 rows use the AVX2 kernel of x86/rows_avx2.c when
** the CPU has it (one read of x from memory, exp() to 1.26 ulp).
*/

#define SOFTMAX_ROWS_(T, EXP, LOG)                                                                                     \
    static void softmax_rows_##T(const T *x, T *y, int64_t R, int64_t C, bool log_out) {                               \
        int nt = cpu_threads_for(R, C * 8);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *xr = x + r * C;                                                                                   \
            T *yr = y + r * C;                                                                                         \
            T m = -INFINITY, s = 0; /* pass 1: the row max */                                                          \
            for (int64_t j = 0; j < C; j++) m = xr[j] > m ? xr[j] : m;                                                 \
            for (int64_t j = 0; j < C; j++) { /* pass 2: shifted exponentials and their sum */                         \
                T e = EXP(xr[j] - m);                                                                                  \
                s += e;                                                                                                \
                if (!log_out) yr[j] = e;                                                                               \
            }                                                                                                          \
            if (log_out) { /* pass 3: normalize */                                                                     \
                T ls = m + LOG(s);                                                                                     \
                for (int64_t j = 0; j < C; j++) yr[j] = xr[j] - ls;                                                    \
            } else {                                                                                                   \
                T inv = 1 / s;                                                                                         \
                for (int64_t j = 0; j < C; j++) yr[j] *= inv;                                                          \
            }                                                                                                          \
        }                                                                                                              \
    }
SOFTMAX_ROWS_(float, expf, logf)
SOFTMAX_ROWS_(double, exp, log)

static void softmax_rows_f32(const float *x, float *y, int64_t R, int64_t C, bool log_out) {
    if (!cpu_has_avx2()) {
        softmax_rows_float(x, y, R, C, log_out);
        return;
    }
    /* outputs far larger than the cache bypass it, each thread staging its row in a scratch buffer */
    bool stream = R * C * (int64_t)sizeof(float) >= CPU_STREAM_BYTES && x != y;
    int nt = cpu_threads_for(R, C * 8);
#pragma omp parallel num_threads(nt)
    {
        float *scratch = stream ? cpu_nn_workspace((size_t)C * sizeof(float)) : NULL; /* NULL: plain stores */
#pragma omp for
        for (int64_t r = 0; r < R; r++) cpu_softmax_row_f32_avx2(x + r * C, y + r * C, C, log_out, scratch);
        if (scratch) cpu_rows_stream_fence();
    }
}

static td_status softmax_run(const td_op *op, bool log_out) {
    const td_operand *x = &op->in[0], *y = &op->out[0];
    int64_t n = td_operand_numel(x), C = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (n == 0) return TD_OK;
    int64_t R = n / C;
    switch (x->dtype) {
    case TD_F32: softmax_rows_f32(cpu_ptr(x), cpu_ptr(y), R, C, log_out); return TD_OK;
    case TD_F64: softmax_rows_double(cpu_ptr(x), cpu_ptr(y), R, C, log_out); return TD_OK;
    default: break;
    }
    float *fx = cpu_nn_to_f32(x);
    if (!fx) return td_last_status();
    softmax_rows_f32(fx, fx, R, C, log_out); /* in place: each row reads x before writing y */
    cpu_nn_from_f32(y, fx);
    free(fx);
    return TD_OK;
}

td_status cpu_op_SOFTMAX(const td_op *op) { return softmax_run(op, false); }
td_status cpu_op_LOG_SOFTMAX(const td_op *op) { return softmax_run(op, true); }

/*
** SOFTMAX_BACKWARD and LOG_SOFTMAX_BACKWARD over the last dim: in = (dy, y),
** out = dx, all (R, C) contiguous (R = product of the leading dims), y the
** forward op's output:
**   softmax:     dx[r,j] = y[r,j] (dy[r,j] - s_r),       s_r = sum_j dy[r,j] y[r,j]
**   log_softmax: dx[r,j] = dy[r,j] - exp(y[r,j]) s_r,    s_r = sum_j dy[r,j]
** Rows run in parallel, each in two passes (the sum, then dx) while the row
** sits in cache. f32 rows use the AVX2 kernel of x86/rows_avx2.c when the CPU
** has it; f16/bf16 run through f32 copies.
*/

#define SOFTMAX_BW_ROWS_(T, EXP)                                                                                       \
    static void softmax_bw_rows_##T(const T *dy, const T *y, T *dx, int64_t R, int64_t C, bool log_out) {              \
        int nt = cpu_threads_for(R, C * 4);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *g = dy + r * C, *v = y + r * C;                                                                   \
            T *o = dx + r * C;                                                                                         \
            double s = 0;                                                                                              \
            for (int64_t j = 0; j < C; j++) s += log_out ? (double)g[j] : (double)g[j] * v[j];                         \
            T st = (T)s;                                                                                               \
            for (int64_t j = 0; j < C; j++) o[j] = log_out ? g[j] - EXP(v[j]) * st : v[j] * (g[j] - st);               \
        }                                                                                                              \
    }
SOFTMAX_BW_ROWS_(float, expf)
SOFTMAX_BW_ROWS_(double, exp)

static void softmax_bw_rows_f32(const float *dy, const float *y, float *dx, int64_t R, int64_t C, bool log_out) {
    if (!cpu_has_avx2()) {
        softmax_bw_rows_float(dy, y, dx, R, C, log_out);
        return;
    }
    /* outputs far larger than the cache bypass it (no read of dx's lines before writing them) */
    bool stream = R * C * (int64_t)sizeof(float) >= CPU_STREAM_BYTES && dx != dy;
    int nt = cpu_threads_for(R, C * 4);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for
        for (int64_t r = 0; r < R; r++)
            cpu_softmax_backward_row_f32_avx2(dy + r * C, y + r * C, dx + r * C, C, log_out, stream);
        if (stream) cpu_rows_stream_fence();
    }
}

static td_status softmax_backward_run(const td_op *op, bool log_out) {
    const td_operand *dy = &op->in[0], *y = &op->in[1], *dx = &op->out[0];
    int64_t n = td_operand_numel(dy), C = dy->ndim ? dy->shape[dy->ndim - 1] : 1;
    if (n == 0) return TD_OK;
    int64_t R = n / C;
    switch (dy->dtype) {
    case TD_F32: softmax_bw_rows_f32(cpu_ptr(dy), cpu_ptr(y), cpu_ptr(dx), R, C, log_out); return TD_OK;
    case TD_F64: softmax_bw_rows_double(cpu_ptr(dy), cpu_ptr(y), cpu_ptr(dx), R, C, log_out); return TD_OK;
    default: break;
    }
    float *fg = cpu_nn_to_f32(dy), *fy = fg ? cpu_nn_to_f32(y) : NULL;
    if (!fy) {
        free(fg);
        return td_last_status();
    }
    softmax_bw_rows_f32(fg, fy, fg, R, C, log_out); /* in place: each element of dy is read before dx overwrites it */
    cpu_nn_from_f32(dx, fg);
    free(fg);
    free(fy);
    return TD_OK;
}

td_status cpu_op_SOFTMAX_BACKWARD(const td_op *op) { return softmax_backward_run(op, false); }
td_status cpu_op_LOG_SOFTMAX_BACKWARD(const td_op *op) { return softmax_backward_run(op, true); }

/*
** CROSS_ENTROPY and its fused backward (PyTorch's F.cross_entropy with class
** index targets, weight, ignore_index and label_smoothing).
**   logits is (N, C) contiguous, target (N) int64, w (C) or absent (all 1);
**   eps = label_smoothing, W = sum_c w[c], t = target[n], logp = log_softmax(logits[n]).
** Forward, per sample (0 where t == ignore_index):
**   loss[n] = (1-eps) * w[t] * -logp[t] + eps/C * sum_c w[c] * -logp[c]
**   reduction none: loss (N); sum: sum_n loss[n]; mean: sum_n loss[n] / sum_n w[t_n]
**   (the mean divides by the summed weight of the non-ignored targets).
** Backward, with p = softmax(logits[n]) and g[n] = dloss[n] (none), dloss (sum) or
** dloss / sum_n w[t_n] (mean); d(-logp[k])/dlogits[c] = p[c] - [c == k]:
**   dlogits[n,c] = g[n] * (p[c] * ((1-eps) w[t] + eps/C * W) - (1-eps) w[t] [c == t] - eps/C * w[c])
** The forward also writes each row's logsumexp when asked (out[1]); the
** backward finds it again (its optional lse input is not read here).
** Targets are checked on the host before anything runs. Each row's max and
** sum of exp(x - max) come from row_max_* / row_sum_exp_* below: scalar loops,
** or for f32 the AVX2 kernels of x86/rows_avx2.c (the backward pass stores
** the exponentials into dlogits and scales them there, fused).
*/

/* TD_ERR_INDEX for the first target outside [0, C) that is not ignore_index. */
static td_status check_targets(const int64_t *target, int64_t N, int64_t C, int64_t ignore_index) {
    for (int64_t n = 0; n < N; n++)
        if (target[n] != ignore_index && (target[n] < 0 || target[n] >= C))
            return td_error_set(TD_ERR_INDEX, "cross_entropy: target %lld at position %lld is out of range [0, %lld)",
                                (long long)target[n], (long long)n, (long long)C);
    return TD_OK;
}

/* sum over non-ignored samples of w[t] (their count without weights) */
static double target_weight_sum(const int64_t *target, int64_t N, int64_t ignore_index,
                                double (*wt)(const void *, int64_t), const void *w) {
    double s = 0;
    for (int64_t n = 0; n < N; n++)
        if (target[n] != ignore_index) s += w ? wt(w, target[n]) : 1;
    return s;
}
static double weight_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
static double weight_f64(const void *w, int64_t i) { return ((const double *)w)[i]; }

/* max_c x[c]; sum_c exp(x[c] - m), storing the terms into e[c] unless e is NULL */
#define ROW_EXP_(T, EXP)                                                                                               \
    static T row_max_##T(const T *x, int64_t C) {                                                                      \
        T m = -INFINITY;                                                                                               \
        for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;                                                       \
        return m;                                                                                                      \
    }                                                                                                                  \
    static T row_sum_exp_##T(const T *x, int64_t C, T m, T *e) {                                                       \
        T s = 0;                                                                                                       \
        for (int64_t c = 0; c < C; c++) {                                                                              \
            T v = EXP(x[c] - m);                                                                                       \
            s += v;                                                                                                    \
            if (e) e[c] = v;                                                                                           \
        }                                                                                                              \
        return s;                                                                                                      \
    }
ROW_EXP_(float, expf)
ROW_EXP_(double, exp)

static float row_max_f32(const float *x, int64_t C) {
    return cpu_has_avx2() ? cpu_row_max_f32_avx2(x, C) : row_max_float(x, C);
}
static float row_sum_exp_f32(const float *x, int64_t C, float m, float *e) {
    return cpu_has_avx2() ? cpu_row_sum_exp_f32_avx2(x, C, m, e) : row_sum_exp_float(x, C, m, e);
}
#define row_max_f64     row_max_double
#define row_sum_exp_f64 row_sum_exp_double

#define XENT_(T, SFX, LOG)                                                                                             \
    /* per-sample losses into loss[N] (double, for a deterministic serial reduction), each row's logsumexp into        \
    ** lse[N] unless NULL (0 for ignored rows) */                                                                      \
    static void xent_forward_##T(const T *x, const int64_t *target, const T *w, double *loss, double *lse_out,         \
                                 int64_t N, int64_t C, int64_t ignore_index, double eps) {                             \
        int nt = cpu_threads_for(N, C * 8);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t n = 0; n < N; n++) {                                  \
            const T *xr = x + n * C;                                                                                   \
            int64_t t = target[n];                                                                                     \
            if (t == ignore_index) {                                                                                   \
                loss[n] = 0;                                                                                           \
                if (lse_out) lse_out[n] = 0;                                                                           \
                continue;                                                                                              \
            }                                                                                                          \
            T m = row_max_##SFX(xr, C), smooth = 0; /* log_softmax: logp[c] = x[c] - lse */                            \
            T lse = m + LOG(row_sum_exp_##SFX(xr, C, m, NULL));                                                        \
            if (lse_out) lse_out[n] = lse;                                                                             \
            if (eps != 0)                                                                                              \
                for (int64_t c = 0; c < C; c++) smooth += (w ? w[c] : 1) * (lse - xr[c]);                              \
            loss[n] = (1 - eps) * (double)(w ? w[t] : 1) * (double)(lse - xr[t]) + eps / (double)C * smooth;           \
        }                                                                                                              \
    }                                                                                                                  \
    static void xent_backward_##T(const T *x, const int64_t *target, const T *w, const T *dloss, bool per_sample,      \
                                  double scale, T *dx, int64_t N, int64_t C, int64_t ignore_index, double eps) {       \
        double W = 0;                                                                                                  \
        for (int64_t c = 0; c < C; c++) W += w ? w[c] : 1;                                                             \
        int nt = cpu_threads_for(N, C * 8);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t n = 0; n < N; n++) {                                  \
            const T *xr = x + n * C;                                                                                   \
            T *dr = dx + n * C;                                                                                        \
            int64_t t = target[n];                                                                                     \
            if (t == ignore_index) {                                                                                   \
                for (int64_t c = 0; c < C; c++) dr[c] = 0;                                                             \
                continue;                                                                                              \
            }                                                                                                          \
            T g = (T)((double)dloss[per_sample ? n : 0] * scale), m = row_max_##SFX(xr, C);                            \
            T s = row_sum_exp_##SFX(xr, C, m, dr); /* dr[c] = exp(x[c] - m) */                                         \
            T wt = (T)((1 - eps) * (double)(w ? w[t] : 1)), pcoef = (T)(wt + eps / (double)C * W) / s;                 \
            T sm = (T)(eps / (double)C);                                                                               \
            for (int64_t c = 0; c < C; c++) dr[c] = g * (dr[c] * pcoef - sm * (w ? w[c] : 1));                         \
            dr[t] -= g * wt;                                                                                           \
        }                                                                                                              \
    }
XENT_(float, f32, logf)
XENT_(double, f64, log)

/* logits, weight and dloss of op in a natively computed dtype (f32 or f64);
** f16/bf16 operands are widened into malloc'd f32 copies listed in owned[]. */
typedef struct xent_args {
    const void *x, *w, *dloss;
    void *owned[3];
    bool wide;
} xent_args;

static td_status xent_args_get(const td_op *op, int ix, int iw, int idl, xent_args *a) {
    *a = (xent_args){0};
    const td_operand *x = &op->in[ix], *w = &op->in[iw];
    if (x->dtype == TD_F32 || x->dtype == TD_F64) {
        a->x = cpu_ptr(x);
        a->w = w->buf ? cpu_ptr(w) : NULL;
        a->dloss = idl >= 0 ? cpu_ptr(&op->in[idl]) : NULL;
        return TD_OK;
    }
    a->wide = true;
    a->x = a->owned[0] = cpu_nn_to_f32(x);
    a->w = a->owned[1] = cpu_nn_to_f32(w);
    a->dloss = a->owned[2] = idl >= 0 ? cpu_nn_to_f32(&op->in[idl]) : NULL;
    if (!a->x || (w->buf && !a->w) || (idl >= 0 && !a->dloss)) return td_last_status();
    return TD_OK;
}

static void xent_args_free(xent_args *a) {
    for (int i = 0; i < 3; i++) free(a->owned[i]);
}

td_status cpu_op_CROSS_ENTROPY(const td_op *op) {
    const td_operand *x = &op->in[0], *tg = &op->in[1], *out = &op->out[0];
    int64_t N = td_operand_numel(tg), C = x->shape[x->ndim - 1], ig = op->p.xent.ignore_index;
    int red = op->p.xent.reduction;
    double eps = op->p.xent.label_smoothing;
    const int64_t *target = cpu_ptr(tg);
    td_status st = check_targets(target, N, C, ig);
    if (st != TD_OK) return st;
    xent_args a;
    const td_operand *lse_op = &op->out[1]; /* optional: each row's logsumexp */
    double *loss = malloc((size_t)(N ? N : 1) * sizeof(double) * 2), *lse = lse_op->buf ? loss + N : NULL;
    if (!loss) return cpu_nn_oom("cross_entropy", (size_t)N * sizeof(double) * 2);
    st = xent_args_get(op, 0, 2, -1, &a);
    if (st == TD_OK) {
        bool f64 = x->dtype == TD_F64;
        if (f64)
            xent_forward_double(a.x, target, a.w, loss, lse, N, C, ig, eps);
        else
            xent_forward_float(a.x, target, a.w, loss, lse, N, C, ig, eps);
        for (int64_t n = 0; lse && n < N; n++) cpu_store(cpu_ptr(lse_op), n, lse_op->dtype, lse[n]);
        void *dst = cpu_ptr(out);
        if (red == TD_REDUCTION_NONE) {
            for (int64_t n = 0; n < N; n++) cpu_store(dst, n, out->dtype, loss[n]);
        } else {
            double total = 0;
            for (int64_t n = 0; n < N; n++) total += loss[n];
            if (red == TD_REDUCTION_MEAN) total /= target_weight_sum(target, N, ig, f64 ? weight_f64 : weight_f32, a.w);
            cpu_store(dst, 0, out->dtype, total);
        }
    }
    xent_args_free(&a);
    free(loss);
    return st;
}

td_status cpu_op_CROSS_ENTROPY_BACKWARD(const td_op *op) {
    const td_operand *x = &op->in[1], *tg = &op->in[2], *dx = &op->out[0];
    int64_t N = td_operand_numel(tg), C = x->shape[x->ndim - 1], ig = op->p.xent.ignore_index;
    int red = op->p.xent.reduction;
    const int64_t *target = cpu_ptr(tg);
    td_status st = check_targets(target, N, C, ig);
    if (st != TD_OK) return st;
    xent_args a;
    st = xent_args_get(op, 1, 3, 0, &a);
    if (st == TD_OK) {
        bool f64 = x->dtype == TD_F64;
        double scale =
            red == TD_REDUCTION_MEAN ? 1 / target_weight_sum(target, N, ig, f64 ? weight_f64 : weight_f32, a.w) : 1;
        bool per_sample = red == TD_REDUCTION_NONE;
        if (f64) {
            xent_backward_double(a.x, target, a.w, a.dloss, per_sample, scale, cpu_ptr(dx), N, C, ig,
                                 op->p.xent.label_smoothing);
        } else {
            float *out = a.wide ? malloc((size_t)(N * C > 0 ? N * C : 1) * sizeof(float)) : cpu_ptr(dx);
            if (!out)
                st = cpu_nn_oom("cross_entropy_backward", (size_t)(N * C) * sizeof(float));
            else {
                xent_backward_float(a.x, target, a.w, a.dloss, per_sample, scale, out, N, C, ig,
                                    op->p.xent.label_smoothing);
                if (a.wide) cpu_nn_from_f32(dx, out), free(out);
            }
        }
    }
    xent_args_free(&a);
    return st;
}
