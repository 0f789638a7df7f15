/*
** The CTC loss on any device, composed from ops: CUDA, Vulkan and any other
** backend get it with no kernel of their own. The math is ctc_loss.c's (l'(s),
** alpha, beta, PyTorch's gradient); here all N samples advance together as
** [1, N, S'] log-space rows (S' = 2 max(L) + 1), a few ops per time step and no
** host read. With >>k / <<k a shift along s that fills -inf:
**   lpe[t, b, s] = lp[t, b, l'_b(s)]                                   (one gather)
**   alpha[0] = lpe[0] + init           init = 0 at s < min(2, S'_b), -inf else
**   alpha[t] = lpe[t] + lse(alpha[t-1], alpha[t-1] >>1, (alpha[t-1] >>2) + skip)
**     skip[b, s] = 0 where l'(s) != blank and l'(s) != l'(s-2), -inf else
**   nll[b] = -lse_s(alpha[Tb-1, b, s] + end[b, s])  end = 0 at s = S'_b - 1, S'_b - 2 (all -inf for Tb = 0)
** A row runs on past its sample's Tb (alpha at Tb-1 is gathered at the end), and
** what reaches s >= S'_b never comes back (alpha moves right only): no per-step
** masks. Backward, from t = T-1 down:
**   beta[t] = lpe[t] + lse(beta[t+1], beta[t+1] <<1, (beta[t+1] <<2) + skip <<2, last[t] + end)
**     last[t, b] = 0 at t = Tb - 1, -inf else: beta starts at Tb - 1 and is -inf after it
**   occ[t, b, c] = sum_{s: l'(s) = c} exp(alpha + beta - lpe + nll)[t, b, s]   (one scatter_add;
**     alpha + beta counts lpe twice, so this is the posterior of passing (t, s))
**   dlp[t, b, c] = (exp(lp[t, b, c]) - occ[t, b, c]) dnll[b] for t < Tb, 0 after; zero_infinity: 0 where
**     nll[b] is inf (else NaN there, as on the host)
** The tables (labels, masks) are built on the host from ctc_loss.c's checked
** copies and uploaded once; td_logsumexp of all -inf is -inf. Each step is
** 6 launches forward (the two shifts' cats, the add of the skip mask, the
** rows' cat, the lse, the add of lpe) and 7 backward, all on the device's queue.
*/
#include <math.h>
#include <stdlib.h>

#include "ctc_internal.h"

typedef struct ctc_dev {
    td__ctc_data *d;
    int64_t Sp;                           /* S' = 2 max(L) + 1 */
    td_tensor *gidx;                      /* [T, N, S'] int64 l'_b(s) (blank past S'_b) */
    td_tensor *init, *skip, *skip2, *end; /* [1, N, S'] 0 / -inf; skip2 = skip <<2 */
    td_tensor *last;                      /* [T, N, 1] 0 at t = Tb - 1, -inf else */
    td_tensor *lastidx;                   /* [1, N, S'] int64 max(Tb - 1, 0) */
    td_tensor *after;                     /* [T, N, 1] bool t >= Tb */
    td_tensor *zfix;                      /* [N] bool Tb = 0 and L = 0 (nll 0); NULL when none */
    td_tensor *ninf;                      /* [1, N, 2] -inf */
} ctc_dev;

static void ctc_dev_free(void *p) {
    ctc_dev *c = p;
    if (!c) return;
    td_tensor *t[] = {c->gidx, c->init, c->skip, c->skip2, c->end, c->last, c->lastidx, c->after, c->zfix, c->ninf};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) td_release(t[i]);
    td__ctc_data_free(c->d);
    free(c);
}

/* x [1, N, S'] shifted by k along s (right: toward larger s), -inf filled in */
static td_tensor *shift(const ctc_dev *c, td_tensor *x, int64_t k, bool right) {
    if (k >= c->Sp) return td_slice(c->ninf, 2, 0, c->Sp, 1); /* S' <= 2 here */
    td_tensor *pad = td_slice(c->ninf, 2, 0, k, 1);
    td_tensor *two[2] = {pad, td_slice(x, 2, 0, c->Sp - k, 1)};
    if (!right) two[0] = td_slice(x, 2, k, c->Sp, 1), two[1] = pad;
    return td_cat(2, two, 2);
}

/* lse over the n [1, N, S'] rows in xs */
static td_tensor *lse_rows(int n, td_tensor *const *xs) { return td_logsumexp(td_cat(n, xs, 0), 1, (int[]){0}, true); }

