/*
** The public device API (include/trident/device.h): properties, memory
** statistics, synchronization, events, native handles, foreign memory,
** capture, the fp32 matmul precision and the host-wait counter. Each function
** checks its arguments and forwards to the device's backend slot, saying which
** slot is missing when a backend lacks it.
*/
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trident/device.h"

static _Atomic int64_t host_syncs;
static _Atomic int tf32_allowed; /* "high": fp32 matmul and conv may use TF32 */

void td__count_host_sync(const td_storage *s) {
    if (s->device.type != TD_DEVICE_CPU) atomic_fetch_add(&host_syncs, 1);
}

int64_t td_host_sync_count(void) { return atomic_load(&host_syncs); }

uint32_t td__op_flags(td_op_kind kind) {
    const td_op_meta *m = td_op_info(kind);
    return m && m->gemm && atomic_load(&tf32_allowed) ? TD_OP_FLAG_TF32 : 0;
}

td_status td_set_float32_matmul_precision(const char *precision) {
    if (precision && !strcmp(precision, "highest"))
        atomic_store(&tf32_allowed, 0);
    else if (precision && (!strcmp(precision, "high") || !strcmp(precision, "medium")))
        atomic_store(&tf32_allowed, 1);
    else
        return TD_ERR(TD_ERR_MISUSE, "set_float32_matmul_precision: '%.32s' is not highest, high or medium",
                      precision ? precision : "(null)");
    return TD_OK;
}

const char *td_get_float32_matmul_precision(void) { return atomic_load(&tf32_allowed) ? "high" : "highest"; }

/* The backend of dev, or NULL with the error set (it names the device). */
static const td_backend *backend_of(td_device dev, const char *fn) {
    (void)fn;
    return td__backend_of(dev);
}

static td_status missing(td_device dev, const char *fn, const char *what) {
    char d[32];
    return TD_ERR(TD_ERR_UNSUPPORTED, "%s: %s has no %s", fn, td_device_str(dev, d, sizeof d), what);
}

td_status td_device_get_info(td_device dev, td_device_info *out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "device_get_info: out is NULL");
    memset(out, 0, sizeof *out);
    const td_backend *be = backend_of(dev, "device_get_info");
    return be ? be->iface->device_info(dev.index, out) : td_last_status();
}

td_status td_memory_stats_get(td_device dev, bool reset_peak, td_memory_stats *out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "memory_stats: out is NULL");
    memset(out, 0, sizeof *out);
    const td_backend *be = backend_of(dev, "memory_stats");
    if (!be) return td_last_status();
    if (!be->iface->memory_stats) return missing(dev, "memory_stats", "allocator statistics");
    return be->iface->memory_stats(dev.index, reset_peak, out);
}

td_status td_memory_empty_cache(td_device dev) {
    const td_backend *be = backend_of(dev, "memory_empty_cache");
    if (!be) return td_last_status();
    return be->iface->empty_cache ? be->iface->empty_cache(dev.index) : TD_OK;
}

td_status td_synchronize(td_device dev) {
    const td_backend *be = backend_of(dev, "synchronize");
    if (!be) return td_last_status();
    if (dev.type != TD_DEVICE_CPU) atomic_fetch_add(&host_syncs, 1);
    td_status st = be->iface->synchronize(dev.index);
    return st == TD_OK ? td__device_check_report(dev) : st;
}

void *td_device_native_stream(td_device dev) {
    const td_backend *be = backend_of(dev, "device_native_stream");
    return be && be->iface->native_stream ? be->iface->native_stream(dev.index) : NULL;
}

/* ---- events ---- */

struct td_device_event {
    const td_backend *be;
    td_device dev;
    td_event *ev;
};

td_status td_event_new(td_device dev, td_device_event **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "event_new: out is NULL");
    *out = NULL;
    const td_backend *be = backend_of(dev, "event_new");
    if (!be) return td_last_status();
    if (!be->iface->event_create) return missing(dev, "event_new", "events");
    td_device_event *e = calloc(1, sizeof *e);
    td_status st = e ? be->iface->event_create(dev.index, &e->ev) : TD_ERR(TD_ERR_OOM, "event_new: out of host memory");
    if (st == TD_OK)
        e->be = be, e->dev = dev, *out = e;
    else
        free(e);
    return st;
}

