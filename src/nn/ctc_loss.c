/*
** F.ctc_loss / nn.CTCLoss on the CPU: log_probs [T, N, C] (log_softmax
** outputs), targets [N, S] padded or 1-D concatenated, input_lengths and
** target_lengths [N]. Sample b has Tb = input_lengths[b] frames and L =
** target_lengths[b] labels l; its extended label sequence is
** l'(s) = blank for even s, l[(s-1)/2] for odd s, s < S' = 2L + 1. In log space
** (double precision, lse = log-sum-exp):
**   alpha[0][0] = lp[0, blank], alpha[0][1] = lp[0, l'(1)], else -inf
**   alpha[t][s] = lp[t, l'(s)] + lse(alpha[t-1][s], alpha[t-1][s-1],
**                                   alpha[t-1][s-2] if l'(s) != blank and l'(s) != l'(s-2))
**   nll = -lse(alpha[Tb-1][S'-1], alpha[Tb-1][S'-2])
**   beta is alpha run backwards (beta[Tb-1][S'-1], [S'-2] = lp there; s+1, s+2 forward),
**   both including lp[t, l'(s)], so alpha[t][s] + beta[t][s] - lp[t, l'(s)] is the log
**   probability of the paths through (t, s).
**   d nll / d lp[t, c] = exp(lp[t, c]) - exp(lse_{s: l'(s) = c}(alpha + beta)[t][s] + nll - lp[t, c])
** for t < Tb, 0 after: PyTorch's gradient, whose exp(lp) term assumes lp = log_softmax(logits): it is
** then the exact gradient of the logits (the term cancels through log_softmax's backward), not of lp
** taken as a free input. An impossible alignment gives nll = inf (and NaN gradients) unless
** zero_infinity, which makes both 0. Reductions over the per-sample nll, composed with ops: none,
** sum, mean = mean over b of nll[b] / max(L, 1).
** CPU tensors: the recursions run on the host in double, in one custom autograd function. Every other
** device: the same recursions composed from ops on the device (ctc_loss_device.c), no host read. Either
** way the targets and lengths are read on the host once, checked, and turned into tables (as PyTorch
** reads the lengths): keep them on the CPU to spare a device sync.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctc_internal.h"

typedef td__ctc_data ctc_data;

void td__ctc_data_free(void *p) {
    ctc_data *d = p;
    if (!d) return;
    free(d->il), free(d->tl), free(d->toff), free(d->tg), free(d->nll), free(d);
}

static double lse2(double a, double b) {
    double m = a > b ? a : b;
    return m == -INFINITY ? -INFINITY : m + log(exp(a - m) + exp(b - m));
}

static double lse3(double a, double b, double c) { return lse2(lse2(a, b), c); }

/* alpha [Tb, S'] of sample b (lp is [T, N, C] in double); returns nll */
static double ctc_alpha(const ctc_data *d, const double *lp, int64_t b, double *alpha) {
    int64_t Tb = d->il[b], Sp = 2 * d->tl[b] + 1;
    const double *lpb = lp + b * d->C;
    int64_t tstride = d->N * d->C;
    for (int64_t s = 0; s < Sp; s++) alpha[s] = s < 2 ? lpb[td__ctc_ext_label(d, b, s)] : -INFINITY;
    for (int64_t t = 1; t < Tb; t++) {
        const double *prev = alpha + (t - 1) * Sp, *row = lpb + t * tstride;
        double *cur = alpha + t * Sp;
        for (int64_t s = 0; s < Sp; s++) {
            int64_t l = td__ctc_ext_label(d, b, s);
            double a = prev[s], a1 = s > 0 ? prev[s - 1] : -INFINITY;
            double a2 = s > 1 && l != d->blank && l != td__ctc_ext_label(d, b, s - 2) ? prev[s - 2] : -INFINITY;
            cur[s] = row[l] + lse3(a, a1, a2);
        }
    }
    if (Tb == 0) return Sp == 1 ? 0 : INFINITY; /* no frames: only the empty target has a (empty) path */
    const double *last = alpha + (Tb - 1) * Sp;
    return -(Sp > 1 ? lse2(last[Sp - 1], last[Sp - 2]) : last[0]);
}

