/*
** Device memory of the CUDA backend: a caching allocator in the manner of
** PyTorch's, and host <-> device transfers through pinned staging buffers.
**
** Blocks: a request is rounded up to a size class (512 B, then 4 classes per
** power of two) and served from that class's free list, else by cudaMalloc.
** Frees are stream-ordered: every op of a device runs on its one stream, so a
** block freed by the host may be handed to the next allocation at once; the
** work that used it is ahead of any work that will reuse it.
** Out of memory: the cache is given back to the driver (cudaFree) and the
** allocation tried once more; then TD_ERR_OOM with the sizes.
** Capture: blocks allocated or freed while a graph is being captured belong
** to the capture's pool, which the graph owns, so eager work never reuses
** memory that a replay will write (cu_capture.c).
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

#define CLASSES   256
#define MIN_BLOCK 512
#define STAGE     ((size_t)8 << 20)

typedef struct cu_pool {
    td_buffer *free[CLASSES];
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

typedef struct cu_alloc {
    td_buffer *free[CLASSES];
    cu_pool *capture; /* the pool of the capture in progress */
    td_memory_stats stats;
    foreign_free *foreign; /* released foreign buffers waiting for their work */
    temp_block *temps;     /* live cu_temp_alloc blocks, to map pointers back */
} cu_alloc;

typedef struct cu_staging {
    void *host[2];
    cudaEvent_t done[2];
    int next;
} cu_staging;

