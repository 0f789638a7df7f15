/*
** LAYER_NORM: normalize each row over its D elements.
**   x is (R, D) contiguous, w and b are (D) or absent;
**   outputs y (R, D), mean (R) and rstd (R), all in x's dtype (y may be
**   f16/bf16 for f32 x: the f32 row rounded, as a COPY after it would).
**   mean_r = sum_j x[r,j] / D
**   rstd_r = 1 / sqrt(sum_j (x[r,j] - mean_r)^2 / D + eps)   (biased variance)
**   y[r,j] = (x[r,j] - mean_r) * rstd_r * w[j] + b[j]
** The variance is a second pass over (x - mean), not E[x^2] - mean^2, which
** cancels catastrophically when |mean| >> std. Sums and (x - mean) are taken
** in double for every dtype (a float mean of values near 1e4 is off by 1e-3).
** Rows run in parallel. f32 rows use the AVX2 kernel of x86/rows_avx2.c when
** the CPU has it (the same passes, with the mean subtracted as a float pair).
** Reference: torch.nn.functional.layer_norm.
** GROUP_NORM (below): the same rows over (n, group) of an [N, C, *] input,
** with a per-channel affine. LAYER_NORM_BACKWARD (at the end): layer_norm's
** gradients from the saved mean and rstd.
*/
#include <stdlib.h>
#include <string.h>

#include "cpu_nn.h"
#include "cpu_rows.h"

#define LAYERNORM_ROWS_(T)                                                                                             \
    static void layernorm_rows_##T(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, int64_t R, int64_t D,   \
                                   double eps) {                                                                       \
        int nt = cpu_threads_for(R, D * 4);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *xr = x + r * D;                                                                                   \
            T *yr = y + r * D;                                                                                         \
            double m = 0, v = 0;                        /* in double: a float mean near 1e4 is off by ~1e-3 */         \
            for (int64_t j = 0; j < D; j++) m += xr[j]; /* pass 1: mean */                                             \
            m /= (double)D;                                                                                            \
            for (int64_t j = 0; j < D; j++) v += (xr[j] - m) * (xr[j] - m); /* pass 2: variance */                     \
            double rs = 1 / sqrt(v / (double)D + eps);                                                                 \
            for (int64_t j = 0; j < D; j++) /* pass 3: normalize, scale, shift */                                      \
                yr[j] = (T)((xr[j] - m) * rs) * (w ? w[j] : 1) + (b ? b[j] : 0);                                       \
            mean[r] = (T)m, rstd[r] = (T)rs;                                                                           \
        }                                                                                                              \
    }
LAYERNORM_ROWS_(float)
LAYERNORM_ROWS_(double)

static void layernorm_rows_f32(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd,
                               int64_t R, int64_t D, double eps) {
    if (!cpu_has_avx2()) {
        layernorm_rows_float(x, w, b, y, mean, rstd, R, D, eps);
        return;
    }
    bool stream = R * D * (int64_t)sizeof(float) >= CPU_STREAM_BYTES && x != y; /* far larger than the cache */
    int nt = cpu_threads_for(R, D * 4);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for
        for (int64_t r = 0; r < R; r++)
            cpu_layernorm_row_f32_avx2(x + r * D, w, b, y + r * D, D, eps, mean + r, rstd + r, stream);
        if (stream) cpu_rows_stream_fence();
    }
}

static void *ptr_or_null(const td_operand *v) { return v->buf ? cpu_ptr(v) : NULL; }

