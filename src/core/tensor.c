/*
** Tensor handles and their storage: allocation, refcounts, getters, creation,
** host transfers and device moves.
**
** Released headers are not returned to malloc at once: they wait, marked
** TD_TENSOR_DEAD, in a FIFO of at least DEAD_QUEUE_MIN entries, so that an op
** given a released tensor can report TD_ERR_STATE instead of reading freed
** memory (detectable until the header is reused).
**
** Freed storage headers wait in a small spare list for the next allocation
** (not under AddressSanitizer, which must see every free). Both lists sit
** behind spin locks: their critical sections are a few loads and stores.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "spin_lock.h"

#define DEAD_QUEUE_MIN 1024
#define GUARD_BYTES    64
#define GUARD_BYTE     0xA5

#if defined(__SANITIZE_ADDRESS__)
#define SPARE_STORAGES 0
#else
#define SPARE_STORAGES 256
#endif

static td__spin_lock header_lock = ATOMIC_FLAG_INIT;
static td_tensor **dead_queue; /* ring buffer of released headers */
static size_t dead_cap, dead_head, dead_count;
static atomic_long live_tensors;
static atomic_int debug_flags;
static atomic_int guard_failures;

void td_debug_set(int flags) { atomic_store(&debug_flags, flags); }
int td_debug_guard_failures(void) { return atomic_load(&guard_failures); }
int64_t td_debug_live_tensors(void) { return atomic_load(&live_tensors); }

static td_tensor *header_new(void) {
    td_tensor *t = NULL;
    td__spin_acquire(&header_lock);
    if (dead_count > DEAD_QUEUE_MIN) {
        t = dead_queue[dead_head];
        dead_head = (dead_head + 1) % dead_cap;
        dead_count--;
    }
    td__spin_release(&header_lock);
    if (!t) t = malloc(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->magic = TD_TENSOR_ALIVE;
    atomic_init(&t->refcount, 1);
    atomic_fetch_add(&live_tensors, 1);
    return t;
}

static void header_free(td_tensor *t) {
    t->magic = TD_TENSOR_DEAD;
    atomic_fetch_sub(&live_tensors, 1);
    td__spin_acquire(&header_lock);
    if (dead_count == dead_cap) {
        size_t cap = dead_cap ? dead_cap * 2 : 4096;
        td_tensor **q = malloc(cap * sizeof *q);
        if (!q) { /* cannot queue: free now, losing detection for this one */
            td__spin_release(&header_lock);
            free(t);
            return;
        }
        for (size_t i = 0; i < dead_count; i++) q[i] = dead_queue[(dead_head + i) % dead_cap];
        free(dead_queue);
        dead_queue = q;
        dead_cap = cap;
        dead_head = 0;
    }
    dead_queue[(dead_head + dead_count) % dead_cap] = t;
    dead_count++;
    td__spin_release(&header_lock);
}

/* ---- storage ---- */

static td__spin_lock spare_lock = ATOMIC_FLAG_INIT;
static td_storage *spares[SPARE_STORAGES + 1]; /* freed storage headers (+1: never a zero-length array) */
static int n_spares;

/* A zeroed storage header: a spare, else calloc's. */
static td_storage *storage_header(void) {
    td_storage *s = NULL;
    if (SPARE_STORAGES) {
        td__spin_acquire(&spare_lock);
        if (n_spares) s = spares[--n_spares];
        td__spin_release(&spare_lock);
    }
    if (!s) return calloc(1, sizeof *s);
    memset(s, 0, sizeof *s);
    return s;
}

static void storage_header_free(td_storage *s) {
    bool kept = false;
    if (SPARE_STORAGES) {
        td__spin_acquire(&spare_lock);
        if ((kept = n_spares < SPARE_STORAGES)) spares[n_spares++] = s;
        td__spin_release(&spare_lock);
    }
    if (!kept) free(s);
}

static td_storage *storage_new(td_device dev, size_t nbytes) {
    const td_backend *be = td__backend_of(dev);
    if (!be) return NULL;
    td_storage *s = storage_header();
    if (!s) TD_FAIL_NULL(TD_ERR_OOM, "out of host memory for a storage header");
    int flags = atomic_load(&debug_flags);
    size_t guard = (flags & TD_DEBUG_GUARDS) ? GUARD_BYTES : 0;
    if (td__fault_alloc_hit()) {
        storage_header_free(s);
        char d[32];
        TD_FAIL_NULL(TD_ERR_OOM, "out of memory allocating %zu bytes on %s (injected by TRIDENT_FAULT_ALLOC)", nbytes,
                     td_device_str(dev, d, sizeof d));
    }
    if (be->iface->buffer_alloc(dev.index, nbytes + 2 * guard, &s->buf) != TD_OK) {
        storage_header_free(s);
        if (td_last_status() != TD_ERR_OOM) return NULL;
        char d[32], why[512]; /* the backend's reason, e.g. the limit it hit */
        snprintf(why, sizeof why, "%s", td_last_error());
        TD_FAIL_NULL(TD_ERR_OOM, "out of memory allocating %zu bytes on %s (%s)", nbytes,
                     td_device_str(dev, d, sizeof d), why);
    }
    atomic_init(&s->refcount, 1);
    s->device = dev;
    s->backend = be;
    s->nbytes = nbytes;
    s->guard = guard;
    if (guard) {
        be->iface->memset(s->buf, 0, GUARD_BYTE, guard);
        be->iface->memset(s->buf, guard + nbytes, GUARD_BYTE, guard);
    }
    if ((flags & TD_DEBUG_POISON) && nbytes) be->iface->memset(s->buf, guard, 0xFF, nbytes);
    return s;
}

static void storage_check_guards(td_storage *s) {
    unsigned char g[2][GUARD_BYTES];
    if (s->backend->iface->read(s->buf, 0, g[0], s->guard) != TD_OK ||
        s->backend->iface->read(s->buf, s->guard + s->nbytes, g[1], s->guard) != TD_OK)
        return;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < s->guard; i++)
            if (g[side][i] != GUARD_BYTE) {
                atomic_fetch_add(&guard_failures, 1);
                fprintf(stderr, "trident: guard bytes %s a %zu-byte buffer were overwritten\n",
                        side ? "after" : "before", s->nbytes);
                return;
            }
}

