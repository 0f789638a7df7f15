/* Recurrent layers against PyTorch: nn.RNN, nn.LSTM, nn.GRU over every flag combination and their cells, from
** tests/fixtures/rnn.tdfx (gen_rnn_fixtures.py, torch 1.13, float64 references): outputs, final states, the
** gradients of the input, the initial states and every parameter for the loss sum(y gy) + sum(h_n ghn) +
** sum(c_n gcn), and state_dict keys in torch's order; on cpu and Vulkan (CUDA skips without a GPU). Also
** gradcheck of the fused cell custom ops and of the CPU's whole-layer LSTM op in float64, dropout in training, bad
** input, the Vulkan LSTM layer node against the CPU path in float32 and its dispatches per time step. Each check is
** |got - want| <= 1e-5 + 1e-5 |want| (1e-4 for float32 Vulkan against float32 CPU). */
#include "tdfx.h"
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(layers_cpu) X(layers_vulkan) X(layers_cuda) X(cells_cpu) X(cells_vulkan) X(cells_cuda) X(state_dict_keys)        \
        X(gradcheck_lstm_cell) X(gradcheck_gru_cell) X(gradcheck_lstm_layer) X(lstm_layer_f32) X(dropout_training)        \
        X(bad_input) X(lstm_vulkan_vs_cpu) X(lstm_vulkan_ops_per_step)
/* clang-format on */

#define TOL 1e-5

static tdfx *fx;

static tdfx *fixtures(void) {
    if (!fx) fx = tdfx_open("rnn.tdfx");
    if (!fx) TEST_FAIL_("fixtures missing");
    return fx;
}

/* "<case>.<what>" as a tensor on dev (NULL when the fixture has none). */
static td_tensor *get(const char *c, const char *what, td_device dev) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", c, what);
    td_tensor *t = tdfx_tensor(fixtures(), name);
    return t && dev.type != TD_DEVICE_CPU ? td_to(t, dev) : t;
}

static td_tensor *need(const char *c, const char *what, td_device dev) {
    td_tensor *t = get(c, what, dev);
    if (!t) TEST_FAIL_("fixture %s.%s is missing", c, what);
    return t;
}

/* Compare got with want elementwise within |got - want| <= tol + tol |want|; print the first mismatches and the max
** difference. */
static void check_close_tol(td_tensor *got, td_tensor *want, const char *c, const char *what, double tol) {
    if (!got) TEST_FAIL_("%s %s: no result (%s)", c, what, td_last_error());
    int64_t n = td_numel(want);
    if (td_ndim(got) != td_ndim(want)) TEST_FAIL_("%s %s: %d dims, want %d", c, what, td_ndim(got), td_ndim(want));
    for (int d = 0; d < td_ndim(want); d++)
        if (td_size(got, d) != td_size(want, d))
            TEST_FAIL_("%s %s: size %d is %lld, want %lld", c, what, d, (long long)td_size(got, d),
                       (long long)td_size(want, d));
    double *g = malloc((size_t)n * 8 + 8), *w = malloc((size_t)n * 8 + 8);
    ASSERT(g && w);
    ASSERT_OK(td_copy_to_host(got, g, (size_t)n * 8, TD_F64));
    ASSERT_OK(td_copy_to_host(want, w, (size_t)n * 8, TD_F64));
    double maxd = 0;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(g[i] - w[i]);
        if (d > maxd || isnan(d)) maxd = isnan(d) ? INFINITY : d;
        if (!(d <= tol + tol * fabs(w[i])) && bad++ < 5)
            fprintf(stderr, "  %s %s[%lld]: got %.9g want %.9g\n", c, what, (long long)i, g[i], w[i]);
    }
    free(g);
    free(w);
    if (bad) TEST_FAIL_("%s %s: %d of %lld elements differ, max |diff| %.3g", c, what, bad, (long long)n, maxd);
}

static void check_close(td_tensor *got, td_tensor *want, const char *c, const char *what) {
    check_close_tol(got, want, c, what, TOL);
}