td_status cpu_op_LAYER_NORM(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    const td_operand *y = &op->out[0], *mean = &op->out[1], *rstd = &op->out[2];
    int64_t R = td_operand_numel(mean), n = td_operand_numel(x);
    if (n == 0) return TD_OK;
    int64_t D = n / R;
    double eps = op->p.norm.eps;
    switch (x->dtype) {
    case TD_F32:
        if (y->dtype != TD_F32) { /* f16/bf16 y: the f32 rows, each rounded as COPY rounds them */
            float *fy = malloc((size_t)n * sizeof(float));
            if (!fy) return cpu_nn_oom("layer_norm", (size_t)n * sizeof(float));
            layernorm_rows_f32(cpu_ptr(x), ptr_or_null(w), ptr_or_null(b), fy, cpu_ptr(mean), cpu_ptr(rstd), R, D, eps);
            cpu_nn_from_f32(y, fy);
            free(fy);
            return TD_OK;
        }
        layernorm_rows_f32(cpu_ptr(x), ptr_or_null(w), ptr_or_null(b), cpu_ptr(y), cpu_ptr(mean), cpu_ptr(rstd), R, D,
                           eps);
        return TD_OK;
    case TD_F64:
        layernorm_rows_double(cpu_ptr(x), ptr_or_null(w), ptr_or_null(b), cpu_ptr(y), cpu_ptr(mean), cpu_ptr(rstd), R,
                              D, eps);
        return TD_OK;
    default: break;
    }
    float *fx = cpu_nn_to_f32(x), *fw = cpu_nn_to_f32(w), *fb = cpu_nn_to_f32(b);
    float *stats = malloc((size_t)(2 * R) * sizeof(float));
    td_status st = TD_OK;
    if (!fx || (w->buf && !fw) || (b->buf && !fb) || !stats) {
        st = stats ? td_last_status() : cpu_nn_oom("layer_norm", (size_t)(2 * R) * sizeof(float));
    } else {
        layernorm_rows_f32(fx, fw, fb, fx, stats, stats + R, R, D, eps); /* y over x: rows are independent */
        cpu_nn_from_f32(y, fx);
        cpu_nn_from_f32(mean, stats);
        cpu_nn_from_f32(rstd, stats + R);
    }
    free(fx), free(fw), free(fb), free(stats);
    return st;
}

/* ADD_LAYER_NORM: in = (x, r, w?, b?), out = (y, s, mean, rstd):
**   s = x + r (rounded to the dtype, as ADD), then LAYER_NORM of s.
** The sum is written first, then the rows are normalized from it, so the
** result equals ADD followed by LAYER_NORM bit for bit. For f32 x, r and y may
** be f16/bf16: r widened exactly, y rounded from the f32 row (LAYER_NORM). */
td_status cpu_op_ADD_LAYER_NORM(const td_op *op) {
    const td_operand *x = &op->in[0], *r = &op->in[1], *s = &op->out[1];
    int64_t n = td_operand_numel(x);
    void *ps = cpu_ptr(s);
    const void *px = cpu_ptr(x), *pr = cpu_ptr(r);
    int nt = cpu_threads_for(n, 1);
    if (x->dtype == TD_F32 && r->dtype == TD_F32) {
        const float *a = px, *b = pr;
        float *o = ps;
#pragma omp parallel for num_threads(nt)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + b[i];
    } else { /* the sum in double, rounded once to s: ADD's f32 sum (53 >= 2 * 24 + 2 bits) */
#pragma omp parallel for num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            cpu_store(ps, i, s->dtype, cpu_load(px, i, x->dtype) + cpu_load(pr, i, r->dtype));
    }
    td_operand in[3] = {*s, op->in[2], op->in[3]}, out[3] = {op->out[0], op->out[2], op->out[3]};
    td_op ln = {.kind = TD_OP_LAYER_NORM, .n_in = 3, .n_out = 3, .in = in, .out = out, .p = op->p};
    return cpu_op_LAYER_NORM(&ln);
}

/* GROUP_NORM: in = (x, w?, b?), out = (y, mean, rstd).
**   x is [N, C, S] contiguous (S the product of the trailing dims, 1 for
**   none), mean and rstd [N, G] (G read from their shape), w and b [C].
**   Row r = (n, g) is the D = Cg * S contiguous elements of channels
**   g Cg .. g Cg + Cg - 1 (Cg = C / G); its mean and rstd are LAYER_NORM's,
**   and y[r, j] = (x[r, j] - mean_r) * rstd_r * w[c] + b[c], c = g Cg + j / S.
** Reference: torch.nn.functional.group_norm. */
#define GROUPNORM_ROWS_(T)                                                                                             \
    static void groupnorm_rows_##T(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, int64_t R, int64_t G,   \
                                   int64_t Cg, int64_t S, double eps) {                                                \
        int64_t D = Cg * S;                                                                                            \
        int nt = cpu_threads_for(R, D * 4);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *xr = x + r * D;                                                                                   \
            T *yr = y + r * D;                                                                                         \
            double m = 0, v = 0;                        /* two passes in double, as LAYER_NORM */                      \
            for (int64_t j = 0; j < D; j++) m += xr[j]; /* pass 1: mean */                                             \
            m /= (double)D;                                                                                            \
            for (int64_t j = 0; j < D; j++) v += (xr[j] - m) * (xr[j] - m); /* pass 2: variance */                     \
            double rs = 1 / sqrt(v / (double)D + eps);                                                                 \
            for (int64_t k = 0; k < Cg; k++) { /* pass 3: normalize, scale and shift per channel */                    \
                int64_t c = (r % G) * Cg + k;                                                                          \
                T wc = w ? w[c] : 1, bc = b ? b[c] : 0;                                                                \
                for (int64_t j = k * S; j < (k + 1) * S; j++) yr[j] = (T)((xr[j] - m) * rs) * wc + bc;                 \
            }                                                                                                          \
            mean[r] = (T)m, rstd[r] = (T)rs;                                                                           \
        }                                                                                                              \
    }
