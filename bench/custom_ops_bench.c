/*
** bench_custom_ops: each example custom op of examples/custom_ops/ against its
** composed reference (ordinary ops), on every present device, as a table.
**   build/examples/custom_ops/bench_custom_ops [--quick] [--device D]
** Shapes: bias_gelu and rmsnorm on x [4096, 4096] (w/b [4096]), top1 on
** [4096, 4096] (--quick: [256, 1024]). Each row: median of 20 timed calls after
** 3 warm-ups, with device events on GPUs (host clock + synchronize elsewhere);
** GB/s counts one read of x and one write of the output.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "custom_ops.h"

static custom_ops ops;

enum { REPS = 20, WARM = 3 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef td_tensor *(*run_fn)(td_tensor *x, td_tensor *w, int which);

/* which: 0 bias_gelu, 1 rmsnorm, 2 top1; fused or composed */
static td_tensor *run_fused(td_tensor *x, td_tensor *w, int which) {
    if (which == 0) return bias_gelu(&ops, x, w);
    if (which == 1) return rmsnorm(&ops, x, w, 1e-5f);
    td_tensor *v, *i;
    return top1(&ops, x, &v, &i) == TD_OK ? v : NULL;
}

static td_tensor *run_composed(td_tensor *x, td_tensor *w, int which) {
    if (which == 0) return bias_gelu_ref(x, w);
    if (which == 1) return rmsnorm_ref(x, w, 1e-5f);
    td_tensor *v = td_amax(x, 1, (int[]){1}, false), *i = td_argmax(x, 1, false);
    return v && i ? v : NULL;
}

/* median ms of fn on dev; -1 on failure */
static double time_ms(td_device dev, run_fn fn, td_tensor *x, td_tensor *w, int which) {
    double t[REPS];
    td_device_event *e0 = NULL, *e1 = NULL;
    bool events = dev.type != TD_DEVICE_CPU && td_event_new(dev, &e0) == TD_OK && td_event_new(dev, &e1) == TD_OK;
    td_clear_error();
    for (int r = -WARM; r < REPS; r++) {
        td_synchronize(dev);
        double h0 = now_ms();
        if (events) td_event_record(e0);
        td_scope_begin();
        td_tensor *y = fn(x, w, which);
        td_scope_end();
        if (!y) return -1;
        if (events) td_event_record(e1);
        td_synchronize(dev);
        double ms = now_ms() - h0;
        if (events) td_event_elapsed_ms(e0, e1, &ms);
        if (r >= 0) t[r] = ms;
    }
    td_event_free(e0);
    td_event_free(e1);
    qsort(t, REPS, sizeof t[0], cmp);
    return t[REPS / 2];
}

int main(int argc, char **argv) {
    bool quick = false;
    td_device devs[3] = {TD_CPU, TD_VULKAN(0), TD_CUDA(0)};
    int nd = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            if (td_device_parse(argv[++i], &devs[0]) != TD_OK) return fprintf(stderr, "%s\n", td_last_error()), 2;
            nd = 1;
        } else
            return fprintf(stderr, "usage: bench_custom_ops [--quick] [--device D]\n"), 2;
    }
    if (custom_ops_register(&ops, CUSTOM_OPS_DIR) != TD_OK) return fprintf(stderr, "%s\n", td_last_error()), 1;
    int64_t rows = quick ? 256 : 4096, cols = quick ? 1024 : 4096;
    static const char *const names[3] = {"bias_gelu", "rmsnorm", "top1"};
    printf("%-10s %-10s %-14s %12s %12s %10s %9s\n", "device", "op", "shape", "custom ms", "composed ms", "speedup",
           "GB/s");
    int rc = 0;
    for (int k = 0; k < nd; k++) {
        char d[32];
        td_device_str(devs[k], d, sizeof d);
        if (!td_device_available(devs[k])) {
            printf("%-10s not present, skipped\n", d);
            continue;
        }
        td_scope_begin();
        td_tensor *x = td_randn(2, (int64_t[]){rows, cols}, 1, 0, TD_F32, devs[k]);
        td_tensor *w = td_randn(1, (int64_t[]){cols}, 2, 0, TD_F32, devs[k]);
        for (int which = 0; which < 3; which++) {
            double a = time_ms(devs[k], run_fused, x, w, which), b = time_ms(devs[k], run_composed, x, w, which);
            if (a < 0 || b < 0) {
                printf("%-10s %-10s error: %s\n", d, names[which], td_last_error());
                rc = 1;
                continue;
            }
            double bytes = (double)rows * cols * 4 * (which == 2 ? 1 : 2);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
            printf("%-10s %-10s %-14s %12.4f %12.4f %9.2fx %9.1f\n", d, names[which], shape, a, b, b / a,
                   bytes / a / 1e6);
        }
        td_scope_end();
    }
    custom_ops_free(&ops);
    return rc;
}
