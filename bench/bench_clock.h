/*
** Host-clock helpers shared by the benchmark programs (bench_cpu, the cpuperf programs
** and trident bench's host timer): a monotonic clock and the median of samples.
** defines: bench_now_s, bench_median_inplace.
*/
#ifndef TRIDENT_BENCH_CLOCK_H
#define TRIDENT_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (n > 0); sorts v. */
static inline double bench_median_inplace(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* TRIDENT_BENCH_CLOCK_H */