GROUPNORM_ROWS_(float)
GROUPNORM_ROWS_(double)

td_status cpu_op_GROUP_NORM(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    const td_operand *y = &op->out[0], *mean = &op->out[1], *rstd = &op->out[2];
    int64_t n = td_operand_numel(x);
    if (n == 0) return TD_OK;
    int64_t N = x->shape[0], C = x->shape[1], R = td_operand_numel(mean), G = R / N, Cg = C / G, S = n / (N * C);
    double eps = op->p.norm.eps;
    if (x->dtype == TD_F64) {
        groupnorm_rows_double(cpu_ptr(x), ptr_or_null(w), ptr_or_null(b), cpu_ptr(y), cpu_ptr(mean), cpu_ptr(rstd), R,
                              G, Cg, S, eps);
        return TD_OK;
    }
    if (x->dtype == TD_F32) {
        groupnorm_rows_float(cpu_ptr(x), ptr_or_null(w), ptr_or_null(b), cpu_ptr(y), cpu_ptr(mean), cpu_ptr(rstd), R, G,
                             Cg, S, eps);
        return TD_OK;
    }
    float *fx = cpu_nn_to_f32(x), *fw = cpu_nn_to_f32(w), *fb = cpu_nn_to_f32(b);
    float *stats = malloc((size_t)(2 * R) * sizeof(float));
    td_status st = TD_OK;
    if (!fx || (w->buf && !fw) || (b->buf && !fb) || !stats) {
        st = stats ? td_last_status() : cpu_nn_oom("group_norm", (size_t)(2 * R) * sizeof(float));
    } else {
        groupnorm_rows_float(fx, fw, fb, fx, stats, stats + R, R, G, Cg, S, eps); /* y over x: rows are independent */
        cpu_nn_from_f32(y, fx);
        cpu_nn_from_f32(mean, stats);
        cpu_nn_from_f32(rstd, stats + R);
    }
    free(fx), free(fw), free(fb), free(stats);
    return st;
}

/* LAYER_NORM_BACKWARD: in = (dy, x [R, D], w? [D], mean, rstd [R], ds? [R, D]),
** out = (dx [R, D], dw? [D], db? [D], dxn? [R, D]), contiguous, one dtype (dy
** and dxn may be f16/bf16 for f32 x: dy widened into an f32 copy, exactly as a
** cast would; dxn = dx rounded as a COPY rounds it):
**   xhat = (x - mean_r) rstd_r,  g = dy w (w absent: 1)
**   pass 1 (rows in parallel): dx = rstd_r (g - mean_D(g) - xhat mean_D(g xhat)) + ds
**   pass 2 (blocks of 64 columns in parallel, rows in order):
**          dw = sum_r dy xhat,  db = sum_r dy
** Sums in double. f16/bf16 run on f32 copies. Reference: the composed
** formula of src/autograd/formulas_nn.c (norm_grads). */
#define LN_BW_COLS 64
#define LN_BACKWARD_ROWS_(T)                                                                                           \
    static void ln_backward_rows_##T(const T *dy, const T *x, const T *w, const T *mean, const T *rstd, const T *ds,   \
                                     T *dx, T *dw, T *db, int64_t R, int64_t D) {                                      \
        int nt = cpu_threads_for(R, D * 8);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *dyr = dy + r * D, *xr = x + r * D;                                                                \
            double m = mean[r], rs = rstd[r], s1 = 0, s2 = 0;                                                          \
            for (int64_t j = 0; j < D; j++) {                                                                          \
                double g = (double)dyr[j] * (w ? (double)w[j] : 1.0);                                                  \
                s1 += g, s2 += g * ((double)xr[j] - m) * rs;                                                           \
            }                                                                                                          \
            s1 /= (double)D, s2 /= (double)D;                                                                          \
            for (int64_t j = 0; j < D; j++) {                                                                          \
                double g = (double)dyr[j] * (w ? (double)w[j] : 1.0), xh = ((double)xr[j] - m) * rs;                   \
                dx[r * D + j] = (T)(rs * (g - s1 - xh * s2) + (ds ? (double)ds[r * D + j] : 0.0));                     \
            }                                                                                                          \
        }                                                                                                              \
        if (!dw && !db) return;                                                                                        \
        int64_t nb = (D + LN_BW_COLS - 1) / LN_BW_COLS;                                                                \
        int ntc = cpu_threads_for(nb, R * LN_BW_COLS * 4);                                                             \
        _Pragma("omp parallel for num_threads(ntc)") for (int64_t bk = 0; bk < nb; bk++) {                             \
            int64_t j0 = bk * LN_BW_COLS, nj = D - j0 < LN_BW_COLS ? D - j0 : LN_BW_COLS;                              \
            double aw[LN_BW_COLS] = {0}, ab[LN_BW_COLS] = {0};                                                         \
            for (int64_t r = 0; r < R; r++) {                                                                          \
                double m = mean[r], rs = rstd[r];                                                                      \
                for (int64_t j = 0; j < nj; j++) {                                                                     \
                    double g = dy[r * D + j0 + j];                                                                     \
                    aw[j] += g * ((double)x[r * D + j0 + j] - m) * rs, ab[j] += g;                                     \
                }                                                                                                      \
            }                                                                                                          \
            for (int64_t j = 0; j < nj; j++) {                                                                         \
                if (dw) dw[j0 + j] = (T)aw[j];                                                                         \
                if (db) db[j0 + j] = (T)ab[j];                                                                         \
            }                                                                                                          \
        }                                                                                                              \
    }
