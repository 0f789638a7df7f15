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
** Custom ops' kernels (td__profile_custom, called by src/core/custom_op.c)
** are recorded the same way, named after the op (kind -1).
**
** Strings (module paths, names) are interned once and never freed: autograd
** nodes made during a run keep pointers to them.
**
** The report (roofline, summary, trace, td_profile_end) is a layer up, in
** src/profile/, reading the records through profile_rec.h.
*/
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile_rec.h"

enum { HARVEST = 1024 };

_Atomic bool td__profiling;
_Thread_local td__prof_where td__prof_at;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static prof_rec *recs;
static int64_t n_recs, cap_recs;
static prof_slot slots[TD_PROF_SLOTS];
static int n_slots;
static int64_t t_begin, t_end, step_ns[TD_PROF_STEPS];
static int n_steps;
static int next_tid;
static _Thread_local int my_tid;
static td_status run_error; /* the first error of recording (out of memory, an event) */

int64_t td__profile_now_ns(void) {
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

/* FLOPs by the op's cost kind (TD_OP_FACTS): 2 M N K of a product (matmul,
** the convolutions as GEMMs), one per element of the largest operand for
** arithmetic ops, 0 for data movement. Bytes: every operand's stored
** elements, read or written once. */
static void op_cost(const td_op *op, double *flops, double *bytes) {
    double b = 0, big = 0;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const td_operand *v = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        if (!v->buf) continue;
        b += stored_of(v) * (double)td_dtype_size(v->dtype);
        if (numel_of(v) > big) big = numel_of(v);
    }
    const td_operand *in = op->in, *out = op->out;
    int cost = td_op_info(op->kind)->cost;
    /* the convolutions: y and w of 2 numel(y) numel(w) / O */
    const td_operand *y = cost == TD_COST_CONV ? &out[0] : &in[0], *w = cost == TD_COST_CONV_DW ? &out[0] : &in[1];
    double f = 0;
    if (cost == TD_COST_ELEM)
        f = big;
    else if (cost == TD_COST_GEMM)
        f = 2 * numel_of(&out[0]) * (double)in[0].shape[in[0].ndim - 1];
    else if (cost != TD_COST_NONE)
        f = 2 * numel_of(y) * numel_of(w) / (double)w->shape[0];
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
    if (n_slots == TD_PROF_SLOTS) return NULL;
    prof_slot *s = &slots[n_slots++];
    *s = (prof_slot){.be = be, .dev = dev, .pending = -1};
    s->events = dev.type != TD_DEVICE_CPU && be->iface->event_create && be->iface->event_record &&
                be->iface->event_elapsed_ms && be->iface->event_free;
    if (s->events &&
        (be->iface->event_create(dev.index, &s->base) != TD_OK || be->iface->event_record(s->base) != TD_OK))
        s->events = false;
    s->base_ns = td__profile_now_ns();
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

/* Time run(ctx) on dev as record r (events on the device's queue, else the
** host clock) and keep the record. */
static td_status record(const td_backend *be, td_device dev, prof_rec r, td_status (*run)(void *), void *ctx) {
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
    r.h0 = td__profile_now_ns();
    td_status st = run(ctx);
    r.h1 = td__profile_now_ns();
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

typedef struct table_run {
    const td_backend *be;
    td_device dev;
    int n;
    const td_op *ops;
} table_run;

static td_status run_table(void *ctx) {
    const table_run *t = ctx;
    return t->n == 1 ? t->be->iface->run(t->dev.index, t->ops) : t->be->iface->run_many(t->dev.index, t->n, t->ops);
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
    int cost = td_op_info(ops[0].kind)->cost;
    r.gemm = cost != TD_COST_ELEM && cost != TD_COST_NONE;
    r.dtype = ops[0].n_in && ops[0].in[0].buf ? ops[0].in[0].dtype : ops[0].n_out ? ops[0].out[0].dtype : TD_F32;
    table_run t = {be, dev, n, ops};
    return record(be, dev, r, run_table, &t);
}

/* A custom op's kernel: named after the op, its bytes every tensor's (its
** FLOPs are unknown: 0), its shapes the inputs' -> the outputs'. */
td_status td__profile_custom(const char *name, int n_in, int n_out, td_tensor *const *tensors, td_status (*run)(void *),
                             void *ctx) {
    const td_storage *st0 = tensors[n_in]->storage;
    prof_rec r = {.kind = -1,
                  .name = td__profile_intern(name),
                  .n_ops = 1,
                  .dtype = td_tensor_dtype(tensors[n_in]),
                  .module = td__prof_at.module,
                  .node = td__prof_at.node,
                  .backward = td__prof_at.backward};
    size_t k = 0;
    for (int i = 0; i < n_in + n_out; i++) {
        const td_tensor *t = tensors[i];
        r.bytes += (double)td_numel(t) * (double)td_dtype_size(td_tensor_dtype(t));
        char sh[96];
        td__shape_str(td_ndim(t), td_shape(t), sh, sizeof sh);
        if (k + 1 < sizeof r.shapes)
            k += (size_t)snprintf(r.shapes + k, sizeof r.shapes - k, "%s%s%s", i == n_in ? " ->" : "", i ? " " : "",
                                  td_dtype_name(td_tensor_dtype(t)));
        if (k + 1 < sizeof r.shapes) k += (size_t)snprintf(r.shapes + k, sizeof r.shapes - k, "%s", sh);
    }
    return record(st0->backend, st0->device, r, run, ctx);
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
    t_begin = td__profile_now_ns();
    pthread_mutex_unlock(&lock);
    td__profiling = true;
    return TD_OK;
}

td_status td_profile_step(void) {
    if (!td__profiling) return TD_ERR(TD_ERR_STATE, "profile_step: the profiler is not recording");
    pthread_mutex_lock(&lock);
    if (n_steps < (int)(sizeof step_ns / sizeof *step_ns)) step_ns[n_steps++] = td__profile_now_ns();
    pthread_mutex_unlock(&lock);
    return TD_OK;
}

bool td__profile_stop(td_status *out) {
    if (!td__profiling) return *out = TD_ERR(TD_ERR_STATE, "profile_end: the profiler is not recording"), false;
    td__profiling = false;
    td_status st = TD_OK;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_slots && st == TD_OK; i++) st = slots[i].be->iface->synchronize(slots[i].dev.index);
    t_end = td__profile_now_ns();
    for (int i = 0; i < n_slots; i++) {
        td_status hs = harvest(i);
        if (st == TD_OK) st = hs;
    }
    pthread_mutex_unlock(&lock);
    if (st == TD_OK && run_error != TD_OK)
        st = TD_ERR(run_error, "profile_end: some ops were not recorded (%s)", td_status_str(run_error));
    *out = st;
    return true;
}

td__prof_data td__profile_data(void) {
    return (td__prof_data){recs, n_recs, slots, n_slots, t_begin, t_end, step_ns, n_steps, next_tid};
}
