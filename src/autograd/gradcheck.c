/*
** td_gradcheck: autograd's Jacobian against f64 central differences, with
** PyTorch's tolerances (torch.autograd.gradcheck: eps 1e-6, atol 1e-5,
** rtol 1e-3).
**   analytical  J[r][c] = d y[c] / d x[r], one td_grad per output element c
**               with a one-hot grad_output;
**   numerical   J[r][c] = (f(x + eps e_r)[c] - f(x - eps e_r)[c]) / (2 eps).
** td_gradgradcheck is td_gradcheck of g(x, gy) = d<fn(x), gy>/dx, the
** first-order gradients built with create_graph.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

typedef struct gc_state {
    td_multi_fn fn;
    void *user;
    int n;
    td_tensor *const *inputs;
    int n_chk;
    int chk[64];       /* indices of the inputs checked */
    int64_t numel[64]; /* of each checked input */
    int64_t rows, cols;
} gc_state;

/* Evaluate fn without recording; its output in host f64 out[cols]. */
static td_status eval(const gc_state *g, double *out) {
    td_no_grad_begin();
    td_scope_begin();
    td_tensor *y = g->fn(g->user, g->n, g->inputs);
    td_status st = !y ? (td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "gradcheck: fn returned NULL"))
                   : td__numel(y->ndim, y->shape) != g->cols
                       ? TD_ERR(TD_ERR_SHAPE, "gradcheck: fn's output changed size between calls")
                       : td_copy_to_host(y, out, (size_t)g->cols * sizeof *out, TD_F64);
    td_scope_end();
    td_no_grad_end();
    return st;
}

static td_status write_input(td_tensor *x, const double *v) {
    td_scope_begin();
    td_tensor *src = td_from_data(v, x->ndim, x->shape, TD_F64, x->storage->device);
    td_status st = src ? td_copy_(x, src) : td_last_status();
    td_scope_end();
    return st;
}

/* J[r * cols + c] by autograd: fn is evaluated once with recording. */
static td_status analytical(const gc_state *g, double *J) {
    td_status st = TD_OK;
    td_enable_grad_begin();
    td_scope_begin();
    td_tensor *y = g->fn(g->user, g->n, g->inputs), *x[64], *gx[64];
    if (!y) st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "gradcheck: fn returned NULL");
    for (int k = 0; k < g->n_chk; k++) x[k] = g->inputs[g->chk[k]];
    double *onehot = y ? calloc((size_t)g->cols, sizeof *onehot) : NULL;
    if (st == TD_OK && !onehot) st = TD_ERR(TD_ERR_OOM, "gradcheck: out of host memory");
    memset(J, 0, (size_t)(g->rows * g->cols) * sizeof *J);
    for (int64_t c = 0; st == TD_OK && c < g->cols && y->requires_grad; c++) {
        td_scope_begin();
        onehot[c] = 1;
        td_tensor *go = td_from_data(onehot, y->ndim, y->shape, TD_F64, y->storage->device);
        onehot[c] = 0;
        st = go ? td_grad(1, &y, &go, g->n_chk, x, gx, true, false, true) : td_last_status();
        int64_t r0 = 0;
        for (int k = 0; st == TD_OK && k < g->n_chk; r0 += g->numel[k], k++) {
            if (!gx[k]) continue;
            double *col = malloc((size_t)g->numel[k] * sizeof *col);
            st = col ? td_copy_to_host(gx[k], col, (size_t)g->numel[k] * sizeof *col, TD_F64)
                     : TD_ERR(TD_ERR_OOM, "gradcheck: out of host memory");
            for (int64_t e = 0; st == TD_OK && e < g->numel[k]; e++) J[(r0 + e) * g->cols + c] = col[e];
            free(col);
        }
        td_scope_end();
    }
    free(onehot);
    td_scope_end();
    td_enable_grad_end();
    return st;
}