td_status td_event_record(td_device_event *ev) {
    if (!ev) return TD_ERR(TD_ERR_MISUSE, "event_record: event is NULL");
    return ev->be->iface->event_record(ev->ev);
}

td_status td_event_wait(td_device_event *ev, td_device dev) {
    if (!ev) return TD_ERR(TD_ERR_MISUSE, "event_wait: event is NULL");
    const td_backend *be = backend_of(dev, "event_wait");
    if (!be) return td_last_status();
    if (be == ev->be && be->iface->event_wait) return be->iface->event_wait(dev.index, ev->ev);
    /* another backend, or no queue-side wait: the host waits for the event's device */
    atomic_fetch_add(&host_syncs, 1);
    return ev->be->iface->synchronize(ev->dev.index);
}

td_status td_event_wait_native(td_device_event *ev, void *native_stream) {
    if (!ev) return TD_ERR(TD_ERR_MISUSE, "event_wait_native: event is NULL");
    if (ev->be->iface->event_wait_native) return ev->be->iface->event_wait_native(native_stream, ev->ev);
    atomic_fetch_add(&host_syncs, 1);
    return ev->be->iface->synchronize(ev->dev.index);
}

td_status td_event_elapsed_ms(td_device_event *start, td_device_event *end, double *ms) {
    if (!start || !end || !ms) return TD_ERR(TD_ERR_MISUSE, "event_elapsed_ms: NULL argument");
    *ms = 0;
    if (start->be != end->be || !td_device_equal(start->dev, end->dev))
        return TD_ERR(TD_ERR_DEVICE, "event_elapsed_ms: the two events belong to different devices");
    atomic_fetch_add(&host_syncs, 1);
    return end->be->iface->event_elapsed_ms(start->ev, end->ev, ms);
}

void td_event_free(td_device_event *ev) {
    if (!ev) return;
    if (ev->be->iface->event_free) ev->be->iface->event_free(ev->ev);
    free(ev);
}

/* ---- native addresses and foreign memory ---- */

uint64_t td_tensor_device_address(const td_tensor *t) {
    if (!td__check_arg(t, "tensor_device_address", "t")) return 0;
    const td_backend *be = t->storage->backend;
    if (!be->iface->buffer_address) return missing(t->storage->device, "tensor_device_address", "buffer addresses"), 0;
    uint64_t base = be->iface->buffer_address(t->storage->buf);
    if (!base) return missing(t->storage->device, "tensor_device_address", "address for this buffer"), 0;
    return base + t->storage->guard + (uint64_t)t->offset * td_dtype_size(t->dtype);
}

