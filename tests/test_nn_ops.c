/* softmax, log_softmax, layer_norm, group_norm, cross_entropy, conv2d and pooling, with
** their backward front-ends: against double-precision loops written here and
** against PyTorch fixtures (tests/fixtures/gen_nn_ops.py). */
#include "core/internal.h"
#include "fixtures/nn_ops_fixtures.h"
#include "nn_util.h"

/* Row lengths that reach every part of the 8-lane kernels: one partial vector, exactly one, one
** plus a tail, several plus a tail, and a long row. */
static const int64_t row_lengths[6] = {1, 7, 8, 9, 33, 4096};

#define TESTS(X)                                                                                                       \
    X(softmax_random)                                                                                                  \
    X(softmax_any_dim)                                                                                                 \
    X(softmax_errors)                                                                                                  \
    X(masked_fill)                                                                                                     \
    X(triu_tril)                                                                                                       \
    X(layer_norm_random)                                                                                               \
    X(layer_norm_errors)                                                                                               \
    X(group_norm_fixtures)                                                                                             \
    X(group_norm_errors)                                                                                               \
    X(xent_fixtures)                                                                                                   \
    X(xent_random)                                                                                                     \
    X(xent_errors)                                                                                                     \
    X(conv_fixtures)                                                                                                   \
    X(conv_random)                                                                                                     \
    X(conv_chunked)                                                                                                    \
    X(conv_threads)                                                                                                    \
    X(conv_errors)                                                                                                     \
    X(pool_fixtures)                                                                                                   \
    X(pool_random)                                                                                                     \
    X(pool_errors)                                                                                                     \
    X(poisoned_outputs_no_leaks)                                                                                       \
    X(exp_ulp)                                                                                                         \
    X(softmax_rows)                                                                                                    \
    X(softmax_rows_streamed)                                                                                           \
    X(layer_norm_rows)                                                                                                 \
    X(xent_rows)                                                                                                       \
    X(max_pool_2x2)

static td_tensor *from_f64(const double *v, int ndim, const int64_t *shape, td_dtype dt) {
    return ASSERT_TENSOR(td_cast(ASSERT_TENSOR(td_from_data(v, ndim, shape, TD_F64, TD_CPU)), dt));
}

/* ---- softmax ---- */

static void ref_softmax(const double *x, double *y, int64_t R, int64_t C, bool log_out) {
    for (int64_t r = 0; r < R; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; j++) m = fmax(m, x[r * C + j]);
        for (int64_t j = 0; j < C; j++) s += exp(x[r * C + j] - m);
        for (int64_t j = 0; j < C; j++) y[r * C + j] = log_out ? x[r * C + j] - m - log(s) : exp(x[r * C + j] - m) / s;
    }
}

TEST(softmax_random) {
    td_scope_begin();
    nn_seed(21);
    const int64_t shapes[4][3] = {{3, 7}, {2, 3, 33}, {1}, {5, 1}};
    const int ndims[4] = {2, 3, 1, 2};
    for (int d = 0; d < 4; d++)
        for (int s = 0; s < 4; s++)
            for (int lg = 0; lg < 2; lg++) {
                td_dtype dt = nn_float_dtypes[d];
                td_tensor *x = nn_rand(ndims[s], shapes[s], 8, dt);
                int64_t C = shapes[s][ndims[s] - 1], R = td_numel(x) / C;
                double *hx = nn_host(x), *want = malloc((size_t)td_numel(x) * sizeof(double));
                ref_softmax(hx, want, R, C, lg);
                td_tensor *y = ASSERT_TENSOR(lg ? td_log_softmax(x, -1) : td_softmax(x, ndims[s] - 1));
                ASSERT(td_tensor_dtype(y) == dt);
                nn_check_tensor(lg ? "log_softmax" : "softmax", y, want, nn_tol(dt), nn_tol(dt) * 4);
                free(hx), free(want);
            }
    /* a transposed input, huge logits (the max shift keeps them finite), and a 0-d tensor */
    td_tensor *xt = nn_rand(2, (int64_t[]){33, 4}, 1, TD_F64);
    td_tensor *big = ASSERT_TENSOR(td_cast(ASSERT_TENSOR(td_transpose(xt, 0, 1)), TD_F32));
    double *hb = nn_host(big), want[4 * 33];
    for (int i = 0; i < 4 * 33; i++) hb[i] = hb[i] * 1000;
    td_tensor *b2 = from_f64(hb, 2, (int64_t[]){4, 33}, TD_F32);
    td_tensor *bt =
        ASSERT_TENSOR(td_transpose(ASSERT_TENSOR(td_contiguous(ASSERT_TENSOR(td_transpose(b2, 0, 1)))), 0, 1));
    ASSERT(!td_is_contiguous(bt));
    ref_softmax(hb, want, 4, 33, false);
    nn_check_tensor("softmax of a transposed view", ASSERT_TENSOR(td_softmax(bt, -1)), want, 1e-6, 1e-5);
    ref_softmax(hb, want, 4, 33, true);
    nn_check_tensor("log_softmax of large logits", ASSERT_TENSOR(td_log_softmax(bt, 1)), want, 1e-3, 1e-6);
    ASSERT_NEAR(td_item(ASSERT_TENSOR(td_softmax(ASSERT_TENSOR(td_scalar(3, TD_F32, TD_CPU)), 0))), 1, 0);
    free(hb);
    td_scope_end();
}

/* softmax over a dim other than the last, against exp(x) / sum(exp(x)) along it computed on the host */
TEST(softmax_any_dim) {
    td_scope_begin();
    enum { A = 3, B = 4, C = 5 };
    double hx[A * B * C], want[A * B * C];
    for (int i = 0; i < A * B * C; i++) hx[i] = 3 * sin(1.7 * i);
    td_tensor *x = from_f64(hx, 3, (int64_t[]){A, B, C}, TD_F32);
    const int64_t n[3] = {A, B, C}, stride[3] = {B * C, C, 1};
    for (int d = -3; d < 2; d++) {
        int dd = d < 0 ? d + 3 : d;
        for (int lg = 0; lg < 2; lg++) {
            for (int i = 0; i < A * B * C; i++) {
                int64_t base = i - (i / stride[dd] % n[dd]) * stride[dd];
                double sum = 0;
                for (int64_t k = 0; k < n[dd]; k++) sum += exp(hx[base + k * stride[dd]]);
                want[i] = lg ? hx[i] - log(sum) : exp(hx[i]) / sum;
            }
            char what[64];
            snprintf(what, sizeof what, "%s over dim %d", lg ? "log_softmax" : "softmax", d);
            nn_check_tensor(what, ASSERT_TENSOR(lg ? td_log_softmax(x, d) : td_softmax(x, d)), want, 1e-6, 1e-5);
        }
    }
    td_scope_end();
}

/* masked_fill and triu/tril against host references */
TEST(masked_fill) {
    td_scope_begin();
    double hx[6] = {1, 2, 3, 4, 5, 6}, want[6];
    bool hm[3] = {true, false, true};
    td_tensor *x = from_f64(hx, 2, (int64_t[]){2, 3}, TD_F32);
    td_tensor *m = ASSERT_TENSOR(td_from_data(hm, 1, (int64_t[]){3}, TD_BOOL, TD_CPU)); /* broadcast over rows */
    for (int i = 0; i < 6; i++) want[i] = hm[i % 3] ? -1e9 : hx[i];
    nn_check_tensor("masked_fill", ASSERT_TENSOR(td_masked_fill(x, m, -1e9)), want, 0, 0);
    ASSERT_ERROR(td_masked_fill(x, x, 0), TD_ERR_DTYPE, "mask must be bool");
    td_tensor *wide = ASSERT_TENSOR(td_zeros(2, (int64_t[]){4, 3}, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_masked_fill(x, wide, 0), TD_ERR_SHAPE, "does not broadcast to x [2,3]");
    td_scope_end();
}

TEST(triu_tril) {
    td_scope_begin();
    enum { N = 2, R = 3, C = 4 };
    double hx[N * R * C], want[N * R * C];
    for (int i = 0; i < N * R * C; i++) hx[i] = i + 1;
    td_tensor *x = from_f64(hx, 3, (int64_t[]){N, R, C}, TD_F64);
    for (int k = -2; k <= 2; k++)
        for (int upper = 0; upper < 2; upper++) {
            for (int i = 0; i < N * R * C; i++) {
                int r = i / C % R, c = i % C;
                want[i] = (upper ? c - r >= k : c - r <= k) ? hx[i] : 0;
            }
            char what[32];
            snprintf(what, sizeof what, "%s(x, %d)", upper ? "triu" : "tril", k);
            nn_check_tensor(what, ASSERT_TENSOR(upper ? td_triu(x, k) : td_tril(x, k)), want, 0, 0);
        }
    ASSERT_ERROR(td_triu(ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU)), 0), TD_ERR_SHAPE,
                 "2 or more dims");
    td_scope_end();
}

