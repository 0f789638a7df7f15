/*
** The profiler (trident/profile.h): records every dispatched op between
** td_profile_begin and td_profile_end.
**
** Recording (td__profile_run, called by the dispatcher only while
** td__profiling is set): one record per run()/run_many() with the op, the
** issuing scope (td__prof_at: module path, backward node), a shape string and
** the op's FLOPs and bytes (op_cost). Devices whose backend has events get an
** event recorded on their queue before and after the op; the CPU is timed on
** the host clock. Events are read back ("harvested") every HARVEST ops of a
** device and at the end: start = elapsed(base, e0), duration = elapsed(e0, e1),
** where base is an event recorded when the device's first op of the run was
** seen, at host time base_ns, which places device time on the host timeline.
**
** Strings (module paths, names) are interned once and never freed: autograd
** nodes made during a run keep pointers to them.
*/
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "trident/device.h"
#include "trident/profile.h"

enum { HARVEST = 1024, MAX_SLOTS = 16, SHAPES = 160 };

_Atomic bool td__profiling;
_Thread_local td__prof_where td__prof_at;

typedef struct prof_rec {
    int kind, n_ops; /* n_ops > 1: one run_many call */
    int slot, tid;
    const char *module, *node;
    bool backward;
    double flops, bytes;
    int64_t h0, h1;       /* host ns around the call */
    td_event *e0, *e1;    /* device events, or NULL */
    double start_ms, dur; /* from the run's start; filled by harvest (or the host clock) */
    char shapes[SHAPES];
} prof_rec;

typedef struct prof_slot {
    const td_backend *be;
    td_device dev;
    bool events;
    td_event *base;
    int64_t base_ns;
    int64_t pending; /* first record not yet harvested */
    int n_pending;
    double gflops, gbps; /* roofline; 0 = unknown */
    char name[200];
} prof_slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static prof_rec *recs;
static int64_t n_recs, cap_recs;
static prof_slot slots[MAX_SLOTS];
static int n_slots;
static int64_t t_begin, t_end, step_ns[4096];
static int n_steps;
static int next_tid;
static _Thread_local int my_tid;
static td_status run_error; /* the first error of recording (out of memory, an event) */

/* roofline kept across runs, by device */
static struct {
    td_device dev;
    double gflops, gbps;
} roofs[MAX_SLOTS];
static int n_roofs;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- interned strings ---- */

static struct {
    char **s;
    int n, cap;
} strs;
static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;

const char *td__profile_intern(const char *s) {
    if (!s) return NULL;
    pthread_mutex_lock(&str_lock);
    const char *r = NULL;
    for (int i = strs.n - 1; i >= 0 && !r; i--)
        if (!strcmp(strs.s[i], s)) r = strs.s[i];
    if (!r &&
        (strs.n < strs.cap || (strs.s = realloc(strs.s, sizeof *strs.s * (size_t)(strs.cap = strs.cap * 2 + 64)))))
        if ((strs.s[strs.n] = strdup(s))) r = strs.s[strs.n++];
    pthread_mutex_unlock(&str_lock);
    return r;
}

/* ---- scopes ---- */

void td_profile_push(const char *name) {
    if (!td__profiling) return;
    char path[512];
    const char *up = td__prof_at.module;
    snprintf(path, sizeof path, "%s%s%s", up && *up ? up : "", up && *up ? "/" : "", name ? name : "?");
    td__prof_at.stack[td__prof_at.depth < TD_PROF_DEPTH ? td__prof_at.depth : TD_PROF_DEPTH - 1] = up;
    td__prof_at.depth++;
    td__prof_at.module = td__profile_intern(path);
}

void td_profile_pop(void) {
    if (td__prof_at.depth <= 0) return;
    td__prof_at.depth--;
    td__prof_at.module = td__prof_at.depth < TD_PROF_DEPTH ? td__prof_at.stack[td__prof_at.depth] : NULL;
}

/* ---- what an op costs ---- */

static double numel_of(const td_operand *v) {
    double n = 1;
    for (int d = 0; d < v->ndim; d++) n *= (double)v->shape[d];
    return n;
}

/* Elements actually stored: broadcast (stride-0) dims count once. */
static double stored_of(const td_operand *v) {
    double n = 1;
    for (int d = 0; d < v->ndim; d++)
        if (v->strides[d] != 0 || v->shape[d] == 0) n *= (double)v->shape[d];
    return n;
}

