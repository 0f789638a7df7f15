/*
** The recurrent layers' cuDNN path on cuda:0 (src/nn/rnn_cudnn.c, src/backend_cuda/cu_rnn_cudnn.c) against our own
** path on the same device (TRIDENT_CUDA_RNN=own): y, h_n, c_n and the gradients of x, h0, c0 and every parameter,
** float32, for RNN tanh/relu, LSTM and GRU over layers 1-2, one and two directions, batch_first or not, with and
** without initial states; extras: bias=False, unbatched input and dropout 0.3 in eval. Each check is
** max |cudnn - own| <= 1e-5 max(1, max |own|). The plugin's counters (td_cuda_rnn_counts, found with
** td_backend_symbol) prove that cuDNN ran each cuDNN forward and backward and never the own ones. fallback:
** dropout between layers in training, which cuDNN does not take, runs our path under the default and fails with a
** clear error under TRIDENT_CUDA_RNN=cudnn. no_grad: an inference forward (no reserve space) gives the training
** forward's values. Everything skips without a CUDA device or when cuDNN does not load (the reason printed).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define TESTS(X) X(rnn_tanh) X(rnn_relu) X(lstm) X(gru) X(extras) X(no_grad) X(fallback)

#define TOL 1e-5

enum { TANH, RELU, LSTM, GRU };

static const td_device CUDA0 = {TD_DEVICE_CUDA, 0};

/* cuDNN forwards and backwards so far */
static void counts(int64_t c[2]) {
    void (*f)(int64_t *) = (void (*)(int64_t *))td_backend_symbol(TD_DEVICE_CUDA, "td_cuda_rnn_counts");
    if (!f) TEST_FAIL_("the CUDA plugin exports no td_cuda_rnn_counts");
    f(c);
}

typedef struct cfg {
    int mode, layers;
    bool bidir, batch_first, states;
    bool no_bias, unbatched, dropout_eval; /* extras: bias=False, x [T, I], dropout 0.3 in eval */
} cfg;

static td_module *make(const cfg *c, int64_t in, int64_t hid, double dropout) {
    td_manual_seed(7);
    bool bias = !c->no_bias;
    td_rnn_nonlinearity act = c->mode == RELU ? TD_RNN_RELU : TD_RNN_TANH;
    td_module *m = c->mode <= RELU   ? td_rnn_new(in, hid, c->layers, act, bias, c->batch_first, dropout, c->bidir)
                   : c->mode == LSTM ? td_lstm_new(in, hid, c->layers, bias, c->batch_first, dropout, c->bidir)
                                     : td_gru_new(in, hid, c->layers, bias, c->batch_first, dropout, c->bidir);
    if (!m) TEST_FAIL_("constructor failed: %s", td_last_error());
    ASSERT_OK(td_module_to(m, CUDA0));
    if (c->dropout_eval) td_module_eval(m);
    return m;
}

/* The results of one run, as host doubles: y, h_n, c_n, dx, dh0, dc0, then the parameters' gradients. */
#define MAX_RES (6 + 16)
typedef struct result {
    double *v[MAX_RES];
    int64_t n[MAX_RES];
} result;

static void keep(result *r, int i, td_tensor *t) {
    if (!t) return;
    r->n[i] = td_numel(t);
    r->v[i] = test_host(t);
}