/* Load "<case>.s.*" strictly, and check that the module's state_dict keys are torch's, in torch's order. */
static void load_and_check_keys(td_module *m, const char *c) {
    tdfx *f = fixtures();
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.s.", c);
    size_t len = strlen(prefix);
    td_named_tensors *sd = td_named_tensors_new(), *mine = td_module_state_dict(m);
    ASSERT(sd && mine);
    int k = 0;
    for (int i = 0; i < f->n; i++) {
        if (strncmp(f->e[i].name, prefix, len)) continue;
        const char *key = f->e[i].name + len;
        if (k >= td_named_tensors_len(mine) || strcmp(td_named_tensors_name(mine, k), key))
            TEST_FAIL_("%s: state_dict key %d is %s, torch's is %s", c, k,
                       k < td_named_tensors_len(mine) ? td_named_tensors_name(mine, k) : "(none)", key);
        k++;
        td_tensor *t = ASSERT_TENSOR(tdfx_tensor(f, f->e[i].name));
        ASSERT_OK(td_named_tensors_add(sd, key, t)); /* the list keeps its own reference */
        td_release(t);
    }
    ASSERT_EQ_INT(k, td_named_tensors_len(mine));
    ASSERT_OK(td_module_load_state_dict(m, sd, true));
    td_named_tensors_free(sd);
    td_named_tensors_free(mine);
}

/* sum(t * w) */
static td_tensor *dot(td_tensor *t, td_tensor *w) { return td_sum(td_mul(t, w), 0, NULL, false); }

static td_tensor *leaf(td_tensor *t) {
    if (t) ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* The module's parameter gradients against "<case>.g.<param>". */
static void check_param_grads(td_module *m, const char *c) {
    tdfx *f = fixtures();
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.g.", c);
    size_t len = strlen(prefix);
    int n = 0;
    for (int i = 0; i < f->n; i++) {
        if (strncmp(f->e[i].name, prefix, len)) continue;
        td_tensor *p = ASSERT_TENSOR(td_module_get(m, f->e[i].name + len));
        check_close(td_grad_of(p), tdfx_tensor(f, f->e[i].name), c, f->e[i].name + len);
        n++;
    }
    ASSERT(n >= 2);
}

static int64_t cfg_at(td_tensor *cfg, int i) {
    int64_t v[16];
    ASSERT_OK(td_copy_to_host(cfg, v, sizeof(int64_t) * (size_t)td_numel(cfg), TD_I64));
    return v[i];
}

static const char *const mode_names[] = {"rnn_tanh", "rnn_relu", "lstm", "gru"};

/* One layer case on dev. */
static void layer_case(const char *c, td_device dev) {
    td_scope_begin();
    td_tensor *cfg = need(c, "cfg", TD_CPU);
    int mode = (int)cfg_at(cfg, 0), layers = (int)cfg_at(cfg, 1);
    bool bidir = cfg_at(cfg, 2), bf = cfg_at(cfg, 3), bias = cfg_at(cfg, 6);
    double dropout = (double)cfg_at(cfg, 4) / 10;
    int64_t in = cfg_at(cfg, 8), hid = cfg_at(cfg, 9);
    td_module *m = mode < 2    ? td_rnn_new(in, hid, layers, mode ? TD_RNN_RELU : TD_RNN_TANH, bias, bf, dropout, bidir)
                   : mode == 2 ? td_lstm_new(in, hid, layers, bias, bf, dropout, bidir)
                               : td_gru_new(in, hid, layers, bias, bf, dropout, bidir);
    if (!m) TEST_FAIL_("%s: constructor failed: %s", c, td_last_error());
    load_and_check_keys(m, c);
    td_module_eval(m);
    ASSERT_OK(td_module_to(m, dev));
    td_tensor *x = leaf(need(c, "x", dev)), *h0 = leaf(get(c, "h0", dev)), *c0 = leaf(get(c, "c0", dev));
    td_tensor *hn = NULL, *cn = NULL;
    td_tensor *y = td_rnn_forward(m, x, h0, c0, &hn, mode == 2 ? &cn : NULL);
    if (!y) TEST_FAIL_("%s (%s): forward failed: %s", c, mode_names[mode], td_last_error());
    check_close(y, need(c, "y", dev), c, "y");
    check_close(hn, need(c, "hn", dev), c, "h_n");
    td_tensor *loss = td_add(dot(y, need(c, "gy", dev)), dot(hn, need(c, "ghn", dev)));
    if (mode == 2) {
        check_close(cn, need(c, "cn", dev), c, "c_n");
        loss = td_add(loss, dot(cn, need(c, "gcn", dev)));
    }
    ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, false));
    check_close(td_grad_of(x), need(c, "dx", dev), c, "dx");
    if (h0) check_close(td_grad_of(h0), need(c, "dh0", dev), c, "dh0");
    if (c0) check_close(td_grad_of(c0), need(c, "dc0", dev), c, "dc0");
    check_param_grads(m, c);
    td_scope_end();
    td_module_free(m);
}