/* FLOPs: 2 M N K of a product (matmul, the convolutions as GEMMs), else one per
** element of the largest operand for arithmetic ops, 0 for data movement.
** Bytes: every operand's stored elements, read or written once. */
static void op_cost(const td_op *op, double *flops, double *bytes) {
    double b = 0, big = 0;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const td_operand *v = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (!v->buf) continue;
        b += stored_of(v) * (double)td_dtype_size(v->dtype);
        if (numel_of(v) > big) big = numel_of(v);
    }
    double f = 0;
    const td_operand *in = op->in, *out = op->out;
    switch (op->kind) {
    case TD_OP_MATMUL: f = 2 * numel_of(&out[0]) * (double)in[0].shape[in[0].ndim - 1]; break;
    case TD_OP_LINEAR_GELU: f = 2 * numel_of(&out[0]) * (double)in[0].shape[1]; break; /* the GEMM's */
    case TD_OP_CONV2D: f = 2 * numel_of(&out[0]) * numel_of(&in[1]) / (double)in[1].shape[0]; break;
    case TD_OP_CONV2D_BACKWARD_INPUT: f = 2 * numel_of(&in[0]) * numel_of(&in[1]) / (double)in[1].shape[0]; break;
    case TD_OP_CONV2D_BACKWARD_WEIGHT: f = 2 * numel_of(&in[0]) * numel_of(&out[0]) / (double)out[0].shape[0]; break;
    case TD_OP_FILL:
    case TD_OP_ARANGE:
    case TD_OP_RAND:
    case TD_OP_RANDN:
    case TD_OP_COPY:
    case TD_OP_EMBEDDING:
    case TD_OP_EMBEDDING_BACKWARD:
    case TD_OP_INDEX_SELECT:
    case TD_OP_GATHER:
    case TD_OP_SCATTER_ADD:
    case TD_OP_CAT:
    case TD_OP_ONE_HOT: f = 0; break;
    default: f = big; break;
    }
    *flops = f, *bytes = b;
}

static void shapes_of(const td_op *op, char *s, size_t n) {
    size_t k = 0;
    s[0] = 0;
    for (int i = 0; i < op->n_in + op->n_out && k + 24 < n; i++) {
        const td_operand *v = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (i == op->n_in) k += (size_t)snprintf(s + k, n - k, "%s->", k ? " " : "");
        if (!v->buf) continue;
        char sh[96];
        td__shape_str(v->ndim, v->shape, sh, sizeof sh);
        const char *dt = td_dtype_name(v->dtype);
        k += (size_t)snprintf(s + k, n - k, "%s%s%s", k && s[k - 1] != '>' ? " " : k ? " " : "", dt, sh);
        if (k >= n) k = n - 1;
    }
}

/* ---- recording ---- */

static prof_slot *slot_for(const td_backend *be, td_device dev) {
    for (int i = 0; i < n_slots; i++)
        if (slots[i].be == be && td_device_equal(slots[i].dev, dev)) return &slots[i];
    if (n_slots == MAX_SLOTS) return NULL;
    prof_slot *s = &slots[n_slots++];
    *s = (prof_slot){.be = be, .dev = dev, .pending = -1};
    s->events = dev.type != TD_DEVICE_CPU && be->iface->event_create && be->iface->event_record &&
                be->iface->event_elapsed_ms && be->iface->event_free;
    if (s->events &&
        (be->iface->event_create(dev.index, &s->base) != TD_OK || be->iface->event_record(s->base) != TD_OK))
        s->events = false;
    s->base_ns = now_ns();
    for (int i = 0; i < n_roofs; i++)
        if (td_device_equal(roofs[i].dev, dev)) s->gflops = roofs[i].gflops, s->gbps = roofs[i].gbps;
    return s;
}

/* Read back the events of slot si's pending records (waits for the device). */
static td_status harvest(int si) {
    prof_slot *s = &slots[si];
    const td_backend_i *f = s->be->iface;
    td_status st = TD_OK;
    for (int64_t i = s->pending; s->n_pending && i >= 0 && i < n_recs; i++) {
        prof_rec *r = &recs[i];
        if (r->slot != si || !r->e0) continue;
        double a = 0, d = 0;
        if (st == TD_OK) st = f->event_elapsed_ms(s->base, r->e0, &a);
        if (st == TD_OK) st = f->event_elapsed_ms(r->e0, r->e1, &d);
        r->start_ms = (double)(s->base_ns - t_begin) / 1e6 + a;
        r->dur = d;
        f->event_free(r->e0), f->event_free(r->e1);
        r->e0 = r->e1 = NULL;
    }
    s->pending = -1, s->n_pending = 0;
    return st;
}