static td_tensor *input(int64_t n0, int64_t n1, int64_t n2, uint64_t seed) {
    td_tensor *t = ASSERT_TENSOR(td_randn(3, (int64_t[]){n0, n1, n2}, seed, 0, TD_F32, CUDA0));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* One forward and backward of c's module under TRIDENT_CUDA_RNN=mode, fixed inputs and output gradients. */
static result run(const cfg *c, const char *mode) {
    const int64_t T = 7, B = 3, I = 5, H = 6, LD = c->layers * (c->bidir ? 2 : 1);
    setenv("TRIDENT_CUDA_RNN", mode, 1);
    td_module *m = make(c, I, H, c->dropout_eval ? 0.3 : 0);
    td_scope_begin();
    int64_t b = c->unbatched ? 1 : B;
    td_tensor *x = c->batch_first ? input(b, T, I, 1) : input(T, b, I, 1);
    td_tensor *h0 = c->states ? input(LD, b, H, 2) : NULL;
    td_tensor *c0 = c->states && c->mode == LSTM ? input(LD, b, H, 3) : NULL;
    if (c->unbatched) { /* x [T, I], states [L*D, H]: fresh leaves */
        x = ASSERT_TENSOR(td_detach(td_squeeze(x, c->batch_first ? 0 : 1)));
        ASSERT_OK(td_set_requires_grad(x, true));
        td_tensor **st[2] = {&h0, &c0};
        for (int i = 0; i < 2; i++)
            if (*st[i]) {
                *st[i] = ASSERT_TENSOR(td_detach(td_squeeze(*st[i], 1)));
                ASSERT_OK(td_set_requires_grad(*st[i], true));
            }
    }
    td_tensor *hn = NULL, *cn = NULL;
    td_tensor *y = td_rnn_forward(m, x, h0, c0, &hn, c->mode == LSTM ? &cn : NULL);
    if (!y) TEST_FAIL_("%s forward failed: %s", mode, td_last_error());
    /* loss = sum(y gy) + sum(h_n ghn) + sum(c_n gcn) with fixed random g */
    td_tensor *loss = td_sum(td_mul(y, td_randn(td_ndim(y), td_shape(y), 11, 0, TD_F32, CUDA0)), 0, NULL, false);
    loss = td_add(loss, td_sum(td_mul(hn, td_randn(td_ndim(hn), td_shape(hn), 12, 0, TD_F32, CUDA0)), 0, NULL, false));
    if (cn)
        loss =
            td_add(loss, td_sum(td_mul(cn, td_randn(td_ndim(cn), td_shape(cn), 13, 0, TD_F32, CUDA0)), 0, NULL, false));
    ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, false));
    result r;
    memset(&r, 0, sizeof r);
    keep(&r, 0, y), keep(&r, 1, hn), keep(&r, 2, cn), keep(&r, 3, td_grad_of(x));
    if (h0) keep(&r, 4, td_grad_of(h0));
    if (c0) keep(&r, 5, td_grad_of(c0));
    td_named_tensors *ps = td_module_named_parameters(m);
    ASSERT(ps && td_named_tensors_len(ps) <= 16);
    for (int i = 0; i < td_named_tensors_len(ps); i++) {
        td_tensor *g = td_grad_of(td_named_tensors_at(ps, i));
        if (!g) TEST_FAIL_("%s: parameter %s has no gradient", mode, td_named_tensors_name(ps, i));
        keep(&r, 6 + i, g);
    }
    td_named_tensors_free(ps);
    td_scope_end();
    td_module_free(m);
    unsetenv("TRIDENT_CUDA_RNN");
    return r;
}

static const char *const what[6] = {"y", "h_n", "c_n", "dx", "dh0", "dc0"};

static void compare(const cfg *c, result *got, result *want) {
    for (int i = 0; i < MAX_RES; i++) {
        ASSERT_EQ_INT(got->n[i], want->n[i]);
        double err = 0, big = 1;
        for (int64_t k = 0; k < want->n[i]; k++) {
            double d = fabs(got->v[i][k] - want->v[i][k]);
            err = d > err || d != d ? d : err;
            big = fabs(want->v[i][k]) > big ? fabs(want->v[i][k]) : big;
        }
        if (!(err <= TOL * big))
            TEST_FAIL_(
                "mode %d layers %d bidir %d batch_first %d states %d: %s%s%d differs, max |diff| %.3g (scale %.3g)",
                c->mode, c->layers, c->bidir, c->batch_first, c->states, i < 6 ? what[i] : "param grad ",
                i < 6 ? "" : "#", i < 6 ? 0 : i - 6, err, big);
        free(got->v[i]), free(want->v[i]);
    }
}