/* One cell case on dev. */
static void cell_case(const char *c, td_device dev) {
    td_scope_begin();
    td_tensor *cfg = need(c, "cfg", TD_CPU);
    int mode = (int)cfg_at(cfg, 0);
    bool bias = cfg_at(cfg, 1);
    int64_t in = cfg_at(cfg, 4), hid = cfg_at(cfg, 5);
    td_module *m = mode < 2    ? td_rnn_cell_new(in, hid, bias, mode ? TD_RNN_RELU : TD_RNN_TANH)
                   : mode == 2 ? td_lstm_cell_new(in, hid, bias)
                               : td_gru_cell_new(in, hid, bias);
    if (!m) TEST_FAIL_("%s: constructor failed: %s", c, td_last_error());
    load_and_check_keys(m, c);
    ASSERT_OK(td_module_to(m, dev));
    td_tensor *x = leaf(need(c, "x", dev)), *h = leaf(get(c, "h", dev)), *cs = leaf(get(c, "c", dev));
    td_tensor *cn = NULL;
    td_tensor *hn = td_rnn_cell_forward(m, x, h, cs, mode == 2 ? &cn : NULL);
    if (!hn) TEST_FAIL_("%s (%s cell): forward failed: %s", c, mode_names[mode], td_last_error());
    check_close(hn, need(c, "hn", dev), c, "h'");
    td_tensor *loss = dot(hn, need(c, "ghn", dev));
    if (mode == 2) {
        check_close(cn, need(c, "cn", dev), c, "c'");
        loss = td_add(loss, dot(cn, need(c, "gcn", dev)));
    }
    ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, false));
    check_close(td_grad_of(x), need(c, "dx", dev), c, "dx");
    if (h) check_close(td_grad_of(h), need(c, "dh", dev), c, "dh");
    if (cs) check_close(td_grad_of(cs), need(c, "dc", dev), c, "dc");
    check_param_grads(m, c);
    td_scope_end();
    td_module_free(m);
}

/* Every case of kind 'l' (layers) or 'c' (cells) on the device spec names. */
static void all_cases(char kind, const char *spec) {
    td_device dev = test_device_or_skip(spec);
    int n = 0;
    for (;; n++) {
        char c[16], name[32];
        snprintf(c, sizeof c, "%c%d", kind, n);
        snprintf(name, sizeof name, "%s.cfg", c);
        td_tensor *cfg = tdfx_tensor(fixtures(), name);
        if (!cfg) break;
        td_release(cfg);
        if (kind == 'l')
            layer_case(c, dev);
        else
            cell_case(c, dev);
    }
    fprintf(stderr, "  %d %s cases on %s\n", n, kind == 'l' ? "layer" : "cell", spec);
    ASSERT(n >= (kind == 'l' ? 100 : 32));
}

TEST(layers_cpu) { all_cases('l', "cpu"); }
TEST(layers_vulkan) { all_cases('l', "vulkan:0"); }
TEST(layers_cuda) { all_cases('l', "cuda:0"); }
TEST(cells_cpu) { all_cases('c', "cpu"); }
TEST(cells_vulkan) { all_cases('c', "vulkan:0"); }
TEST(cells_cuda) { all_cases('c', "cuda:0"); }