/* J[r * cols + c] by central differences, restoring every input. */
static td_status numerical(const gc_state *g, double eps, double *J) {
    td_status st = TD_OK;
    double *plus = malloc((size_t)g->cols * sizeof *plus), *minus = malloc((size_t)g->cols * sizeof *minus);
    if (!plus || !minus) st = TD_ERR(TD_ERR_OOM, "gradcheck: out of host memory");
    int64_t r0 = 0;
    for (int k = 0; st == TD_OK && k < g->n_chk; r0 += g->numel[k], k++) {
        td_tensor *x = g->inputs[g->chk[k]];
        double *v = malloc((size_t)g->numel[k] * sizeof *v);
        st = v ? td_copy_to_host(x, v, (size_t)g->numel[k] * sizeof *v, TD_F64)
               : TD_ERR(TD_ERR_OOM, "gradcheck: out of host memory");
        for (int64_t e = 0; st == TD_OK && e < g->numel[k]; e++) {
            double orig = v[e];
            v[e] = orig + eps;
            st = write_input(x, v);
            if (st == TD_OK) st = eval(g, plus);
            v[e] = orig - eps;
            if (st == TD_OK) st = write_input(x, v);
            if (st == TD_OK) st = eval(g, minus);
            v[e] = orig;
            for (int64_t c = 0; st == TD_OK && c < g->cols; c++)
                J[(r0 + e) * g->cols + c] = (plus[c] - minus[c]) / (2 * eps);
        }
        if (v) {
            td_status restore = write_input(x, v);
            if (st == TD_OK) st = restore;
        }
        free(v);
    }
    free(plus);
    free(minus);
    return st;
}

td_status td_gradcheck(td_multi_fn fn, void *user, int n, td_tensor *const *inputs, const td_gradcheck_options *opt) {
    td_gradcheck_options o = opt ? *opt : (td_gradcheck_options){1e-6, 1e-5, 1e-3};
    if (!fn || n < 0 || n > 64 || (n && !inputs)) return TD_ERR(TD_ERR_MISUSE, "gradcheck: need fn and 0..64 inputs");
    gc_state g = {.fn = fn, .user = user, .n = n, .inputs = inputs};
    for (int i = 0; i < n; i++) {
        TD_CHECK_ARG_ST(inputs[i], "gradcheck");
        if (!inputs[i]->requires_grad) continue;
        if (inputs[i]->dtype != TD_F64)
            return TD_ERR(TD_ERR_DTYPE, "gradcheck: input %d is %s; gradcheck needs float64 inputs", i,
                          td_dtype_name(inputs[i]->dtype));
        g.chk[g.n_chk] = i;
        g.numel[g.n_chk] = td__numel(inputs[i]->ndim, inputs[i]->shape);
        g.rows += g.numel[g.n_chk++];
    }
    if (!g.n_chk) return TD_ERR(TD_ERR_MISUSE, "gradcheck: no input requires grad");
    td_no_grad_begin();
    td_scope_begin();
    td_tensor *y = fn(user, n, inputs);
    if (y) g.cols = td__numel(y->ndim, y->shape);
    td_scope_end();
    td_no_grad_end();
    if (!y) return td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "gradcheck: fn returned NULL");
    double *Ja = malloc((size_t)(g.rows * g.cols + 1) * sizeof *Ja),
           *Jn = malloc((size_t)(g.rows * g.cols + 1) * sizeof *Jn);
    td_status st = Ja && Jn ? analytical(&g, Ja) : TD_ERR(TD_ERR_OOM, "gradcheck: out of host memory");
    if (st == TD_OK) st = numerical(&g, o.eps, Jn);
    double worst = 0;
    int64_t wr = -1, wc = -1;
    for (int64_t r = 0; st == TD_OK && r < g.rows; r++)
        for (int64_t c = 0; c < g.cols; c++) {
            double a = Ja[r * g.cols + c], nu = Jn[r * g.cols + c];
            double excess = fabs(a - nu) / (o.atol + o.rtol * fabs(nu));
            if (!(excess <= 1) && (wr < 0 || !(excess <= worst))) worst = excess, wr = r, wc = c;
        }
    if (st == TD_OK && wr >= 0) {
        int k = 0;
        int64_t e = wr;
        while (e >= g.numel[k]) e -= g.numel[k++];
        double a = Ja[wr * g.cols + wc], nu = Jn[wr * g.cols + wc];
        st = TD_ERR(TD_ERR_STATE,
                    "gradcheck: Jacobian mismatch for input %d element %lld, output element %lld: analytical %.10g "
                    "vs numerical %.10g (|diff| %.3g > atol %g + rtol %g * |numerical|)",
                    g.chk[k], (long long)e, (long long)wc, a, nu, fabs(a - nu), o.atol, o.rtol);
    }
    free(Ja);
    free(Jn);
    return st;
}