TEST(softmax_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 3}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_log_softmax(x, 2), TD_ERR_INDEX, "out of range");
    ASSERT_ERROR(td_softmax(ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_I32, TD_CPU)), -1), TD_ERR_DTYPE, "int32");
    /* the fused backward front-ends */
    td_tensor *wide = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 4}, TD_F32, TD_CPU));
    ASSERT_ERROR(td__softmax_backward(wide, x), TD_ERR_SHAPE, "softmax_backward: dy has shape [2,4] but y has [2,3]");
    ASSERT_ERROR(td__log_softmax_backward(x, ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 3}, TD_I64, TD_CPU))),
                 TD_ERR_DTYPE, "log_softmax_backward: y must be a floating-point tensor, got int64");
    td_scope_end();
}

/* ---- layer_norm ---- */

static void ref_layer_norm(const double *x, const double *w, const double *b, double *y, int64_t R, int64_t D,
                           double eps) {
    for (int64_t r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += x[r * D + j];
        m /= (double)D;
        for (int64_t j = 0; j < D; j++) v += (x[r * D + j] - m) * (x[r * D + j] - m);
        v /= (double)D;
        for (int64_t j = 0; j < D; j++)
            y[r * D + j] = (x[r * D + j] - m) / sqrt(v + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
    }
}

TEST(layer_norm_random) {
    nn_seed(22);
    int64_t xs[3] = {4, 7, 33};
    for (int d = 0; d < 4; d++)
        for (int nn = 1; nn <= 2; nn++)
            for (int affine = 0; affine < 2; affine++) {
                td_dtype dt = nn_float_dtypes[d];
                td_scope_begin();
                td_tensor *x = nn_rand(3, xs, 3, dt);
                td_tensor *w = affine ? nn_rand(nn, xs + 3 - nn, 1, dt) : NULL;
                td_tensor *b = affine ? nn_rand(nn, xs + 3 - nn, 1, dt) : NULL;
                int64_t D = nn == 1 ? 33 : 7 * 33, R = 4 * 7 * 33 / D;
                double *hx = nn_host(x), *hw = w ? nn_host(w) : NULL, *hb = b ? nn_host(b) : NULL;
                double *want = malloc(4 * 7 * 33 * sizeof(double));
                ref_layer_norm(hx, hw, hb, want, R, D, 1e-5);
                td_tensor *y = ASSERT_TENSOR(td_layer_norm(x, nn, w, b, 1e-5));
                ASSERT_EQ_INT(td_ndim(y), 3);
                nn_check_tensor(td_dtype_name(dt), y, want, nn_tol(dt) * 8, nn_tol(dt) * 8);
                free(hx), free(hw), free(hb), free(want);
                td_scope_end();
            }
    /* |mean| >> std: the two-pass variance stays accurate; a strided input */
    td_scope_begin();
    nn_seed(23);
    td_tensor *base = nn_rand(2, (int64_t[]){33, 6}, 1, TD_F64);
    double *hb = nn_host(base);
    for (int i = 0; i < 33 * 6; i++) hb[i] += 1e4;
    td_tensor *xt = ASSERT_TENSOR(td_transpose(from_f64(hb, 2, (int64_t[]){33, 6}, TD_F64), 0, 1));
    double *hx = nn_host(xt), want[6 * 33];
    ref_layer_norm(hx, NULL, NULL, want, 6, 33, 1e-5);
    nn_check_tensor("offset f64", ASSERT_TENSOR(td_layer_norm(xt, 1, NULL, NULL, 1e-5)), want, 1e-9, 1e-9);
    td_tensor *xf = ASSERT_TENSOR(td_cast(xt, TD_F32)); /* the reference reads the rounded f32 inputs */
    double *hxf = nn_host(xf);
    ref_layer_norm(hxf, NULL, NULL, want, 6, 33, 1e-5);
    nn_check_tensor("offset f32", ASSERT_TENSOR(td_layer_norm(xf, 1, NULL, NULL, 1e-5)), want, 1e-4, 1e-4);
    free(hb), free(hx), free(hxf);
    td_scope_end();
}

TEST(layer_norm_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 3}, TD_F32, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_ones(1, (int64_t[]){4}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_layer_norm(x, 1, w, NULL, 1e-5), TD_ERR_SHAPE, "weight has shape [4], expected [3]");
    ASSERT_ERROR(td_layer_norm(x, 3, NULL, NULL, 1e-5), TD_ERR_SHAPE, "n_norm 3 outside [1, 2]");
    td_tensor *wd = ASSERT_TENSOR(td_ones(1, (int64_t[]){3}, TD_F64, TD_CPU));
    ASSERT_ERROR(td_layer_norm(x, 1, NULL, wd, 1e-5), TD_ERR_DTYPE, "bias is float64");
    td_scope_end();
}

/* ---- group_norm ---- */

/* torch's group_norm of x [2, 6, 3, 3] in 3 groups with w and b [6]: y, and
** dx, dw, db of dy (through the backward from the op's saved mean and rstd) */
TEST(group_norm_fixtures) {
    const int64_t xs[4] = {2, 6, 3, 3}, cs[1] = {6};
    for (int d = 0; d < 2; d++) {
        td_scope_begin();
        td_dtype dt = nn_float_dtypes[d];
        double tol = d ? 1e-12 : 1e-5;
        td_tensor *x = from_f64(fx_gn_x, 4, xs, dt), *w = from_f64(fx_gn_w, 1, cs, dt),
                  *b = from_f64(fx_gn_b, 1, cs, dt);
        td_tensor *in[3] = {x, w, b};
        for (int i = 0; i < 3; i++) ASSERT_OK(td_set_requires_grad(in[i], true));
        td_tensor *y = ASSERT_TENSOR(td_group_norm(x, 3, w, b, 1e-5));
        nn_check_tensor("y", y, fx_gn_y, tol, tol);
        ASSERT_OK(td_backward(y, from_f64(fx_gn_dy, 4, xs, dt), false));
        nn_check_tensor("dx", td_grad_of(x), fx_gn_dx, tol, tol);
        nn_check_tensor("dw", td_grad_of(w), fx_gn_dw, tol, tol);
        nn_check_tensor("db", td_grad_of(b), fx_gn_db, tol, tol);
        td_scope_end();
    }
}

TEST(group_norm_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(3, (int64_t[]){2, 6, 3}, TD_F32, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_ones(1, (int64_t[]){4}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_group_norm(x, 4, NULL, NULL, 1e-5), TD_ERR_SHAPE, "6 channels do not split into num_groups 4");
    ASSERT_ERROR(td_group_norm(x, 0, NULL, NULL, 1e-5), TD_ERR_SHAPE, "num_groups 0");
    ASSERT_ERROR(td_group_norm(x, 3, w, NULL, 1e-5), TD_ERR_SHAPE, "weight has shape [4], expected [6]");
    td_tensor *bd = ASSERT_TENSOR(td_ones(1, (int64_t[]){6}, TD_F64, TD_CPU));
    ASSERT_ERROR(td_group_norm(x, 3, NULL, bd, 1e-5), TD_ERR_DTYPE, "bias is float64");
    ASSERT_ERROR(td_group_norm(ASSERT_TENSOR(td_zeros(1, (int64_t[]){6}, TD_F32, TD_CPU)), 1, NULL, NULL, 1e-5),
                 TD_ERR_SHAPE, "expected [N, C, *]");
    ASSERT_ERROR(td_group_norm(ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 6}, TD_I64, TD_CPU)), 1, NULL, NULL, 1e-5),
                 TD_ERR_DTYPE, "floating");
    td_scope_end();
}

