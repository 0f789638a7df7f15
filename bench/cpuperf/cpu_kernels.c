/*
** cpu_kernels: the CPU kernels W1/W2 training (and the softmax/layer_norm
** rows of W4) spend their time in, op by op, against the machine's copy
** bandwidth. Names match bench/cpuperf/torch_w2_ops.py, so that
** run_cpuperf.sh can print PyTorch's time for the same shapes beside them.
** Each figure is the median of REPS runs after WARMUP untimed ones.
** Prints "TRIDENT name ms" lines (and GB/s for the row ops, 8 bytes/element).
**
** Usage: build/bench/cpu_kernels [filter-substring]
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../bench_clock.h"
#include "core/internal.h"
#include "trident/trident.h"

enum { WARMUP = 3, REPS = 11 };

typedef struct bench_ctx {
    td_tensor *a, *b, *c, *d;
    void *src, *dst;
    size_t bytes;
} bench_ctx;
typedef void *(*bench_fn)(bench_ctx *);

/* Median milliseconds of fn; every call runs in its own scope so results are freed. */
static double median_ms(bench_fn fn, bench_ctx *c) {
    double t[REPS];
    for (int i = 0; i < WARMUP + REPS; i++) {
        td_scope_begin();
        double t0 = bench_now_s();
        void *r = fn(c);
        double dt = bench_now_s() - t0;
        td_scope_end();
        if (!r) {
            fprintf(stderr, "failed: %s\n", td_last_error());
            exit(1);
        }
        if (i >= WARMUP) t[i - WARMUP] = dt;
    }
    return 1e3 * bench_median_inplace(t, REPS);
}

static const int S1[2] = {1, 1}, P1[2] = {1, 1}, K2[2] = {2, 2}, P0[2] = {0, 0};

/* memcpy split over the OpenMP threads (the same threads the kernels get) */
static void *b_memcpy(bench_ctx *c) {
#pragma omp parallel
    {
#ifdef _OPENMP
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
#else
        size_t nt = 1, t = 0;
#endif
        size_t chunk = (c->bytes / nt + 63) / 64 * 64, lo = t * chunk,
               hi = lo + chunk < c->bytes ? lo + chunk : c->bytes;
        if (lo < hi) memcpy((char *)c->dst + lo, (const char *)c->src + lo, hi - lo);
    }
    return c->dst;
}
static void *b_conv_fwd(bench_ctx *c) { return td_conv2d(c->a, c->b, c->c, S1, P1, S1, 1); }
static void *b_conv_bw_weight(bench_ctx *c) {
    return td__conv2d_backward_weight(c->d, c->a, td_shape(c->b), S1, P1, S1, 1);
}
static void *b_conv_bw_input(bench_ctx *c) {
    return td__conv2d_backward_input(c->d, c->b, td_shape(c->a), S1, P1, S1, 1);
}
static void *b_pool_fwd(bench_ctx *c) {
    td_tensor *idx;
    return td_max_pool2d(c->a, K2, K2, P0, &idx);
}
static void *b_pool_bw(bench_ctx *c) { return td__max_pool2d_backward(c->b, c->c, td_shape(c->a)); }
static void *b_relu(bench_ctx *c) { return td_relu(c->a); }
static void *b_relu_bw(bench_ctx *c) { return td_where(td_gt(c->a, c->c), c->b, c->c); }
static void *b_softmax(bench_ctx *c) { return td_softmax(c->a, -1); }
static void *b_log_softmax(bench_ctx *c) { return td_log_softmax(c->a, -1); }
static void *b_layer_norm(bench_ctx *c) { return td_layer_norm(c->a, 1, c->b, c->c, 1e-5); }
static void *b_xent(bench_ctx *c) {
    td_tensor *one = td_full(0, NULL, 1, TD_F32, TD_CPU);
    td_tensor *loss = td__cross_entropy(c->a, c->b, NULL, -100, 0, TD_REDUCTION_MEAN);
    return loss ? td__cross_entropy_backward(one, c->a, c->b, NULL, -100, 0, TD_REDUCTION_MEAN) : NULL;
}

static td_tensor *randn(int ndim, const int64_t *shape, uint64_t seed) {
    return td_keep(td_randn(ndim, shape, seed, 0, TD_F32, TD_CPU));
}

static const char *filter;
static void report(const char *name, bench_fn fn, bench_ctx *c, double gbytes) {
    if (filter && !strstr(name, filter)) return;
    double ms = median_ms(fn, c);
    if (gbytes > 0)
        printf("TRIDENT %s %.3f  (%.2f GB/s)\n", name, ms, gbytes / (ms * 1e-3));
    else
        printf("TRIDENT %s %.3f\n", name, ms);
    fflush(stdout);
}