/* ---- gradgradcheck ---- */

typedef struct gg_state {
    td_multi_fn fn;
    void *user;
    int n; /* fn's inputs; in[n] of gg_fn is grad_output */
    int n_chk;
    int chk[64];
} gg_state;

/* g(in[0..n), gy = in[n]): fn's input gradients, flattened and concatenated.
** It records (create_graph) even when td_gradcheck evaluates it under no_grad. */
static td_tensor *gg_fn(void *user, int n, td_tensor *const *in) {
    const gg_state *s = user;
    (void)n;
    td_enable_grad_begin();
    td_tensor *y = s->fn(s->user, s->n, in), *x[64], *g[64], *out = NULL;
    for (int k = 0; k < s->n_chk; k++) x[k] = in[s->chk[k]];
    td_status st = y ? td_grad(1, &y, &in[s->n], s->n_chk, x, g, true, true, true) : td_last_status();
    for (int k = 0; st == TD_OK && k < s->n_chk; k++) {
        int64_t numel = td__numel(x[k]->ndim, x[k]->shape);
        g[k] = td_reshape(g[k] ? g[k] : td_zeros_like(x[k]), 1, &numel);
    }
    if (st == TD_OK) out = td_cat(s->n_chk, g, 0);
    td_enable_grad_end();
    return out;
}

td_status td_gradgradcheck(td_multi_fn fn, void *user, int n, td_tensor *const *inputs, td_tensor *grad_output,
                           const td_gradcheck_options *opt) {
    if (!fn || n < 0 || n > 63 || (n && !inputs))
        return TD_ERR(TD_ERR_MISUSE, "gradgradcheck: need fn and 0..63 inputs");
    gg_state s = {.fn = fn, .user = user, .n = n};
    for (int i = 0; i < n; i++) {
        TD_CHECK_ARG_ST(inputs[i], "gradgradcheck");
        if (inputs[i]->requires_grad) s.chk[s.n_chk++] = i;
    }
    if (!s.n_chk) return TD_ERR(TD_ERR_MISUSE, "gradgradcheck: no input requires grad");
    td_tensor *in[64], *gy = grad_output ? td_retain(grad_output) : NULL;
    if (!gy) {
        td_no_grad_begin();
        td_scope_begin();
        td_tensor *y = fn(user, n, inputs);
        gy = y ? td_keep(td_sub_scalar(
                     td_mul_scalar(td_rand(y->ndim, y->shape, 0x6AD6AD, 0, TD_F64, y->storage->device), 2), 1))
               : NULL;
        td_scope_end();
        td_no_grad_end();
        if (!gy) return td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "gradgradcheck: fn returned NULL");
        td_status st = td_set_requires_grad(gy, true);
        if (st != TD_OK) {
            td_release(gy);
            return st;
        }
    }
    memcpy(in, inputs, (size_t)n * sizeof *in);
    in[n] = gy;
    td_status st = td_gradcheck(gg_fn, &s, n + 1, in, opt);
    td_release(gy);
    if (st == TD_ERR_STATE && !strncmp(td_last_error(), "gradcheck: ", 11)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", td_last_error() + 11);
        st = TD_ERR(TD_ERR_STATE, "gradgradcheck: %s", msg);
    }
    return st;
}
