/*
** soak: many W1 training steps (src/workloads' MLP, Adam, batch 64) on one
** device, checking that memory stays flat. Each step builds its batch from host
** memory (td_from_data, as a data loader does: a fresh device tensor per step),
** trains on it and reads the loss; every 50 steps one evaluation batch runs too.
**
** Samples, taken every steps/SAMPLES steps after a td_synchronize:
**   rss        resident memory of the process (/proc/self/statm)
**   allocated  td_memory_stats: bytes held by live tensors on the device
**   reserved   td_memory_stats: bytes taken from the driver (allocated + cache)
**   tensors    td_debug_live_tensors(), which must not change after warm-up
** and the loss and training steps per second since the previous sample.
** After warm-up (the first tenth of the steps, at least 50: one evaluation), each byte count's
** highest later sample may exceed its warm-up sample by less than --max-growth
** percent (default 1). Prints one table row per sample, then one line per
** measure; exits 0 when all are flat, 1 when one grew, 2 on an error.
** A device that is absent exits 77 (CTest's skip) with the reason.
**
** Usage: build/bench/soak [--device cpu|vulkan:0|cuda:0] [--steps N] [--batch B] [--max-growth PCT]
** bench/soak.sh runs the full soak (10,000 steps on the CPU, 2,000 on Vulkan).
*/
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clock.h"
#include "trident/trident.h"
#include "workloads.h"

enum { SAMPLES = 20, POOL = 8, FEATURES = 784, CLASSES = 10, EVAL_EVERY = 50 };

typedef struct sample {
    int64_t step;
    uint64_t rss, allocated, reserved;
    int64_t tensors;
    double loss, steps_per_s;
} sample;