/* One configuration: cuDNN against our path, and the counters say which ran. */
static void one(const cfg *c) {
    int64_t a[2], b[2], e[2];
    counts(a);
    result own = run(c, "own");
    counts(b);
    result dnn = run(c, "cudnn");
    counts(e);
    if (b[0] != a[0] || b[1] != a[1]) TEST_FAIL_("TRIDENT_CUDA_RNN=own still ran cuDNN");
    if (e[0] != b[0] + 1 || e[1] != b[1] + 1)
        TEST_FAIL_("cuDNN ran %lld forwards and %lld backwards, want 1 and 1", (long long)(e[0] - b[0]),
                   (long long)(e[1] - b[1]));
    compare(c, &dnn, &own);
}

/* Every flag combination of mode. */
static void sweep(int mode) {
    test_need_cudnn();
    for (int k = 0; k < 16; k++)
        one(&(cfg){.mode = mode,
                   .layers = 1 + (k & 1),
                   .bidir = (k >> 1) & 1,
                   .batch_first = (k >> 2) & 1,
                   .states = (k >> 3) & 1});
    printf("  16 configurations: cuDNN matches our path within %g\n", TOL);
}

/* bias=False, unbatched input, dropout 0.3 in eval (cuDNN takes it: no dropout runs), each mode. */
TEST(extras) {
    test_need_cudnn();
    for (int mode = TANH; mode <= GRU; mode++) {
        one(&(cfg){.mode = mode, .layers = 2, .bidir = true, .states = true, .no_bias = true});
        one(&(cfg){.mode = mode, .layers = 2, .bidir = true, .states = true, .unbatched = true});
        one(&(cfg){.mode = mode, .layers = 2, .batch_first = true, .dropout_eval = true});
    }
    printf("  12 configurations: cuDNN matches our path within %g\n", TOL);
}

TEST(rnn_tanh) { sweep(TANH); }
TEST(rnn_relu) { sweep(RELU); }
TEST(lstm) { sweep(LSTM); }
TEST(gru) { sweep(GRU); }

/* A forward without grad (cuDNN's inference mode) gives the training forward's y. */
TEST(no_grad) {
    test_need_cudnn();
    cfg c = {.mode = LSTM, .layers = 2, .bidir = true};
    td_module *m = make(&c, 5, 6, 0);
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_randn(3, (int64_t[]){7, 3, 5}, 1, 0, TD_F32, CUDA0));
    td_tensor *y1 = ASSERT_TENSOR(td_rnn_forward(m, x, NULL, NULL, NULL, NULL));
    td_no_grad_begin();
    int64_t a[2], b[2];
    counts(a);
    td_tensor *y2 = td_rnn_forward(m, x, NULL, NULL, NULL, NULL);
    counts(b);
    td_no_grad_end();
    ASSERT_TENSOR(y2);
    ASSERT_EQ_INT(b[0], a[0] + 1);
    double worst = test_max_rel(y2, y1);
    if (!(worst <= TOL)) TEST_FAIL_("no-grad y differs from the training forward's by %.3g", worst);
    td_scope_end();
    td_module_free(m);
}

/* Inter-layer dropout in training: our path by default, a clear error when cuDNN is forced. */
TEST(fallback) {
    test_need_cudnn();
    cfg c = {.mode = GRU, .layers = 2};
    td_module *m = make(&c, 5, 6, 0.3);
    td_module_train(m, true);
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_randn(3, (int64_t[]){7, 3, 5}, 1, 0, TD_F32, CUDA0));
    int64_t a[2], b[2];
    counts(a);
    ASSERT_TENSOR(td_rnn_forward(m, x, NULL, NULL, NULL, NULL));
    counts(b);
    ASSERT_EQ_INT(b[0], a[0]);
    setenv("TRIDENT_CUDA_RNN", "cudnn", 1);
    td_tensor *y = td_rnn_forward(m, x, NULL, NULL, NULL, NULL);
    unsetenv("TRIDENT_CUDA_RNN");
    ASSERT(y == NULL);
    ASSERT_EQ_INT(td_last_status(), TD_ERR_UNSUPPORTED);
    if (!strstr(td_last_error(), "dropout")) TEST_FAIL_("the error does not say why: %s", td_last_error());
    printf("  forced: %s\n", td_last_error());
    td_scope_end();
    td_module_free(m);
}

TEST_MAIN(TESTS)
