/*
** The CPU backend: host memory, the kernel table and device facts.
** Kernels live one family per file (cpu_<family>.c).
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "cpu.h"
#include "cpu_gemm.h"

#define CPU_ALIGN 64

typedef td_status (*cpu_kernel_fn)(const td_op *op);

/* Whether libtrident-ompenv chose the passive OpenMP wait policy (src/omp_env/omp_env.c). */
#ifdef TRIDENT_OMPENV
bool td__omp_env_passive(void);
static bool omp_passive_by_library(void) { return td__omp_env_passive(); }
#else
static bool omp_passive_by_library(void) { return false; }
#endif

/* One thread pool owns the cores: the kernels split their GEMMs over OpenMP
** threads themselves (cpu_matmul.c, cpu_conv.c) and call OpenBLAS from inside
** those threads, so OpenBLAS must run each call on its caller's thread. A
** pthreads OpenBLAS (openblas_get_parallel() == 1, Debian's default) is set to
** one thread; its own pool would otherwise compete with OpenMP's for the same
** cores. An OpenMP OpenBLAS (== 2) already runs single-threaded inside a
** parallel region, and its openblas_set_num_threads would also change
** OpenMP's thread count, so it is left alone; a serial one (== 0) needs nothing.
** Then OpenBLAS's GEMMs are checked on this machine (cpu_gemm.c). */
static td_status cpu_init(char *why, size_t why_size) {
    (void)why, (void)why_size;
    if (openblas_get_parallel() == 1) openblas_set_num_threads(1);
    cpu_gemm_init();
    return TD_OK;
}

static const cpu_kernel_fn kernels[TD_OP_COUNT] = {
#define TD_CPU_ENTRY_(N, ni, no, g, dts, lay, amp, s) [TD_OP_##N] = td_cpu_##N,
    TD_OP_LIST(TD_CPU_ENTRY_)
#undef TD_CPU_ENTRY_
};

/* below ~32k ops a thread (or a piece of work) costs more than it gives */
#define CPU_OPS_PER_PIECE (1 << 15)

int64_t cpu_splits_for(int64_t n, int64_t cost_per_unit, int64_t most) {
    int64_t t = n * cost_per_unit / CPU_OPS_PER_PIECE;
    return t < 1 ? 1 : t > most ? most : t;
}

int cpu_threads_for(int64_t n, int64_t cost_per_unit) {
#ifdef _OPENMP
    return (int)cpu_splits_for(n, cost_per_unit, omp_get_max_threads());
#else
    (void)n, (void)cost_per_unit;
    return 1;
#endif
}

/* ---- strided iteration ---- */

void cpu_iter_init(cpu_iter *it, int nops, const td_operand *const *views) {
    const td_operand *v0 = views[0];
    it->nops = nops;
    it->ndim = 0;
    /* drop size-1 dims, then merge dim i into i+1 when every operand allows */
    for (int d = 0; d < v0->ndim; d++) {
        if (v0->shape[d] == 1) continue;
        int n = it->ndim;
        bool merge = n > 0;
        for (int k = 0; k < nops && merge; k++) merge = it->strides[k][n - 1] == views[k]->strides[d] * v0->shape[d];
        if (merge) {
            it->shape[n - 1] *= v0->shape[d];
            for (int k = 0; k < nops; k++) it->strides[k][n - 1] = views[k]->strides[d];
        } else {
            it->shape[n] = v0->shape[d];
            for (int k = 0; k < nops; k++) it->strides[k][n] = views[k]->strides[d];
            it->ndim++;
        }
    }
    if (it->ndim == 0) { /* a single element (or all dims of size 1) */
        it->shape[0] = td_operand_numel(v0);
        for (int k = 0; k < nops; k++) it->strides[k][0] = 1;
        it->ndim = 1;
    }
    it->inner = it->shape[it->ndim - 1];
    it->rows = 1;
    for (int d = 0; d < it->ndim - 1; d++) it->rows *= it->shape[d];
    for (int k = 0; k < nops; k++) it->inner_strides[k] = it->strides[k][it->ndim - 1];
}

void cpu_iter_row_offsets(const cpu_iter *it, int64_t row, int64_t *offsets) {
    for (int k = 0; k < it->nops; k++) offsets[k] = 0;
    for (int d = it->ndim - 2; d >= 0; d--) {
        int64_t i = row % it->shape[d];
        row /= it->shape[d];
        for (int k = 0; k < it->nops; k++) offsets[k] += i * it->strides[k][d];
    }
}

/* ---- devices ---- */

static int cpu_device_count(void) { return 1; }

