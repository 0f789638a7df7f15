/*
** The profiler's report (trident/profile.h), a layer above the recorder
** (src/core/profile.c): td_profile_end, the roofline of each device (set, or
** measured once: the faster of a copy and an add, a GEMM per dtype), the rows by op and module, the
** terminal summary with % of roofline, the Chrome trace, and TRIDENT_PROFILE.
*/
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile_rec.h"
#include "trident/device.h"
#include "trident/profile.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* roofline kept across runs, by device: set (one peak for every dtype) or
** measured (a GEMM peak per dtype, gemm[] 0 where not measured) */
typedef struct roof {
    double gflops, gbps;         /* the f32 GEMM peak (or the set peak) and the bandwidth */
    double gemm[TD_DTYPE_COUNT]; /* measured GEMM peaks by dtype; 0: gflops */
    bool tried[TD_DTYPE_COUNT];  /* measured (or failed) once */
} roof;
static struct {
    td_device dev;
    roof r;
} roofs[TD_PROF_SLOTS];
static int n_roofs;

/* per slot of the last run: its name and roofline (0 = unknown) */
static struct {
    roof r;
    char name[200];
} info[TD_PROF_SLOTS];

static td__prof_data D; /* the records, as of the last refresh() */

static td_status write_trace(const char *path);

/* Best of 3 of fn on dev, timed with device events where the backend has them. */
static double time_best_ms(td_device dev, td_tensor *(*fn)(td_tensor *, td_tensor *), td_tensor *a, td_tensor *b) {
    double best = INFINITY;
    for (int rep = 0; rep < 4; rep++) {
        td_device_event *e0 = NULL, *e1 = NULL;
        bool ev = dev.type != TD_DEVICE_CPU && td_event_new(dev, &e0) == TD_OK && td_event_new(dev, &e1) == TD_OK;
        td_scope_begin();
        td_synchronize(dev);
        int64_t h0 = td__profile_now_ns();
        if (ev) td_event_record(e0);
        td_tensor *y = fn(a, b);
        double ms = NAN;
        if (ev) {
            td_event_record(e1);
            td_event_elapsed_ms(e0, e1, &ms);
        } else if (td_synchronize(dev) == TD_OK) {
            ms = (double)(td__profile_now_ns() - h0) / 1e6;
        }
        td_scope_end();
        td_event_free(e0), td_event_free(e1);
        if (!y) return NAN;
        if (rep && ms > 0 && ms < best) best = ms; /* rep 0 warms up */
    }
    return best;
}

static td_tensor *copy_fn(td_tensor *a, td_tensor *b) { return td_copy_(b, a) == TD_OK ? b : NULL; }

static bool small_device(td_device dev) {
    td_device_info di;
    return dev.type == TD_DEVICE_CPU || (td_device_get_info(dev, &di) == TD_OK && di.emulated);
}

/* The bandwidth roof of a device that has none: the faster of a copy (8
** bytes per f32 element) and an add (12), so that an elementwise op is not
** measured against a copy the backend runs slower than its adds. */
static void measure_bandwidth(int si) {
    td_device dev = D.slots[si].dev;
    int64_t len = small_device(dev) ? (int64_t)1 << 23 : (int64_t)1 << 25;
    td_tensor *x = td_zeros(1, &len, TD_F32, dev), *y = td_zeros(1, &len, TD_F32, dev);
    if (!x || !y) return;
    double c = time_best_ms(dev, copy_fn, x, y), a = time_best_ms(dev, td_add, x, y);
    double bc = c > 0 && isfinite(c) ? 8.0 * (double)len / (c * 1e6) : 0;
    double ba = a > 0 && isfinite(a) ? 12.0 * (double)len / (a * 1e6) : 0;
    info[si].r.gbps = bc > ba ? bc : ba;
}

/* The GEMM peak of dtype dt on a device: a square product, best of 3. */
static double measure_gemm(td_device dev, td_dtype dt) {
    int64_t n = small_device(dev) ? (dt == TD_F32 ? 512 : 256) : 2048;
    td_tensor *a = td_cast(td_randn(2, (int64_t[]){n, n}, 1, 0, TD_F32, dev), dt),
              *b = td_cast(td_randn(2, (int64_t[]){n, n}, 2, 0, TD_F32, dev), dt);
    double g = a && b ? time_best_ms(dev, td_matmul, a, b) : NAN;
    return g > 0 && isfinite(g) ? 2.0 * (double)n * (double)n * (double)n / (g * 1e6) : 0;
}

