/*
** Device memory of the CUDA backend: a caching allocator in the manner of
** PyTorch's, and host <-> device transfers through pinned staging buffers.
**
** Blocks: the shared td_alloc_cache (src/core/alloc_cache.c) over cudaMalloc
** and cudaFree, one per device: a request is rounded up to a size class (512 B,
** then 8 classes per power of two) and served from that class's free list,
** else by cudaMalloc. Frees are stream-ordered: every op of a device runs on
** its one stream, so a block freed by the host may be handed to the next
** allocation at once; the work that used it is ahead of any work that will
** reuse it. Eager blocks wait under stream tag 0.
** Out of memory: the cache is given back to the driver (cudaFree) and the
** allocation tried once more; then TD_ERR_OOM with the sizes.
** Capture: blocks allocated or freed while a graph is being captured belong
** to the capture's pool (their free lists are tagged with the pool and kept
** from emptying), which the graph owns, so eager work never reuses memory that
** a replay will write (cu_capture.c). No OOM retry while capturing: cudaFree
** would break the capture.
** Foreign buffers (buffer_import) run their deleter once the work queued
** before their release has finished, found by polling an event.
** Staging: two pinned buffers of STAGE bytes alternate; a write copies into
** one and queues the upload, waiting only for that buffer's previous upload.
** A read waits for the stream (it is the caller's visible host wait).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "cu_runtime.h"

#define CLASSES     256
#define MIN_BLOCK   512
#define LARGE_ROUND ((size_t)2 << 20)
#define EAGER       0 /* the stream tag of blocks outside capture pools */
#define STAGE       ((size_t)8 << 20)

/* A capture's pool; its address is the stream tag of its free lists. */
typedef struct cu_pool {
    int64_t live;  /* blocks of the pool held by tensors */
    bool released; /* its graph is gone: blocks return to the device's cache */
} cu_pool;

typedef struct foreign_free {
    td_buffer *b;
    cudaEvent_t done;
    struct foreign_free *next;
} foreign_free;

typedef struct temp_block {
    td_buffer *b;
    struct temp_block *next;
} temp_block;

/* Everything here is used under the device's lock. */
typedef struct cu_alloc {
    td_alloc_cache *cache;
    cu_pool *capture;      /* the pool of the capture in progress */
    cudaError_t error;     /* the last failed cudaMalloc's code */
    foreign_free *foreign; /* released foreign buffers waiting for their work */
    temp_block *temps;     /* live cu_temp_alloc blocks, to map pointers back */
} cu_alloc;

typedef struct cu_staging {
    void *host[2];
    cudaEvent_t done[2];
    int next;
} cu_staging;

static void *raw_alloc(void *ctx, size_t bytes) {
    cu_dev *d = ctx;
    void *ptr = NULL;
    cudaError_t e = cudaMalloc(&ptr, bytes);
    if (e == cudaSuccess) return ptr;
    cudaGetLastError(); /* not sticky: clear it */
    d->alloc->error = e;
    return NULL;
}

static void raw_free(void *ctx, void *ptr) {
    (void)ctx;
    cudaFree(ptr); /* waits for the device */
}

td_status cu_memory_init(cu_dev *d) {
    d->alloc = calloc(1, sizeof *d->alloc);
    d->staging = calloc(1, sizeof *d->staging);
    if (!d->alloc || !d->staging) return td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    td_alloc_cache_config cfg = {.header_size = sizeof(td_buffer),
                                 .min_block = MIN_BLOCK,
                                 .classes = CLASSES,
                                 .align = MIN_BLOCK,
                                 .large_round = LARGE_ROUND,
                                 .oom_retry = true,
                                 .raw_alloc = raw_alloc,
                                 .raw_free = raw_free,
                                 .ctx = d};
    td_status st = td_alloc_cache_new(&cfg, &d->alloc->cache);
    if (st != TD_OK) return st;
    for (int i = 0; i < 2; i++) {
        CU_TRY(cudaHostAlloc(&d->staging->host[i], STAGE, cudaHostAllocPortable));
        CU_TRY(cudaEventCreateWithFlags(&d->staging->done[i], cudaEventDisableTiming));
    }
    return TD_OK;
}

