/*
** Host staging without host waits: a transport that works on host memory (tcp,
** mpi) gets a device tensor's bytes through a host buffer of the tensor's
** backend (host_buffer_alloc, backend.h). The training thread only queues:
** start queues the copy tensor -> host buffer and records a fence after it;
** the collectives' worker waits for the fence, reduces the host bytes in
** place, and the training thread later queues the copy back (back), which
** the device runs before the work queued after it (the optimizer step). The
** device never waits for the host, and the host waits only where the bytes
** are needed, on the worker.
**
** The host buffers are pooled per device and reused step after step (DDP's
** buckets have the same sizes every step); a buffer is reused only after back
** or drop, and its next copy in is queued after the copy out of its previous
** use, so the queue orders them. Everything but wait runs on the thread that
** called start. A backend without host buffers (CPU: nothing to stage; CUDA:
** nccl reads device memory) is not staged here: td__host_copy_able is false.
** defines: td__host_copy_*.
*/
#include <stdlib.h>

#include "dist/dist_internal.h"

struct td__host_buf {
    const td_backend *be;
    td_device dev;
    td_buffer *buf;
    void *host;
    size_t cap;
    bool used;
    struct td__host_buf *next;
};

static struct td__host_buf *pool;

bool td__host_copy_able(const td_tensor *t) {
    const td_backend_i *i = t->storage->backend->iface;
    return t->storage->device.type != TD_DEVICE_CPU && i->host_buffer_alloc && i->fence_record && i->fence_wait;
}

/* A free pooled buffer of t's device holding at least n bytes (the smallest such, within twice n), else a new one. */
static td_status take(const td_tensor *t, size_t n, struct td__host_buf **out) {
    struct td__host_buf *best = NULL;
    for (struct td__host_buf *h = pool; h; h = h->next)
        if (!h->used && td_device_equal(h->dev, t->storage->device) && h->cap >= n && h->cap <= 2 * n &&
            (!best || h->cap < best->cap))
            best = h;
    if (!best) {
        best = calloc(1, sizeof *best);
        if (!best) return TD_ERR(TD_ERR_OOM, "host staging: out of host memory");
        best->be = t->storage->backend, best->dev = t->storage->device, best->cap = n;
        td_status st = best->be->iface->host_buffer_alloc(best->dev.index, n, &best->buf, &best->host);
        if (st != TD_OK) {
            free(best);
            return td_error_prefix("host staging of %zu bytes", n);
        }
        best->next = pool, pool = best;
    }
    best->used = true;
    *out = best;
    return TD_OK;
}

/* t's bytes in its buffer: [*at, *at + *n) */
static void span(const td_tensor *t, size_t *at, size_t *n) {
    size_t es = td_dtype_size(td_tensor_dtype(t));
    *at = t->storage->guard + (size_t)t->offset * es;
    *n = (size_t)td_numel(t) * es;
}

td_status td__host_copy_start(td_tensor *t, td__host_copy *c) {
    *c = (td__host_copy){.t = t};
    size_t at, n;
    span(t, &at, &n);
    td_status st = take(t, n, &c->hb);
    if (st != TD_OK) return st;
    const td_backend_i *i = c->hb->be->iface;
    st = i->copy(t->storage->buf, at, c->hb->buf, 0, n);
    if (st == TD_OK) st = i->fence_record(c->hb->dev.index, &c->fence);
    if (st != TD_OK) {
        c->hb->used = false, c->hb = NULL;
        return td_error_prefix("host staging");
    }
    c->host = c->hb->host;
    return TD_OK;
}

td_status td__host_copy_wait(td__host_copy *c) {
    td_fence *f = c->fence;
    c->fence = NULL;
    return f ? c->hb->be->iface->fence_wait(f) : TD_OK;
}

td_status td__host_copy_back(td__host_copy *c) {
    if (!c->hb) return TD_OK;
    size_t at, n;
    span(c->t, &at, &n);
    td_status st = td__host_copy_wait(c); /* normally done already, by the worker */
    if (st == TD_OK) st = c->hb->be->iface->copy(c->hb->buf, 0, c->t->storage->buf, at, n);
    if (st == TD_OK) atomic_fetch_add(&c->t->storage->version, 1); /* written, as td_copy_ counts it */
    c->hb->used = false, c->hb = NULL;
    return st == TD_OK ? TD_OK : td_error_prefix("host staging");
}

void td__host_copy_drop(td__host_copy *c) {
    if (!c->hb) return;
    td__host_copy_wait(c); /* the queued copy may still write the buffer */
    c->hb->used = false, c->hb = NULL;
}

void td__host_copy_pool_free(void) {
    while (pool) {
        struct td__host_buf *h = pool;
        pool = h->next;
        h->be->iface->buffer_free(h->buf);
        free(h);
    }
}
