/*
** soak: many training steps of W1 (MLP), W2 (CNN) or W3 (GPT-mini) (src/workloads,
** Adam/AdamW) on one device, checking that memory stays flat. Each step builds its batch from host
** memory (td_from_data, as a data loader does: a fresh device tensor per step),
** trains on it and reads the loss; every 50 steps one evaluation batch runs too.
**
** Samples, taken every steps/SAMPLES steps after a td_synchronize:
**   rss        resident memory of the process (/proc/self/statm)
**   allocated  td_memory_stats: bytes held by live tensors on the device
**   reserved   td_memory_stats: bytes taken from the driver (allocated + cache)
**   tensors    td_debug_live_tensors(), which must not change after warm-up
**   fds        open file descriptors (/proc/self/fd): driver handles, shader caches
** and the loss and training steps per second since the previous sample.
** After warm-up (the first tenth of the steps, at least 50: one evaluation; half a shorter run), each byte count's
** highest later sample may exceed its warm-up sample by less than --max-growth
** percent (default 1), and the fd count may not change. Prints one table row per sample, then one line per
** measure; exits 0 when all are flat, 1 when one grew, 2 on an error.
** A device that is absent exits 77 (CTest's skip) with the reason.
**
** Usage: build/bench/soak [--model mlp|cnn|gpt] [--device cpu|vulkan:0|cuda:0] [--steps N] [--batch B]
**                         [--max-growth PCT]
** (batch default: 64 for mlp and cnn, 16 for gpt, whose windows are W3's 256 bytes of random text).
** bench/soak.sh runs the full soak (10,000 steps on the CPU, 2,000 on Vulkan; 10,000 W2 and 2,000 W3 steps
** per GPU device with `gpu`).
*/
#include <dirent.h>
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
    int64_t tensors, fds;
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

static int64_t open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int64_t n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

static int fail(const char *what) {
    fprintf(stderr, "soak: %s: %s\n", what, td_last_error());
    return 2;
}

/* A pool of POOL host batches. Images (mlp, cnn): xf [batch, 784] pixels in [0, 1), y [batch] labels in
** [0, 10). Text (gpt): xi and y [batch, t] bytes, y the next byte of a random stream (per = t). */
static void make_batches(float *xf, int64_t *xi, int64_t *y, int64_t batch, int64_t t) {
    uint64_t s = 0x50A4;
    for (int64_t i = 0; xf && i < POOL * batch * FEATURES; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        xf[i] = (float)(s >> 40) / (float)(1 << 24);
    }
    for (int64_t i = 0; xi && i < POOL * batch; i++) {
        int64_t prev = 0;
        for (int64_t j = 0; j <= t; j++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t byte = (int64_t)((s >> 33) % 256);
            if (j > 0) xi[i * t + j - 1] = prev, y[i * t + j - 1] = byte;
            prev = byte;
        }
    }
    for (int64_t i = 0; !xi && i < POOL * batch; i++) {
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
                    .fds = open_fds(),
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

/* The range [*lo, *hi] of an int64 field over samples w..n-1. */
static void span(const sample *s, int n, int w, size_t field, int64_t *lo, int64_t *hi) {
    *lo = *hi = *(const int64_t *)((const char *)&s[w] + field);
    for (int i = w + 1; i < n; i++) {
        int64_t v = *(const int64_t *)((const char *)&s[i] + field);
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
}

int main(int argc, char **argv) {
    const char *devname = "cpu", *model = "mlp";
    int64_t steps = 10000, batch = 0;
    double max_growth = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            devname = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--max-growth") && i + 1 < argc)
            max_growth = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--model mlp|cnn|gpt] [--device DEV] [--steps N >= %d] [--batch B] [--max-growth PCT]\n",
                    argv[0], 2 * SAMPLES);
            return 2;
        }
    }
    workload_kind kind;
    if (workload_kind_parse(model, &kind) != TD_OK || kind == WORKLOAD_LSTM) {
        fprintf(stderr, "soak: --model takes mlp, cnn or gpt (got '%s')\n", model);
        return 2;
    }
    if (batch == 0) batch = kind == WORKLOAD_GPT ? 16 : 64;
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
    workload_gpt_config cfg = workload_gpt_config_default();
    const bool text = kind == WORKLOAD_GPT;
    const int64_t t = text ? cfg.context : 1, per = text ? t : FEATURES;
    float *hx = text ? NULL : malloc((size_t)(POOL * batch * FEATURES) * sizeof *hx);
    int64_t *hxi = text ? malloc((size_t)(POOL * batch * t) * sizeof *hxi) : NULL;
    int64_t *hy = malloc((size_t)(POOL * batch * t) * sizeof *hy);
    if ((!hx && !hxi) || !hy) return fprintf(stderr, "soak: out of host memory\n"), 2;
    make_batches(hx, hxi, hy, batch, t);
    td_manual_seed(0);
    workload w;
    if (workload_init(&w, kind, text ? &cfg : NULL, dev, NULL, 0, false) != TD_OK) return fail("workload_init");

    int64_t every = steps / SAMPLES, warm = steps / 10 > EVAL_EVERY ? steps / 10 : EVAL_EVERY;
    if (warm >= steps) warm = steps / 2; /* a run shorter than one evaluation: its first half */
    sample s[SAMPLES + 2];
    int n = 0, w_at = -1;
    double t_prev = bench_now_s(), loss = 0;
    int64_t step_prev = 0;
    static const char *const title[3] = {"W1 (MLP 784-256-256-10, Adam", "W2 (CNN, Adam", "W3 (GPT-mini, AdamW"};
    printf("soak: %s, batch %lld) for %lld steps on %s; warm-up %lld steps\n", title[kind], (long long)batch,
           (long long)steps, devname, (long long)warm);
    printf("%8s %10s %14s %13s %8s %6s %8s %8s\n", "step", "rss MiB", "allocated MiB", "reserved MiB", "tensors", "fds",
           "loss", "steps/s");
    for (int64_t k = 1; k <= steps; k++) {
        const int64_t b = (k - 1) % POOL, xs[2] = {batch, per}, ys[2] = {batch, t};
        td_scope_begin();
        td_tensor *x = text ? td_from_data(hxi + b * batch * t, 2, xs, TD_I64, dev)
                            : td_from_data(hx + b * batch * FEATURES, 2, xs, TD_F32, dev);
        td_tensor *y = td_from_data(hy + b * batch * t, text ? 2 : 1, ys, TD_I64, dev);
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
            printf("%8lld %10.2f %14.2f %13.2f %8lld %6lld %8.4f %8.1f\n", (long long)c->step, c->rss / 1048576.0,
                   c->allocated / 1048576.0, c->reserved / 1048576.0, (long long)c->tensors, (long long)c->fds, c->loss,
                   c->steps_per_s);
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
        printf("soak %s %s %s: %+.3f%% after warm-up (limit %g%%): %s\n", model, devname, measures[m].name, g,
               max_growth, flat ? "flat" : "GREW");
    }
    static const struct {
        const char *name;
        size_t field;
    } counts[2] = {{"tensors", offsetof(sample, tensors)}, {"fds", offsetof(sample, fds)}};
    for (int m = 0; m < 2; m++) {
        int64_t lo, hi;
        span(s, n, w_at, counts[m].field, &lo, &hi);
        bad |= lo != hi;
        printf("soak %s %s %s: %lld..%lld after warm-up: %s\n", model, devname, counts[m].name, (long long)lo,
               (long long)hi, lo == hi ? "flat" : "GREW");
    }
    workload_free(&w);
    free(hx);
    free(hxi);
    free(hy);
    return bad ? 1 : 0;
}
