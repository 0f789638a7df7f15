/*
** bench_cpu: the CPU backend against what the machine can do.
**   - sgemm through td_matmul against cblas_sgemm called directly (goal >= 0.95x). The CPU backend runs
**     OpenBLAS on one thread and splits the GEMM over OpenMP threads itself (cpu_matmul.c); the direct
**     call gets OpenBLAS's own threading with as many threads (blas_threads), so both use every core;
**   - add, softmax and sum through Trident against the copy bandwidth measured with memcpy (goal >= 90%).
** Each figure is the median of REPS timed runs after WARMUP untimed ones. Bytes per element: add 12
** (read a and b, write out), softmax 8 (read x, write y), sum 4 (read x); memcpy counts read + write.
** Output: a readable table, plus "RESULT op impl value unit" lines for bench/run_cpu_bench.sh.
**
** Usage: build/bench/bench_cpu [--quick]
*/
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_clock.h"
#include "trident/trident.h"

enum { WARMUP = 2, REPS = 9 };

static double median(double *t, int n) { return bench_median_inplace(t, n); }

/* Median seconds of one call of fn(ctx). */
static double time_median(void (*fn)(void *), void *ctx, int reps) {
    double t[64];
    for (int i = 0; i < WARMUP; i++) fn(ctx);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        fn(ctx);
        t[i] = bench_now_s() - t0;
    }
    return median(t, reps);
}

/* ---- the workloads ---- */

typedef struct work {
    td_tensor *a, *b;    /* Trident inputs */
    float *fa, *fb, *fc; /* host buffers for OpenBLAS and memcpy */
    int n;               /* matrix size */
    size_t bytes;        /* memcpy size */
    int kind;
} work;

enum { W_ADD, W_SOFTMAX, W_SUM };

static void run_td_matmul(void *p) {
    work *w = p;
    td_release(td_matmul(w->a, w->b));
}
/* The OpenBLAS thread count for the direct call; the backend's own setting is restored after it. */
static int blas_threads = 1;
static void run_cblas(void *p) {
    work *w = p;
    int backend_threads = openblas_get_num_threads();
    openblas_set_num_threads(blas_threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, w->n, w->n, w->n, 1.0f, w->fa, w->n, w->fb, w->n, 0.0f,
                w->fc, w->n);
    openblas_set_num_threads(backend_threads);
}
static void run_memcpy(void *p) {
    work *w = p;
    memcpy(w->fc, w->fa, w->bytes);
}
/* memcpy split over the OpenMP threads: on some machines one core cannot saturate memory */
static void run_memcpy_mt(void *p) {
    work *w = p;
    size_t n = w->bytes;
#pragma omp parallel
    {
        int nt = 1, id = 0;
#ifdef _OPENMP
        nt = omp_get_num_threads(), id = omp_get_thread_num();
#endif
        size_t chunk = (n / (size_t)nt + 63) & ~(size_t)63, lo = chunk * (size_t)id;
        if (lo < n) memcpy((char *)w->fc + lo, (char *)w->fa + lo, lo + chunk > n ? n - lo : chunk);
    }
}
static void run_td_op(void *p) {
    work *w = p;
    td_tensor *r = w->kind == W_ADD       ? td_add(w->a, w->b)
                   : w->kind == W_SOFTMAX ? td_softmax(w->a, -1)
                                          : td_sum(w->a, 0, NULL, false);
    if (!r) {
        fprintf(stderr, "bench_cpu: %s\n", td_last_error());
        exit(1);
    }
    td_release(r);
}