static td_status cpu_device_info(int dev, td_device_info *out) {
    (void)dev;
    memset(out, 0, sizeof *out);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out->name, sizeof out->name, "cpu");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            snprintf(out->name, sizeof out->name, "%s", colon + 2);
            out->name[strcspn(out->name, "\n")] = 0;
            break;
        }
    }
    if (f) fclose(f);
    /* "OpenBLAS 0.3.26" (its config string's second word is the version) and the kernels it chose */
    char version[24] = "";
    sscanf(openblas_get_config(), "%*s %23s", version);
    snprintf(out->driver, sizeof out->driver, "OpenBLAS %s, %s kernels", version, openblas_get_corename());
#ifdef _OPENMP
    out->compute_units = omp_get_max_threads();
#else
    out->compute_units = 1;
#endif
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    out->subgroup_size = avx2 ? 8 : 1;
    out->fp16 = out->bf16 = false;
    out->unified_memory = true;
    out->timestamps = true;
    snprintf(out->features, sizeof out->features, "%s openmp=%d%s openblas; %s", avx2 ? "avx2 fma" : "scalar",
             out->compute_units, omp_passive_by_library() ? " omp_wait=passive" : "", cpu_gemm_note());
    return TD_OK;
}

/* ---- memory ---- */

/* A caching allocator: freed buffers wait in per-size-class lists for reuse,
** so a training loop that allocates the same shapes every step stops paying
** for malloc, page faults and zeroing. Classes are 4 per power of two above
** 4 KiB; at most CACHE_LIMIT bytes are kept. Off under AddressSanitizer,
** which must see every free to catch use-after-free. */
#define CACHE_CLASSES 256
#define CACHE_LIMIT   ((size_t)2 << 30)
#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ON 0
#else
#define CACHE_ON 1
#endif

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static td_buffer *cache[CACHE_CLASSES]; /* free lists, linked through next_free */
static size_t cache_bytes;
static td_memory_stats stats; /* under cache_lock; allocated counts capacities */

static void stats_take(size_t capacity) {
    stats.allocated += capacity;
    stats.alloc_count++;
    if (stats.allocated > stats.peak_allocated) stats.peak_allocated = stats.allocated;
    stats.reserved = stats.allocated + cache_bytes;
}

/* Size class of n bytes, and the capacity it rounds up to; -1 if uncached. */
static int size_class(size_t n, size_t *capacity) {
    if (n <= 4096) {
        *capacity = 4096;
        return 0;
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^log2 < n <= 2^(log2+1) */
    size_t base = (size_t)1 << log2, step = base / 4;
    size_t quarter = (n - base + step - 1) / step; /* 1..4 */
    *capacity = base + quarter * step;
    int c = (log2 - 12) * 4 + (int)quarter;
    return c < CACHE_CLASSES ? c : -1;
}

/* RAM plus swap, in bytes (0 if unknown): no allocation larger can succeed. */
static uint64_t host_memory_limit(void) {
    static _Atomic uint64_t limit; /* computed once; every thread computes the same value */
    struct sysinfo si;
    if (!limit && sysinfo(&si) == 0) limit = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
    return limit;
}

static td_status cpu_buffer_alloc(int dev, size_t nbytes, td_buffer **out) {
    (void)dev;
    *out = NULL;
    size_t capacity = (nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    int c = CACHE_ON ? size_class(nbytes, &capacity) : -1;
    if (c >= 0) {
        pthread_mutex_lock(&cache_lock);
        td_buffer *b = cache[c];
        if (b) {
            cache[c] = b->next_free;
            cache_bytes -= b->capacity;
            stats_take(b->capacity);
        }
        pthread_mutex_unlock(&cache_lock);
        if (b) {
            b->size = nbytes;
            *out = b;
            return TD_OK;
        }
    }
    /* refused up front: an allocator may abort on such a request (AddressSanitizer's does) instead of failing */
    uint64_t limit = host_memory_limit();
    if (limit && nbytes > limit)
        return td_error_set(TD_ERR_OOM,
                            "cpu: out of memory allocating %zu bytes (the host has %llu bytes of RAM and swap)", nbytes,
                            (unsigned long long)limit);
    td_buffer *b = malloc(sizeof *b);
    void *data = b ? aligned_alloc(CPU_ALIGN, capacity ? capacity : CPU_ALIGN) : NULL;
    if (!data) {
        free(b);
        return td_error_set(TD_ERR_OOM, "cpu: out of memory allocating %zu bytes", nbytes);
    }
    *b = (td_buffer){.data = data, .size = nbytes, .capacity = capacity, .size_class = c};
    pthread_mutex_lock(&cache_lock);
    stats_take(capacity);
    pthread_mutex_unlock(&cache_lock);
    *out = b;
    return TD_OK;
}

static td_status cpu_buffer_import(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *), void *ctx,
                                   td_buffer **out) {
    (void)dev;
    *out = NULL;
    td_buffer *b = malloc(sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "cpu: out of host memory for a buffer header");
    *b = (td_buffer){.data = (void *)(uintptr_t)address,
                     .size = nbytes,
                     .capacity = nbytes,
                     .size_class = -1,
                     .deleter = deleter,
                     .ctx = ctx,
                     .foreign = true};
    *out = b;
    return TD_OK;
}

static void cpu_buffer_free(td_buffer *b) {
    if (!b) return;
    if (b->foreign) {
        if (b->deleter) b->deleter(b->ctx);
        free(b);
        return;
    }
    pthread_mutex_lock(&cache_lock);
    stats.allocated -= b->capacity;
    pthread_mutex_unlock(&cache_lock);
    if (b->size_class >= 0) {
        pthread_mutex_lock(&cache_lock);
        bool keep = cache_bytes + b->capacity <= CACHE_LIMIT;
        if (keep) {
            b->next_free = cache[b->size_class];
            cache[b->size_class] = b;
            cache_bytes += b->capacity;
        }
        pthread_mutex_unlock(&cache_lock);
        if (keep) return;
    }
    free(b->data);
    free(b);
}

static void *cpu_buffer_host_ptr(td_buffer *b) { return b->data; }
static uint64_t cpu_buffer_address(td_buffer *b) { return (uint64_t)(uintptr_t)b->data; }

static td_status cpu_memory_stats(int dev, bool reset_peak, td_memory_stats *out) {
    (void)dev;
    pthread_mutex_lock(&cache_lock);
    stats.reserved = stats.allocated + cache_bytes;
    *out = stats;
    if (reset_peak) stats.peak_allocated = stats.allocated;
    pthread_mutex_unlock(&cache_lock);
    return TD_OK;
}

/* Frees every cached buffer. */
static td_status cpu_empty_cache(int dev) {
    (void)dev;
    pthread_mutex_lock(&cache_lock);
    for (int c = 0; c < CACHE_CLASSES; c++)
        for (td_buffer *b = cache[c], *next; b; b = next) {
            next = b->next_free;
            free(b->data);
            free(b);
        }
    memset(cache, 0, sizeof cache);
    cache_bytes = 0;
    pthread_mutex_unlock(&cache_lock);
    return TD_OK;
}

static td_status cpu_write(td_buffer *dst, size_t offset, const void *src, size_t n) {
    memcpy((char *)dst->data + offset, src, n);
    return TD_OK;
}

static td_status cpu_read(td_buffer *src, size_t offset, void *dst, size_t n) {
    memcpy(dst, (char *)src->data + offset, n);
    return TD_OK;
}

static td_status cpu_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n) {
    memmove((char *)dst->data + dof, (char *)src->data + so, n);
    return TD_OK;
}