/* Names in torch's order for a 2-layer bidirectional LSTM without a fixture, and bias=False dropping the biases. */
TEST(state_dict_keys) {
    static const char *const want[] = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
        "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
        "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
    td_module *m = td_lstm_new(3, 4, 2, true, false, 0, true);
    ASSERT(m);
    td_named_tensors *sd = td_module_state_dict(m);
    ASSERT(sd);
    ASSERT_EQ_INT(td_named_tensors_len(sd), 16);
    for (int i = 0; i < 16; i++) ASSERT(!strcmp(td_named_tensors_name(sd, i), want[i]));
    /* shapes: layer 1 takes D*H inputs; init within +-1/sqrt(H) */
    td_tensor *w = ASSERT_TENSOR(td_module_get(m, "weight_ih_l1_reverse"));
    ASSERT_EQ_INT(td_size(w, 0), 16);
    ASSERT_EQ_INT(td_size(w, 1), 8);
    double v[128];
    ASSERT_OK(td_copy_to_host(w, v, sizeof v, TD_F64));
    double lo = 1, hi = -1;
    for (int i = 0; i < 128; i++) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    ASSERT(lo >= -0.5 && hi <= 0.5 && hi - lo > 0.5);
    td_named_tensors_free(sd);
    td_module_free(m);
    m = td_gru_new(3, 4, 1, false, true, 0, false);
    ASSERT(m);
    sd = td_module_state_dict(m);
    ASSERT_EQ_INT(td_named_tensors_len(sd), 2);
    ASSERT(!strcmp(td_named_tensors_name(sd, 1), "weight_hh_l0"));
    ASSERT_EQ_INT(td_size(td_module_get(m, "weight_hh_l0"), 0), 12);
    td_named_tensors_free(sd);
    td_module_free(m);
}

/* gradcheck in float64 of one fused cell op: LSTM's outputs h' and c' summed with weights so both get checked. */
static td_tensor *lstm_cell_fn(void *user, int n, td_tensor *const *in) {
    (void)user, (void)n;
    td_tensor *out[2];
    if (td_custom_op_call(td_custom_op_find("rnn.lstm_cell"), 3, in, 0, NULL, 2, out) != TD_OK) return NULL;
    return td_add(out[0], td_mul_scalar(out[1], 0.7));
}

static td_tensor *gru_cell_fn(void *user, int n, td_tensor *const *in) {
    (void)user, (void)n;
    return td_custom_op_apply(td_custom_op_find("rnn.gru_cell"), 3, in, 0, NULL);
}

static void cell_gradcheck(td_multi_fn fn, int gates) {
    td_scope_begin();
    td_module_free(td_lstm_new(1, 1, 1, true, false, 0, false)); /* registers the cells */
    const int64_t B = 3, H = 4;
    int64_t s[2] = {B, H}, g[2] = {B, gates * H};
    td_tensor *in[3] = {test_uniform_tensor(2, s, -1.5, 1.5, TD_F64, TD_CPU),
                        test_uniform_tensor(2, g, -2, 2, TD_F64, TD_CPU),
                        test_uniform_tensor(2, g, -2, 2, TD_F64, TD_CPU)};
    for (int i = 0; i < 3; i++) ASSERT_OK(td_set_requires_grad(in[i], true));
    td_gradcheck_options o = {1e-6, 1e-7, 1e-5};
    ASSERT_OK(td_gradcheck(fn, NULL, 3, in, &o));
    td_scope_end();
}

TEST(gradcheck_lstm_cell) { cell_gradcheck(lstm_cell_fn, 4); }
TEST(gradcheck_gru_cell) { cell_gradcheck(gru_cell_fn, 3); }