/* lp [T, N, C] -> nll [N] (zero_infinity applied); saves lp, lpe, alpha and the raw nll */
static td_status ctcd_fw(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    ctc_dev *c = td_ctx_user(ctx);
    td_ctx_set_data(ctx, c, ctc_dev_free); /* the node (or apply, without one) frees it */
    int64_t T = c->d->T, N = c->d->N;
    td_tensor **al = malloc((size_t)(T ? T : 1) * sizeof *al);
    if (!al) return TD_ERR(TD_ERR_OOM, "ctc_loss: out of host memory");
    td_scope_begin();
    td_tensor *lpe = td_gather(in[0], 2, c->gidx), *nll;
    if (T == 0) { /* no frames: only empty targets have a (empty) path */
        nll = td_masked_fill(td_full(1, &N, INFINITY, td_tensor_dtype(in[0]), td_tensor_device(in[0])),
                             c->zfix ? c->zfix : td_full(1, &N, 0, TD_BOOL, td_tensor_device(in[0])), 0);
    } else {
        al[0] = td_add(td_slice(lpe, 0, 0, 1, 1), c->init);
        for (int64_t t = 1; t < T; t++) {
            td_scope_begin();
            td_tensor *p = al[t - 1], *rows[3] = {p, shift(c, p, 1, true), td_add(shift(c, p, 2, true), c->skip)};
            al[t] = td__scope_end_keep(td_add(td_slice(lpe, 0, t, t + 1, 1), lse_rows(3, rows)));
        }
        td_tensor *alpha = td_cat((int)T, al, 0), *fin = td_gather(alpha, 0, c->lastidx);
        nll = td_reshape(td_neg(td_logsumexp(td_add(fin, c->end), 1, (int[]){2}, false)), 1, &N);
        if (c->zfix) nll = td_masked_fill(nll, c->zfix, 0);
        td_tensor *keep[4] = {in[0], lpe, alpha, nll};
        if (nll && td_ctx_save_for_backward(ctx, 4, keep) != TD_OK) nll = NULL;
    }
    td_tensor *y = nll;
    if (y && c->d->zero_infinity)
        y = td_masked_fill(nll, td_eq(nll, td_scalar(INFINITY, td_tensor_dtype(nll), td_tensor_device(nll))), 0);
    out[0] = td__scope_end_keep(y);
    free(al);
    return out[0] ? TD_OK : td_last_status();
}

static td_status ctcd_bw(td_function_ctx *ctx, int n_out, td_tensor *const *gy, int n_in, td_tensor **gx) {
    (void)n_out, (void)n_in;
    ctc_dev *c = td_ctx_data(ctx);
    int64_t T = c->d->T, N = c->d->N;
    if (T == 0) { /* nothing saved: an empty gradient */
        gx[0] = td_zeros(3, (int64_t[]){0, N, c->d->C}, td_tensor_dtype(gy[0]), td_tensor_device(gy[0]));
        return gx[0] ? TD_OK : td_last_status();
    }
    td_tensor *lp = td_ctx_saved(ctx, 0), *lpe = td_ctx_saved(ctx, 1), *alpha = td_ctx_saved(ctx, 2);
    td_tensor *nll = td_ctx_saved(ctx, 3);
    if (!lp || !lpe || !alpha || !nll) return td_last_status();
    td_tensor **be = malloc((size_t)T * sizeof *be);
    if (!be) return TD_ERR(TD_ERR_OOM, "ctc_loss: out of host memory");
    td_scope_begin();
    be[T - 1] = td_add(td_slice(lpe, 0, T - 1, T, 1), td_add(td_slice(c->last, 0, T - 1, T, 1), c->end));
    for (int64_t t = T - 2; t >= 0; t--) {
        td_scope_begin();
        td_tensor *n = be[t + 1], *rows[4] = {n, shift(c, n, 1, false), td_add(shift(c, n, 2, false), c->skip2),
                                              td_add(td_slice(c->last, 0, t, t + 1, 1), c->end)};
        be[t] = td__scope_end_keep(td_add(td_slice(lpe, 0, t, t + 1, 1), lse_rows(4, rows)));
    }
    td_tensor *beta = td_cat((int)T, be, 0);
    int64_t col[3] = {1, N, 1};
    td_tensor *nll3 = td_reshape(nll, 3, col); /* nll3 - nll3: NaN for an impossible sample, as on the host */
    td_tensor *post = td_exp(td_add(td_sub(td_add(alpha, beta), lpe), nll3));
    td_tensor *occ = td_scatter_add(td_zeros_like(lp), 2, c->gidx, post);
    td_tensor *g = td_mul(td_add(td_sub(td_exp(lp), occ), td_sub(nll3, nll3)), td_reshape(gy[0], 3, col));
    g = td_masked_fill(g, c->after, 0);
    if (c->d->zero_infinity)
        g = td_masked_fill(
            g, td_reshape(td_eq(nll, td_scalar(INFINITY, td_tensor_dtype(nll), td_tensor_device(nll))), 3, col), 0);
    gx[0] = td__scope_end_keep(g);
    free(be);
    return gx[0] ? TD_OK : td_last_status();
}

static const td_function ctcd_fn = {.name = "ctc_loss", .forward = ctcd_fw, .backward = ctcd_bw};

/* host values (src dtype) -> a tensor of dtype dt on dev, owned by the caller */
static td_tensor *upload(const void *v, int nd, const int64_t *shape, td_dtype src, td_dtype dt, td_device dev) {
    td_scope_begin();
    td_tensor *t = td_to(td_cast(td_from_data(v, nd, shape, src, TD_CPU), dt), dev);
    td_keep(t);
    td_scope_end();
    return t;
}