static void keep_error(td_status st) {
    if (st != TD_OK && run_error == TD_OK) run_error = st;
}

td_status td__profile_run(const td_backend *be, td_device dev, int n, const td_op *ops) {
    prof_rec r = {.kind = ops[0].kind,
                  .n_ops = n,
                  .module = td__prof_at.module,
                  .node = td__prof_at.node,
                  .backward = td__prof_at.backward};
    for (int i = 0; i < n; i++) {
        double f, b;
        op_cost(&ops[i], &f, &b);
        r.flops += f, r.bytes += b;
    }
    shapes_of(&ops[0], r.shapes, sizeof r.shapes);
    pthread_mutex_lock(&lock);
    if (!my_tid) my_tid = ++next_tid;
    r.tid = my_tid;
    prof_slot *s = slot_for(be, dev);
    r.slot = s ? (int)(s - slots) : -1;
    bool ev = s && s->events;
    pthread_mutex_unlock(&lock);
    const td_backend_i *f = be->iface;
    if (ev && (f->event_create(dev.index, &r.e0) != TD_OK || f->event_create(dev.index, &r.e1) != TD_OK ||
               f->event_record(r.e0) != TD_OK))
        keep_error(td_last_status()), ev = false;
    r.h0 = now_ns();
    td_status st = n == 1 ? f->run(dev.index, ops) : f->run_many(dev.index, n, ops);
    r.h1 = now_ns();
    if (ev && f->event_record(r.e1) != TD_OK) keep_error(td_last_status()), ev = false;
    if (!ev) {
        if (r.e0) f->event_free(r.e0);
        if (r.e1) f->event_free(r.e1);
        r.e0 = r.e1 = NULL;
        r.start_ms = (double)(r.h0 - t_begin) / 1e6, r.dur = (double)(r.h1 - r.h0) / 1e6;
    }
    pthread_mutex_lock(&lock);
    if (n_recs == cap_recs) {
        int64_t c = cap_recs ? cap_recs * 2 : 4096;
        prof_rec *p = realloc(recs, sizeof *recs * (size_t)c);
        if (p) recs = p, cap_recs = c;
    }
    if (n_recs < cap_recs && r.slot >= 0) {
        recs[n_recs] = r;
        if (ev && !s->n_pending++) s->pending = n_recs;
        n_recs++;
        if (s->n_pending >= HARVEST) {
            td_status hs = harvest(r.slot);
            keep_error(hs);
        }
    } else {
        if (r.e0) f->event_free(r.e0), f->event_free(r.e1);
        keep_error(TD_ERR_OOM); /* the record is lost; the op ran */
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---- begin, step, end ---- */

static void clear_run(void) {
    for (int64_t i = 0; i < n_recs; i++)
        if (recs[i].e0)
            slots[recs[i].slot].be->iface->event_free(recs[i].e0),
                slots[recs[i].slot].be->iface->event_free(recs[i].e1);
    for (int i = 0; i < n_slots; i++)
        if (slots[i].base) slots[i].be->iface->event_free(slots[i].base);
    n_recs = 0, n_slots = 0, n_steps = 0, run_error = TD_OK;
}

td_status td_profile_begin(void) {
    if (td__profiling) return TD_ERR(TD_ERR_STATE, "profile_begin: the profiler is already recording");
    pthread_mutex_lock(&lock);
    clear_run();
    t_begin = now_ns();
    pthread_mutex_unlock(&lock);
    td__profiling = true;
    return TD_OK;
}

td_status td_profile_step(void) {
    if (!td__profiling) return TD_ERR(TD_ERR_STATE, "profile_step: the profiler is not recording");
    pthread_mutex_lock(&lock);
    if (n_steps < (int)(sizeof step_ns / sizeof *step_ns)) step_ns[n_steps++] = now_ns();
    pthread_mutex_unlock(&lock);
    return TD_OK;
}

/* Best of 3 of fn on dev, timed with device events where the backend has them. */
static double time_best_ms(td_device dev, td_tensor *(*fn)(td_tensor *, td_tensor *), td_tensor *a, td_tensor *b) {
    double best = INFINITY;
    for (int rep = 0; rep < 4; rep++) {
        td_device_event *e0 = NULL, *e1 = NULL;
        bool ev = dev.type != TD_DEVICE_CPU && td_event_new(dev, &e0) == TD_OK && td_event_new(dev, &e1) == TD_OK;
        td_scope_begin();
        td_synchronize(dev);
        int64_t h0 = now_ns();
        if (ev) td_event_record(e0);
        td_tensor *y = fn(a, b);
        double ms = NAN;
        if (ev) {
            td_event_record(e1);
            td_event_elapsed_ms(e0, e1, &ms);
        } else if (td_synchronize(dev) == TD_OK) {
            ms = (double)(now_ns() - h0) / 1e6;
        }
        td_scope_end();
        td_event_free(e0), td_event_free(e1);
        if (!y) return NAN;
        if (rep && ms > 0 && ms < best) best = ms; /* rep 0 warms up */
    }
    return best;
}

static td_tensor *copy_fn(td_tensor *a, td_tensor *b) { return td_copy_(b, a) == TD_OK ? b : NULL; }

/* The roofline of a device that has none: a copy (bytes read + written per
** second) and a square f32 GEMM, with recording off. */
static void measure_roof(prof_slot *s) {
    td_device_info info;
    bool small = s->dev.type == TD_DEVICE_CPU || (td_device_get_info(s->dev, &info) == TD_OK && info.emulated);
    int64_t n = small ? 512 : 2048, len = small ? (int64_t)1 << 23 : (int64_t)1 << 25;
    td_status keep = td_last_status();
    td_scope_begin();
    td_tensor *a = td_randn(2, (int64_t[]){n, n}, 1, 0, TD_F32, s->dev),
              *b = td_randn(2, (int64_t[]){n, n}, 2, 0, TD_F32, s->dev);
    td_tensor *x = td_zeros(1, &len, TD_F32, s->dev), *y = td_zeros(1, &len, TD_F32, s->dev);
    if (a && b && x && y) {
        double g = time_best_ms(s->dev, td_matmul, a, b), c = time_best_ms(s->dev, copy_fn, x, y);
        if (g > 0 && isfinite(g)) s->gflops = 2.0 * (double)n * (double)n * (double)n / (g * 1e6);
        if (c > 0 && isfinite(c)) s->gbps = 8.0 * (double)len / (c * 1e6);
    }
    td_scope_end();
    if (keep == TD_OK) td_clear_error();
}

td_status td_profile_end(const char *trace_path) {
    if (!td__profiling) return TD_ERR(TD_ERR_STATE, "profile_end: the profiler is not recording");
    td__profiling = false;
    td_status st = TD_OK;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_slots && st == TD_OK; i++) st = slots[i].be->iface->synchronize(slots[i].dev.index);
    t_end = now_ns();
    for (int i = 0; i < n_slots; i++) {
        td_status hs = harvest(i);
        if (st == TD_OK) st = hs;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n_slots; i++) {
        prof_slot *s = &slots[i];
        char d[32];
        td_device_info info;
        snprintf(s->name, sizeof s->name, "%s", td_device_str(s->dev, d, sizeof d));
        if (td_device_get_info(s->dev, &info) == TD_OK) snprintf(s->name, sizeof s->name, "%s (%s)", d, info.name);
        if (!(s->gflops > 0 && s->gbps > 0)) { /* once per device and process */
            measure_roof(s);
            if (s->gflops > 0 && s->gbps > 0) td_profile_set_roofline(s->dev, s->gflops, s->gbps);
        }
    }
    if (st == TD_OK && run_error != TD_OK)
        st = TD_ERR(run_error, "profile_end: some ops were not recorded (%s)", td_status_str(run_error));
    if (st == TD_OK && trace_path) st = td__profile_write_trace(trace_path);
    return st;
}

td_status td_profile_set_roofline(td_device dev, double gflops, double gbps) {
    if (!(gflops > 0 && gbps > 0 && isfinite(gflops) && isfinite(gbps)))
        return TD_ERR(TD_ERR_MISUSE,
                      "profile_set_roofline: rates must be positive and finite, got %g GFLOP/s and %g GB/s", gflops,
                      gbps);
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < n_roofs && !td_device_equal(roofs[i].dev, dev)) i++;
    if (i < MAX_SLOTS) {
        roofs[i].dev = dev, roofs[i].gflops = gflops, roofs[i].gbps = gbps;
        if (i == n_roofs) n_roofs++;
    }
    for (int k = 0; k < n_slots; k++)
        if (td_device_equal(slots[k].dev, dev)) slots[k].gflops = gflops, slots[k].gbps = gbps;
    pthread_mutex_unlock(&lock);
    return TD_OK;
}