/* gradcheck in float64 of the CPU's whole-layer LSTM op (rnn_lstm_cpu.c), both directions: y and the cell states
** summed with weights, back to gx, h0, c0 and w_hh (its third output, the saved gates, is the backward's own). */
static td_tensor *lstm_layer_fn(void *user, int n, td_tensor *const *in) {
    (void)n;
    float reverse = *(const float *)user;
    td_tensor *out[3];
    if (td_custom_op_call(td_custom_op_find("rnn.lstm_layer"), 4, in, 1, &reverse, 3, out) != TD_OK) return NULL;
    return td_add(out[0], td_mul_scalar(out[1], 0.7));
}

TEST(gradcheck_lstm_layer) {
    td_scope_begin();
    td_module *m = td_lstm_new(2, 3, 1, true, false, 0, false);
    int64_t xs[3] = {2, 1, 2};
    ASSERT_TENSOR(td_module_forward(m, test_uniform_tensor(3, xs, -1, 1, TD_F32, TD_CPU))); /* registers the op */
    const int64_t T = 4, B = 2, H = 3;
    int64_t g[3] = {T, B, 4 * H}, s[2] = {B, H}, w[2] = {4 * H, H};
    for (int r = 0; r < 2; r++) {
        td_tensor *in[4] = {
            test_uniform_tensor(3, g, -2, 2, TD_F64, TD_CPU), test_uniform_tensor(2, s, -1, 1, TD_F64, TD_CPU),
            test_uniform_tensor(2, s, -1.5, 1.5, TD_F64, TD_CPU), test_uniform_tensor(2, w, -0.8, 0.8, TD_F64, TD_CPU)};
        for (int i = 0; i < 4; i++) ASSERT_OK(td_set_requires_grad(in[i], true));
        td_gradcheck_options o = {1e-6, 1e-7, 1e-5};
        float reverse = (float)r;
        ASSERT_OK(td_gradcheck(lstm_layer_fn, &reverse, 4, in, &o));
    }
    td_module_free(m);
    td_scope_end();
}

/* The op in float32 (its AVX2 cells where the CPU has them: H 20 is a block of 16 units and one of 4, so both the
** vector and the scalar units run) against the same op in float64 (scalar): outputs and the four gradients. */
TEST(lstm_layer_f32) {
    td_scope_begin();
    td_module *m = td_lstm_new(2, 3, 1, true, false, 0, false);
    int64_t xs[3] = {2, 1, 2};
    ASSERT_TENSOR(td_module_forward(m, test_uniform_tensor(3, xs, -1, 1, TD_F32, TD_CPU))); /* registers the op */
    const int64_t T = 6, B = 3, H = 20;
    int64_t g[3] = {T, B, 4 * H}, s[2] = {B, H}, w[2] = {4 * H, H}, ys[3] = {T, B, H};
    td_tensor *in64[4] = {
        test_uniform_tensor(3, g, -3, 3, TD_F32, TD_CPU), test_uniform_tensor(2, s, -1, 1, TD_F32, TD_CPU),
        test_uniform_tensor(2, s, -1.5, 1.5, TD_F32, TD_CPU), test_uniform_tensor(2, w, -0.3, 0.3, TD_F32, TD_CPU)};
    td_tensor *gy = test_uniform_tensor(3, ys, -1, 1, TD_F32, TD_CPU),
              *gc = test_uniform_tensor(3, ys, -1, 1, TD_F32, TD_CPU);
    td_tensor *res[2][6];
    for (int r = 0; r < 2; r++) {
        td_dtype dt = r ? TD_F64 : TD_F32;
        td_tensor *in[4], *out[3], *grads[4];
        for (int i = 0; i < 4; i++) {
            in[i] = td_detach(td_cast(in64[i], dt));
            ASSERT_OK(td_set_requires_grad(in[i], true));
        }
        float reverse = 0;
        ASSERT_OK(td_custom_op_call(td_custom_op_find("rnn.lstm_layer"), 4, in, 1, &reverse, 3, out));
        td_tensor *outs[2] = {out[0], out[1]}, *gos[2] = {td_cast(gy, dt), td_cast(gc, dt)};
        ASSERT_OK(td_grad(2, outs, gos, 4, in, grads, false, false, false));
        res[r][0] = out[0], res[r][1] = out[1];
        for (int i = 0; i < 4; i++) res[r][2 + i] = grads[i];
    }
    static const char *const what[6] = {"y", "cs", "dgx", "dh0", "dc0", "dw_hh"};
    for (int i = 0; i < 6; i++) check_close(res[0][i], res[1][i], "lstm_layer f32", what[i]);
    td_module_free(m);
    td_scope_end();
}

