/*
** The CPU backend's memory: host buffers from the shared caching allocator
** (td_alloc_cache, src/core/alloc_cache.c) over aligned_alloc, buffers
** imported from foreign memory, and the byte transfers (all memcpy).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "cpu.h"

#define CPU_ALIGN 64

/* The cache: freed buffers wait in per-size-class lists for reuse, so a
** training loop that allocates the same shapes every step stops paying for
** malloc, page faults and zeroing. Classes are 8 per power of two above
** 4 KiB; at most CACHE_LIMIT bytes are kept. Off under AddressSanitizer,
** which must see every free to catch use-after-free. One stream (tag 0):
** every kernel has finished when it returns. */
#define CACHE_CLASSES 256
#define CACHE_LIMIT   ((size_t)2 << 30)
#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ON 0
#else
#define CACHE_ON 1
#endif

static void *raw_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return aligned_alloc(CPU_ALIGN, bytes);
}

static void raw_free(void *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

static td_alloc_cache *cache;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_create(void) {
    td_alloc_cache_config cfg = {.header_size = sizeof(td_buffer),
                                 .min_block = 4096,
                                 .classes = CACHE_CLASSES,
                                 .align = CPU_ALIGN,
                                 .cache_limit = CACHE_LIMIT,
                                 .disabled = !CACHE_ON,
                                 .raw_alloc = raw_alloc,
                                 .raw_free = raw_free};
    td_alloc_cache_new(&cfg, &cache);
}

/* The cache, or NULL (error set) when its creation ran out of memory. */
static td_alloc_cache *get_cache(void) {
    pthread_once(&cache_once, cache_create);
    if (!cache) td_error_set(TD_ERR_OOM, "cpu: out of host memory for the allocator");
    return cache;
}

/* RAM plus swap, in bytes (0 if unknown): no allocation larger can succeed. */
static uint64_t host_memory_limit(void) {
    static _Atomic uint64_t limit; /* computed once; every thread computes the same value */
    struct sysinfo si;
    if (!limit && sysinfo(&si) == 0) limit = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
    return limit;
}

td_status cpu_buffer_alloc(int dev, size_t nbytes, td_buffer **out) {
    (void)dev;
    *out = NULL;
    td_alloc_cache *c = get_cache();
    if (!c) return td_last_status();
    /* refused up front: an allocator may abort on such a request (AddressSanitizer's does) instead of failing */
    uint64_t limit = host_memory_limit();
    if (limit && nbytes > limit)
        return td_error_set(TD_ERR_OOM,
                            "cpu: out of memory allocating %zu bytes (the host has %llu bytes of RAM and swap)", nbytes,
                            (unsigned long long)limit);
    td_buffer *b = (td_buffer *)td_alloc_cache_alloc(c, nbytes, 0);
    if (!b) return td_error_set(TD_ERR_OOM, "cpu: out of memory allocating %zu bytes", nbytes);
    *out = b;
    return TD_OK;
}

td_status cpu_buffer_import(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *), void *ctx,
                            td_buffer **out) {
    (void)dev;
    *out = NULL;
    td_buffer *b = malloc(sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "cpu: out of host memory for a buffer header");
    *b = (td_buffer){.block = {.ptr = (void *)(uintptr_t)address, .size = nbytes, .capacity = nbytes, .size_class = -1},
                     .deleter = deleter,
                     .ctx = ctx,
                     .foreign = true};
    *out = b;
    return TD_OK;
}

void cpu_buffer_free(td_buffer *b) {
    if (!b) return;
    if (b->foreign) {
        if (b->deleter) b->deleter(b->ctx);
        free(b);
        return;
    }
    td_alloc_cache_release(cache, &b->block, 0); /* cache exists: b came from it */
}

void *cpu_buffer_host_ptr(td_buffer *b) { return b->block.ptr; }
uint64_t cpu_buffer_address(td_buffer *b) { return (uint64_t)(uintptr_t)b->block.ptr; }

td_status cpu_memory_stats(int dev, bool reset_peak, td_memory_stats *out) {
    (void)dev;
    td_alloc_cache *c = get_cache();
    if (!c) return td_last_status();
    td_alloc_cache_stats(c, reset_peak, out);
    return TD_OK;
}

/* Frees every cached buffer. */
td_status cpu_empty_cache(int dev) {
    (void)dev;
    td_alloc_cache *c = get_cache();
    if (!c) return td_last_status();
    td_alloc_cache_empty(c);
    return TD_OK;
}

td_status cpu_write(td_buffer *dst, size_t offset, const void *src, size_t n) {
    memcpy((char *)dst->block.ptr + offset, src, n);
    return TD_OK;
}

td_status cpu_read(td_buffer *src, size_t offset, void *dst, size_t n) {
    memcpy(dst, (char *)src->block.ptr + offset, n);
    return TD_OK;
}

td_status cpu_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n) {
    memmove((char *)dst->block.ptr + dof, (char *)src->block.ptr + so, n);
    return TD_OK;
}

td_status cpu_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t n) {
    memset((char *)dst->block.ptr + offset, byte, n);
    return TD_OK;
}