/* Class of n bytes and the capacity it rounds up to. */
static int size_class(size_t n, size_t *capacity) {
    if (n <= MIN_BLOCK) {
        *capacity = MIN_BLOCK;
        return 0;
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^log2 < n <= 2^(log2+1) */
    size_t base = (size_t)1 << log2, step = base / 4;
    size_t quarter = (n - base + step - 1) / step; /* 1..4 */
    *capacity = base + quarter * step;
    int c = (log2 - 9) * 4 + (int)quarter;
    return c < CLASSES ? c : CLASSES - 1;
}

td_status cu_memory_init(cu_dev *d) {
    d->alloc = calloc(1, sizeof *d->alloc);
    d->staging = calloc(1, sizeof *d->staging);
    if (!d->alloc || !d->staging) return td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    for (int i = 0; i < 2; i++) {
        CU_TRY(cudaHostAlloc(&d->staging->host[i], STAGE, cudaHostAllocPortable));
        CU_TRY(cudaEventCreateWithFlags(&d->staging->done[i], cudaEventDisableTiming));
    }
    return TD_OK;
}

static void stats_take(cu_alloc *a, size_t capacity) {
    a->stats.allocated += capacity;
    a->stats.alloc_count++;
    if (a->stats.allocated > a->stats.peak_allocated) a->stats.peak_allocated = a->stats.allocated;
}

/* Give every cached block back to the driver (cudaFree waits for the device). */
static void release_cache(cu_dev *d) {
    cu_alloc *a = d->alloc;
    for (int c = 0; c < CLASSES; c++)
        for (td_buffer *b = a->free[c], *next; b; b = next) {
            next = b->next_free;
            cudaFree(b->ptr);
            a->stats.reserved -= b->block;
            free(b);
        }
    memset(a->free, 0, sizeof a->free);
}

static td_status alloc_locked(cu_dev *d, size_t nbytes, td_buffer **out) {
    cu_alloc *a = d->alloc;
    size_t capacity;
    int c = size_class(nbytes, &capacity);
    if (c == CLASSES - 1) capacity = (nbytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    td_buffer **lists[2] = {a->capture ? &a->capture->free[c] : NULL, &a->free[c]};
    for (int l = 0; l < 2; l++) {
        td_buffer **pb = lists[l];
        for (; pb && *pb; pb = &(*pb)->next_free)
            if ((*pb)->block >= capacity) break; /* the last class holds blocks of many sizes */
        if (pb && *pb) {
            td_buffer *b = *pb;
            *pb = b->next_free;
            b->next_free = NULL;
            b->nbytes = nbytes;
            if (a->capture) b->pool = a->capture;
            if (b->pool) b->pool->live++;
            stats_take(a, b->block);
            *out = b;
            return TD_OK;
        }
    }
    td_buffer *b = calloc(1, sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "cuda: out of host memory for a buffer header");
    cudaError_t e = cudaMalloc(&b->ptr, capacity);
    if (e == cudaErrorMemoryAllocation && !d->capturing) {
        cudaGetLastError(); /* not sticky: clear it */
        release_cache(d);
        a->stats.oom_retries++;
        e = cudaMalloc(&b->ptr, capacity);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(b);
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        if (e == cudaErrorMemoryAllocation)
            return td_error_set(TD_ERR_OOM,
                                "cuda:%d: out of memory allocating %zu bytes (%.1f MiB held by tensors, %.1f MiB "
                                "reserved, %.1f of %.1f MiB free on the device)",
                                d->index, nbytes, a->stats.allocated / 1048576.0, a->stats.reserved / 1048576.0,
                                free_b / 1048576.0, total_b / 1048576.0);
        return cu_status(e, "cudaMalloc");
    }
    b->nbytes = nbytes;
    b->block = capacity;
    b->dev = d->index;
    b->size_class = c;
    b->pool = a->capture;
    if (b->pool) b->pool->live++;
    a->stats.reserved += capacity;
    stats_take(a, capacity);
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

static void free_locked(cu_dev *d, td_buffer *b) {
    cu_alloc *a = d->alloc;
    a->stats.allocated -= b->block;
    cu_pool *p = b->pool;
    if (p) p->live--;
    if (a->capture && !p) p = b->pool = a->capture; /* freed during capture: the graph may write it */
    if (p && p->released) {
        b->pool = NULL;
        if (p->live == 0) free(p);
        p = NULL;
    }
    td_buffer **list = p ? &p->free[b->size_class] : &a->free[b->size_class];
    b->next_free = *list;
    *list = b;
}

void cu_buffer_free(td_buffer *b) {
    if (!b) return;
    cu_dev *d = cu_get(b->dev);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    if (!b->block) { /* foreign: the deleter runs once the queued work is done */
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

uint64_t cu_buffer_address(td_buffer *b) { return (uint64_t)(uintptr_t)b->ptr; }

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
    *b = (td_buffer){.ptr = (void *)(uintptr_t)address, .nbytes = nbytes, .dev = dev, .deleter = deleter, .ctx = ctx};
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
        *out = t->b->ptr;
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
        if ((*pt)->b->ptr == ptr) {
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
    d->alloc->capture = p;
    pthread_mutex_unlock(&d->lock);
    return TD_OK;
}

cu_pool *cu_pool_end(cu_dev *d) {
    pthread_mutex_lock(&d->lock);
    cu_pool *p = d->alloc->capture;
    d->alloc->capture = NULL;
    pthread_mutex_unlock(&d->lock);
    return p;
}

/* The graph is gone: its free blocks return to the cache; live ones do when freed. */
void cu_pool_release(cu_dev *d, cu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&d->lock);
    for (int c = 0; c < CLASSES; c++)
        for (td_buffer *b = p->free[c], *next; b; b = next) {
            next = b->next_free;
            b->pool = NULL;
            b->next_free = d->alloc->free[c];
            d->alloc->free[c] = b;
        }
    p->released = true;
    if (p->live == 0) free(p);
    pthread_mutex_unlock(&d->lock);
}

/* ---- transfers ---- */

static td_status check_range(const td_buffer *b, size_t offset, size_t n, const char *what) {
    if (offset > b->nbytes || n > b->nbytes - offset)
        return td_error_set(TD_ERR_MISUSE, "cuda %s: bytes [%zu, %zu) outside a %zu-byte buffer", what, offset,
                            offset + n, b->nbytes);
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
        char *dev = (char *)buf->ptr + offset + at, *h = (char *)host + at;
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
    char *from = (char *)src->ptr + so, *to = (char *)dst->ptr + dof;
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
    return cu_status(cudaMemsetAsync((char *)dst->ptr + offset, byte, n, d->stream), "memset");
}

td_status cu_memory_stats(int dev, bool reset_peak, td_memory_stats *out) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    pthread_mutex_lock(&d->lock);
    *out = d->alloc->stats;
    if (reset_peak) d->alloc->stats.peak_allocated = d->alloc->stats.allocated;
    pthread_mutex_unlock(&d->lock);
    return TD_OK;
}

td_status cu_empty_cache(int dev) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (d->capturing) return td_error_set(TD_ERR_STATE, "cuda:%d: empty_cache during a capture", dev);
    pthread_mutex_lock(&d->lock);
    release_cache(d);
    pthread_mutex_unlock(&d->lock);
    return TD_OK;
}