/* ---- cross_entropy ---- */

/* log(sum_c exp(xr[c])) over a row of C, shifted by its max */
static double row_logsumexp(const double *xr, int64_t C) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; c++) m = fmax(m, xr[c]);
    for (int64_t c = 0; c < C; c++) s += exp(xr[c] - m);
    return m + log(s);
}

/* Per-sample losses and dlogits of sum_n g[n]*loss[n] by the formula; returns the sum of w[t] over kept targets. */
static double ref_xent(const double *x, const int64_t *t, const double *w, int64_t N, int64_t C, int64_t ig, double eps,
                       double *loss, double *dx, const double *g) {
    double wsum = 0;
    for (int64_t n = 0; n < N; n++) {
        const double *xr = x + n * C;
        double lse = row_logsumexp(xr, C);
        if (t[n] == ig) {
            loss[n] = 0;
            for (int64_t c = 0; c < C; c++) dx[n * C + c] = 0;
            continue;
        }
        wsum += w ? w[t[n]] : 1;
        double l = 0;
        for (int64_t c = 0; c < C; c++) {
            double q = (1 - eps) * (c == t[n]) + eps / (double)C; /* smoothed one-hot */
            double wc = w ? w[c] : 1;
            l += wc * q * (lse - xr[c]);
            dx[n * C + c] = 0;
        }
        loss[n] = l;
        /* d loss / d x[c] = sum_k w_k q_k (p_c - [c == k]) */
        for (int64_t k = 0; k < C; k++) {
            double q = (1 - eps) * (k == t[n]) + eps / (double)C, wk = w ? w[k] : 1;
            for (int64_t c = 0; c < C; c++) dx[n * C + c] += g[n] * wk * q * (exp(xr[c] - lse) - (c == k));
        }
    }
    return wsum;
}

TEST(xent_fixtures) {
    td_scope_begin();
    for (int d = 0; d < 2; d++) {
        td_dtype dt = nn_float_dtypes[d];
        double tol = d ? 1e-12 : 2e-6;
        td_tensor *x = from_f64(fx_xent_logits, 2, (int64_t[]){6, 5}, dt);
        td_tensor *t = ASSERT_TENSOR(td_from_data(fx_xent_target, 1, (int64_t[]){6}, TD_I64, TD_CPU));
        td_tensor *w = from_f64(fx_xent_weight, 1, (int64_t[]){5}, dt);
        td_tensor *dl_none = from_f64(fx_xent_dloss_none, 1, (int64_t[]){6}, dt);
        td_tensor *dl = ASSERT_TENSOR(td_scalar(0.7, dt, TD_CPU));
        const double *losses[12] = {fx_xent_loss_w0_s0_r0, fx_xent_loss_w0_s0_r1, fx_xent_loss_w0_s0_r2,
                                    fx_xent_loss_w0_s1_r0, fx_xent_loss_w0_s1_r1, fx_xent_loss_w0_s1_r2,
                                    fx_xent_loss_w1_s0_r0, fx_xent_loss_w1_s0_r1, fx_xent_loss_w1_s0_r2,
                                    fx_xent_loss_w1_s1_r0, fx_xent_loss_w1_s1_r1, fx_xent_loss_w1_s1_r2};
        const double *grads[12] = {fx_xent_grad_w0_s0_r0, fx_xent_grad_w0_s0_r1, fx_xent_grad_w0_s0_r2,
                                   fx_xent_grad_w0_s1_r0, fx_xent_grad_w0_s1_r1, fx_xent_grad_w0_s1_r2,
                                   fx_xent_grad_w1_s0_r0, fx_xent_grad_w1_s0_r1, fx_xent_grad_w1_s0_r2,
                                   fx_xent_grad_w1_s1_r0, fx_xent_grad_w1_s1_r1, fx_xent_grad_w1_s1_r2};
        for (int k = 0; k < 12; k++) {
            td_tensor *wk = k >= 6 ? w : NULL;
            double ls = (k / 3) % 2 ? 0.2 : 0;
            int red = k % 3 == 0 ? TD_REDUCTION_NONE : k % 3 == 1 ? TD_REDUCTION_MEAN : TD_REDUCTION_SUM;
            char what[64];
            snprintf(what, sizeof what, "%s case %d loss", td_dtype_name(dt), k);
            td_tensor *loss = ASSERT_TENSOR(td__cross_entropy(x, t, wk, -100, ls, red));
            ASSERT_EQ_INT(td_ndim(loss), red == TD_REDUCTION_NONE ? 1 : 0);
            nn_check_tensor(what, loss, losses[k], tol, tol);
            snprintf(what, sizeof what, "%s case %d grad", td_dtype_name(dt), k);
            td_tensor *g = ASSERT_TENSOR(
                td__cross_entropy_backward(red == TD_REDUCTION_NONE ? dl_none : dl, x, t, wk, -100, ls, red));
            nn_check_tensor(what, g, grads[k], tol, tol);
        }
    }
    td_scope_end();
}

TEST(xent_random) {
    td_scope_begin();
    nn_seed(24);
    int64_t N = 33, C = 7;
    int64_t tg[33];
    for (int n = 0; n < N; n++) tg[n] = (int64_t)((nn_uniform() + 1) * 3.5) % C; /* 3 is ignore_index below */
    td_tensor *t = ASSERT_TENSOR(td_from_data(tg, 1, &N, TD_I64, TD_CPU));
    for (int d = 0; d < 4; d++) {
        td_dtype dt = nn_float_dtypes[d];
        td_tensor *x = nn_rand(2, (int64_t[]){N, C}, 4, dt), *w = nn_rand(1, &C, 1, dt);
        td_tensor *gl = nn_rand(1, &N, 1, dt);
        double *hx = nn_host(x), *hw = nn_host(w), *hg = nn_host(gl), loss[33], dx[33 * 7], ones[33];
        ref_xent(hx, tg, hw, N, C, 3, 0.1, loss, dx, hg);
        double tol = nn_tol(dt) * 10;
        nn_check_tensor("loss none", ASSERT_TENSOR(td__cross_entropy(x, t, w, 3, 0.1, TD_REDUCTION_NONE)), loss, tol,
                        tol);
        nn_check_tensor("grad none", ASSERT_TENSOR(td__cross_entropy_backward(gl, x, t, w, 3, 0.1, TD_REDUCTION_NONE)),
                        dx, tol, tol);
        for (int n = 0; n < N; n++) ones[n] = 1;
        double wsum = ref_xent(hx, tg, NULL, N, C, 3, 0.1, loss, dx, ones), total = 0;
        for (int n = 0; n < N; n++) total += loss[n];
        ASSERT_NEAR(td_item(ASSERT_TENSOR(td__cross_entropy(x, t, NULL, 3, 0.1, TD_REDUCTION_MEAN))), total / wsum,
                    tol);
        for (int i = 0; i < N * C; i++) dx[i] /= wsum;
        td_tensor *one = ASSERT_TENSOR(td_scalar(1, dt, TD_CPU));
        nn_check_tensor("grad mean",
                        ASSERT_TENSOR(td__cross_entropy_backward(one, x, t, NULL, 3, 0.1, TD_REDUCTION_MEAN)), dx, tol,
                        tol);
        free(hx), free(hw), free(hg);
    }
    /* logits [C] with a 0-d target */
    td_tensor *x1 = nn_rand(1, &C, 2, TD_F64);
    int64_t t1 = 5;
    double *hx1 = nn_host(x1), l1, d1[7], one = 1;
    ref_xent(hx1, &t1, NULL, 1, C, -100, 0, &l1, d1, &one);
    td_tensor *l = ASSERT_TENSOR(td__cross_entropy(x1, ASSERT_TENSOR(td_from_data(&t1, 0, NULL, TD_I64, TD_CPU)), NULL,
                                                   -100, 0, TD_REDUCTION_NONE));
    ASSERT_EQ_INT(td_ndim(l), 0);
    ASSERT_NEAR(td_item(l), l1, 1e-12);
    free(hx1);
    td_scope_end();
}