static td_status cpu_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t n) {
    memset((char *)dst->data + offset, byte, n);
    return TD_OK;
}

/* ---- ops ---- */

static bool dtype_in_class(td_dtype dt, int cls) {
    switch (cls) {
    case TD_DTS_ALL: return true;
    case TD_DTS_NUM: return dt != TD_BOOL;
    case TD_DTS_FLOAT: return td_dtype_is_float(dt);
    default: return false;
    }
}

static bool cpu_supports(int dev, const td_op *op) {
    (void)dev;
    if ((unsigned)op->kind >= TD_OP_COUNT || !kernels[op->kind]) return false;
    const td_op_meta *m = td_op_info(op->kind);
    td_dtype dt = op->n_in && op->in[0].buf && m->n_in != 0 ? op->in[0].dtype : op->out[0].dtype;
    /* where's first input is the bool mask: its class applies to the values */
    if (op->kind == TD_OP_WHERE) dt = op->in[1].dtype;
    return dtype_in_class(dt, m->dtypes);
}

static td_status cpu_run(int dev, const td_op *op) {
    (void)dev;
    return kernels[op->kind](op);
}

static td_status cpu_synchronize(int dev) {
    (void)dev;
    return TD_OK;
}

static const td_backend_i cpu_iface = {
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .native_stream = NULL,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_host_ptr = cpu_buffer_host_ptr,
    .buffer_address = cpu_buffer_address,
    .buffer_import = cpu_buffer_import,
    .write = cpu_write,
    .read = cpu_read,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .memory_stats = cpu_memory_stats,
    .empty_cache = cpu_empty_cache,
    .supports = cpu_supports,
    .run = cpu_run,
    .run_many = NULL,
    .synchronize = cpu_synchronize,
    .event_create = NULL,
    .event_record = NULL,
    .event_elapsed_ms = NULL,
    .event_free = NULL,
    .event_wait = NULL,
    .event_wait_native = NULL,
    .capture_begin = NULL,
    .capture_end = NULL,
    .graph_replay = NULL,
    .graph_free = NULL,
    .kernel_compile = NULL,
    .kernel_launch = NULL,
    .kernel_free = NULL,
};

const td_backend td_cpu_backend = {
    .api_version = TD_BACKEND_API_VERSION,
    .name = "cpu",
    .device_type = TD_DEVICE_CPU,
    .init = cpu_init,
    .iface = &cpu_iface,
};