/* Measure what slot si's roofline lacks (recording is off): the bandwidth,
** the f32 GEMM peak, and the GEMM peak of each other float dtype its
** products ran in. */
static void measure_roof(int si) {
    td_device dev = D.slots[si].dev;
    td_status keep = td_last_status();
    td_scope_begin();
    if (!(info[si].r.gbps > 0)) measure_bandwidth(si);
    if (!(info[si].r.gflops > 0)) info[si].r.gflops = measure_gemm(dev, TD_F32);
    for (int64_t i = 0; info[si].r.gflops > 0 && i < D.n_recs; i++) {
        const prof_rec *r = &D.recs[i];
        if (r->slot != si || !r->gemm || r->dtype == TD_F32 || !td_dtype_is_float(r->dtype) ||
            info[si].r.tried[r->dtype])
            continue;
        info[si].r.tried[r->dtype] = true;
        info[si].r.gemm[r->dtype] = measure_gemm(dev, r->dtype);
    }
    td_scope_end();
    if (keep == TD_OK) td_clear_error();
}

/* The slot's roofline as known: set or measured before, by device. */
static void roof_of_slot(int si) {
    info[si].r = (roof){0};
    for (int i = 0; i < n_roofs; i++)
        if (td_device_equal(roofs[i].dev, D.slots[si].dev)) info[si].r = roofs[i].r;
}

/* Keep slot si's roofline for later runs on its device. */
static void keep_roof(int si) {
    int i = 0;
    while (i < n_roofs && !td_device_equal(roofs[i].dev, D.slots[si].dev)) i++;
    if (i == TD_PROF_SLOTS) return;
    roofs[i].dev = D.slots[si].dev, roofs[i].r = info[si].r;
    if (i == n_roofs) n_roofs++;
}

/* Read the recorder's current records (a run may have begun since the last look). */
static void refresh(void) {
    pthread_mutex_lock(&lock);
    D = td__profile_data();
    for (int i = 0; i < D.n_slots; i++) roof_of_slot(i);
    pthread_mutex_unlock(&lock);
}

td_status td_profile_end(const char *trace_path) {
    td_status st;
    if (!td__profile_stop(&st)) return st;
    refresh();
    for (int i = 0; i < D.n_slots; i++) {
        const prof_slot *s = &D.slots[i];
        char d[32];
        td_device_info di;
        snprintf(info[i].name, sizeof info[i].name, "%s", td_device_str(s->dev, d, sizeof d));
        if (td_device_get_info(s->dev, &di) == TD_OK)
            snprintf(info[i].name, sizeof info[i].name, "%s (%s)", d, di.name);
        measure_roof(i); /* what is not known yet, once per device (and dtype) and process */
        pthread_mutex_lock(&lock);
        keep_roof(i);
        pthread_mutex_unlock(&lock);
    }
    if (st == TD_OK && trace_path) st = write_trace(trace_path);
    return st;
}

td_status td_profile_set_roofline(td_device dev, double gflops, double gbps) {
    if (!(gflops > 0 && gbps > 0 && isfinite(gflops) && isfinite(gbps)))
        return TD_ERR(TD_ERR_MISUSE,
                      "profile_set_roofline: rates must be positive and finite, got %g GFLOP/s and %g GB/s", gflops,
                      gbps);
    roof set = {.gflops = gflops, .gbps = gbps};
    for (int d = 0; d < TD_DTYPE_COUNT; d++) set.tried[d] = true; /* one peak for every dtype */
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < n_roofs && !td_device_equal(roofs[i].dev, dev)) i++;
    if (i < TD_PROF_SLOTS) {
        roofs[i].dev = dev, roofs[i].r = set;
        if (i == n_roofs) n_roofs++;
    }
    for (int k = 0; k < D.n_slots; k++)
        if (td_device_equal(D.slots[k].dev, dev)) info[k].r = set;
    pthread_mutex_unlock(&lock);
    return TD_OK;
}

/* ---- aggregation ---- */

static td_profile_row *rows;
static int n_rows;

/* r's time at the roofline: max(flops / peak, bytes / bandwidth), the peak
** the GEMM peak of r's dtype for products (else the f32 one), at most r's
** own time: an op whose data stay in cache, or a small product, can beat a
** roof measured on large operands in memory, and counts as at the roof. */
static double roof_ms_of(const prof_rec *r) {
    if (r->kind < 0) return 0; /* a custom op: its cost is unknown */
    const roof *q = &info[r->slot].r;
    double g = r->gemm && q->gemm[r->dtype] > 0 ? q->gemm[r->dtype] : q->gflops, bw = q->gbps;
    double f = g > 0 ? r->flops / (g * 1e6) : 0, b = bw > 0 ? r->bytes / (bw * 1e6) : 0;
    double t = f > b ? f : b;
    return t < r->dur ? t : r->dur;
}