TEST(xent_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(2, (int64_t[]){3, 5}, TD_F32, TD_CPU));
    int64_t tg[3] = {0, 4, 5}, three = 3;
    td_tensor *t = ASSERT_TENSOR(td_from_data(tg, 1, &three, TD_I64, TD_CPU));
    ASSERT_ERROR(td__cross_entropy(x, t, NULL, -100, 0, TD_REDUCTION_MEAN), TD_ERR_INDEX,
                 "target 5 at position 2 is out of range [0, 5)");
    ASSERT_ERROR(
        td__cross_entropy_backward(ASSERT_TENSOR(td_scalar(1, TD_F32, TD_CPU)), x, t, NULL, -100, 0, TD_REDUCTION_MEAN),
        TD_ERR_INDEX, "target 5");
    td_tensor *ok = ASSERT_TENSOR(td__cross_entropy(x, t, NULL, 5, 0, TD_REDUCTION_MEAN)); /* 5 ignored */
    ASSERT_NEAR(td_item(ok), log(5.0), 1e-6);
    ASSERT_ERROR(td__cross_entropy(x, ASSERT_TENSOR(td_cast(t, TD_F32)), NULL, -100, 0, 1), TD_ERR_DTYPE, "int64");
    ASSERT_ERROR(td__cross_entropy(x, ASSERT_TENSOR(td_slice(t, 0, 0, 2, 1)), NULL, -100, 0, 1), TD_ERR_SHAPE,
                 "do not fit");
    ASSERT_ERROR(td__cross_entropy(x, t, x, 5, 0, 1), TD_ERR_SHAPE, "weight has shape [3,5], expected [5]");
    ASSERT_ERROR(td__cross_entropy(x, t, NULL, 5, 1.5, 1), TD_ERR_MISUSE, "label_smoothing");
    ASSERT_ERROR(td__cross_entropy(x, t, NULL, 5, 0, 7), TD_ERR_MISUSE, "reduction 7");
    /* every target ignored: the mean is 0/0 = NaN, as in PyTorch */
    int64_t ig[3] = {-100, -100, -100};
    td_tensor *ti = ASSERT_TENSOR(td_from_data(ig, 1, &three, TD_I64, TD_CPU));
    ASSERT(isnan(td_item(ASSERT_TENSOR(td__cross_entropy(x, ti, NULL, -100, 0, TD_REDUCTION_MEAN)))));
    td_scope_end();
}

/* ---- conv2d ---- */

typedef struct conv_case {
    int64_t xs[4], ws[4];
    int st[2], pd[2], dl[2], g;
} conv_case;

/* y = conv(x, w) + b, and for the given dy: dx and dw, by direct loops. */
static void ref_conv(const conv_case *k, const int64_t ys[4], const double *x, const double *w, const double *b,
                     const double *dy, double *y, double *dx, double *dw) {
    int64_t N = k->xs[0], C = k->xs[1], H = k->xs[2], W = k->xs[3], O = k->ws[0], kh = k->ws[2], kw = k->ws[3];
    int64_t Ho = ys[2], Wo = ys[3], Cg = C / k->g, Og = O / k->g;
    memset(dx, 0, sizeof(double) * (size_t)(N * C * H * W));
    memset(dw, 0, sizeof(double) * (size_t)(O * Cg * kh * kw));
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    int64_t yi = ((n * O + o) * Ho + oh) * Wo + ow;
                    double s = b ? b[o] : 0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t i = 0; i < kh; i++)
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t h = oh * k->st[0] - k->pd[0] + i * k->dl[0],
                                        v = ow * k->st[1] - k->pd[1] + j * k->dl[1];
                                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                                int64_t xi = ((n * C + o / Og * Cg + c) * H + h) * W + v,
                                        wi = ((o * Cg + c) * kh + i) * kw + j;
                                s += w[wi] * x[xi];
                                dx[xi] += w[wi] * dy[yi];
                                dw[wi] += x[xi] * dy[yi];
                            }
                    y[yi] = s;
                }
}

static void check_conv(const conv_case *k, td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *dy,
                       const double *y_want, const double *dx_want, const double *dw_want, double tol,
                       const char *what) {
    char msg[96];
    td_tensor *y = ASSERT_TENSOR(td_conv2d(x, w, b, k->st, k->pd, k->dl, k->g));
    snprintf(msg, sizeof msg, "%s y", what);
    nn_check_tensor(msg, y, y_want, tol, tol);
    td_tensor *dx = ASSERT_TENSOR(td__conv2d_backward_input(dy, w, k->xs, k->st, k->pd, k->dl, k->g));
    snprintf(msg, sizeof msg, "%s dx", what);
    nn_check_tensor(msg, dx, dx_want, tol, tol);
    td_tensor *dw = ASSERT_TENSOR(td__conv2d_backward_weight(dy, x, k->ws, k->st, k->pd, k->dl, k->g));
    snprintf(msg, sizeof msg, "%s dw", what);
    nn_check_tensor(msg, dw, dw_want, tol * 4, tol * 4);
}

TEST(conv_fixtures) {
    td_scope_begin();
    const conv_case cases[2] = {{{2, 4, 5, 6}, {6, 2, 3, 2}, {2, 1}, {1, 2}, {1, 2}, 2},
                                {{1, 3, 7, 7}, {2, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1}};
    const double *data[2][7] = {
        {fx_conv_a_x, fx_conv_a_w, fx_conv_a_b, fx_conv_a_y, fx_conv_a_dy, fx_conv_a_dx, fx_conv_a_dw},
        {fx_conv_b_x, fx_conv_b_w, fx_conv_b_b, fx_conv_b_y, fx_conv_b_dy, fx_conv_b_dx, fx_conv_b_dw}};
    const int64_t *ys[2] = {fx_conv_a_yshape, fx_conv_b_yshape};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 2; c++) {
            td_dtype dt = nn_float_dtypes[d];
            const conv_case *k = &cases[c];
            td_tensor *x = from_f64(data[c][0], 4, k->xs, dt), *w = from_f64(data[c][1], 4, k->ws, dt);
            td_tensor *b = from_f64(data[c][2], 1, k->ws, dt), *dy = from_f64(data[c][4], 4, ys[c], dt);
            check_conv(k, x, w, b, dy, data[c][3], data[c][5], data[c][6], d ? 1e-12 : 1e-5, td_dtype_name(dt));
        }
    td_scope_end();
}

/* Case c of dtype dt: conv2d of x, w and b (b may be NULL) and its gradients for a random dy against ref_conv,
** within 16 times the dtype's tolerance; returns dy. */
static td_tensor *check_conv_random(const conv_case *k, td_tensor *x, td_tensor *w, td_tensor *b, td_dtype dt, int c) {
    int64_t ys[4] = {k->xs[0], k->ws[0], 0, 0};
    for (int i = 0; i < 2; i++)
        ys[2 + i] = (k->xs[2 + i] + 2 * k->pd[i] - k->dl[i] * (k->ws[2 + i] - 1) - 1) / k->st[i] + 1;
    td_tensor *dy = nn_rand(4, ys, 1, dt);
    double *hx = nn_host(x), *hw = nn_host(w), *hb = b ? nn_host(b) : NULL, *hdy = nn_host(dy);
    double *y = malloc(sizeof(double) * (size_t)td_numel(dy)), *dx = malloc(sizeof(double) * (size_t)td_numel(x));
    double *dw = malloc(sizeof(double) * (size_t)td_numel(w));
    ref_conv(k, ys, hx, hw, hb, hdy, y, dx, dw);
    char what[64];
    snprintf(what, sizeof what, "%s case %d", td_dtype_name(dt), c);
    check_conv(k, x, w, b, dy, y, dx, dw, nn_tol(dt) * 16, what);
    free(hx), free(hw), free(hb), free(hdy), free(y), free(dx), free(dw);
    return dy;
}

