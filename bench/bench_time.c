/*
** Timing of one row: warm-up, then samples until a count or time budget.
**
** GPU backends queue work asynchronously, so a host clock around the call would
** time the enqueue. With device events (td_event_new) each sample is the time
** between two events recorded around the call. A device without events (or a
** row that asks for the host clock) is synchronized before and after, and timed
** by the host clock. The CPU backend is synchronous, so its host clock is exact.
** bench_device.timer records which. The host waits (td_host_sync_count) made
** inside the call are counted apart from the timer's own.
*/
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_clock.h"

#define BENCH_WARMUP       2
#define BENCH_MIN_SAMPLES  3
#define BENCH_ROTATE_BYTES (128.0 * 1024 * 1024)

static double now_ms(void) { return bench_now_s() * 1e3; }

int bench_rotation(double bytes_per_set) {
    if (bytes_per_set <= 0) return 1;
    double k = BENCH_ROTATE_BYTES / bytes_per_set;
    return k >= 8 ? 8 : k <= 1 ? 1 : (int)k + 1;
}

/* One call inside its own scope, so its outputs are freed after the sample. */
static td_status call(bench_fn fn, void *arg, int rep) {
    td_scope_begin();
    td_status st = fn(arg, rep);
    td_scope_end();
    return st;
}

typedef struct timer {
    td_device dev;
    td_device_event *start, *end; /* NULL: host clock */
    bool sync;                    /* synchronize around host-clock samples */
    int64_t waits;                /* host waits made inside the sampled calls */
} timer;

/* After the warm-up, the pipelines it left to Vulkan's compile threads are made (until then matmul's
** large tiles run on their small alternative), so that samples time the steady state. */
static void settle(td_device dev) {
    void (*wait)(int) = NULL;
    if (dev.type == TD_DEVICE_VULKAN) *(void **)&wait = td_backend_symbol(TD_DEVICE_VULKAN, "td_vulkan_compile_wait");
    if (wait) wait(dev.index);
}

static td_status sample(timer *t, bench_fn fn, void *arg, int rep, double *ms) {
    td_status st;
    int64_t w0;
    if (t->start) {
        if ((st = td_event_record(t->start)) != TD_OK) return st;
        td_scope_begin();
        w0 = td_host_sync_count();
        st = fn(arg, rep);
        t->waits += td_host_sync_count() - w0;
        if (st == TD_OK) st = td_event_record(t->end);
        td_scope_end();
        return st != TD_OK ? st : td_event_elapsed_ms(t->start, t->end, ms);
    }
    if (t->sync && (st = td_synchronize(t->dev)) != TD_OK) return st;
    double t0 = now_ms();
    td_scope_begin();
    w0 = td_host_sync_count();
    st = fn(arg, rep);
    t->waits += td_host_sync_count() - w0;
    if (st == TD_OK && t->sync) st = td_synchronize(t->dev);
    *ms = now_ms() - t0;
    td_scope_end();
    return st;
}

/* Pick the timer of device d (host_clock: never events) and name it in d->timer. */
static void timer_open(bench_device *d, timer *t, bool host_clock) {
    memset(t, 0, sizeof *t);
    t->dev = d->dev;
    if (d->dev.type == TD_DEVICE_CPU) {
        d->timer = "host clock (synchronous backend)";
        return;
    }
    t->sync = true;
    if (host_clock) return; /* this row's choice; d->timer names the device's usual timer */
    if (td_event_new(d->dev, &t->start) == TD_OK && td_event_new(d->dev, &t->end) == TD_OK) {
        d->timer = "device events";
        return;
    }
    td_event_free(t->start);
    t->start = NULL;
    td_clear_error();
    d->timer = "synchronize + host clock (backend has no events)";
}

static void timer_close(timer *t) {
    td_event_free(t->start);
    td_event_free(t->end);
}

static bench_row *new_row(bench_session *s, int device, const char *workload, const char *variant) {
    if (s->n_rows >= BENCH_MAX_ROWS) return NULL;
    bench_row *r = &s->rows[s->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    snprintf(r->variant, sizeof r->variant, "%s", variant ? variant : "");
    r->device = device;
    r->buffers = 1;
    return r;
}

void bench_fail(bench_session *s, int device, const char *workload, const char *variant, const char *why) {
    bench_row *r = new_row(s, device, workload, variant);
    if (r) snprintf(r->error, sizeof r->error, "%s", why ? why : td_last_error());
    td_clear_error();
}

double bench_median(const double *v, int n) {
    if (n <= 0) return 0;
    double tmp[BENCH_MAX_SAMPLES];
    if (n > BENCH_MAX_SAMPLES) n = BENCH_MAX_SAMPLES;
    memcpy(tmp, v, (size_t)n * sizeof *v);
    return bench_median_inplace(tmp, n);
}

bench_row *bench_time(bench_session *s, int device, const char *workload, const char *variant, const char *size,
                      bench_unit unit, double work, int buffers, bench_fn fn, void *arg) {
    bench_sampling how = {.warmup = BENCH_WARMUP, .max_samples = s->opt.max_reps, .budget_s = s->opt.budget_s};
    return bench_time_ext(s, device, workload, variant, size, unit, work, buffers, fn, arg, &how);
}

bench_row *bench_time_ext(bench_session *s, int device, const char *workload, const char *variant, const char *size,
                          bench_unit unit, double work, int buffers, bench_fn fn, void *arg,
                          const bench_sampling *how) {
    bench_device *d = &s->devices[device];
    timer t;
    timer_open(d, &t, how->host_clock);
    td_status st = TD_OK;
    for (int i = 0; i < how->warmup && st == TD_OK; i++) st = call(fn, arg, i % buffers);
    if (st == TD_OK && how->warmup) settle(t.dev);
    if (st == TD_OK && t.sync) st = td_synchronize(t.dev);
    int max = how->max_samples < 1 ? 1 : how->max_samples > BENCH_MAX_SAMPLES ? BENCH_MAX_SAMPLES : how->max_samples;
    double samples[BENCH_MAX_SAMPLES], spent = 0;
    int n = 0;
    while (st == TD_OK && n < max && (n < BENCH_MIN_SAMPLES || spent < how->budget_s * 1e3)) {
        st = sample(&t, fn, arg, n % buffers, &samples[n]);
        if (st == TD_OK) spent += samples[n++];
    }
    timer_close(&t);
    if (st != TD_OK) {
        bench_fail(s, device, workload, variant, NULL);
        return NULL;
    }
    bench_row *r = new_row(s, device, workload, variant);
    if (!r) return NULL;
    snprintf(r->size, sizeof r->size, "%s", size);
    r->unit = unit;
    r->work = work;
    r->buffers = buffers;
    r->n_samples = n;
    memcpy(r->samples_ms, samples, (size_t)n * sizeof *samples);
    r->median_ms = bench_median(samples, n);
    r->host_waits = (double)t.waits / n;
    r->rate = r->median_ms > 0 ? work / (r->median_ms * 1e-3) / bench_unit_scale(unit) : 0;
    return r;
}