/* A block of nbytes: from the capture's pool while capturing, else from the eager cache or cudaMalloc. */
static td_status alloc_locked(cu_dev *d, size_t nbytes, td_buffer **out) {
    cu_alloc *a = d->alloc;
    a->error = cudaSuccess;
    td_alloc_block *blk = a->capture ? td_alloc_cache_reuse(a->cache, nbytes, (uintptr_t)a->capture) : NULL;
    if (!blk) blk = td_alloc_cache_alloc(a->cache, nbytes, EAGER);
    if (!blk) {
        if (a->error == cudaSuccess) return td_error_set(TD_ERR_OOM, "cuda: out of host memory for a buffer header");
        if (a->error != cudaErrorMemoryAllocation) return cu_status(a->error, "cudaMalloc");
        td_memory_stats s;
        td_alloc_cache_stats(a->cache, false, &s);
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return td_error_set(TD_ERR_OOM,
                            "cuda:%d: out of memory allocating %zu bytes (%.1f MiB held by tensors, %.1f MiB "
                            "reserved, %.1f of %.1f MiB free on the device)",
                            d->index, nbytes, s.allocated / 1048576.0, s.reserved / 1048576.0, free_b / 1048576.0,
                            total_b / 1048576.0);
    }
    td_buffer *b = (td_buffer *)blk;
    b->dev = d->index;
    b->pool = a->capture; /* a block from the eager lists joins the capture's pool */
    if (b->pool) b->pool->live++;
    *out = b;
    return TD_OK;
}

td_status cu_buffer_alloc(int dev, size_t nbytes, td_buffer **out) {
    *out = NULL;
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    pthread_mutex_lock(&d->lock);
    if (d->alloc->foreign) cu_foreign_poll(d, false);
    td_status st = alloc_locked(d, nbytes, out);
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* b back to its pool's free lists, or the eager ones. */
static void free_locked(cu_dev *d, td_buffer *b) {
    cu_alloc *a = d->alloc;
    cu_pool *p = b->pool;
    if (p) p->live--;
    if (a->capture && !p) p = b->pool = a->capture; /* freed during capture: the graph may write it */
    if (p && p->released) {
        b->pool = NULL;
        if (p->live == 0) free(p);
        p = NULL;
    }
    td_alloc_cache_release(a->cache, &b->block, p ? (uintptr_t)p : EAGER);
}

void cu_buffer_free(td_buffer *b) {
    if (!b) return;
    cu_dev *d = cu_get(b->dev);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    if (b->foreign) { /* the deleter runs once the queued work is done */
        foreign_free *f = calloc(1, sizeof *f);
        if (f && cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming) == cudaSuccess &&
            cudaEventRecord(f->done, d->stream) == cudaSuccess) {
            f->b = b;
            f->next = d->alloc->foreign;
            d->alloc->foreign = f;
        } else { /* cannot track it: wait here */
            free(f);
            cudaStreamSynchronize(d->stream);
            if (b->deleter) b->deleter(b->ctx);
            free(b);
        }
    } else {
        free_locked(d, b);
    }
    pthread_mutex_unlock(&d->lock);
}

void cu_foreign_poll(cu_dev *d, bool wait) {
    for (foreign_free **pf = &d->alloc->foreign; *pf;) {
        foreign_free *f = *pf;
        if (wait) cudaEventSynchronize(f->done);
        if (cudaEventQuery(f->done) != cudaSuccess) {
            cudaGetLastError(); /* cudaErrorNotReady is not an error */
            pf = &f->next;
            continue;
        }
        *pf = f->next;
        cudaEventDestroy(f->done);
        if (f->b->deleter) f->b->deleter(f->b->ctx);
        free(f->b);
        free(f);
    }
}

uint64_t cu_buffer_address(td_buffer *b) { return (uint64_t)(uintptr_t)b->block.ptr; }