/* ---- aggregation ---- */

static td_profile_row *rows;
static int n_rows;

static double roof_ms_of(const prof_rec *r) {
    const prof_slot *s = &slots[r->slot];
    double f = s->gflops > 0 ? r->flops / (s->gflops * 1e6) : 0, b = s->gbps > 0 ? r->bytes / (s->gbps * 1e6) : 0;
    return f > b ? f : b;
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
    free(rows);
    rows = NULL, n_rows = 0;
    int cap = 0, hcap = 0, *h = NULL;
    for (int64_t i = 0; i < n_recs; i++) {
        const prof_rec *r = &recs[i];
        td_profile_row key = {.op = td_op_name(r->kind),
                              .module = r->module ? r->module : no_name,
                              .node = r->node ? r->node : no_name,
                              .backward = r->backward,
                              .device = slots[r->slot].dev};
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
    int n = n_steps ? n_steps : 1;
    if (steps) *steps = n_recs ? n : 0;
    if (!n_recs) return 0;
    /* marked steps: from begin to the last mark; else begin to end */
    double span = (double)((n_steps ? step_ns[n_steps - 1] : t_end) - t_begin) / 1e6;
    for (int64_t i = 0; i < n_recs; i++) /* a GPU may end after the host's last mark */
        if (recs[i].start_ms + recs[i].dur > span) span = recs[i].start_ms + recs[i].dur;
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
    for (int i = 0; i < n_slots; i++)
        fprintf(f, "  %-40s %s; roofline %.3g GFLOP/s, %.3g GB/s%s\n", slots[i].name,
                slots[i].events ? "device timestamps" : "host clock", slots[i].gflops, slots[i].gbps,
                slots[i].gflops > 0 ? "" : " (unknown)");
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
        while (s < n_slots && !td_device_equal(slots[s].dev, rows[i].device)) s++;
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
    fprintf(f, "\ntop ops by total time (per step: ms and %% of the step; mean over calls)\n");
    fprintf(f, "  %-24s %-8s %-10s %8s %9s %7s %9s %8s %8s %6s\n", "op", "phase", "device", "calls", "ms/step",
            "% step", "mean us", "GFLOP/s", "GB/s", "% roof");
    for (int i = 0; i < ng && i < top; i++) {
        char d[32];
        fprintf(f, "  %-24s %-8s %-10s %8lld %9.3f %7.1f %9.1f", g[i].op, g[i].bw ? "backward" : "forward",
                td_device_str(slots[g[i].slot].dev, d, sizeof d), (long long)g[i].n, g[i].ms / steps,
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
    fprintf(f, "  %-32s %9s %9s %7s  %s\n", "module", "forward", "backward", "% step", "heaviest op");
    for (int i = 0; i < ng && i < top; i++)
        fprintf(f, "  %-32s %9.3f %9.3f %7.1f  %s (%s)\n", *m[i].module ? m[i].module : "(no module)", m[i].fw / steps,
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
td_status td__profile_write_trace(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return TD_ERR(TD_ERR_IO, "profile_end: cannot write the trace %s", TD_QUOTE(path));
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (int i = 0; i < n_slots; i++) {
        fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", i + 1);
        json_str(f, slots[i].name);
        fprintf(
            f,
            "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
            i + 1, i);
        if (slots[i].dev.type != TD_DEVICE_CPU)
            fprintf(f,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"queue 0\"}},\n",
                    i + 1);
    }
    for (int t = 1; t <= next_tid; t++)
        for (int i = 0; i < n_slots; i++)
            if (slots[i].dev.type == TD_DEVICE_CPU)
                fprintf(f,
                        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"host thread "
                        "%d\"}},\n",
                        i + 1, t, t);
    for (int s = 0; s < n_steps; s++)
        fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"step %d\",\"pid\":1,\"tid\":0,\"ts\":%.3f},\n", s + 1,
                (double)(step_ns[s] - t_begin) / 1e3);
    for (int64_t i = 0; i < n_recs; i++) {
        const prof_rec *r = &recs[i];
        const prof_slot *s = &slots[r->slot];
        double roof = roof_ms_of(r);
        fprintf(
            f, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
            td_op_name(r->kind), r->backward ? "backward" : "forward", r->slot + 1,
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
        fprintf(f, "}}%s\n", i + 1 < n_recs ? "," : "");
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