TEST(conv_random) {
    nn_seed(25);
    const conv_case cases[4] = {
        {{3, 6, 7, 9}, {9, 2, 3, 3}, {2, 2}, {1, 1}, {2, 1}, 3},  /* groups, stride, dilation */
        {{2, 3, 33, 1}, {4, 3, 5, 1}, {3, 1}, {2, 0}, {1, 1}, 1}, /* odd sizes, width 1 */
        {{1, 1, 1, 1}, {7, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  /* 1x1 on 1x1 */
        {{2, 4, 6, 5}, {4, 1, 3, 2}, {1, 2}, {2, 1}, {1, 3}, 4},  /* depthwise */
    };
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 4; c++) {
            td_scope_begin();
            td_dtype dt = nn_float_dtypes[d];
            const conv_case *k = &cases[c];
            /* x is a permuted view (non-contiguous) for even cases */
            td_tensor *x = nn_rand(4, k->xs, 1, dt);
            if (c % 2 == 0) {
                int64_t ps[4] = {k->xs[0], k->xs[2], k->xs[3], k->xs[1]};
                x = ASSERT_TENSOR(td_permute(nn_rand(4, ps, 1, dt), (int[]){0, 3, 1, 2}));
            }
            td_tensor *w = nn_rand(4, k->ws, 1, dt), *b = c == 2 ? NULL : nn_rand(1, k->ws, 1, dt);
            check_conv_random(k, x, w, b, dt, c);
            td_scope_end();
        }
}

TEST(conv_chunked) {
    td_scope_begin();
    /* 1x1 conv on 5 images of 2x1024x1024: the im2col buffer holds 4 images, so two chunks */
    nn_seed(26);
    const conv_case k = {{5, 2, 1024, 1024}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1};
    td_tensor *x = nn_rand(4, k.xs, 1, TD_F32), *w = nn_rand(4, k.ws, 1, TD_F32), *b = nn_rand(1, k.ws, 1, TD_F32);
    int64_t ys[4] = {5, 3, 1024, 1024};
    td_tensor *dy = nn_rand(4, ys, 1, TD_F32);
    double *hx = nn_host(x), *hw = nn_host(w), *hb = nn_host(b), *hdy = nn_host(dy);
    int64_t P = 1024 * 1024;
    double *y = malloc(sizeof(double) * (size_t)(5 * 3 * P)), *dx = malloc(sizeof(double) * (size_t)(5 * 2 * P)),
           dw[6] = {0};
    for (int64_t n = 0; n < 5; n++)
        for (int64_t o = 0; o < 3; o++)
            for (int64_t p = 0; p < P; p++) {
                double s = hb[o], g = hdy[(n * 3 + o) * P + p];
                for (int64_t c = 0; c < 2; c++) {
                    s += hw[o * 2 + c] * hx[(n * 2 + c) * P + p];
                    dw[o * 2 + c] += g * hx[(n * 2 + c) * P + p];
                }
                y[(n * 3 + o) * P + p] = s;
            }
    for (int64_t n = 0; n < 5; n++)
        for (int64_t c = 0; c < 2; c++)
            for (int64_t p = 0; p < P; p++) {
                double s = 0;
                for (int64_t o = 0; o < 3; o++) s += hw[o * 2 + c] * hdy[(n * 3 + o) * P + p];
                dx[(n * 2 + c) * P + p] = s;
            }
    check_conv(&k, x, w, b, dy, y, dx, dw, 1e-4, "chunked");
    free(hx), free(hw), free(hb), free(hdy), free(y), free(dx);
    td_scope_end();
}

/* Images shared out over 3 threads, with the paths they choose: 3x3 with padding 1 at stride 1 (the
** run fast path of im2col/col2im, W2's shape; 29 images, so the backward-weight slots hold several
** images per GEMM), a 1x1 window read in place, a 1x1 window with padding, stride 2 with dilation,
** and groups. A rerun must give the same bits (the per-slot dw partials are summed in a fixed order). */
TEST(conv_threads) {
    nn_seed(29);
    nn_threads(3);
    const conv_case cases[5] = {
        {{29, 5, 9, 8}, {6, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},   /* W2-like: 3x3, pad 1, stride 1 */
        {{7, 12, 9, 8}, {10, 12, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}, /* 1x1 in place */
        {{7, 12, 9, 8}, {10, 6, 1, 1}, {1, 1}, {1, 0}, {1, 1}, 2},  /* 1x1 with padding, groups */
        {{7, 6, 11, 10}, {8, 3, 3, 2}, {2, 1}, {1, 2}, {2, 1}, 2},  /* stride, dilation, groups */
        {{7, 4, 9, 8}, {6, 4, 3, 3}, {1, 1}, {2, 0}, {1, 2}, 1},    /* stride 1, uneven padding, dilation */
    };
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 5; c++) {
            td_scope_begin();
            td_dtype dt = nn_float_dtypes[d];
            const conv_case *k = &cases[c];
            td_tensor *x = nn_rand(4, k->xs, 1, dt), *w = nn_rand(4, k->ws, 1, dt), *b = nn_rand(1, k->ws, 1, dt);
            td_tensor *dy = check_conv_random(k, x, w, b, dt, c);
            double *dw1 = nn_host(ASSERT_TENSOR(td__conv2d_backward_weight(dy, x, k->ws, k->st, k->pd, k->dl, k->g)));
            double *dw2 = nn_host(ASSERT_TENSOR(td__conv2d_backward_weight(dy, x, k->ws, k->st, k->pd, k->dl, k->g)));
            ASSERT(memcmp(dw1, dw2, sizeof(double) * (size_t)td_numel(w)) == 0);
            free(dw1), free(dw2);
            td_scope_end();
        }
}

TEST(conv_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(4, (int64_t[]){1, 4, 3, 3}, TD_F32, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_zeros(4, (int64_t[]){6, 2, 5, 5}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_conv2d(x, w, NULL, NULL, NULL, NULL, 2), TD_ERR_SHAPE,
                 "kernel 5x5 (dilated 5x5) is larger than the padded input 3x3");
    ASSERT_ERROR(td_conv2d(x, w, NULL, NULL, (int[]){1, 1}, NULL, 3), TD_ERR_SHAPE, "divisible by groups 3");
    ASSERT_ERROR(td_conv2d(x, w, NULL, NULL, (int[]){1, 1}, NULL, 1), TD_ERR_SHAPE, "expects weight [O, 4, kh, kw]");
    ASSERT_ERROR(td_conv2d(x, w, w, NULL, (int[]){1, 1}, NULL, 2), TD_ERR_SHAPE, "bias must be [6]");
    ASSERT_ERROR(td_conv2d(x, w, NULL, (int[]){0, 1}, NULL, NULL, 2), TD_ERR_MISUSE, "stride >= 1");
    ASSERT_ERROR(td_conv2d(x, w, NULL, NULL, NULL, NULL, 0), TD_ERR_MISUSE, "groups must be >= 1");
    ASSERT_ERROR(
        td_conv2d(ASSERT_TENSOR(td_zeros(3, (int64_t[]){4, 3, 3}, TD_F32, TD_CPU)), w, NULL, NULL, NULL, NULL, 2),
        TD_ERR_SHAPE, "input must be 4-d");
    ASSERT_ERROR(td_conv2d(ASSERT_TENSOR(td_cast(x, TD_F64)), w, NULL, NULL, NULL, NULL, 2), TD_ERR_DTYPE, "differ");
    ASSERT_ERROR(td__conv2d_backward_input(x, w, (int64_t[]){1, 4, 3, 3}, NULL, (int[]){1, 1}, NULL, 2), TD_ERR_SHAPE,
                 "dy has shape [1,4,3,3], expected [1,6,1,1]");
    td_scope_end();
}

/* ---- pooling ---- */

/* max pool (and its indices) or avg pool by direct loops; dx of sum(y * dy). */
static void ref_pool(bool is_max, bool cip, const int64_t xs[4], const int k[2], const int s[2], const int p[2],
                     const int64_t ys[4], const double *x, const double *dy, double *y, int64_t *idx, double *dx) {
    int64_t H = xs[2], W = xs[3], Ho = ys[2], Wo = ys[3];
    memset(dx, 0, sizeof(double) * (size_t)(xs[0] * xs[1] * H * W));
    for (int64_t pl = 0; pl < xs[0] * xs[1]; pl++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t o = (pl * Ho + oh) * Wo + ow, best = -1, cnt = 0, cnt_pad = 0;
                double acc = is_max ? -INFINITY : 0;
                for (int64_t i = 0; i < k[0]; i++)
                    for (int64_t j = 0; j < k[1]; j++) {
                        int64_t h = oh * s[0] - p[0] + i, v = ow * s[1] - p[1] + j;
                        if (h < H + p[0] && v < W + p[1]) cnt_pad++;
                        if (h < 0 || h >= H || v < 0 || v >= W) continue;
                        double xv = x[pl * H * W + h * W + v];
                        cnt++;
                        if (!is_max)
                            acc += xv;
                        else if (xv > acc)
                            acc = xv, best = h * W + v;
                    }
                double div = cip ? (double)cnt_pad : (double)cnt;
                y[o] = is_max ? acc : acc / div;
                if (is_max) {
                    idx[o] = best;
                    dx[pl * H * W + best] += dy[o];
                    continue;
                }
                for (int64_t i = 0; i < k[0]; i++)
                    for (int64_t j = 0; j < k[1]; j++) {
                        int64_t h = oh * s[0] - p[0] + i, v = ow * s[1] - p[1] + j;
                        if (h >= 0 && h < H && v >= 0 && v < W) dx[pl * H * W + h * W + v] += dy[o] / div;
                    }
            }
}

TEST(pool_fixtures) {
    td_scope_begin();
    int64_t xs[4] = {2, 3, 5, 7};
    for (int d = 0; d < 2; d++) {
        td_dtype dt = nn_float_dtypes[d];
        double tol = d ? 1e-12 : 1e-6;
        td_tensor *x = from_f64(fx_pool_x, 4, xs, dt), *idx = NULL;
        td_tensor *y = ASSERT_TENSOR(td_max_pool2d(x, (int[]){3, 2}, (int[]){2, 2}, (int[]){1, 1}, &idx));
        nn_check_tensor("max y", y, fx_maxpool_y, tol, tol);
        ASSERT(idx && td_tensor_dtype(idx) == TD_I64);
        int64_t got[72];
        ASSERT_OK(td_copy_to_host(idx, got, sizeof got, TD_I64));
        for (int i = 0; i < 72; i++) ASSERT_EQ_INT(got[i], fx_maxpool_idx[i]);
        td_tensor *dy = from_f64(fx_maxpool_dy, 4, fx_maxpool_yshape, dt);
        nn_check_tensor("max dx", ASSERT_TENSOR(td__max_pool2d_backward(dy, idx, xs)), fx_maxpool_dx, tol, tol);
        const double *ay[2] = {fx_avgpool0_y, fx_avgpool1_y}, *ady[2] = {fx_avgpool0_dy, fx_avgpool1_dy};
        const double *adx[2] = {fx_avgpool0_dx, fx_avgpool1_dx};
        const int64_t *ays[2] = {fx_avgpool0_yshape, fx_avgpool1_yshape};
        for (int c = 0; c < 2; c++) {
            td_tensor *a = ASSERT_TENSOR(td_avg_pool2d(x, (int[]){3, 3}, (int[]){2, 1}, (int[]){1, 1}, c));
            nn_check_tensor("avg y", a, ay[c], tol, tol);
            td_tensor *g = from_f64(ady[c], 4, ays[c], dt);
            nn_check_tensor(
                "avg dx", ASSERT_TENSOR(td__avg_pool2d_backward(g, xs, (int[]){3, 3}, (int[]){2, 1}, (int[]){1, 1}, c)),
                adx[c], tol, tol);
        }
    }
    td_scope_end();
}

TEST(pool_random) {
    nn_seed(27);
    int64_t base[4] = {2, 3, 33, 7};
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 3; c++) {
            td_scope_begin();
            td_dtype dt = nn_float_dtypes[d];
            const int ks[3][2] = {{2, 2}, {3, 1}, {1, 7}}, ss[3][2] = {{2, 2}, {2, 1}, {1, 1}},
                      ps[3][2] = {{1, 0}, {1, 0}, {0, 3}};
            const int *k = ks[c], *s = c == 0 ? NULL : ss[c], *p = ps[c]; /* NULL stride: stride = kernel */
            /* x is a transposed view: [2,3,7,33] -> [2,3,33,7] */
            td_tensor *x = ASSERT_TENSOR(td_transpose(nn_rand(4, (int64_t[]){2, 3, 7, 33}, 2, dt), 2, 3));
            int64_t ys[4] = {2, 3, 0, 0};
            for (int i = 0; i < 2; i++) ys[2 + i] = (base[2 + i] + 2 * p[i] - k[i]) / (s ? s[i] : k[i]) + 1;
            td_tensor *dy = nn_rand(4, ys, 1, dt);
            double *hx = nn_host(x), *hdy = nn_host(dy), *y = malloc(sizeof(double) * (size_t)td_numel(dy));
            double *dx = malloc(sizeof(double) * (size_t)td_numel(x));
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)td_numel(dy));
            const int *st = s ? s : k;
            double tol = nn_tol(dt) * 4;
            ref_pool(true, false, base, k, st, p, ys, hx, hdy, y, idx, dx);
            td_tensor *ti = NULL;
            nn_check_tensor("max y", ASSERT_TENSOR(td_max_pool2d(x, k, s, p, &ti)), y, tol, tol);
            nn_check_tensor("max dx", ASSERT_TENSOR(td__max_pool2d_backward(dy, ti, base)), dx, tol, tol);
            for (int cip = 0; cip < 2; cip++) {
                ref_pool(false, cip, base, k, st, p, ys, hx, hdy, y, idx, dx);
                nn_check_tensor("avg y", ASSERT_TENSOR(td_avg_pool2d(x, k, s, p, cip)), y, tol, tol);
                nn_check_tensor("avg dx", ASSERT_TENSOR(td__avg_pool2d_backward(dy, base, k, s, p, cip)), dx, tol, tol);
            }
            free(hx), free(hdy), free(y), free(dx), free(idx);
            td_scope_end();
        }
}