td_status cu_buffer_import(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *), void *ctx,
                           td_buffer **out) {
    *out = NULL;
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (address) {
        struct cudaPointerAttributes attr;
        cudaError_t e = cudaPointerGetAttributes(&attr, (void *)(uintptr_t)address);
        if (e != cudaSuccess) cudaGetLastError();
        if (e != cudaSuccess || (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged &&
                                 attr.type != cudaMemoryTypeHost))
            return td_error_set(TD_ERR_MISUSE, "cuda:%d: address 0x%llx is not CUDA device or pinned memory", dev,
                                (unsigned long long)address);
        if (attr.type == cudaMemoryTypeDevice && attr.device != d->ordinal)
            return td_error_set(TD_ERR_DEVICE, "cuda:%d: address 0x%llx is memory of CUDA device %d", dev,
                                (unsigned long long)address, attr.device);
    }
    td_buffer *b = calloc(1, sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "cuda: out of host memory for a buffer header");
    *b = (td_buffer){.block = {.ptr = (void *)(uintptr_t)address, .size = nbytes, .capacity = nbytes, .size_class = -1},
                     .dev = dev,
                     .foreign = true,
                     .deleter = deleter,
                     .ctx = ctx};
    *out = b;
    return TD_OK;
}

td_status cu_temp_alloc(cu_dev *d, size_t nbytes, void **out) {
    *out = NULL;
    temp_block *t = calloc(1, sizeof *t);
    if (!t) return td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    pthread_mutex_lock(&d->lock);
    td_status st = alloc_locked(d, nbytes ? nbytes : 1, &t->b);
    if (st == TD_OK) {
        t->next = d->alloc->temps;
        d->alloc->temps = t;
        *out = t->b->block.ptr;
    } else {
        free(t);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

void cu_temp_free(cu_dev *d, void *ptr) {
    if (!ptr) return;
    pthread_mutex_lock(&d->lock);
    for (temp_block **pt = &d->alloc->temps; *pt; pt = &(*pt)->next)
        if ((*pt)->b->block.ptr == ptr) {
            temp_block *t = *pt;
            *pt = t->next;
            free_locked(d, t->b);
            free(t);
            break;
        }
    pthread_mutex_unlock(&d->lock);
}

/* ---- capture pools ---- */

td_status cu_pool_begin(cu_dev *d) {
    cu_pool *p = calloc(1, sizeof *p);
    if (!p) return td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    pthread_mutex_lock(&d->lock);
    td_status st = td_alloc_cache_keep(d->alloc->cache, (uintptr_t)p);
    if (st == TD_OK) {
        d->alloc->capture = p;
        td_alloc_cache_set_oom_retry(d->alloc->cache, false);
    }
    pthread_mutex_unlock(&d->lock);
    if (st != TD_OK) free(p);
    return st;
}

cu_pool *cu_pool_end(cu_dev *d) {
    pthread_mutex_lock(&d->lock);
    cu_pool *p = d->alloc->capture;
    d->alloc->capture = NULL;
    td_alloc_cache_set_oom_retry(d->alloc->cache, true);
    pthread_mutex_unlock(&d->lock);
    return p;
}

/* The graph is gone: its free blocks return to the cache; live ones do when freed. */
void cu_pool_release(cu_dev *d, cu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&d->lock);
    td_alloc_cache_retag(d->alloc->cache, (uintptr_t)p, EAGER);
    p->released = true;
    if (p->live == 0) free(p);
    pthread_mutex_unlock(&d->lock);
}

/* ---- transfers ---- */

static td_status check_range(const td_buffer *b, size_t offset, size_t n, const char *what) {
    if (offset > b->block.size || n > b->block.size - offset)
        return td_error_set(TD_ERR_MISUSE, "cuda %s: bytes [%zu, %zu) outside a %zu-byte buffer", what, offset,
                            offset + n, b->block.size);
    return TD_OK;
}

static td_status not_capturing(cu_dev *d, const char *what) {
    if (!d->capturing) return TD_OK;
    return td_error_set(TD_ERR_STATE,
                        "cuda:%d: a %s cannot be captured in a graph (host data is not part of it); do it before "
                        "td_capture_begin or after td_capture_end",
                        d->index, what);
}

/* n bytes between host and buf at offset through the staging buffers, in
** STAGE chunks: a write (UP) waits for the buffer's previous upload, copies
** into it and enqueues the upload; a read enqueues the download, waits for it
** (the visible host wait) and copies out. */
static td_status staged(td_buffer *buf, size_t offset, void *host, size_t n, bool up) {
    const char *what = up ? "write" : "read";
    cu_dev *d = cu_get(buf->dev);
    if (!d) return td_last_status();
    td_status st = check_range(buf, offset, n, what);
    if (st == TD_OK) st = not_capturing(d, up ? "host-to-device write" : "device-to-host read");
    if (st != TD_OK || n == 0) return st;
    pthread_mutex_lock(&d->lock);
    cu_staging *s = d->staging;
    for (size_t at = 0; at < n && st == TD_OK; at += STAGE) {
        size_t len = n - at < STAGE ? n - at : STAGE;
        char *dev = (char *)buf->block.ptr + offset + at, *h = (char *)host + at;
        int i = s->next;
        s->next ^= 1;
        if (up) {
            st = cu_status(cudaEventSynchronize(s->done[i]), "write: staging wait"); /* its previous upload */
            if (st != TD_OK) break;
            memcpy(s->host[i], h, len);
            st = cu_status(cudaMemcpyAsync(dev, s->host[i], len, cudaMemcpyHostToDevice, d->stream),
                           "write: cudaMemcpyAsync");
            if (st == TD_OK) st = cu_status(cudaEventRecord(s->done[i], d->stream), "write: cudaEventRecord");
        } else {
            st = cu_status(cudaMemcpyAsync(s->host[i], dev, len, cudaMemcpyDeviceToHost, d->stream),
                           "read: cudaMemcpyAsync");
            if (st == TD_OK) st = cu_status(cudaStreamSynchronize(d->stream), "read"); /* the visible host wait */
            if (st == TD_OK) memcpy(h, s->host[i], len);
        }
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

td_status cu_write(td_buffer *dst, size_t offset, const void *src, size_t n) {
    return staged(dst, offset, (void *)src, n, true);
}

td_status cu_read(td_buffer *src, size_t offset, void *dst, size_t n) { return staged(src, offset, dst, n, false); }

td_status cu_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n) {
    cu_dev *d = cu_get(dst->dev);
    if (!d) return td_last_status();
    td_status st = check_range(src, so, n, "copy");
    if (st == TD_OK) st = check_range(dst, dof, n, "copy");
    if (st != TD_OK || n == 0) return st;
    char *from = (char *)src->block.ptr + so, *to = (char *)dst->block.ptr + dof;
    if (src->dev == dst->dev)
        return cu_status(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, d->stream), "copy");
    /* two devices: dst's stream waits for src's work, copies (peer access where the driver allows it, else the
    ** driver stages), and src's stream waits for the copy before it may reuse the source */
    cu_dev *s = cu_get(src->dev);
    if (!s) return td_last_status();
    cudaEvent_t before = NULL, after = NULL;
    st = cu_status(cudaEventCreateWithFlags(&before, cudaEventDisableTiming), "copy: event");
    if (st == TD_OK) st = cu_status(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "copy: event");
    if (st == TD_OK) st = cu_status(cudaEventRecord(before, s->stream), "copy: record");
    if (st == TD_OK) st = cu_status(cudaStreamWaitEvent(d->stream, before, 0), "copy: wait");
    if (st == TD_OK) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, d->ordinal, s->ordinal) == cudaSuccess && can) {
            cudaError_t e = cudaDeviceEnablePeerAccess(s->ordinal, 0); /* on d, the current device */
            if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        }
        st = cu_status(cudaMemcpyPeerAsync(to, d->ordinal, from, s->ordinal, n, d->stream), "copy: peer");
    }
    if (st == TD_OK) st = cu_status(cudaEventRecord(after, d->stream), "copy: record");
    if (st == TD_OK) st = cu_status(cudaStreamWaitEvent(s->stream, after, 0), "copy: wait");
    if (before) cudaEventDestroy(before); /* destroying a recorded event is deferred by the driver */
    if (after) cudaEventDestroy(after);
    cu_get(dst->dev);
    return st;
}

td_status cu_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t n) {
    cu_dev *d = cu_get(dst->dev);
    if (!d) return td_last_status();
    td_status st = check_range(dst, offset, n, "memset");
    if (st != TD_OK || n == 0) return st;
    return cu_status(cudaMemsetAsync((char *)dst->block.ptr + offset, byte, n, d->stream), "memset");
}

td_status cu_memory_stats(int dev, bool reset_peak, td_memory_stats *out) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    td_alloc_cache_stats(d->alloc->cache, reset_peak, out);
    return TD_OK;
}

td_status cu_empty_cache(int dev) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (d->capturing) return td_error_set(TD_ERR_STATE, "cuda:%d: empty_cache during a capture", dev);
    td_alloc_cache_empty(d->alloc->cache); /* the live graphs' pools are kept */
    return TD_OK;
}