/* grad[t, b, :] (sample b's slice of [T, N, C]) = gout * d nll / d lp (see the top) */
static void ctc_grad(const ctc_data *d, const double *lp, int64_t b, double gout, const double *alpha, double *beta,
                     double *lcab, double *grad) {
    int64_t Tb = d->il[b], Sp = 2 * d->tl[b] + 1, C = d->C, tstride = d->N * C;
    const double *lpb = lp + b * C;
    double nll = d->nll[b];
    if (d->zero_infinity && isinf(nll)) return; /* grad stays 0 */
    for (int64_t t = Tb - 1; t >= 0; t--) {
        const double *row = lpb + t * tstride, *next = beta + (t + 1) * Sp;
        double *cur = beta + t * Sp;
        for (int64_t s = Sp - 1; s >= 0; s--) {
            int64_t l = td__ctc_ext_label(d, b, s);
            if (t == Tb - 1) {
                cur[s] = s >= Sp - 2 ? row[l] : -INFINITY;
                continue;
            }
            double a = next[s], a1 = s + 1 < Sp ? next[s + 1] : -INFINITY;
            double a2 = s + 2 < Sp && l != d->blank && l != td__ctc_ext_label(d, b, s + 2) ? next[s + 2] : -INFINITY;
            cur[s] = row[l] + lse3(a, a1, a2);
        }
        for (int64_t c = 0; c < C; c++) lcab[c] = -INFINITY;
        for (int64_t s = 0; s < Sp; s++) {
            int64_t l = td__ctc_ext_label(d, b, s);
            lcab[l] = lse2(lcab[l], alpha[t * Sp + s] + cur[s]);
        }
        double *g = grad + t * tstride + b * C;
        for (int64_t c = 0; c < C; c++) g[c] = (exp(row[c]) - exp(lcab[c] + nll - row[c])) * gout;
    }
}

/* lp (inputs[0], [T, N, C]) -> nll [N], zeroed where infinite under zero_infinity */
static td_status ctc_fw(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    ctc_data *d = td_ctx_user(ctx);
    td_ctx_set_data(ctx, d, td__ctc_data_free); /* the node (or apply, without one) frees it */
    int64_t numel = d->T * d->N * d->C, Smax = 0;
    for (int64_t b = 0; b < d->N; b++) Smax = 2 * d->tl[b] + 1 > Smax ? 2 * d->tl[b] + 1 : Smax;
    double *lp = malloc((size_t)numel * sizeof *lp), *alpha = malloc((size_t)(d->T * Smax + 1) * sizeof *alpha);
    double *y = malloc((size_t)d->N * sizeof *y);
    td_status st = lp && alpha && y ? td_copy_to_host(in[0], lp, (size_t)numel * sizeof *lp, TD_F64) : TD_ERR_OOM;
    if (st == TD_OK) {
        for (int64_t b = 0; b < d->N; b++) {
            d->nll[b] = ctc_alpha(d, lp, b, alpha);
            y[b] = d->zero_infinity && isinf(d->nll[b]) ? 0 : d->nll[b];
        }
        out[0] = td_cast(td_from_data(y, 1, &d->N, TD_F64, TD_CPU), td_tensor_dtype(in[0]));
        st = out[0] ? td_ctx_save_for_backward(ctx, 1, in) : td_last_status();
    } else if (st == TD_ERR_OOM) {
        st = TD_ERR(TD_ERR_OOM, "ctc_loss: out of host memory");
    }
    free(lp), free(alpha), free(y);
    return st;
}