TEST(pool_errors) {
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_zeros(4, (int64_t[]){1, 1, 4, 4}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_max_pool2d(x, (int[]){3, 3}, NULL, (int[]){2, 0}, NULL), TD_ERR_MISUSE, "at most half");
    ASSERT_ERROR(td_avg_pool2d(x, (int[]){5, 5}, NULL, NULL, true), TD_ERR_SHAPE,
                 "kernel 5x5 is larger than the padded input 4x4");
    ASSERT_ERROR(td_max_pool2d(x, NULL, NULL, NULL, NULL), TD_ERR_MISUSE, "kernel is NULL");
    ASSERT_ERROR(
        td_max_pool2d(ASSERT_TENSOR(td_zeros(2, (int64_t[]){4, 4}, TD_F32, TD_CPU)), (int[]){2, 2}, NULL, NULL, NULL),
        TD_ERR_SHAPE, "4-d");
    td_tensor *dy = ASSERT_TENSOR(td_ones(4, (int64_t[]){1, 1, 2, 2}, TD_F32, TD_CPU));
    int64_t bad[4] = {0, 3, 16, 1};
    td_tensor *idx = ASSERT_TENSOR(td_from_data(bad, 4, (int64_t[]){1, 1, 2, 2}, TD_I64, TD_CPU));
    ASSERT_ERROR(td__max_pool2d_backward(dy, idx, (int64_t[]){1, 1, 4, 4}), TD_ERR_INDEX, "index 16 at position 2");
    td_scope_end();
}