static uint64_t rss_bytes(void) {
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int fail(const char *what) {
    fprintf(stderr, "soak: %s: %s\n", what, td_last_error());
    return 2;
}

/* A pool of POOL host batches: pixels in [0, 1), labels in [0, 10). */
static void make_batches(float *x, int64_t *y, int64_t batch) {
    uint64_t s = 0x50A4;
    for (int64_t i = 0; i < POOL * batch * FEATURES; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(s >> 40) / (float)(1 << 24);
    }
    for (int64_t i = 0; i < POOL * batch; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        y[i] = (int64_t)((s >> 33) % CLASSES);
    }
}

/* A sample at step; *t_prev/steps_prev: the previous sample's time and step,
** for the rate over the interval (updated). */
static td_status take_sample(td_device dev, int64_t step, double loss, double *t_prev, int64_t *step_prev,
                             sample *out) {
    td_memory_stats ms = {0};
    td_status st = td_synchronize(dev);
    if (st == TD_OK) st = td_memory_stats_get(dev, false, &ms);
    double now = bench_now_s();
    *out = (sample){.step = step,
                    .rss = rss_bytes(),
                    .allocated = ms.allocated,
                    .reserved = ms.reserved,
                    .tensors = td_debug_live_tensors(),
                    .loss = loss,
                    .steps_per_s = (double)(step - *step_prev) / (now - *t_prev)};
    *t_prev = now, *step_prev = step;
    return st;
}

/* Percent growth of the highest sample after w over sample w. */
static double growth(const sample *s, int n, int w, size_t field) {
    uint64_t base = *(const uint64_t *)((const char *)&s[w] + field), top = base;
    for (int i = w + 1; i < n; i++) {
        uint64_t v = *(const uint64_t *)((const char *)&s[i] + field);
        top = v > top ? v : top;
    }
    return base ? 100.0 * (double)(top - base) / (double)base : 0;
}

int main(int argc, char **argv) {
    const char *devname = "cpu";
    int64_t steps = 10000, batch = 64;
    double max_growth = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            devname = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--max-growth") && i + 1 < argc)
            max_growth = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--device DEV] [--steps N >= %d] [--batch B] [--max-growth PCT]\n", argv[0],
                    2 * SAMPLES);
            return 2;
        }
    }
    if (steps < 2 * SAMPLES || batch < 1 || batch > 4096) {
        fprintf(stderr, "soak: need --steps >= %d and --batch in [1, 4096] (got %lld, %lld)\n", 2 * SAMPLES,
                (long long)steps, (long long)batch);
        return 2;
    }
    td_device dev;
    if (td_device_parse(devname, &dev) != TD_OK || !td_device_available(dev)) {
        printf("soak: skipped: device %s is not available: %s\n", devname, td_last_error());
        return 77;
    }
    float *hx = malloc((size_t)(POOL * batch * FEATURES) * sizeof *hx);
    int64_t *hy = malloc((size_t)(POOL * batch) * sizeof *hy);
    if (!hx || !hy) return fprintf(stderr, "soak: out of host memory\n"), 2;
    make_batches(hx, hy, batch);
    td_manual_seed(0);
    workload w;
    if (workload_init(&w, WORKLOAD_MLP, NULL, dev, NULL, 0, false) != TD_OK) return fail("workload_init");

    int64_t every = steps / SAMPLES, warm = steps / 10 > EVAL_EVERY ? steps / 10 : EVAL_EVERY;
    sample s[SAMPLES + 2];
    int n = 0, w_at = -1;
    double t_prev = bench_now_s(), loss = 0;
    int64_t step_prev = 0;
    printf("soak: W1 (MLP 784-256-256-10, Adam, batch %lld) for %lld steps on %s; warm-up %lld steps\n",
           (long long)batch, (long long)steps, devname, (long long)warm);
    printf("%8s %10s %14s %13s %8s %8s %8s\n", "step", "rss MiB", "allocated MiB", "reserved MiB", "tensors", "loss",
           "steps/s");
    for (int64_t k = 1; k <= steps; k++) {
        const int64_t xs[2] = {batch, FEATURES}, b = (k - 1) % POOL;
        td_scope_begin();
        td_tensor *x = td_from_data(hx + b * batch * FEATURES, 2, xs, TD_F32, dev);
        td_tensor *y = td_from_data(hy + b * batch, 1, &batch, TD_I64, dev);
        td_status st = x && y ? workload_train_step(&w, x, y, &loss) : td_last_status();
        if (st == TD_OK && k % EVAL_EVERY == 0) {
            double sum = 0;
            int64_t correct = 0, count = 0;
            st = workload_eval_batch(&w, x, y, &sum, &correct, &count);
        }
        td_scope_end();
        if (st != TD_OK) return fail("training step");
        if (k == warm || (k > warm && k % every == 0) || k == steps) {
            if (k == warm) w_at = n;
            if (take_sample(dev, k, loss, &t_prev, &step_prev, &s[n]) != TD_OK) return fail("sample");
            const sample *c = &s[n++];
            printf("%8lld %10.2f %14.2f %13.2f %8lld %8.4f %8.1f\n", (long long)c->step, c->rss / 1048576.0,
                   c->allocated / 1048576.0, c->reserved / 1048576.0, (long long)c->tensors, c->loss, c->steps_per_s);
            fflush(stdout);
        }
    }
    int bad = 0;
    static const struct {
        const char *name;
        size_t field;
    } measures[3] = {{"rss", offsetof(sample, rss)},
                     {"allocated", offsetof(sample, allocated)},
                     {"reserved", offsetof(sample, reserved)}};
    for (int m = 0; m < 3; m++) {
        double g = growth(s, n, w_at, measures[m].field);
        bool flat = g < max_growth;
        bad |= !flat;
        printf("soak %s %s: %+.3f%% after warm-up (limit %g%%): %s\n", devname, measures[m].name, g, max_growth,
               flat ? "flat" : "GREW");
    }
    int64_t t_min = s[w_at].tensors, t_max = s[w_at].tensors;
    for (int i = w_at; i < n; i++) {
        t_min = s[i].tensors < t_min ? s[i].tensors : t_min;
        t_max = s[i].tensors > t_max ? s[i].tensors : t_max;
    }
    bad |= t_min != t_max;
    printf("soak %s tensors: %lld..%lld live after warm-up: %s\n", devname, (long long)t_min, (long long)t_max,
           t_min == t_max ? "flat" : "GREW");
    workload_free(&w);
    free(hx);
    free(hy);
    return bad ? 1 : 0;
}