static td_status ctc_bw(td_function_ctx *ctx, int n_out, td_tensor *const *gy, int n_in, td_tensor **gx) {
    (void)n_out, (void)n_in;
    ctc_data *d = td_ctx_data(ctx);
    td_tensor *lpt = td_ctx_saved(ctx, 0);
    if (!lpt) return td_last_status();
    int64_t numel = d->T * d->N * d->C, Smax = 0;
    for (int64_t b = 0; b < d->N; b++) Smax = 2 * d->tl[b] + 1 > Smax ? 2 * d->tl[b] + 1 : Smax;
    double *lp = malloc((size_t)numel * sizeof *lp), *grad = calloc((size_t)numel, sizeof *grad);
    double *alpha = malloc((size_t)(d->T * Smax + 1) * sizeof *alpha);
    double *beta = malloc((size_t)(d->T * Smax + 1) * sizeof *beta), *lcab = malloc((size_t)d->C * sizeof *lcab);
    double *g = malloc((size_t)d->N * sizeof *g);
    td_status st =
        lp && grad && alpha && beta && lcab && g ? TD_OK : TD_ERR(TD_ERR_OOM, "ctc_loss: out of host memory");
    if (st == TD_OK) st = td_copy_to_host(lpt, lp, (size_t)numel * sizeof *lp, TD_F64);
    if (st == TD_OK) st = td_copy_to_host(gy[0], g, (size_t)d->N * sizeof *g, TD_F64);
    if (st == TD_OK) {
        for (int64_t b = 0; b < d->N; b++) {
            ctc_alpha(d, lp, b, alpha);
            ctc_grad(d, lp, b, g[b], alpha, beta, lcab, grad);
        }
        gx[0] = td_cast(td_from_data(grad, 3, (int64_t[]){d->T, d->N, d->C}, TD_F64, TD_CPU), td_tensor_dtype(lpt));
        if (!gx[0]) st = td_last_status();
    }
    free(lp), free(grad), free(alpha), free(beta), free(lcab), free(g);
    return st;
}

static const td_function ctc_fn = {.name = "ctc_loss", .forward = ctc_fw, .backward = ctc_bw};

/* An integer tensor of n elements on the host as int64 (NULL with the error set). */
static int64_t *host_ints(td_tensor *t, int64_t n, const char *what) {
    td_dtype dt = td_tensor_dtype(t);
    if (td_dtype_is_float(dt) || dt == TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "ctc_loss: %s must be an integer tensor, got %s", what, td_dtype_name(dt));
    if (td_numel(t) != n)
        TD_FAIL_NULL(TD_ERR_SHAPE, "ctc_loss: %s has %lld elements, want %lld", what, (long long)td_numel(t),
                     (long long)n);
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) TD_FAIL_NULL(TD_ERR_OOM, "ctc_loss: out of host memory");
    if (td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_I64) != TD_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* The checked host copies of targets and lengths; NULL with the error set. */
static ctc_data *ctc_prepare(td_tensor *lp, td_tensor *targets, td_tensor *il, td_tensor *tl, int64_t blank,
                             bool zero_infinity) {
    ctc_data *d = calloc(1, sizeof *d);
    if (!d) TD_FAIL_NULL(TD_ERR_OOM, "ctc_loss: out of host memory");
    d->T = td_size(lp, 0), d->N = td_size(lp, 1), d->C = td_size(lp, 2), d->blank = blank;
    d->zero_infinity = zero_infinity;
    const char *bad = NULL;
    char msg[160];
    int64_t total = 0;
    if (!(d->il = host_ints(il, d->N, "input_lengths")) || !(d->tl = host_ints(tl, d->N, "target_lengths"))) goto fail;
    bool padded = td_ndim(targets) == 2;
    if (td_ndim(targets) != 1 && !(padded && td_size(targets, 0) == d->N)) {
        snprintf(msg, sizeof msg, "targets must be [N=%lld, S] or 1-D, got %d dims", (long long)d->N, td_ndim(targets));
        bad = msg;
    }
    for (int64_t b = 0; !bad && b < d->N; b++) {
        if (d->il[b] < 0 || d->il[b] > d->T)
            snprintf(msg, sizeof msg, "input_lengths[%lld] = %lld is outside [0, T=%lld]", (long long)b,
                     (long long)d->il[b], (long long)d->T),
                bad = msg;
        else if (d->tl[b] < 0 || (padded && d->tl[b] > td_size(targets, 1)))
            snprintf(msg, sizeof msg, "target_lengths[%lld] = %lld is negative or longer than the targets",
                     (long long)b, (long long)d->tl[b]),
                bad = msg;
        total += d->tl[b];
    }
    if (!bad && !padded && total != td_numel(targets))
        snprintf(msg, sizeof msg, "1-D targets have %lld labels, target_lengths sum to %lld",
                 (long long)td_numel(targets), (long long)total),
            bad = msg;
    if (bad) {
        td__ctc_data_free(d);
        TD_FAIL_NULL(TD_ERR_SHAPE, "ctc_loss: %s", bad);
    }
    if (!(d->tg = host_ints(targets, td_numel(targets), "targets"))) goto fail;
    d->toff = malloc((size_t)d->N * sizeof *d->toff);
    d->nll = malloc((size_t)d->N * sizeof *d->nll);
    if (!d->toff || !d->nll) {
        td__ctc_data_free(d);
        TD_FAIL_NULL(TD_ERR_OOM, "ctc_loss: out of host memory");
    }
    for (int64_t b = 0, off = 0; b < d->N; b++) {
        d->toff[b] = padded ? b * td_size(targets, 1) : off;
        off += d->tl[b];
        for (int64_t i = 0; i < d->tl[b]; i++) {
            int64_t l = d->tg[d->toff[b] + i];
            if (l < 0 || l >= d->C || l == blank) {
                long long C = (long long)d->C;
                td__ctc_data_free(d);
                TD_FAIL_NULL(TD_ERR_INDEX,
                             "ctc_loss: target %lld of sample %lld is %lld: not a class in [0, %lld) "
                             "other than blank %lld",
                             (long long)i, (long long)b, (long long)l, C, (long long)blank);
            }
        }
    }
    return d;
fail:
    td__ctc_data_free(d);
    return NULL;
}