static void storage_release(td_storage *s) {
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    td_release(s->low);
    if (s->guard) storage_check_guards(s);
    s->backend->iface->buffer_free(s->buf);
    storage_header_free(s);
}

/* ---- handles ---- */

/* Element count; INT64_MAX when it would overflow (never for an allocated
** tensor, whose extent check_shape bounds), so an unchecked user shape cannot
** wrap: a zero dim anywhere gives 0 even after huge ones. */
int64_t td__numel(int ndim, const int64_t *shape) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, shape[i], &n)) return INT64_MAX;
    return n;
}

void td__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

const char *td__shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, n - at, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

#define TENSOR_MAX_BYTES ((uint64_t)1 << 48)

/* Validates ndim/shape/dtype and computes the byte count without overflow.
** The bound is on the extent, the product of the sizes with zero dims taken as
** 1: the contiguous strides of a size-0 tensor such as [0, 2^40, 2^40] are
** that large too, and must not overflow. */
static bool check_shape(int ndim, const int64_t *shape, td_dtype dt, const char *op, size_t *nbytes) {
    if (ndim < 0 || ndim > TD_MAX_DIMS)
        return TD_ERR(TD_ERR_MISUSE, "%s: ndim %d outside [0, %d]", op, ndim, TD_MAX_DIMS), false;
    if (ndim > 0 && !shape) return TD_ERR(TD_ERR_MISUSE, "%s: shape is NULL", op), false;
    if ((unsigned)dt >= TD_DTYPE_COUNT) return TD_ERR(TD_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt), false;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return TD_ERR(TD_ERR_MISUSE, "%s: negative size %lld at dim %d", op, (long long)shape[i], i), false;
        empty |= shape[i] == 0;
    }
    uint64_t extent = td_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(extent, shape[i] ? (uint64_t)shape[i] : 1, &extent) || extent > TENSOR_MAX_BYTES) {
            char s[160];
            return TD_ERR(TD_ERR_OOM, "%s: shape %s of %s is too large: its size overflows 2^48 bytes%s", op,
                          td__shape_str(ndim, shape, s, sizeof s), td_dtype_name(dt),
                          empty ? " (a size-0 tensor's strides span its other dims)" : ""),
                   false;
        }
    *nbytes = empty ? 0 : (size_t)extent;
    return true;
}