int main(int argc, char **argv) {
    filter = argc > 1 ? argv[1] : NULL;
    const int64_t B = 128;
    bench_ctx c = {0};
    /* copy bandwidth: 64 MiB memcpy, read + write counted */
    c.bytes = (size_t)64 << 20;
    c.src = malloc(c.bytes), c.dst = malloc(c.bytes);
    memset(c.src, 1, c.bytes), memset(c.dst, 2, c.bytes);
    report("copy_64MiB", b_memcpy, &c, 2.0 * (double)c.bytes * 1e-9);
    /* conv1: x (B,1,28,28), w (32,1,3,3); conv2: x (B,32,14,14), w (64,32,3,3) */
    bench_ctx c1 = {.a = randn(4, (int64_t[]){B, 1, 28, 28}, 1),
                    .b = randn(4, (int64_t[]){32, 1, 3, 3}, 2),
                    .c = randn(1, (int64_t[]){32}, 3),
                    .d = randn(4, (int64_t[]){B, 32, 28, 28}, 4)};
    bench_ctx c2 = {.a = randn(4, (int64_t[]){B, 32, 14, 14}, 5),
                    .b = randn(4, (int64_t[]){64, 32, 3, 3}, 6),
                    .c = randn(1, (int64_t[]){64}, 7),
                    .d = randn(4, (int64_t[]){B, 64, 14, 14}, 8)};
    report("conv1_fwd", b_conv_fwd, &c1, 0);
    report("conv2_fwd", b_conv_fwd, &c2, 0);
    report("conv1_bw_weight", b_conv_bw_weight, &c1, 0);
    report("conv2_bw_weight", b_conv_bw_weight, &c2, 0);
    report("conv2_bw_input", b_conv_bw_input, &c2, 0);
    /* pools over relu outputs (B,32,28,28) and (B,64,14,14) */
    const int64_t *pshape[2] = {(int64_t[]){B, 32, 28, 28}, (int64_t[]){B, 64, 14, 14}};
    const char *fwd_name[2] = {"pool1_fwd", "pool2_fwd"}, *bw_name[2] = {"pool1_bw", "pool2_bw"};
    for (int k = 0; k < 2; k++) {
        bench_ctx p = {.a = td_keep(td_relu(randn(4, pshape[k], 9 + k)))};
        p.b = td_keep(td_max_pool2d(p.a, K2, K2, P0, &p.c));
        td_keep(p.c);
        report(fwd_name[k], b_pool_fwd, &p, 0);
        report(bw_name[k], b_pool_bw, &p, 0);
    }
    bench_ctx r = {
        .a = randn(4, pshape[0], 11), .b = randn(4, pshape[0], 12), .c = td_keep(td_scalar(0, TD_F32, TD_CPU))};
    report("relu1_fwd", b_relu, &r, 0);
    report("relu1_bw", b_relu_bw, &r, 0);
    /* rows of 4096: 8 bytes per element (read x, write y) */
    double gb = 8.0 * 4096 * 4096 * 1e-9;
    bench_ctx s = {.a = randn(2, (int64_t[]){4096, 4096}, 13),
                   .b = randn(1, (int64_t[]){4096}, 14),
                   .c = randn(1, (int64_t[]){4096}, 15)};
    report("softmax_4096x4096", b_softmax, &s, gb);
    report("log_softmax_4096x4096", b_log_softmax, &s, gb);
    report("layer_norm_4096x4096", b_layer_norm, &s, gb);
    int64_t *tg = malloc(4096 * sizeof(int64_t));
    for (int i = 0; i < 4096; i++) tg[i] = (i * 37) % 4096;
    bench_ctx x = {.a = s.a, .b = td_keep(td_from_data(tg, 1, (int64_t[]){4096}, TD_I64, TD_CPU))};
    report("xent_fwd_bw_4096x4096", b_xent, &x, 0);
    bench_ctx x10 = {.a = randn(2, (int64_t[]){B, 10}, 16)};
    for (int i = 0; i < B; i++) tg[i] = i % 10;
    x10.b = td_keep(td_from_data(tg, 1, (int64_t[]){B}, TD_I64, TD_CPU));
    report("xent_fwd_bw_128x10", b_xent, &x10, 0);
    free(tg), free(c.src), free(c.dst);
    return 0;
}