/* The tables of the top, from d's host copies. */
static ctc_dev *ctc_tables(td__ctc_data *d, td_dtype dt, td_device dev) {
    int64_t T = d->T, N = d->N, Lmax = 0;
    for (int64_t b = 0; b < N; b++) Lmax = d->tl[b] > Lmax ? d->tl[b] : Lmax;
    int64_t Sp = 2 * Lmax + 1, NS = N * Sp, TN = T * N;
    ctc_dev *c = calloc(1, sizeof *c);
    double *init = malloc((size_t)NS * sizeof *init), *skip = malloc((size_t)NS * sizeof *skip);
    double *skip2 = malloc((size_t)NS * sizeof *skip2), *end = malloc((size_t)NS * sizeof *end);
    double *last = malloc((size_t)(TN ? TN : 1) * sizeof *last), *ninf = malloc((size_t)(2 * N + 1) * sizeof *ninf);
    int64_t *lab = malloc((size_t)NS * sizeof *lab), *lastidx = malloc((size_t)NS * sizeof *lastidx);
    bool *after = malloc((size_t)(TN ? TN : 1) * sizeof *after), *zfix = malloc((size_t)(N ? N : 1) * sizeof *zfix);
    bool any_zfix = false;
    if (!c || !init || !skip || !skip2 || !end || !last || !ninf || !lab || !lastidx || !after || !zfix) {
        free(c), c = NULL;
        td__ctc_data_free(d);
        TD_ERR(TD_ERR_OOM, "ctc_loss: out of host memory");
        goto done;
    }
    c->d = d, c->Sp = Sp;
    for (int64_t b = 0; b < N; b++) {
        int64_t Spb = 2 * d->tl[b] + 1, Tb = d->il[b];
        for (int64_t s = 0; s < Sp; s++) {
            int64_t i = b * Sp + s, l = s < Spb ? td__ctc_ext_label(d, b, s) : d->blank;
            lab[i] = l;
            init[i] = s < 2 && s < Spb ? 0 : -INFINITY;
            skip[i] = s >= 2 && s < Spb && l != d->blank && l != td__ctc_ext_label(d, b, s - 2) ? 0 : -INFINITY;
            end[i] = Tb > 0 && s < Spb && s >= Spb - 2 ? 0 : -INFINITY;
            lastidx[i] = Tb > 0 ? Tb - 1 : 0;
        }
        for (int64_t s = 0; s < Sp; s++) skip2[b * Sp + s] = s + 2 < Sp ? skip[b * Sp + s + 2] : -INFINITY;
        for (int64_t t = 0; t < T; t++) last[t * N + b] = t == Tb - 1 ? 0 : -INFINITY, after[t * N + b] = t >= Tb;
        zfix[b] = Tb == 0 && d->tl[b] == 0;
        any_zfix |= zfix[b];
        ninf[2 * b] = ninf[2 * b + 1] = -INFINITY;
    }
    int64_t row[3] = {1, N, Sp}, tcol[3] = {T, N, 1}, full[3] = {T, N, Sp};
    td_scope_begin();
    td_tensor *lab1 = td_from_data(lab, 3, row, TD_I64, TD_CPU);
    c->gidx = td_keep(td_to(td_contiguous(td_expand(lab1, 3, full)), dev));
    td_scope_end();
    c->init = upload(init, 3, row, TD_F64, dt, dev);
    c->skip = upload(skip, 3, row, TD_F64, dt, dev);
    c->skip2 = upload(skip2, 3, row, TD_F64, dt, dev);
    c->end = upload(end, 3, row, TD_F64, dt, dev);
    c->last = upload(last, 3, tcol, TD_F64, dt, dev);
    c->lastidx = upload(lastidx, 3, row, TD_I64, TD_I64, dev);
    c->after = upload(after, 3, tcol, TD_BOOL, TD_BOOL, dev);
    c->zfix = any_zfix ? upload(zfix, 1, &N, TD_BOOL, TD_BOOL, dev) : NULL;
    c->ninf = upload(ninf, 3, (int64_t[]){1, N, 2}, TD_F64, dt, dev);
    if (!c->gidx || !c->init || !c->skip || !c->skip2 || !c->end || !c->last || !c->lastidx || !c->after ||
        (any_zfix && !c->zfix) || !c->ninf)
        ctc_dev_free(c), c = NULL;
done:
    free(init), free(skip), free(skip2), free(end), free(last), free(ninf), free(lab), free(lastidx), free(after),
        free(zfix);
    return c;
}

td_tensor *td__ctc_nll_device(td__ctc_data *d, td_tensor *lp) {
    ctc_dev *c = ctc_tables(d, td_tensor_dtype(lp), td_tensor_device(lp));
    if (!c) return NULL;
    td_tensor *nll = NULL;
    return td_function_apply(&ctcd_fn, c, 1, &lp, 1, &nll) == TD_OK ? nll : NULL;
}