/* Training with dropout 0.3 between layers changes the output, reproducibly from the seed; the last layer's
** output and eval are untouched (a 1-layer net has no dropout). */
TEST(dropout_training) {
    td_scope_begin();
    td_manual_seed(3);
    td_module *m = td_lstm_new(3, 8, 2, true, false, 0.3, false);
    ASSERT(m);
    int64_t xs[3] = {4, 2, 3};
    td_tensor *x = test_uniform_tensor(3, xs, -1, 1, TD_F32, TD_CPU);
    td_tensor *y_eval, *y1, *y2;
    td_module_eval(m);
    y_eval = ASSERT_TENSOR(td_module_forward(m, x));
    td_module_train(m, true);
    td_manual_seed(9);
    y1 = ASSERT_TENSOR(td_module_forward(m, x));
    td_manual_seed(9);
    y2 = ASSERT_TENSOR(td_module_forward(m, x));
    double a[64], b[64], e[64];
    ASSERT_OK(td_copy_to_host(y1, a, sizeof a, TD_F64));
    ASSERT_OK(td_copy_to_host(y2, b, sizeof b, TD_F64));
    ASSERT_OK(td_copy_to_host(y_eval, e, sizeof e, TD_F64));
    double diff = 0;
    for (int i = 0; i < 64; i++) {
        ASSERT(a[i] == b[i]);
        diff = fmax(diff, fabs(a[i] - e[i]));
    }
    ASSERT(diff > 1e-4);
    td_scope_end();
    td_module_free(m);
}

TEST(bad_input) {
    td_scope_begin();
    ASSERT_ERROR(td_lstm_new(0, 4, 1, true, false, 0, false), TD_ERR_MISUSE, "must be positive");
    ASSERT_ERROR(td_gru_new(3, 4, 1, true, false, 1.5, false), TD_ERR_MISUSE, "outside [0, 1]");
    ASSERT_ERROR(td_rnn_new(3, 4, 1, (td_rnn_nonlinearity)7, true, false, 0, false), TD_ERR_MISUSE, "nonlinearity");
    td_module *m = td_lstm_new(3, 4, 2, true, false, 0, false), *g = td_gru_new(3, 4, 1, true, false, 0, false);
    ASSERT(m && g);
    int64_t bad[3] = {5, 2, 6}, ok[3] = {5, 2, 3}, hbad[3] = {1, 2, 4};
    td_tensor *xb = test_uniform_tensor(3, bad, -1, 1, TD_F32, TD_CPU),
              *x = test_uniform_tensor(3, ok, -1, 1, TD_F32, TD_CPU);
    td_tensor *hb = test_uniform_tensor(3, hbad, -1, 1, TD_F32, TD_CPU);
    ASSERT_ERROR(td_rnn_forward(m, xb, NULL, NULL, NULL, NULL), TD_ERR_SHAPE, "expected input [T, B, 3]");
    ASSERT_ERROR(td_rnn_forward(m, x, hb, NULL, NULL, NULL), TD_ERR_SHAPE, "expected h0 of shape [2,2,4]");
    ASSERT_ERROR(td_rnn_forward(g, x, NULL, hb, NULL, NULL), TD_ERR_MISUSE, "c0 is for LSTM only");
    ASSERT_ERROR(td_rnn_forward(NULL, x, NULL, NULL, NULL, NULL), TD_ERR_MISUSE, "not an RNN");
    td_module *lin = td_linear_new(3, 4, true);
    ASSERT_ERROR(td_rnn_cell_forward(lin, x, NULL, NULL, NULL), TD_ERR_MISUSE, "not an RNNCell");
    td_module_free(lin);
    td_module_free(m);
    td_module_free(g);
    td_scope_end();
}