td_tensor *td_from_foreign(td_device dev, uint64_t address, int ndim, const int64_t *shape, const int64_t *strides,
                           td_dtype dt, void (*deleter)(void *ctx), void *ctx) {
    if (ndim < 0 || ndim > TD_MAX_DIMS || (ndim && !shape))
        TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: ndim %d with %s shape", ndim, shape ? "a" : "a NULL");
    if ((unsigned)dt >= TD_DTYPE_COUNT) TD_FAIL_NULL(TD_ERR_DTYPE, "from_foreign: invalid dtype %d", (int)dt);
    /* the sizes before any stride is computed from them: >= 0, and their product (a 0 taken as 1, since a
    ** size-0 tensor's strides still span its other dims) within td_empty's 2^48 bytes, so that every tensor
    ** made from this one (a contiguous copy) can exist */
    uint64_t extent = td_dtype_size(dt);
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: dim %d has size %lld; sizes must be >= 0", i,
                         (long long)shape[i]);
        empty |= shape[i] == 0;
        if (__builtin_mul_overflow(extent, shape[i] ? (uint64_t)shape[i] : 1, &extent) || extent > (uint64_t)1 << 48)
            TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: the sizes (a 0 taken as 1) multiply past 2^48 bytes at dim %d",
                         i);
    }
    if (address % td_dtype_size(dt))
        TD_FAIL_NULL(TD_ERR_MISUSE,
                     "from_foreign: address 0x%llx is not a multiple of the element size %zu: the elements would be "
                     "misaligned (copy it first)",
                     (unsigned long long)address, td_dtype_size(dt));
    int64_t st[TD_MAX_DIMS], span = 1; /* span: elements from element 0 to the last reachable one, plus one */
    if (!strides) td__contiguous_strides(ndim, shape, st);
    for (int i = 0; i < ndim; i++) {
        if (strides) st[i] = strides[i];
        if (st[i] < 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: dim %d has size %lld and stride %lld; both must be >= 0", i,
                         (long long)shape[i], (long long)st[i]);
        if (shape[i] == 0) continue;
        if (shape[i] > 1 && st[i] > (INT64_MAX / 16 - span) / (shape[i] - 1))
            TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: the strides reach past 2^59 elements");
        else
            span += (shape[i] - 1) * st[i];
    }
    size_t nbytes = empty ? 0 : (size_t)span * td_dtype_size(dt);
    if (nbytes && !address) TD_FAIL_NULL(TD_ERR_MISUSE, "from_foreign: address is 0 for %zu bytes", nbytes);
    const td_backend *be = backend_of(dev, "from_foreign");
    if (!be) return NULL;
    if (empty) { /* no element to wrap (the address may be anything, 0 too): a fresh empty tensor, and the memory goes
                  */
        td_tensor *t = td_empty(ndim, shape, dt, dev);
        if (!t) return (void)td_error_prefix("from_foreign"), NULL;
        if (deleter) deleter(ctx);
        return t;
    }
    if (!be->iface->buffer_import) {
        missing(dev, "from_foreign", "foreign-memory import");
        return NULL;
    }
    td_storage *s = calloc(1, sizeof *s);
    if (!s) TD_FAIL_NULL(TD_ERR_OOM, "from_foreign: out of host memory");
    if (be->iface->buffer_import(dev.index, address, nbytes, deleter, ctx, &s->buf) != TD_OK) {
        free(s);
        return NULL;
    }
    atomic_init(&s->refcount, 1);
    s->device = dev;
    s->backend = be;
    s->nbytes = nbytes;
    s->flags = TD__STORAGE_SHARED;                          /* its producer may write it */
    td_tensor *t = td__tensor_over(s, ndim, shape, st, dt); /* takes s; on failure releases it (running the deleter) */
    if (!t) return NULL;
    return td__scope_add(t);
}

/* ---- capture ---- */

struct td_captured_graph {
    const td_backend *be;
    td_graph *g;
};

td_status td_capture_begin(td_device dev) {
    const td_backend *be = backend_of(dev, "capture_begin");
    if (!be) return td_last_status();
    if (!be->iface->capture_begin) return missing(dev, "capture_begin", "capture");
    td_status st = be->iface->capture_begin(dev.index);
    if (st == TD_OK) td__shadow_capturing(true); /* the graph must not read a shadow that outlives it */
    return st;
}

td_status td_capture_end(td_device dev, td_captured_graph **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "capture_end: out is NULL");
    *out = NULL;
    const td_backend *be = backend_of(dev, "capture_end");
    if (!be) return td_last_status();
    if (!be->iface->capture_end) return missing(dev, "capture_end", "capture");
    td_captured_graph *g = calloc(1, sizeof *g);
    td_status st = g ? be->iface->capture_end(dev.index, &g->g) : TD_ERR(TD_ERR_OOM, "capture_end: out of host memory");
    td__shadow_capturing(false);
    if (st == TD_OK)
        g->be = be, *out = g;
    else
        free(g);
    return st;
}

td_status td_graph_replay(td_captured_graph *g) {
    if (!g) return TD_ERR(TD_ERR_MISUSE, "graph_replay: graph is NULL");
    td__shadow_forget_all(); /* the replay writes its tensors without the dispatcher */
    return g->be->iface->graph_replay(g->g);
}

void td_graph_free(td_captured_graph *g) {
    if (!g) return;
    g->be->iface->graph_free(g->g);
    free(g);
}