static int by_total(const void *a, const void *b) {
    double x = ((const td_profile_row *)a)->total_ms, y = ((const td_profile_row *)b)->total_ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

static const char no_name[] = "";

static uint64_t row_hash(const td_profile_row *w) {
    return (uintptr_t)w->op * 0x9E3779B97F4A7C15u ^ (uintptr_t)w->module * 31 ^ (uintptr_t)w->node * 131 ^
           (uint64_t)w->backward << 7 ^ (uint64_t)w->device.type << 9 ^ (uint64_t)w->device.index << 12;
}

static bool row_same(const td_profile_row *a, const td_profile_row *b) {
    return a->op == b->op && a->module == b->module && a->node == b->node && a->backward == b->backward &&
           td_device_equal(a->device, b->device);
}

/* Rows keyed by (op, module, node, phase, device): names are interned or
** static, so they compare by pointer; an open-addressing table of row indices
** at most half full, rebuilt twice as large when it would pass that. */
static void aggregate(void) {
    refresh();
    free(rows);
    rows = NULL, n_rows = 0;
    int cap = 0, hcap = 0, *h = NULL;
    for (int64_t i = 0; i < D.n_recs; i++) {
        const prof_rec *r = &D.recs[i];
        td_profile_row key = {.op = td__prof_rec_name(r),
                              .module = r->module ? r->module : no_name,
                              .node = r->node ? r->node : no_name,
                              .backward = r->backward,
                              .device = D.slots[r->slot].dev};
        if (2 * (n_rows + 1) > hcap) { /* grow: rows, then the table from the rows */
            int nc = cap ? 2 * cap : 256;
            td_profile_row *nr = realloc(rows, sizeof *rows * (size_t)nc);
            int *nh = malloc(sizeof *nh * (size_t)(2 * nc));
            if (!nr || !nh) {
                free(nh);
                if (nr) rows = nr;
                break; /* out of memory: the rows so far */
            }
            rows = nr, cap = nc, hcap = 2 * nc;
            free(h);
            h = nh;
            memset(h, -1, sizeof *h * (size_t)hcap);
            for (int k = 0; k < n_rows; k++) {
                int j = (int)(row_hash(&rows[k]) % (uint64_t)hcap);
                while (h[j] >= 0) j = (j + 1) % hcap;
                h[j] = k;
            }
        }
        int j = (int)(row_hash(&key) % (uint64_t)hcap);
        while (h[j] >= 0 && !row_same(&rows[h[j]], &key)) j = (j + 1) % hcap;
        if (h[j] < 0) h[j] = n_rows, rows[n_rows++] = key;
        td_profile_row *w = &rows[h[j]];
        w->count += r->n_ops;
        w->total_ms += r->dur;
        w->flops += r->flops, w->bytes += r->bytes;
        w->roof_ms += roof_ms_of(r);
    }
    free(h);
    if (rows) qsort(rows, (size_t)n_rows, sizeof *rows, by_total);
}

int td_profile_rows(td_profile_row *out, int cap) {
    aggregate();
    for (int i = 0; i < n_rows && i < cap; i++) out[i] = rows[i];
    return n_rows;
}

double td_profile_step_ms(int *steps) {
    refresh();
    int n = D.n_steps ? D.n_steps : 1;
    if (steps) *steps = D.n_recs ? n : 0;
    if (!D.n_recs) return 0;
    /* marked steps: from begin to the last mark; else begin to end */
    double span = (double)((D.n_steps ? D.step_ns[D.n_steps - 1] : D.t_end) - D.t_begin) / 1e6;
    for (int64_t i = 0; i < D.n_recs; i++) /* a GPU may end after the host's last mark */
        if (D.recs[i].start_ms + D.recs[i].dur > span) span = D.recs[i].start_ms + D.recs[i].dur;
    return span / n;
}

/* ---- the terminal summary ---- */

static void print_rate(FILE *f, double v) {
    if (v > 0)
        fprintf(f, " %8.1f", v);
    else
        fprintf(f, " %8s", "-");
}

td_status td_profile_print(FILE *f, int top) {
    if (!f) return TD_ERR(TD_ERR_MISUSE, "profile_print: FILE is NULL");
    aggregate();
    int steps;
    double step = td_profile_step_ms(&steps), ops = 0;
    int64_t count = 0;
    for (int i = 0; i < n_rows; i++) ops += rows[i].total_ms, count += rows[i].count;
    if (!steps) {
        fprintf(f, "profile: no ops recorded\n");
        return TD_OK;
    }
    fprintf(f, "profile: %d step%s, %lld ops, %.3f ms per step; ops %.3f ms per step (%.1f%% of it)\n", steps,
            steps == 1 ? "" : "s", (long long)count, step, ops / steps, 100 * ops / steps / step);
    for (int i = 0; i < D.n_slots; i++) {
        const roof *q = &info[i].r;
        fprintf(f, "  %-40s %s; roofline %.3g GFLOP/s", info[i].name,
                D.slots[i].events ? "device timestamps" : "host clock", q->gflops);
        for (int d = 0; d < TD_DTYPE_COUNT; d++)
            if (q->gemm[d] > 0) fprintf(f, " (%s %.3g)", td_dtype_name((td_dtype)d), q->gemm[d]);
        fprintf(f, ", %.3g GB/s%s\n", q->gbps, q->gflops > 0 ? "" : " (unknown)");
    }
    /* top (op, phase, device) groups, summed over modules */
    typedef struct {
        const char *op;
        bool bw;
        int slot;
        double ms, flops, bytes, roof;
        int64_t n;
    } grp;
    grp *g = calloc((size_t)n_rows + 1, sizeof *g);
    int ng = 0;
    for (int i = 0; g && i < n_rows; i++) {
        int s = 0;
        while (s < D.n_slots && !td_device_equal(D.slots[s].dev, rows[i].device)) s++;
        int j = 0;
        while (j < ng && !(g[j].op == rows[i].op && g[j].bw == rows[i].backward && g[j].slot == s)) j++;
        if (j == ng) g[ng++] = (grp){.op = rows[i].op, .bw = rows[i].backward, .slot = s};
        g[j].ms += rows[i].total_ms, g[j].n += rows[i].count, g[j].flops += rows[i].flops;
        g[j].bytes += rows[i].bytes, g[j].roof += rows[i].roof_ms;
    }
    for (int i = 1; i < ng; i++) /* insertion sort by time, descending */
        for (int j = i; j > 0 && g[j].ms > g[j - 1].ms; j--) {
            grp t = g[j];
            g[j] = g[j - 1], g[j - 1] = t;
        }
    fprintf(f,
            "\ntop ops by total time (per step: ms and %% of the step; mean over calls; %% roof: the time at the\n"
            "roofline over the time taken, the peak the GEMM rate of the op's dtype for products, the bandwidth the\n"
            "faster of a copy and an add; at most 100: ops in cache or small products that beat it count as at it)\n");
    fprintf(f, "  %-24s %-8s %-10s %8s %9s %7s %9s %8s %8s %6s\n", "op", "phase", "device", "calls", "ms/step",
            "% step", "mean us", "GFLOP/s", "GB/s", "% roof");
    for (int i = 0; i < ng && i < top; i++) {
        char d[32];
        fprintf(f, "  %-24s %-8s %-10s %8lld %9.3f %7.1f %9.1f", g[i].op, g[i].bw ? "backward" : "forward",
                td_device_str(D.slots[g[i].slot].dev, d, sizeof d), (long long)g[i].n, g[i].ms / steps,
                100 * g[i].ms / steps / step, 1e3 * g[i].ms / (double)(g[i].n ? g[i].n : 1));
        print_rate(f, g[i].ms > 0 ? g[i].flops / (g[i].ms * 1e6) : 0);
        print_rate(f, g[i].ms > 0 ? g[i].bytes / (g[i].ms * 1e6) : 0);
        if (g[i].roof > 0 && g[i].ms > 0)
            fprintf(f, " %6.0f\n", 100 * g[i].roof / g[i].ms);
        else
            fprintf(f, " %6s\n", "-");
    }
    /* by module: forward and backward time, and the heaviest op of each */
    ng = 0;
    typedef struct {
        const char *module;
        double fw, bw, top_ms;
        const char *top;
        bool top_bw;
    } mod;
    mod *m = calloc((size_t)n_rows + 1, sizeof *m);
    for (int i = 0; m && i < n_rows; i++) {
        int j = 0;
        while (j < ng && m[j].module != rows[i].module) j++;
        if (j == ng) m[ng++] = (mod){.module = rows[i].module};
        *(rows[i].backward ? &m[j].bw : &m[j].fw) += rows[i].total_ms;
        if (rows[i].total_ms > m[j].top_ms)
            m[j].top_ms = rows[i].total_ms, m[j].top = rows[i].op, m[j].top_bw = rows[i].backward;
    }
    for (int i = 1; i < ng; i++)
        for (int j = i; j > 0 && m[j].fw + m[j].bw > m[j - 1].fw + m[j - 1].bw; j--) {
            mod t = m[j];
            m[j] = m[j - 1], m[j - 1] = t;
        }
    fprintf(f, "\nby module (ms per step; backward: the autograd nodes its forward recorded)\n");
    fprintf(f, "  %-40s %9s %9s %7s  %s\n", "module", "forward", "backward", "% step", "heaviest op");
    for (int i = 0; i < ng && i < top; i++)
        fprintf(f, "  %-40s %9.3f %9.3f %7.1f  %s (%s)\n", *m[i].module ? m[i].module : "(no module)", m[i].fw / steps,
                m[i].bw / steps, 100 * (m[i].fw + m[i].bw) / steps / step, m[i].top,
                m[i].top_bw ? "backward" : "forward");
    free(g);
    free(m);
    return TD_OK;
}

/* ---- the Chrome trace ---- */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* pid: 1 + slot for a device's queue (tid 0); CPU ops: pid 1 + slot, tid = the
** host thread that ran them. Times in microseconds from td_profile_begin. */
static td_status write_trace(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return TD_ERR(TD_ERR_IO, "profile_end: cannot write the trace %s", TD_QUOTE(path));
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (int i = 0; i < D.n_slots; i++) {
        fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", i + 1);
        json_str(f, info[i].name);
        fprintf(
            f,
            "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
            i + 1, i);
        if (D.slots[i].dev.type != TD_DEVICE_CPU)
            fprintf(f,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"queue 0\"}},\n",
                    i + 1);
    }
    for (int t = 1; t <= D.n_threads; t++)
        for (int i = 0; i < D.n_slots; i++)
            if (D.slots[i].dev.type == TD_DEVICE_CPU)
                fprintf(f,
                        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"host thread "
                        "%d\"}},\n",
                        i + 1, t, t);
    for (int s = 0; s < D.n_steps; s++)
        fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"step %d\",\"pid\":1,\"tid\":0,\"ts\":%.3f},\n", s + 1,
                (double)(D.step_ns[s] - D.t_begin) / 1e3);
    for (int64_t i = 0; i < D.n_recs; i++) {
        const prof_rec *r = &D.recs[i];
        const prof_slot *s = &D.slots[r->slot];
        double roof = roof_ms_of(r);
        fprintf(
            f, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
            td__prof_rec_name(r), r->backward ? "backward" : "forward", r->slot + 1,
            s->dev.type == TD_DEVICE_CPU ? r->tid : 0, r->start_ms * 1e3, r->dur * 1e3);
        fprintf(f, "\"module\":");
        json_str(f, r->module ? r->module : "");
        if (r->node) {
            fprintf(f, ",\"node\":");
            json_str(f, r->node);
        }
        fprintf(f, ",\"backend\":\"%s\",\"shapes\":", s->be->name);
        json_str(f, r->shapes);
        fprintf(f, ",\"ops\":%d,\"flops\":%.0f,\"bytes\":%.0f", r->n_ops, r->flops, r->bytes);
        if (roof > 0 && r->dur > 0) fprintf(f, ",\"roof_pct\":%.1f", 100 * roof / r->dur);
        fprintf(f, "}}%s\n", i + 1 < D.n_recs ? "," : "");
    }
    fprintf(f, "]}\n");
    td_status st = ferror(f) ? TD_ERR(TD_ERR_IO, "profile_end: writing the trace %s failed", TD_QUOTE(path)) : TD_OK;
    if (fclose(f) != 0 && st == TD_OK)
        st = TD_ERR(TD_ERR_IO, "profile_end: closing the trace %s failed", TD_QUOTE(path));
    return st;
}

/* TRIDENT_PROFILE=1 profiles the whole process and prints the summary to
** stderr at exit; TRIDENT_PROFILE=FILE.json also writes the trace there. */
static const char *env_trace;

static void env_report(void) {
    if (!td__profiling) return;
    if (td_profile_end(env_trace) != TD_OK) fprintf(stderr, "TRIDENT_PROFILE: %s\n", td_last_error());
    td_profile_print(stderr, 20);
}

__attribute__((constructor)) static void env_start(void) {
    const char *e = getenv("TRIDENT_PROFILE");
    if (!e || !*e || !strcmp(e, "0")) return;
    if (strcmp(e, "1")) env_trace = e;
    if (td_profile_begin() == TD_OK) atexit(env_report);
}