TEST_MAIN(TESTS)

/* The Vulkan LSTM's layer node (rnn_lstm_seq.c) against the CPU's layer op in float32, in both modes (fused, and
** TRIDENT_VK_LSTM=gemm) and fused in float64 (its own slice count): a 2-layer bidirectional batch-first LSTM at
** odd sizes (B H = 603: three workgroups of the step kernels; H 67: a partial unit block, and several K tiles, the
** last partial, of the fused ones) with initial states, forward outputs and every gradient. */
TEST(lstm_vulkan_vs_cpu) {
    td_device vk = test_device_or_skip("vulkan:0");
    td_scope_begin();
    td_manual_seed(5);
    td_module *m = td_lstm_new(5, 67, 2, true, true, 0, true);
    ASSERT(m);
    const int64_t B = 9, T = 9, H = 67;
    int64_t xs[3] = {B, T, 5}, ss[3] = {4, B, H}, ys[3] = {B, T, 2 * H};
    td_tensor *x_h = test_uniform_tensor(3, xs, -1, 1, TD_F32, TD_CPU),
              *h0_h = test_uniform_tensor(3, ss, -1, 1, TD_F32, TD_CPU),
              *c0_h = test_uniform_tensor(3, ss, -1, 1, TD_F32, TD_CPU),
              *gy = test_uniform_tensor(3, ys, -1, 1, TD_F32, TD_CPU),
              *ghn = test_uniform_tensor(3, ss, -1, 1, TD_F32, TD_CPU),
              *gcn = test_uniform_tensor(3, ss, -1, 1, TD_F32, TD_CPU);
    static const char *const what[] = {"y", "h_n", "c_n", "dx", "dh0", "dc0"};
    static const char *const pnames[] = {"weight_ih_l0", "weight_hh_l0",         "bias_ih_l1",
                                         "weight_hh_l1", "weight_hh_l1_reverse", "bias_hh_l0_reverse"};
    td_tensor *res[4][12];
    for (int r = 0; r < 4; r++) { /* cpu, vulkan fused, vulkan gemm, vulkan fused in float64 */
        td_device dev = r ? vk : TD_CPU;
        td_dtype dt = r == 3 ? TD_F64 : TD_F32;
        if (r == 2) ASSERT(setenv("TRIDENT_VK_LSTM", "gemm", 1) == 0);
        if (r == 3) ASSERT(unsetenv("TRIDENT_VK_LSTM") == 0);
        ASSERT_OK(td_module_to(m, dev));
        ASSERT_OK(td_module_to_dtype(m, dt));
        td_module_zero_grad(m); /* the second Vulkan run starts from none too */
        td_tensor *x = leaf(td_detach(td_cast(td_to(x_h, dev), dt))),
                  *h0 = leaf(td_detach(td_cast(td_to(h0_h, dev), dt))),
                  *c0 = leaf(td_detach(td_cast(td_to(c0_h, dev), dt)));
        td_tensor *hn = NULL, *cn = NULL;
        td_tensor *y = ASSERT_TENSOR(td_rnn_forward(m, x, h0, c0, &hn, &cn));
        td_tensor *loss = td_add(td_add(dot(y, td_cast(td_to(gy, dev), dt)), dot(hn, td_cast(td_to(ghn, dev), dt))),
                                 dot(cn, td_cast(td_to(gcn, dev), dt)));
        ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, false));
        td_tensor *got[12] = {y, hn, cn, td_grad_of(x), td_grad_of(h0), td_grad_of(c0)};
        for (int i = 0; i < 6; i++) got[6 + i] = td_grad_of(ASSERT_TENSOR(td_module_get(m, pnames[i])));
        for (int i = 0; i < 12; i++) res[r][i] = td_to(ASSERT_TENSOR(got[i]), TD_CPU);
    }
    static const char *const runs[4] = {"", "lstm vulkan (fused) vs cpu", "lstm vulkan (gemm) vs cpu",
                                        "lstm vulkan (fused, float64) vs cpu"};
    for (int r = 1; r < 4; r++)
        for (int i = 0; i < 12; i++)
            check_close_tol(res[r][i], res[0][i], runs[r], i < 6 ? what[i] : pnames[i - 6], 1e-4);
    td_module_free(m);
    td_scope_end();
}