/* Every front-end under NaN-poisoned, guarded allocations: outputs are fully
** written (finite), nothing writes past a buffer, and no tensor leaks. */
static void assert_finite(td_tensor *t, const char *what) {
    double *v = nn_host(t);
    for (int64_t i = 0; i < td_numel(t); i++)
        if (!isfinite(v[i])) TEST_FAIL_("%s[%lld] is %g", what, (long long)i, v[i]);
    free(v);
}

TEST(poisoned_outputs_no_leaks) {
    td_debug_set(TD_DEBUG_POISON | TD_DEBUG_GUARDS);
    nn_seed(28);
    int64_t live = td_debug_live_tensors();
    td_scope_begin();
    for (int d = 0; d < 4; d++) {
        td_dtype dt = nn_float_dtypes[d];
        td_tensor *x = nn_rand(4, (int64_t[]){2, 4, 9, 7}, 1, dt), *w = nn_rand(4, (int64_t[]){6, 2, 3, 3}, 1, dt);
        td_tensor *y = ASSERT_TENSOR(td_conv2d(x, w, NULL, (int[]){2, 1}, (int[]){1, 1}, NULL, 2));
        assert_finite(y, "conv2d");
        assert_finite(
            ASSERT_TENSOR(td__conv2d_backward_input(y, w, td_shape(x), (int[]){2, 1}, (int[]){1, 1}, NULL, 2)), "dx");
        assert_finite(
            ASSERT_TENSOR(td__conv2d_backward_weight(y, x, td_shape(w), (int[]){2, 1}, (int[]){1, 1}, NULL, 2)), "dw");
        td_tensor *p = ASSERT_TENSOR(td_max_pool2d(x, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, NULL));
        assert_finite(p, "max_pool2d");
        td_tensor *a = ASSERT_TENSOR(td_avg_pool2d(x, (int[]){3, 3}, NULL, (int[]){1, 1}, false));
        assert_finite(ASSERT_TENSOR(td__avg_pool2d_backward(a, td_shape(x), (int[]){3, 3}, NULL, (int[]){1, 1}, false)),
                      "avg dx");
        td_tensor *m = nn_rand(2, (int64_t[]){5, 7}, 1, dt);
        assert_finite(ASSERT_TENSOR(td_matmul(m, ASSERT_TENSOR(td_transpose(m, 0, 1)))), "matmul");
        assert_finite(ASSERT_TENSOR(td_softmax(m, -1)), "softmax");
        assert_finite(ASSERT_TENSOR(td_layer_norm(m, 1, NULL, NULL, 1e-5)), "layer_norm");
        int64_t tg[5] = {0, 6, -100, 3, 3};
        td_tensor *t = ASSERT_TENSOR(td_from_data(tg, 1, (int64_t[]){5}, TD_I64, TD_CPU));
        td_tensor *l = ASSERT_TENSOR(td__cross_entropy(m, t, NULL, -100, 0.1, TD_REDUCTION_NONE));
        assert_finite(ASSERT_TENSOR(td__cross_entropy_backward(l, m, t, NULL, -100, 0.1, TD_REDUCTION_NONE)),
                      "dlogits");
        td_clear_error();
        (void)td__cross_entropy(m, t, NULL, 5, 0, TD_REDUCTION_MEAN); /* target 6 out of range: fails, frees */
        ASSERT(td_last_status() == TD_ERR_INDEX);
    }
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), live);
    ASSERT_EQ_INT(td_debug_guard_failures(), 0);
}

/* ---- the vector kernels (x86/rows_avx2.c, exp_avx2.h) and their row tails ---- */

/* |got - want| in units of the last place of want (as a float; 2^-149 in the subnormal range) */
static double ulp_error(float got, double want) {
    int e;
    frexp(want, &e);
    double ulp = ldexp(1.0, (e - 24 > -149 ? e - 24 : -149));
    return fabs((double)got - want) / ulp;
}

/* exp of f32: at most 1.5 ulp from exp() in double over [-104, 88.75] (the vector exp measures
** 1.26 on every float of the range), and exact special values. */
TEST(exp_ulp) {
    td_scope_begin();
    const int64_t n = 1 << 20;
    float *v = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = (float)(-104.0 + (88.75 + 104.0) * (double)i / (double)(n - 1));
    td_tensor *y = ASSERT_TENSOR(td_exp(ASSERT_TENSOR(td_from_data(v, 1, &n, TD_F32, TD_CPU))));
    ASSERT_OK(td_copy_to_host(y, got, (size_t)n * sizeof(float), TD_F32));
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = exp((double)v[i]),
               u = want > 3.4028234663852886e38 ? (isinf(got[i]) ? 0 : INFINITY) : ulp_error(got[i], want);
        if (!(u <= worst)) worst = u, at = i;
    }
    printf("  max error %.3f ulp at x = %.9g\n", worst, v[at]);
    ASSERT(worst <= 1.5);
    const float sp[9] = {-INFINITY, INFINITY, NAN, 0, -0.0f, 89.0f, -110.0f, 88.7f, -87.0f};
    const double want[9] = {0, INFINITY, NAN, 1, 1, INFINITY, 0, exp(88.7f), exp(-87.0f)};
    int64_t n9 = 9;
    float g9[9];
    y = ASSERT_TENSOR(td_exp(ASSERT_TENSOR(td_from_data(sp, 1, &n9, TD_F32, TD_CPU))));
    ASSERT_OK(td_copy_to_host(y, g9, sizeof g9, TD_F32));
    for (int i = 0; i < 9; i++) {
        if (isnan(want[i]))
            ASSERT(isnan(g9[i]));
        else if (isinf(want[i]) || want[i] == 0)
            ASSERT(g9[i] == want[i]);
        else
            ASSERT(ulp_error(g9[i], want[i]) <= 1.5);
    }
    free(v), free(got);
    td_scope_end();
}

/* nn_check that also requires infinities to match exactly (log_softmax of -inf is -inf) */
static void check_with_inf(const char *what, td_tensor *t, const double *want, double atol, double rtol) {
    int64_t n = td_numel(t);
    double *got = nn_host(t), *finite_want = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        if (isinf(want[i])) {
            if (got[i] != want[i]) TEST_FAIL_("%s[%lld]: got %g want %g", what, (long long)i, got[i], want[i]);
            got[i] = finite_want[i] = 0;
        } else
            finite_want[i] = want[i];
    }
    nn_check(what, got, finite_want, n, atol, rtol);
    free(got), free(finite_want);
}

/* R rows of C values in [-8, 8); row 1 also holds -inf logits (never all of them), row 2 is scaled
** by 1000 (large logits: the max shift keeps exp finite), row 3 is offset by 1e4. */
static double *rows_with_extremes(int64_t R, int64_t C) {
    double *v = malloc((size_t)(R * C) * sizeof(double));
    for (int64_t i = 0; i < R * C; i++) v[i] = nn_uniform() * 8;
    for (int64_t j = 0; j < C; j++) {
        if (C > 1 && R > 1 && j % 3 == 1) v[C + j] = -INFINITY;
        if (R > 2) v[2 * C + j] *= 1000;
        if (R > 3) v[3 * C + j] += 1e4;
    }
    return v;
}

TEST(softmax_rows) {
    nn_seed(31);
    const int64_t R = 4;
    for (int k = 0; k < 6; k++) {
        int64_t C = row_lengths[k], shape[2] = {R, C};
        td_scope_begin();
        double *hx = rows_with_extremes(R, C), *want = malloc((size_t)(R * C) * sizeof(double));
        td_tensor *x = from_f64(hx, 2, shape, TD_F32);
        double *hxf = nn_host(x); /* the reference reads the rounded f32 inputs */
        for (int lg = 0; lg < 2; lg++) {
            ref_softmax(hxf, want, R, C, lg);
            char what[64];
            snprintf(what, sizeof what, "%s, rows of %lld", lg ? "log_softmax" : "softmax", (long long)C);
            check_with_inf(what, ASSERT_TENSOR(lg ? td_log_softmax(x, -1) : td_softmax(x, -1)), want, 1e-6, 2e-5);
        }
        free(hx), free(hxf), free(want);
        td_scope_end();
    }
}