td_tensor *td__alloc(int ndim, const int64_t *shape, td_dtype dt, td_device dev) {
    size_t nbytes;
    if (!check_shape(ndim, shape, dt, "empty", &nbytes)) return NULL;
    td_storage *s = storage_new(dev, nbytes);
    if (!s) return NULL;
    int64_t strides[TD_MAX_DIMS];
    td__contiguous_strides(ndim, shape, strides);
    return td__tensor_over(s, ndim, shape, strides, dt);
}

td_tensor *td__tensor_over(td_storage *s, int ndim, const int64_t *shape, const int64_t *strides, td_dtype dt) {
    td_tensor *t = header_new();
    if (!t) {
        storage_release(s);
        TD_FAIL_NULL(TD_ERR_OOM, "out of host memory for a tensor header");
    }
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i], t->strides[i] = strides[i];
    t->storage = s;
    return t;
}

td_tensor *td__make_view(td_tensor *base, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset) {
    td_tensor *t = header_new();
    if (!t) TD_FAIL_NULL(TD_ERR_OOM, "out of host memory for a tensor header");
    t->dtype = base->dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
    t->offset = offset;
    t->storage = base->storage;
    atomic_fetch_add(&t->storage->refcount, 1);
    return td__scope_add(t);
}

td_tensor *td_retain(td_tensor *t) {
    if (t && t->magic == TD_TENSOR_ALIVE) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void td_release(td_tensor *t) {
    if (!t) return;
    if (t->magic != TD_TENSOR_ALIVE) {
        TD_ERR(TD_ERR_STATE, "td_release: tensor was already released");
        return;
    }
    if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
    if (td__release_hook && (t->grad_fn || t->autograd_meta)) td__release_hook(t);
    td_release(t->grad);
    storage_release(t->storage);
    header_free(t);
}

/* ---- getters ---- */

/* Getters report a NULL or released tensor only when no error is stored yet:
** they never overwrite the first error of a failed expression. */
static bool alive(const td_tensor *t, const char *fn) {
    if (t && t->magic == TD_TENSOR_ALIVE) return true;
    if (td_last_status() == TD_OK) {
        if (!t)
            TD_ERR(TD_ERR_MISUSE, "%s: tensor is NULL", fn);
        else
            TD_ERR(TD_ERR_STATE, "%s: tensor was released", fn);
    }
    return false;
}

int td_ndim(const td_tensor *t) { return alive(t, "td_ndim") ? t->ndim : -1; }
const int64_t *td_shape(const td_tensor *t) { return alive(t, "td_shape") ? t->shape : NULL; }
const int64_t *td_strides(const td_tensor *t) { return alive(t, "td_strides") ? t->strides : NULL; }
int64_t td_numel(const td_tensor *t) { return alive(t, "td_numel") ? td__numel(t->ndim, t->shape) : -1; }
td_dtype td_tensor_dtype(const td_tensor *t) { return alive(t, "td_tensor_dtype") ? t->dtype : TD_DTYPE_COUNT; }
td_device td_tensor_device(const td_tensor *t) {
    return alive(t, "td_tensor_device") ? t->storage->device : (td_device){-1, -1};
}
int64_t td_storage_offset(const td_tensor *t) { return alive(t, "td_storage_offset") ? t->offset : -1; }

int64_t td_size(const td_tensor *t, int dim) {
    if (!alive(t, "td_size") || !td__wrap_dim(&dim, t->ndim, "td_size")) return -1;
    return t->shape[dim];
}

int64_t td_stride(const td_tensor *t, int dim) {
    if (!alive(t, "td_stride") || !td__wrap_dim(&dim, t->ndim, "td_stride")) return -1;
    return t->strides[dim];
}

bool td_is_contiguous(const td_tensor *t) {
    return alive(t, "td_is_contiguous") && td__strides_contiguous(t->ndim, t->shape, t->strides);
}

td_operand td__view_of(const td_tensor *t) {
    size_t guard = t->storage->guard;
    td_operand v = {.buf = t->storage->buf,
                    .offset = t->offset + (guard ? (int64_t)(guard / td_dtype_size(t->dtype)) : 0),
                    .dtype = t->dtype,
                    .ndim = t->ndim};
    memcpy(v.shape, t->shape, sizeof v.shape); /* whole arrays: fixed-size copies, the dims past ndim zero */
    memcpy(v.strides, t->strides, sizeof v.strides);
    return v;
}

void *td__host_data(const td_tensor *t) {
    const td_backend_i *be = t->storage->backend->iface;
    char *base = be->buffer_host_ptr ? be->buffer_host_ptr(t->storage->buf) : NULL;
    return base ? base + t->storage->guard + (size_t)t->offset * td_dtype_size(t->dtype) : NULL;
}

/* ---- creation ---- */

td_tensor *td_empty(int ndim, const int64_t *shape, td_dtype dt, td_device dev) {
    return td__scope_add(td__alloc(ndim, shape, dt, dev));
}

td_tensor *td_full(int ndim, const int64_t *shape, double value, td_dtype dt, td_device dev) {
    td_tensor *t = td__alloc(ndim, shape, dt, dev);
    if (!t) return NULL;
    td_op_params p = {.fill = {value}};
    return td__finish(td__dispatch(TD_OP_FILL, 0, NULL, NULL, 1, &t, &p), t);
}

td_tensor *td_zeros(int ndim, const int64_t *shape, td_dtype dt, td_device dev) {
    return td_full(ndim, shape, 0, dt, dev);
}
td_tensor *td_ones(int ndim, const int64_t *shape, td_dtype dt, td_device dev) {
    return td_full(ndim, shape, 1, dt, dev);
}
td_tensor *td_scalar(double value, td_dtype dt, td_device dev) { return td_full(0, NULL, value, dt, dev); }

td_tensor *td_empty_like(td_tensor *t) {
    TD_CHECK_ARG(t, "empty_like");
    return td_empty(t->ndim, t->shape, t->dtype, t->storage->device);
}
td_tensor *td_zeros_like(td_tensor *t) {
    TD_CHECK_ARG(t, "zeros_like");
    return td_full(t->ndim, t->shape, 0, t->dtype, t->storage->device);
}
td_tensor *td_full_like(td_tensor *t, double value) {
    TD_CHECK_ARG(t, "full_like");
    return td_full(t->ndim, t->shape, value, t->dtype, t->storage->device);
}

td_tensor *td_from_data(const void *data, int ndim, const int64_t *shape, td_dtype dt, td_device dev) {
    td_tensor *t = td__alloc(ndim, shape, dt, dev);
    if (!t) return NULL;
    size_t nbytes = t->storage->nbytes;
    if (nbytes && !data) {
        td_release(t);
        TD_FAIL_NULL(TD_ERR_MISUSE, "td_from_data: data is NULL for %zu bytes", nbytes);
    }
    if (nbytes && t->storage->backend->iface->write(t->storage->buf, t->storage->guard, data, nbytes) != TD_OK) {
        td_release(t);
        return NULL;
    }
    return td__scope_add(t);
}

td_tensor *td_arange(double start, double end, double step, td_dtype dt, td_device dev) {
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        TD_FAIL_NULL(TD_ERR_MISUSE, "arange: need finite start, end and a non-zero step (got %g, %g, %g)", start, end,
                     step);
    double count = ceil((end - start) / step);
    if (count < 0) TD_FAIL_NULL(TD_ERR_MISUSE, "arange: step %g moves away from end %g", step, end);
    if (count > 1e15) TD_FAIL_NULL(TD_ERR_OOM, "arange: %g elements is too many", count);
    int64_t n = (int64_t)count;
    td_tensor *t = td__alloc(1, &n, dt, dev);
    if (!t) return NULL;
    td_op_params p = {.arange = {start, step}};
    return td__finish(td__dispatch(TD_OP_ARANGE, 0, NULL, NULL, 1, &t, &p), t);
}

static td_tensor *random_tensor(td_op_kind kind, int ndim, const int64_t *shape, uint64_t seed, uint64_t offset,
                                td_dtype dt, td_device dev) {
    if (!td_dtype_is_float(dt))
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: dtype %s is not a floating type", td_op_name(kind), td_dtype_name(dt));
    td_tensor *t = td__alloc(ndim, shape, dt, dev);
    if (!t) return NULL;
    td_op_params p = {.rng = {seed, offset, 0}};
    return td__finish(td__dispatch(kind, 0, NULL, NULL, 1, &t, &p), t);
}

td_tensor *td_rand(int ndim, const int64_t *shape, uint64_t seed, uint64_t offset, td_dtype dt, td_device dev) {
    return random_tensor(TD_OP_RAND, ndim, shape, seed, offset, dt, dev);
}
td_tensor *td_randn(int ndim, const int64_t *shape, uint64_t seed, uint64_t offset, td_dtype dt, td_device dev) {
    return random_tensor(TD_OP_RANDN, ndim, shape, seed, offset, dt, dev);
}

/* ---- copies, casts, moves ---- */

/* New tensor of dtype dt with t's values, contiguous; recorded for autograd. */
static td_tensor *copy_as(td_tensor *t, td_dtype dt) {
    td_tensor *out = td__alloc(t->ndim, t->shape, dt, t->storage->device);
    if (!out) return NULL;
    return td__finish(td__dispatch(TD_OP_COPY, 1, &t, NULL, 1, &out, NULL), out);
}

td_tensor *td_contiguous(td_tensor *t) {
    TD_CHECK_ARG(t, "contiguous");
    return td_is_contiguous(t) ? td__scope_add(td_retain(t)) : copy_as(t, t->dtype);
}

td_tensor *td_clone(td_tensor *t) {
    TD_CHECK_ARG(t, "clone");
    return copy_as(t, t->dtype);
}

td_tensor *td_cast(td_tensor *t, td_dtype dt) {
    TD_CHECK_ARG(t, "cast");
    if ((unsigned)dt >= TD_DTYPE_COUNT) TD_FAIL_NULL(TD_ERR_DTYPE, "cast: invalid dtype %d", (int)dt);
    return t->dtype == dt ? td__scope_add(td_retain(t)) : copy_as(t, dt);
}

td_status td_copy_(td_tensor *dst, td_tensor *src) {
    TD_CHECK_ARG_ST(dst, "copy_");
    TD_CHECK_ARG_ST(src, "copy_");
    int nb;
    int64_t bshape[TD_MAX_DIMS];
    td_status st = td_broadcast_shapes(src->ndim, src->shape, dst->ndim, dst->shape, &nb, bshape);
    if (st != TD_OK) return st;
    if (nb != dst->ndim || td__numel(nb, bshape) != td__numel(dst->ndim, dst->shape)) {
        char a[96], b[96];
        return TD_ERR(TD_ERR_SHAPE, "copy_: source %s does not broadcast to destination %s",
                      td__shape_str(src->ndim, src->shape, a, sizeof a),
                      td__shape_str(dst->ndim, dst->shape, b, sizeof b));
    }
    td_tensor *moved = td_to(src, dst->storage->device);
    if (!moved) return td_last_status();
    td_operand v = td__view_broadcast(moved, dst->ndim, dst->shape);
    st = td__dispatch(TD_OP_COPY, 1, &moved, &v, 1, &dst, NULL);
    td_release(td_keep(moved));
    return st;
}

td_tensor *td_to(td_tensor *t, td_device dev) {
    TD_CHECK_ARG(t, "to");
    if (td_device_equal(t->storage->device, dev)) return td__scope_add(td_retain(t));
    if (!td__backend_of(dev)) return NULL;
    td_tensor *src = td_contiguous(t);
    if (!src) return NULL;
    td_keep(src);
    td_tensor *out = td__alloc(t->ndim, t->shape, t->dtype, dev);
    size_t nbytes = (size_t)td__numel(t->ndim, t->shape) * td_dtype_size(t->dtype);
    size_t src_off = src->storage->guard + (size_t)src->offset * td_dtype_size(t->dtype);
    void *host = nbytes ? td__host_data(src) : NULL;
    void *staging = NULL;
    td_status st = out ? TD_OK : td_last_status();
    if (st == TD_OK && nbytes && !host && out->storage->backend == src->storage->backend) {
        /* two devices of one backend: a device-to-device (peer) copy where the backend can */
        st = out->storage->backend->iface->copy(src->storage->buf, src_off, out->storage->buf, out->storage->guard,
                                                nbytes);
        if (st == TD_OK)
            nbytes = 0;
        else if (st == TD_ERR_UNSUPPORTED)
            st = TD_OK, td_clear_error(); /* stage through the host below */
    }
    if (st == TD_OK && nbytes && !host) {
        td__count_host_sync(src->storage);
        host = td__host_data(out);
        if (!host) host = staging = malloc(nbytes);
        if (!host)
            st = TD_ERR(TD_ERR_OOM, "to: no host memory to stage %zu bytes", nbytes);
        else
            st = src->storage->backend->iface->read(src->storage->buf, src_off, host, nbytes);
        if (st == TD_OK && host == td__host_data(out)) host = NULL; /* already landed */
    }
    if (st == TD_OK && nbytes && host)
        st = out->storage->backend->iface->write(out->storage->buf, out->storage->guard, host, nbytes);
    free(staging);
    td_release(src);
    if (st != TD_OK) {
        td_release(out);
        return NULL;
    }
    if (td__record_hook && t->requires_grad && td__record_hook(TD_OP_COPY, 1, &t, 1, &out, NULL) != TD_OK) {
        td_release(out);
        return NULL;
    }
    return td__scope_add(out);
}

td_status td_copy_to_host(td_tensor *t, void *dst, size_t nbytes, td_dtype dt) {
    TD_CHECK_ARG_ST(t, "copy_to_host");
    int64_t n = td__numel(t->ndim, t->shape);
    if ((unsigned)dt >= TD_DTYPE_COUNT) return TD_ERR(TD_ERR_DTYPE, "copy_to_host: invalid dtype %d", (int)dt);
    size_t need = (size_t)n * td_dtype_size(dt);
    if (nbytes < need) return TD_ERR(TD_ERR_MISUSE, "copy_to_host: buffer of %zu bytes, need %zu", nbytes, need);
    if (n == 0) return TD_OK;
    if (!dst) return TD_ERR(TD_ERR_MISUSE, "copy_to_host: dst is NULL");
    td_tensor *c = (t->dtype == dt && td_is_contiguous(t)) ? td_retain(t) : td_keep(copy_as(t, dt));
    if (!c) return td_last_status();
    td__count_host_sync(c->storage);
    td_status st = c->storage->backend->iface->read(
        c->storage->buf, c->storage->guard + (size_t)c->offset * td_dtype_size(dt), dst, need);
    if (st == TD_OK) st = td__device_check_report(c->storage->device);
    td_release(c);
    return st;
}

double td_get(td_tensor *t, const int64_t *idx) {
    if (!td__check_arg(t, "get", "t")) return NAN;
    if (t->ndim && !idx) return TD_ERR(TD_ERR_MISUSE, "get: idx is NULL"), NAN;
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (idx[i] < 0 || idx[i] >= t->shape[i])
            return TD_ERR(TD_ERR_INDEX, "get: index %lld out of range for dim %d of size %lld", (long long)idx[i], i,
                          (long long)t->shape[i]),
                   NAN;
        off += idx[i] * t->strides[i];
    }
    td_tensor *one = td__make_view(t, 0, NULL, NULL, t->offset + off);
    if (!one) return NAN;
    td_keep(one);
    double v = NAN;
    td_status st = td_copy_to_host(one, &v, sizeof v, TD_F64);
    td_release(one);
    return st == TD_OK ? v : NAN;
}