LN_BACKWARD_ROWS_(float)
LN_BACKWARD_ROWS_(double)

/* out[3] (dxn), when present, from dx of x's dtype (f32 or f64) at dx: a cast's rounding */
static td_status dx_narrow(const td_op *op, const void *dx) {
    const td_operand *n = &op->out[3];
    if (!n->buf) return TD_OK;
    if (n->dtype == op->out[0].dtype)
        memcpy(cpu_ptr(n), dx, (size_t)td_operand_numel(n) * td_dtype_size(n->dtype));
    else
        cpu_nn_from_f32(n, dx); /* f32 x: the table's 'h' leaves f16/bf16 */
    return TD_OK;
}

td_status cpu_op_LAYER_NORM_BACKWARD(const td_op *op) {
    const td_operand *x = &op->in[1];
    int64_t R = td_operand_numel(&op->in[3]), D = R ? td_operand_numel(x) / R : 0;
    if (R == 0) return TD_OK; /* the core sends no empty rows */
    const td_operand *ops[9] = {&op->in[0], x,           &op->in[2],  &op->in[3], &op->in[4],
                                &op->in[5], &op->out[0], &op->out[1], &op->out[2]};
    void *p[9] = {0};
    if (x->dtype == TD_F32 || x->dtype == TD_F64) {
        for (int i = 0; i < 9; i++) p[i] = ops[i]->buf ? cpu_ptr(ops[i]) : NULL;
        float *wide = ops[0]->dtype != x->dtype ? cpu_nn_to_f32(ops[0]) : NULL; /* f16/bf16 dy of f32 x */
        if (ops[0]->dtype != x->dtype && !wide) return td_last_status();
        if (x->dtype == TD_F64)
            ln_backward_rows_double(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], R, D);
        else
            ln_backward_rows_float(wide ? wide : p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], R, D);
        free(wide);
        return dx_narrow(op, p[6]);
    }
    td_status st = TD_OK; /* f16/bf16: widened copies, results narrowed back */
    for (int i = 0; i < 9 && st == TD_OK; i++) {
        if (!ops[i]->buf) continue;
        p[i] = i < 6 ? cpu_nn_to_f32(ops[i]) : malloc(sizeof(float) * (size_t)td_operand_numel(ops[i]));
        if (!p[i]) st = i < 6 ? td_last_status() : cpu_nn_oom("layer_norm_backward", 0);
    }
    if (st == TD_OK) {
        ln_backward_rows_float(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], R, D);
        for (int i = 6; i < 9; i++)
            if (p[i]) cpu_nn_from_f32(ops[i], p[i]);
        if (op->out[3].buf) cpu_nn_from_f32(&op->out[3], p[6]); /* x's dtype, as dx */
    }
    for (int i = 0; i < 9; i++) free(p[i]);
    return st;
}