/* 1024 rows of 4096: 16 MiB of output, written with non-temporal stores from a scratch row */
TEST(softmax_rows_streamed) {
    td_scope_begin();
    nn_seed(32);
    const int64_t R = 1024, C = 4096, shape[2] = {R, C};
    td_tensor *x = nn_rand(2, shape, 8, TD_F32);
    double *hx = nn_host(x), *want = malloc((size_t)(R * C) * sizeof(double));
    for (int lg = 0; lg < 2; lg++) {
        ref_softmax(hx, want, R, C, lg);
        nn_check_tensor(lg ? "log_softmax 1024x4096" : "softmax 1024x4096",
                        ASSERT_TENSOR(lg ? td_log_softmax(x, -1) : td_softmax(x, -1)), want, 1e-6, 2e-5);
    }
    ref_layer_norm(hx, NULL, NULL, want, R, C, 1e-5);
    nn_check_tensor("layer_norm 1024x4096", ASSERT_TENSOR(td_layer_norm(x, 1, NULL, NULL, 1e-5)), want, 1e-5, 1e-5);
    free(hx), free(want);
    td_scope_end();
}

TEST(layer_norm_rows) {
    nn_seed(33);
    const int64_t R = 4;
    for (int k = 0; k < 6; k++)
        for (int affine = 0; affine < 2; affine++) {
            int64_t C = row_lengths[k], shape[2] = {R, C};
            td_scope_begin();
            double *hx = malloc((size_t)(R * C) * sizeof(double)), *want = malloc((size_t)(R * C) * sizeof(double));
            for (int64_t i = 0; i < R * C; i++)
                hx[i] = nn_uniform() * 3 + (i / C == 3 ? 1e4 : 0); /* row 3: |mean| >> std */
            td_tensor *x = from_f64(hx, 2, shape, TD_F32);
            td_tensor *w = affine ? nn_rand(1, &C, 1, TD_F32) : NULL, *b = affine ? nn_rand(1, &C, 1, TD_F32) : NULL;
            double *hxf = nn_host(x), *hw = w ? nn_host(w) : NULL, *hb = b ? nn_host(b) : NULL;
            ref_layer_norm(hxf, hw, hb, want, R, C, 1e-5);
            char what[64];
            snprintf(what, sizeof what, "layer_norm, rows of %lld%s", (long long)C, affine ? ", affine" : "");
            nn_check_tensor(what, ASSERT_TENSOR(td_layer_norm(x, 1, w, b, 1e-5)), want, 2e-4, 1e-4);
            free(hx), free(want), free(hxf), free(hw), free(hb);
            td_scope_end();
        }
}

/* Loss and dlogits (reduction none, weights none, no smoothing) against a direct double formula:
** loss = lse - x[t], dx[c] = g * (exp(x[c] - lse) - [c == t]). */
TEST(xent_rows) {
    nn_seed(34);
    const int64_t N = 4;
    for (int k = 0; k < 6; k++) {
        int64_t C = row_lengths[k], shape[2] = {N, C}, tg[4];
        td_scope_begin();
        double *hx = rows_with_extremes(N, C), loss[4], g[4], *dx = malloc((size_t)(N * C) * sizeof(double));
        for (int64_t n = 0; n < N; n++) {
            tg[n] = (int64_t)((nn_uniform() + 1) * 0.5 * (double)C) % C;
            if (isinf(hx[n * C + tg[n]])) tg[n] = (tg[n] + 1) % C; /* a finite target logit */
            g[n] = nn_uniform();
        }
        td_tensor *x = from_f64(hx, 2, shape, TD_F32), *gl = from_f64(g, 1, &N, TD_F32);
        td_tensor *t = ASSERT_TENSOR(td_from_data(tg, 1, &N, TD_I64, TD_CPU));
        double *hxf = nn_host(x), *hg = nn_host(gl);
        for (int64_t n = 0; n < N; n++) {
            const double *xr = hxf + n * C;
            double lse = row_logsumexp(xr, C);
            loss[n] = lse - xr[tg[n]];
            for (int64_t c = 0; c < C; c++) dx[n * C + c] = hg[n] * (exp(xr[c] - lse) - (c == tg[n]));
        }
        char what[64];
        snprintf(what, sizeof what, "cross_entropy, rows of %lld", (long long)C);
        /* lse - x[t] cancels: its absolute error is a few ulps of the largest logit (8000 in row 2) */
        double big = 0;
        for (int64_t i = 0; i < N * C; i++) big = isinf(hxf[i]) ? big : fmax(big, fabs(hxf[i]));
        nn_check_tensor(what, ASSERT_TENSOR(td__cross_entropy(x, t, NULL, -100, 0, TD_REDUCTION_NONE)), loss,
                        1e-5 + 4e-7 * big, 2e-5);
        nn_check_tensor(what, ASSERT_TENSOR(td__cross_entropy_backward(gl, x, t, NULL, -100, 0, TD_REDUCTION_NONE)), dx,
                        1e-6, 2e-5);
        free(hx), free(hxf), free(hg), free(dx);
        td_scope_end();
    }
}

/* The 2x2/stride-2 unpadded max pool (vector rows of 8 windows, masked tails): output widths 1, 7, 8, 9
** and 17, odd input sizes (the last row/column unused), ties (values on a 0.5 grid: the first max wins),
** windows of -inf (index of the window's first element) and NaNs (the last NaN wins), as PyTorch. */
TEST(max_pool_2x2) {
    nn_seed(35);
    const int64_t widths[6] = {2, 14, 15, 16, 18, 34};
    const int k2[2] = {2, 2}, p0[2] = {0, 0};
    for (int d = 0; d < 2; d++)
        for (int wi = 0; wi < 6; wi++) {
            td_dtype dt = d ? TD_F64 : TD_F32;
            int64_t H = 5, W = widths[wi], xs[4] = {2, 3, H, W}, n = 2 * 3 * H * W, Ho = H / 2, Wo = W / 2;
            td_scope_begin();
            double *hx = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++) {
                double u = nn_uniform();
                hx[i] = u > 0.97 ? NAN : u < -0.9 ? -INFINITY : round(u * 8) / 2;
            }
            td_tensor *idx = NULL;
            td_tensor *y = ASSERT_TENSOR(td_max_pool2d(from_f64(hx, 4, xs, dt), k2, NULL, p0, &idx));
            double *got = nn_host(y);
            int64_t *gi = malloc((size_t)(6 * Ho * Wo) * sizeof(int64_t));
            ASSERT_OK(td_copy_to_host(idx, gi, (size_t)(6 * Ho * Wo) * sizeof(int64_t), TD_I64));
            for (int64_t pl = 0; pl < 6; pl++)
                for (int64_t oh = 0; oh < Ho; oh++)
                    for (int64_t ow = 0; ow < Wo; ow++) {
                        double best = -INFINITY;
                        int64_t bi = 2 * oh * W + 2 * ow, o = (pl * Ho + oh) * Wo + ow;
                        for (int i = 0; i < 2; i++)
                            for (int j = 0; j < 2; j++) {
                                int64_t at = (2 * oh + i) * W + 2 * ow + j;
                                double v = hx[pl * H * W + at];
                                if (v > best || isnan(v)) best = v, bi = at;
                            }
                        if (gi[o] != bi || !(got[o] == best || (isnan(got[o]) && isnan(best))))
                            TEST_FAIL_("%s W=%lld plane %lld (%lld, %lld): got %g at %lld, want %g at %lld",
                                       td_dtype_name(dt), (long long)W, (long long)pl, (long long)oh, (long long)ow,
                                       got[o], (long long)gi[o], best, (long long)bi);
                    }
            free(hx), free(got), free(gi);
            td_scope_end();
        }
}

TEST_MAIN(TESTS)
