/*
** The math-block rewrites of elementwise chains (issue 21, TRIDENT_MATH_FUSE):
** each computed with the switch at 0 (the table ops) and at 1 (the blocks), in
** child processes (the switch is read once a process), on cpu and vulkan:0
** (cuda:0 too when present), compared with each other and with a float64
** reference computed here:
**   layer_norm_bw:     layer norm's backward (src/autograd/norm_fused.c), with
**                      weight and bias, without them, and ADD_LAYER_NORM's;
**                      the fused run issues fewer backward ops (profiler).
** (The GPT block's bias + residual add is one LINEAR_RESIDUAL op now, not a
** block: tests/test_linear_residual.c and the conformance table.)
*/
#include <math.h>

#include "runner.h"
#include "test_util.h"

#define CAP 20000

typedef int (*collect_fn)(td_device dev, double *out, int cap);

/* fn(dev) run in a child with TRIDENT_MATH_FUSE=fuse; its values into out, their count returned */
static int in_child(const char *fuse, collect_fn fn, td_device dev, double *out) {
    int fd[2];
    ASSERT(pipe(fd) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        setenv("TRIDENT_MATH_FUSE", fuse, 1);
        static double vals[CAP];
        int n = fn(dev, vals, CAP);
        ssize_t w = write(fd[1], &n, sizeof n);
        for (size_t off = 0; w > 0 && off < sizeof(double) * (size_t)n; off += (size_t)w)
            w = write(fd[1], (char *)vals + off, sizeof(double) * (size_t)n - off);
        _exit(w > 0 ? 0 : 3);
    }
    close(fd[1]);
    int n = -1;
    ASSERT(read(fd[0], &n, sizeof n) == (ssize_t)sizeof n);
    ASSERT(n >= 0 && n <= CAP);
    size_t got = 0, want = sizeof(double) * (size_t)n;
    for (ssize_t r = 1; got < want && r > 0; got += (size_t)r) r = read(fd[0], (char *)out + got, want - got);
    close(fd[0]);
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT(got == want);
    return n;
}

/* spec's device (cpu, vulkan:0 or cuda:0), or the case skipped. Probed in a child: a CUDA or Vulkan driver set up
** in this process does not survive the fork of in_child (cudaErrorInitializationError, VK_ERROR_INITIALIZATION_FAILED
** there), and parsing a GPU device loads its backend. */
static td_device device_of(const char *spec) {
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        td_device dev;
        td_device_info info;
        _exit(td_device_parse(spec, &dev) == TD_OK && td_device_get_info(dev, &info) == TD_OK ? 0 : 77);
    }
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    if (WEXITSTATUS(status) != 0) {
        char why[128];
        snprintf(why, sizeof why, "%s is not available", spec);
        TEST_SKIP(why);
    }
    return !strcmp(spec, "cpu") ? TD_CPU : !strcmp(spec, "vulkan:0") ? TD_VULKAN(0) : TD_CUDA(0);
}

/* ---- layer norm's backward ---- */

enum { LN_A = 3, LN_B = 5, LN_D = 24, LN_N = LN_A * LN_B * LN_D };

/* x, r (ADD_LAYER_NORM's residual), w, b, dy: the same numbers in every process */
static void ln_inputs(double *x, double *r, double *w, double *b, double *dy) {
    test_rng_state = 42;
    for (int i = 0; i < LN_N; i++) x[i] = test_uniform(-2, 2), r[i] = test_uniform(-1, 1), dy[i] = test_uniform(-1, 1);
    for (int i = 0; i < LN_D; i++) w[i] = test_uniform(0.5, 1.5), b[i] = test_uniform(-0.5, 0.5);
}

/* ops the backward issues from layer-norm nodes, with the profiler */
static double ln_backward_ops(td_tensor *y, td_tensor *gy) {
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_backward(y, gy, false));
    ASSERT_OK(td_profile_end(NULL));
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    double ops = 0;
    for (int i = 0; i < n && i < 256; i++)
        if (rows[i].backward && strstr(rows[i].node, "layer_norm")) ops += (double)rows[i].count;
    return ops;
}

static int put(double *out, int k, td_tensor *t) {
    double *v = test_host(ASSERT_TENSOR(t));
    for (int64_t i = 0; i < td_numel(t); i++) out[k++] = v[i];
    free(v);
    return k;
}