/* Ops of one forward + backward of a 2-layer bidirectional LSTM on Vulkan over T steps, by name and phase. */
static int64_t lstm_ops(td_device dev, int64_t T, const char *op, int backward) {
    td_scope_begin();
    td_manual_seed(6);
    td_module *m = td_lstm_new(3, 5, 2, true, false, 0, true);
    ASSERT(m);
    ASSERT_OK(td_module_to(m, dev));
    int64_t xs[3] = {T, 2, 3}, ss[3] = {4, 2, 5};
    td_tensor *x = leaf(td_to(test_uniform_tensor(3, xs, -1, 1, TD_F32, TD_CPU), dev));
    td_tensor *h0 = leaf(td_to(test_uniform_tensor(3, ss, -1, 1, TD_F32, TD_CPU), dev)), *hn = NULL, *cn = NULL;
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1)); /* no roofline measurement at td_profile_end */
    ASSERT_OK(td_profile_begin());
    td_tensor *y = td_rnn_forward(m, x, h0, NULL, &hn, &cn);
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_add(td_sum(y, 0, NULL, false), td_sum(cn, 0, NULL, false))), NULL, false));
    ASSERT_OK(td_profile_end(NULL));
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    ASSERT(n <= 256);
    int64_t count = 0;
    for (int i = 0; i < n; i++)
        if ((!op || !strcmp(rows[i].op, op)) && (backward < 0 || rows[i].backward == (backward == 1)))
            count += rows[i].count;
    td_module_free(m);
    td_scope_end();
    return count;
}

/* Each further time step of each layer direction costs the Vulkan LSTM two dispatches, the fused step kernel each
** way (its GEMM inside); with TRIDENT_VK_LSTM=gemm four: forward one GEMM (h W_hh^T) and one step kernel, backward
** one step kernel and one GEMM (dG W_hh). No copies, adds, concatenations or per-step dW_hh either way. Measured as
** the difference between T 4 and T 9 (2 layers, 2 directions: 20 more step-layers). */
TEST(lstm_vulkan_ops_per_step) {
    td_device vk = test_device_or_skip("vulkan:0");
    const int64_t dT = 5, dirs = 4;
    typedef struct {
        const char *op;
        int backward;
    } per_step_op;
    static const per_step_op fused[] = {{"rnn.lstm_seq_fused", 0}, {"rnn.lstm_seq_fused_backward", 1}};
    static const per_step_op gemm[] = {
        {"linear", 0}, {"rnn.lstm_seq_step", 0}, {"rnn.lstm_seq_step_backward", 1}, {"matmul", 1}};
    for (int mode = 0; mode < 2; mode++) {
        if (mode) ASSERT(setenv("TRIDENT_VK_LSTM", "gemm", 1) == 0);
        const per_step_op *ops = mode ? gemm : fused;
        int n = mode ? 4 : 2;
        for (int i = 0; i < n; i++) {
            int64_t d = lstm_ops(vk, 4 + dT, ops[i].op, ops[i].backward) - lstm_ops(vk, 4, ops[i].op, ops[i].backward);
            if (d != dT * dirs)
                TEST_FAIL_("%s (%s): %lld more calls for 20 more step-layers, want 20", ops[i].op,
                           ops[i].backward ? "backward" : "forward", (long long)d);
        }
        int64_t total = lstm_ops(vk, 4 + dT, NULL, -1) - lstm_ops(vk, 4, NULL, -1);
        if (total != n * dT * dirs)
            TEST_FAIL_("%s: %lld more ops in all for 20 more step-layers, want %lld", mode ? "gemm" : "fused",
                       (long long)total, (long long)(n * dT * dirs));
    }
    ASSERT(unsetenv("TRIDENT_VK_LSTM") == 0);
}