static float *host_random(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_cpu: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    return p;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    int reps = quick ? 3 : REPS;
    td_device_info info;
    if (td_device_get_info(TD_CPU, &info) != TD_OK) snprintf(info.name, sizeof info.name, "cpu");
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    blas_threads = threads;
    printf("# bench_cpu on %s, %d threads; median of %d after %d warm-up runs\n", info.name, threads, reps, WARMUP);
    printf("RESULT cpu_model %s\nRESULT threads %d\n", info.name, threads);

    /* sgemm */
    printf("\n%-16s %14s %14s %8s\n", "sgemm", "td_matmul", "cblas_sgemm", "ratio");
    const int sizes[3] = {512, 1024, 2048};
    for (int s = 0; s < (quick ? 2 : 3); s++) {
        int n = sizes[s];
        work w = {.n = n,
                  .fa = host_random((size_t)n * n),
                  .fb = host_random((size_t)n * n),
                  .fc = host_random((size_t)n * n)};
        int64_t shape[2] = {n, n};
        w.a = td_from_data(w.fa, 2, shape, TD_F32, TD_CPU);
        w.b = td_from_data(w.fb, 2, shape, TD_F32, TD_CPU);
        double flops = 2.0 * n * n * (double)n;
        double t_td = time_median(run_td_matmul, &w, reps), t_blas = time_median(run_cblas, &w, reps);
        printf("%-16d %9.1f GF/s %9.1f GF/s %7.3fx\n", n, flops / t_td * 1e-9, flops / t_blas * 1e-9, t_blas / t_td);
        printf("RESULT sgemm_%d trident %.2f GFLOP/s\nRESULT sgemm_%d openblas %.2f GFLOP/s\n", n, flops / t_td * 1e-9,
               n, flops / t_blas * 1e-9);
        td_release(w.a), td_release(w.b);
        free(w.fa), free(w.fb), free(w.fc);
    }

    /* copy bandwidth: read + write of a buffer far larger than the caches */
    size_t copy_n = (size_t)1 << 25;
    work cw = {.fa = host_random(copy_n), .fc = host_random(copy_n), .bytes = copy_n * sizeof(float)};
    double bw1 = 2.0 * (double)cw.bytes / time_median(run_memcpy, &cw, reps) * 1e-9;
    double bwn = 2.0 * (double)cw.bytes / time_median(run_memcpy_mt, &cw, reps) * 1e-9;
    double bw = bw1 > bwn ? bw1 : bwn;
    free(cw.fa), free(cw.fc);
    printf("\ncopy bandwidth (memcpy, read+write of 128 MiB): %.2f GB/s on 1 thread, %.2f GB/s on %d; using %.2f\n",
           bw1, bwn, threads, bw);
    printf("RESULT copy memcpy %.2f GB/s\n", bw);

    /* memory-bound ops */
    printf("\n%-34s %10s %10s\n", "op (2^24 f32)", "GB/s", "% of copy");
    const struct {
        int kind;
        const char *name, *label;
        double bytes_per_elem;
    } ops[3] = {{W_ADD, "add", "add [2^24] + [2^24] (12 B/elem)", 12},
                {W_SOFTMAX, "softmax", "softmax [4096,4096] rows (8 B/elem)", 8},
                {W_SUM, "sum", "sum [2^24] (4 B/elem)", 4}};
    int64_t n = (int64_t)1 << 24;
    for (int k = 0; k < 3; k++) {
        work w = {.kind = ops[k].kind};
        int64_t shape1[1] = {n}, shape2[2] = {4096, n / 4096};
        w.a =
            td_rand(ops[k].kind == W_SOFTMAX ? 2 : 1, ops[k].kind == W_SOFTMAX ? shape2 : shape1, 1, 0, TD_F32, TD_CPU);
        w.b = td_rand(1, shape1, 2, 0, TD_F32, TD_CPU);
        double gbs = ops[k].bytes_per_elem * (double)n / time_median(run_td_op, &w, reps) * 1e-9;
        printf("%-34s %10.2f %9.1f%%\n", ops[k].label, gbs, 100 * gbs / bw);
        printf("RESULT %s trident %.2f GB/s\n", ops[k].name, gbs);
        td_release(w.a), td_release(w.b);
    }
    return 0;
}