/* [dx, dw, db, ops] of layer_norm with weight and bias; [dx, ops] without; [dx, dr, dw, db, ops] of add_layer_norm */
static int ln_collect(td_device dev, double *out, int cap) {
    (void)cap;
    static double x[LN_N], r[LN_N], w[LN_D], b[LN_D], dy[LN_N];
    ln_inputs(x, r, w, b, dy);
    td_profile_set_roofline(dev, 1000, 100);
    int64_t sh[3] = {LN_A, LN_B, LN_D}, d = LN_D;
    int k = 0;
    td_scope_begin();
    for (int variant = 0; variant < 3; variant++) {
        td_tensor *xt = td_to(test_tensor_f64(x, 3, sh, TD_F32), dev),
                  *gy = td_to(test_tensor_f64(dy, 3, sh, TD_F32), dev);
        td_tensor *wt = td_to(test_tensor_f64(w, 1, &d, TD_F32), dev),
                  *bt = td_to(test_tensor_f64(b, 1, &d, TD_F32), dev);
        td_tensor *rt = td_to(test_tensor_f64(r, 3, sh, TD_F32), dev);
        td_set_requires_grad(xt, true), td_set_requires_grad(wt, true), td_set_requires_grad(bt, true);
        td_set_requires_grad(rt, true);
        td_tensor *s = NULL;
        td_tensor *y = variant == 0   ? td_layer_norm(xt, 1, wt, bt, 1e-5)
                       : variant == 1 ? td_layer_norm(xt, 1, NULL, NULL, 1e-5)
                                      : td_add_layer_norm(xt, rt, 1, wt, bt, 1e-5, &s);
        double ops = ln_backward_ops(ASSERT_TENSOR(y), gy);
        k = put(out, k, td_grad_of(xt));
        if (variant == 2) k = put(out, k, td_grad_of(rt));
        if (variant != 1) k = put(out, k, td_grad_of(wt)), k = put(out, k, td_grad_of(bt));
        out[k++] = ops;
    }
    td_scope_end();
    return k;
}

/* the float64 reference of ln_collect's gradients (ops left out) */
static int ln_reference(double *out) {
    static double x[LN_N], r[LN_N], w[LN_D], b[LN_D], dy[LN_N], ones[LN_D];
    ln_inputs(x, r, w, b, dy);
    for (int i = 0; i < LN_D; i++) ones[i] = 1;
    int k = 0;
    for (int variant = 0; variant < 3; variant++) {
        const double *wv = variant == 1 ? ones : w;
        double dw[LN_D] = {0}, db[LN_D] = {0};
        int kx = k;
        for (int row = 0; row < LN_A * LN_B; row++) {
            double s[LN_D], mu = 0, var = 0, gm = 0, gxm = 0;
            for (int j = 0; j < LN_D; j++)
                s[j] = x[row * LN_D + j] + (variant == 2 ? r[row * LN_D + j] : 0), mu += s[j];
            mu /= LN_D;
            for (int j = 0; j < LN_D; j++) var += (s[j] - mu) * (s[j] - mu);
            double rstd = 1 / sqrt(var / LN_D + 1e-5);
            for (int j = 0; j < LN_D; j++) {
                double xh = (s[j] - mu) * rstd, g = dy[row * LN_D + j] * wv[j];
                gm += g / LN_D, gxm += g * xh / LN_D;
                dw[j] += dy[row * LN_D + j] * xh, db[j] += dy[row * LN_D + j];
            }
            for (int j = 0; j < LN_D; j++) {
                double xh = (s[j] - mu) * rstd;
                out[k++] = rstd * (dy[row * LN_D + j] * wv[j] - gm - xh * gxm);
            }
        }
        if (variant == 2)
            for (int i = 0; i < LN_N; i++) out[k++] = out[kx + i]; /* dr = dx = ds */
        if (variant != 1) {
            for (int j = 0; j < LN_D; j++) out[k++] = dw[j];
            for (int j = 0; j < LN_D; j++) out[k++] = db[j];
        }
        k++; /* the ops slot */
    }
    return k;
}

static void layer_norm_bw_on(const char *spec) {
    td_device dev = device_of(spec);
    static double off[CAP], on[CAP], ref[CAP];
    int n0 = in_child("0", ln_collect, dev, off), n1 = in_child("1", ln_collect, dev, on), nr = ln_reference(ref);
    ASSERT_EQ_INT(n0, n1);
    ASSERT_EQ_INT(n0, nr);
    int slot[3] = {LN_N + 2 * LN_D, 2 * LN_N + 2 * LN_D + 1, nr - 1}; /* where each variant's ops count is */
    for (int i = 0, v = 0; i < nr; i++) {
        if (v < 3 && i == slot[v]) {
            fprintf(stderr, "  %s variant %d: %g backward ops by the hand op, %g by the block\n", spec, v, off[i],
                    on[i]);
            ASSERT(off[i] == 1 && on[i] < 13); /* one LAYER_NORM_BACKWARD op; the block, fewer than the 13 composed */
            v++;
            continue;
        }
        double tol = 2e-5 * (1 + fabs(ref[i]));
        ASSERT_NEAR(off[i], ref[i], tol);
        ASSERT_NEAR(on[i], ref[i], tol);
        ASSERT_NEAR(on[i], off[i], tol);
    }
}

TEST(layer_norm_bw_cpu) { layer_norm_bw_on("cpu"); }
TEST(layer_norm_bw_vulkan) { layer_norm_bw_on("vulkan:0"); }
TEST(layer_norm_bw_cuda) { layer_norm_bw_on("cuda:0"); }

#define TESTS(X)                                                                                                       \
    X(layer_norm_bw_cpu)                                                                                               \
    X(layer_norm_bw_vulkan)                                                                                            \
    X(layer_norm_bw_cuda)
TEST_MAIN(TESTS)
