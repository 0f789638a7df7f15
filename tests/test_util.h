/*
** Helpers shared by the tests: a printed seed and the tests' own generator
** (never td_rand, so references do not depend on the library), tensors made
** from and read back as doubles, gradients set through autograd, and scratch
** files, shell commands and the device a case names. A failing run repeats
** with TD_SEED=<n> build/tests/test_x case.
** defines: test_seed, test_seed_from, test_next, test_uniform, test_int,
**          test_tensor_f64, test_uniform_tensor, test_host, test_max_rel, test_rel_err, test_set_grad, test_tmp_dir,
**          test_tmp_path, test_write_file, test_read_file, test_sh, test_device_or_skip, test_need_cudnn.
*/
#ifndef TRIDENT_TEST_UTIL_H
#define TRIDENT_TEST_UTIL_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

/* ---- seeded host random numbers (splitmix64) ---- */

static uint64_t test_rng_state;

/* Seed the generator with $TD_SEED, or dflt when it is unset; prints the seed. */
static inline uint64_t test_seed_from(uint64_t dflt) {
    const char *env = getenv("TD_SEED");
    uint64_t s = env && *env ? strtoull(env, NULL, 0) : dflt;
    fprintf(stderr, "  seed %" PRIu64 " (TD_SEED=%" PRIu64 " to repeat)\n", s, s);
    test_rng_state = s;
    return s;
}

/* test_seed_from with the default seed 12345. */
static inline uint64_t test_seed(void) { return test_seed_from(12345u); }

static inline uint64_t test_next(void) {
    uint64_t z = (test_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform double in [lo, hi) */
static inline double test_uniform(double lo, double hi) {
    return lo + (hi - lo) * (double)(test_next() >> 11) * 0x1p-53;
}

/* integer in [0, n) */
static inline int64_t test_int(int64_t n) { return (int64_t)(test_next() % (uint64_t)n); }

/* ---- tensors as doubles ---- */

/* A CPU tensor of dtype dt holding v (converted from double); scope-owned. */
static inline td_tensor *test_tensor_f64(const double *v, int ndim, const int64_t *shape, td_dtype dt) {
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, ndim, shape, TD_F64, TD_CPU));
    return ASSERT_TENSOR(td_cast(t, dt));
}

/* A tensor of dtype dt on dev, its elements test_uniform(lo, hi) in row-major order; scope-owned. */
static inline td_tensor *test_uniform_tensor(int ndim, const int64_t *shape, double lo, double hi, td_dtype dt,
                                             td_device dev) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ASSERT(v);
    for (int64_t i = 0; i < n; i++) v[i] = test_uniform(lo, hi);
    td_tensor *t = ASSERT_TENSOR(td_to(test_tensor_f64(v, ndim, shape, dt), dev));
    free(v);
    return t;
}

/* The tensor's elements in row-major order, as doubles (caller frees). */
static inline double *test_host(td_tensor *t) {
    int64_t n = td_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ASSERT(v);
    ASSERT_OK(td_copy_to_host(t, v, sizeof(double) * (size_t)n, TD_F64));
    return v;
}

/* max |a - b| / (1 + |b|) over two tensors of the same element count: a relative
** error that turns absolute near zero. */
static inline double test_max_rel(td_tensor *a, td_tensor *b) {
    ASSERT_EQ_INT(td_numel(a), td_numel(b));
    double *x = test_host(a), *y = test_host(b), worst = 0;
    for (int64_t i = 0; i < td_numel(b); i++) worst = fmax(worst, fabs(x[i] - y[i]) / (1 + fabs(y[i])));
    free(x), free(y);
    return worst;
}

/* max |a - b| / max(1, max |b|) over two tensors of the same element count: the worst error against the
** reference's scale (a NaN anywhere gives NaN, which no limit accepts). */
static inline double test_rel_err(td_tensor *a, td_tensor *b) {
    double *x = test_host(a), *y = test_host(b), err = 0, big = 1;
    int64_t n = td_numel(b);
    ASSERT_EQ_INT(td_numel(a), n);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(x[i] - y[i]);
        err = d > err || d != d ? d : err;
        big = fabs(y[i]) > big ? fabs(y[i]) : big;
    }
    free(x), free(y);
    return err / big;
}

/* p.grad = g, through a backward pass of p * 1. */
static inline void test_set_grad(td_tensor *p, td_tensor *g) {
    td_zero_grad(p);
    td_scope_begin();
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_mul_scalar(p, 1.0)), g, false));
    td_scope_end();
}

/* ---- scratch files ---- */

/* A fresh directory for this process's files. */
static inline const char *test_tmp_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/td_test_%d_XXXXXX", (int)getpid());
        if (!mkdtemp(dir)) TEST_FAIL_("mkdtemp failed");
    }
    return dir;
}

/* test_tmp_dir()/name; the last 8 results stay valid. */
static inline const char *test_tmp_path(const char *name) {
    static char p[8][512];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 512, "%s/%s", test_tmp_dir(), name);
    return s;
}

static inline void test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ASSERT(f);
    ASSERT(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* The file's bytes plus a terminating 0 (caller frees); *n is the byte count. */
static inline unsigned char *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    ASSERT(b && fread(b, 1, *n, f) == *n);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* ---- processes and devices ---- */

/* Run the shell command printf(fmt, ...) (echoed to stderr); returns its exit status, 128 if it did not exit. */
static inline int test_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "  $ %s\n", cmd);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* The device spec names ("vulkan:0"), or skip the case when it is not available. */
static inline td_device test_device_or_skip(const char *spec) {
    td_device dev;
    td_device_info info;
    if (td_device_parse(spec, &dev) != TD_OK || td_device_get_info(dev, &info) != TD_OK) {
        char why[128];
        snprintf(why, sizeof why, "%s is not available", spec);
        TEST_SKIP(why);
    }
    return dev;
}

/* Skips the case unless cuda:0 exists and the CUDA plugin loads cuDNN there (the reason printed). */
static inline void test_need_cudnn(void) {
    if (!td_device_available((td_device){TD_DEVICE_CUDA, 0})) TEST_SKIP("no CUDA device");
    const char *(*status)(void) = (const char *(*)(void))td_backend_symbol(TD_DEVICE_CUDA, "td_cuda_cudnn_status");
    if (!status) TEST_FAIL_("the CUDA plugin exports no td_cuda_cudnn_status");
    const char *why = status();
    if (why) TEST_SKIP("cuDNN not loadable: %s", why);
}

#endif /* TRIDENT_TEST_UTIL_H */