double td_item(td_tensor *t) {
    if (!td__check_arg(t, "item", "t")) return NAN;
    if (td__numel(t->ndim, t->shape) != 1) {
        char s[96];
        return TD_ERR(TD_ERR_SHAPE, "item: tensor of shape %s has %lld elements, not 1",
                      td__shape_str(t->ndim, t->shape, s, sizeof s), (long long)td__numel(t->ndim, t->shape)),
               NAN;
    }
    int64_t zero[TD_MAX_DIMS] = {0};
    return td_get(t, zero);
}

void td_print(td_tensor *t, const char *name, int max) {
    if (!td__check_arg(t, "print", "t")) {
        fprintf(stderr, "%s: <invalid: %s>\n", name ? name : "tensor", td_last_error());
        return;
    }
    char s[128], d[32];
    int64_t n = td__numel(t->ndim, t->shape);
    fprintf(stderr, "%s: %s %s %s [", name ? name : "tensor", td__shape_str(t->ndim, t->shape, s, sizeof s),
            td_dtype_name(t->dtype), td_device_str(t->storage->device, d, sizeof d));
    int64_t shown = n < max ? n : max;
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (v && td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_F64) == TD_OK)
        for (int64_t i = 0; i < shown; i++) fprintf(stderr, "%s%g", i ? ", " : "", v[i]);
    free(v);
    fprintf(stderr, "%s]\n", shown < n ? ", ..." : "");
}