td_tensor *td_ctc_loss(td_tensor *log_probs, td_tensor *targets, td_tensor *input_lengths, td_tensor *target_lengths,
                       int64_t blank, td_reduction reduction, bool zero_infinity) {
    const char *fn = "ctc_loss";
    if (!td__check_arg(log_probs, fn, "log_probs") || !td__check_arg(targets, fn, "targets") ||
        !td__check_arg(input_lengths, fn, "input_lengths") || !td__check_arg(target_lengths, fn, "target_lengths"))
        return NULL;
    td_device dev = td_tensor_device(log_probs);
    if (!td_dtype_is_float(td_tensor_dtype(log_probs)))
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: log_probs must be floating, got %s", fn,
                     td_dtype_name(td_tensor_dtype(log_probs)));
    if (td_ndim(log_probs) != 3) {
        char s[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: log_probs %s must be [T, N, C]", fn,
                     td__shape_str(td_ndim(log_probs), td_shape(log_probs), s, sizeof s));
    }
    if (blank < 0 || blank >= td_size(log_probs, 2))
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: blank %lld is not a class in [0, %lld)", fn, (long long)blank,
                     (long long)td_size(log_probs, 2));
    if (reduction != TD_REDUCE_NONE && reduction != TD_REDUCE_MEAN && reduction != TD_REDUCE_SUM)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: reduction %d is not none, mean or sum", fn, (int)reduction);
    ctc_data *d = ctc_prepare(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity);
    if (!d) return NULL;
    int64_t N = d->N;
    double *len = malloc((size_t)(N ? N : 1) * sizeof *len);
    if (!len) {
        td__ctc_data_free(d);
        TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", fn);
    }
    for (int64_t b = 0; b < N; b++) len[b] = d->tl[b] > 1 ? (double)d->tl[b] : 1;
    td_tensor *tlen = td_to(td_cast(td_from_data(len, 1, &N, TD_F64, TD_CPU), td_tensor_dtype(log_probs)), dev);
    free(len);
    td_tensor *nll = NULL;
    if (dev.type != TD_DEVICE_CPU) {
        td_dtype dt = td_tensor_dtype(log_probs); /* half types run the recursion in f32 */
        td_tensor *lp = dt == TD_F16 || dt == TD_BF16 ? td_cast(log_probs, TD_F32) : log_probs;
        if (!(nll = td_cast(td__ctc_nll_device(d, lp), dt))) return NULL;
    } else if (td_function_apply(&ctc_fn, d, 1, &log_probs, 1, &nll) != TD_OK) {
        return NULL;
    }
    if (reduction == TD_REDUCE_NONE) return nll;
    if (reduction == TD_REDUCE_SUM) return td_sum(nll, 0, NULL, false);
    return td_mean(td_div(nll, tlen), 0, NULL, false);
}
