/*
** The backend contract: what a device backend implements.
**
** This header is for backend implementers (the built-in CPU backend, the CUDA
** and Vulkan plugins, and out-of-tree backends). Applications never need it.
**
** A backend is a `const td_backend` whose iface is a table of function
** pointers. Data lives in opaque td_buffer handles that only the backend
** understands; the core never dereferences them. Every op names its operands
** as td_views (buffer + element offset + shape + strides + dtype), so an
** asynchronous GPU backend can queue work without host pointers.
**
** Execution model: run() may return before the work is done (CUDA stream order,
** Vulkan command buffers). read() and synchronize() wait. Work submitted to one
** device executes in submission order, on the device's one queue, whose native
** handle native_stream() gives; event_wait() orders it after other work.
**
** Version 2 added: buffer_address, native_stream, buffer_import (foreign
** memory), event_wait, memory_stats/empty_cache, kernel options, block size
** and shared memory at launch, cross-device copy, run_many (multi-tensor
** launches) and td_op.flags.
** Version 3 added: event_wait_native (a caller's stream waits: DLPack), the
** ops ATTENTION, ATTENTION_BACKWARD, ADD_LAYER_NORM and AMP_UNSCALE (which
** renumber td_op_kind) with their td_op_params, and td_op_meta.amp.
**
** Plugins: a shared library libtrident-<name>.so exporting
**     const td_backend *td_backend_plugin(void);
** found beside libtrident.so. Its init() reports why it cannot run, if so.
*/
#ifndef TRIDENT_BACKEND_H
#define TRIDENT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "device.h"
#include "kernel.h"
#include "op_list.h"
#include "ops.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TD_BACKEND_API_VERSION 5 /* 5: host_buffer_alloc, fence_record, fence_wait (4: op kinds renumbered) */

typedef enum td_op_kind {
#define TD_OP_ENUM_(N, ni, no, g, dts, lay, amp, s) TD_OP_##N,
    TD_OP_LIST(TD_OP_ENUM_)
#undef TD_OP_ENUM_
        TD_OP_COUNT
} td_op_kind;

/* GETTER. Lower-case name of an op ("add"); "?" if out of range. */
TD_API const char *td_op_name(td_op_kind k);

/* Static facts about an op from the table. */
typedef struct td_op_meta {
    const char *name;
    int n_in, n_out, differentiable, dtypes, layout;
    const char *summary;
    int amp;                         /* TD_AMP_*: the op's autocast policy */
    int gemm, batchable, cost;       /* TD_OP_FACTS' columns */
    const char *sig;                 /* operand dtypes and probe shapes (td_sig_next) */
    const union td_op_params *probe; /* the probe invocation's params */
} td_op_meta;
TD_API const td_op_meta *td_op_info(td_op_kind k); /* NULL if out of range */

typedef struct td_buffer td_buffer; /* defined by each backend */
typedef struct td_event td_event;   /* defined by each backend */
typedef struct td_kernel td_kernel; /* defined by each backend */
typedef struct td_graph td_graph;   /* defined by each backend */
typedef struct td_fence td_fence;   /* defined by each backend */

/* One operand: elements live at buf + (offset + sum(i_k * strides[k])) * size. */
typedef struct td_operand {
    td_buffer *buf; /* NULL: an absent optional operand */
    int64_t offset; /* in elements of dtype */
    td_dtype dtype;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    int64_t strides[TD_MAX_DIMS]; /* in elements; 0 on broadcast dims */
} td_operand;

/* td_op_params.xent.reduction: td_reduction's values (ops.h) under the names the kernels use */
enum { TD_REDUCTION_NONE = TD_REDUCE_NONE, TD_REDUCTION_MEAN = TD_REDUCE_MEAN, TD_REDUCTION_SUM = TD_REDUCE_SUM };
enum { TD_GELU_ERF = 0, TD_GELU_TANH = 1 };

/* Parameters per op; which member is valid follows from td_op.kind. */
typedef union td_op_params {
    struct {
        double value;
    } fill; /* FILL */
    struct {
        double start, step;
    } arange; /* ARANGE */
    struct {
        uint64_t seed, offset;
        double p;
    } rng; /* RAND, RANDN, DROPOUT(p) */
    struct {
        double lo, hi;
        bool has_lo, has_hi;
    } clamp; /* CLAMP */
    struct {
        int approximate;
    } gelu; /* GELU, GELU_BACKWARD, LINEAR_GELU: TD_GELU_* */
    struct {
        uint32_t dims;
        int correction;
    } reduce; /* reductions: bit k = reduce dim k */
    struct {
        double eps;
    } norm; /* LAYER_NORM, ADD_LAYER_NORM: rows are the last dim */
    struct {
        double scale, dropout_p; /* scores q.k * scale; dropout on the probabilities (0: none) */
        uint64_t seed, offset;   /* Philox stream of the dropout mask, element (n, i, j) at (n L + i) S + j */
        bool causal;             /* key j > query i masked (top-left aligned) */
    } attn;                      /* ATTENTION* */
    struct {
        int64_t ignore_index;
        double label_smoothing;
        int reduction;
    } xent; /* CROSS_ENTROPY* */
    struct {
        int stride[2], padding[2], dilation[2], groups;
    } conv; /* CONV2D* */
    struct {
        int kernel[2], stride[2], padding[2];
        bool count_include_pad;
    } pool; /* *_POOL2D* */
    struct {
        int dim;
    } axis; /* INDEX_SELECT, GATHER, SCATTER_ADD, CAT */
    struct {
        int64_t num_classes;
    } one_hot; /* ONE_HOT */
    struct {
        int64_t padding_idx;
    } embedding; /* EMBEDDING_BACKWARD: -1 none */
    struct {
        double lr, beta1, beta2, eps, weight_decay;
        int64_t step;
        bool decoupled, amsgrad, maximize;
    } adam;
    struct {
        double lr, momentum, dampening, weight_decay;
        bool nesterov, first_step, maximize;
    } sgd;
    struct {
        double lr, alpha, eps, weight_decay, momentum;
        bool centered, maximize;
    } rmsprop;
    struct {
        double inv_scale;
    } amp; /* AMP_UNSCALE */
} td_op_params;

/* td_op.flags */
enum {
    TD_OP_FLAG_TF32 = 1 /* MATMUL, LINEAR_GELU, CONV2D*: fp32 may use TF32 ("high" matmul precision) */
};

/* One op invocation. in and out point to n_in / n_out views. */
typedef struct td_op {
    td_op_kind kind;
    int n_in, n_out;
    const td_operand *in;
    td_operand *out;
    td_op_params p;
    uint32_t flags; /* TD_OP_FLAG_* */
} td_op;

/* LINEAR_GELU's GEMM h = x @ w^T as a MATMUL op writing *out: w [N, K] row-major is read as w^T [K, N] (strides
** swapped); mm_in[2] receives the two operands. Backends run it with their own MATMUL. */
static inline td_op td_linear_gelu_matmul(const td_op *op, td_operand mm_in[2], td_operand *out) {
    int64_t K = op->in[0].shape[1], N = op->in[1].shape[0];
    mm_in[0] = op->in[0], mm_in[1] = op->in[1];
    mm_in[1].shape[0] = K, mm_in[1].shape[1] = N;
    mm_in[1].strides[0] = 1, mm_in[1].strides[1] = K;
    td_op mm;
    memset(&mm, 0, sizeof mm);
    mm.kind = TD_OP_MATMUL, mm.n_in = 2, mm.n_out = 1, mm.in = mm_in, mm.out = out, mm.flags = op->flags;
    return mm;
}

enum { TD_LANG_GLSL = 1, TD_LANG_CUDA = 2 };

typedef struct td_backend_i {
    /* ---- devices ---- */
    int (*device_count)(void);                              /* >= 0 */
    td_status (*device_info)(int dev, td_device_info *out); /* fills *out */
    /* (optional) the native queue: cudaStream_t, VkQueue. NULL slot: td_device_native_stream gives NULL. */
    void *(*native_stream)(int dev);

    /* ---- memory (bytes) ---- */
    td_status (*buffer_alloc)(int dev, size_t nbytes, td_buffer **out); /* TD_ERR_OOM on failure; nbytes may be 0 */
    void (*buffer_free)(td_buffer *buf); /* NULL is a no-op; may be deferred until work ends */
    /* (optional) host address of the buffer's byte 0, or NULL. NULL slot: never host-addressable. */
    void *(*buffer_host_ptr)(td_buffer *buf);
    /* (optional) device address of byte 0 (CUdeviceptr, VkDeviceAddress, host pointer), 0 if it has none.
    ** NULL slot: td_tensor_device_address reports TD_ERR_UNSUPPORTED. */
    uint64_t (*buffer_address)(td_buffer *buf);
    /* (optional) wrap nbytes of foreign memory at address (in buffer_address's terms) as a buffer;
    ** buffer_free runs deleter(ctx) (when not NULL) after the queued work that uses it.
    ** NULL slot: td_from_foreign reports TD_ERR_UNSUPPORTED. */
    td_status (*buffer_import)(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *ctx), void *ctx,
                               td_buffer **out);
    td_status (*write)(td_buffer *dst, size_t offset, const void *src, size_t nbytes); /* host -> device, ordered */
    td_status (*read)(td_buffer *src, size_t offset, void *dst, size_t nbytes);        /* device -> host, waits */
    /* Device to device, ordered on dst's queue. src and dst may be buffers of two devices of this backend:
    ** TD_ERR_UNSUPPORTED when the backend cannot copy between those two (the core then stages on the host). */
    td_status (*copy)(td_buffer *src, size_t src_offset, td_buffer *dst, size_t dst_offset, size_t nbytes);
    td_status (*memset)(td_buffer *dst, size_t offset, uint8_t byte, size_t nbytes);
    /* (optional) allocator statistics. NULL slot: td_memory_stats_get reports TD_ERR_UNSUPPORTED. */
    td_status (*memory_stats)(int dev, bool reset_peak, td_memory_stats *out);
    /* (optional) return cached memory to the driver. NULL slot: nothing to do. */
    td_status (*empty_cache)(int dev);

    /* ---- ops ---- */
    bool (*supports)(int dev, const td_op *op); /* can run() take this op with these dtypes? */
    td_status (*run)(int dev, const td_op *op); /* enqueue; errors are TD_ERR_* with a message */
    /* (optional) run n ops of one kind with equal params (td_op.p) as few launches as possible: the optimizer
    ** steps of every parameter in one multi-tensor launch. Each op passed supports(). NULL slot: the core
    ** runs them one by one. */
    td_status (*run_many)(int dev, int n, const td_op *ops);

    /* ---- streams and timing ---- */
    td_status (*synchronize)(int dev);                                         /* wait for all queued work */
    td_status (*event_create)(int dev, td_event **out);                        /* (optional) NULL: no events */
    td_status (*event_record)(td_event *ev);                                   /* (optional) mark the queue */
    td_status (*event_elapsed_ms)(td_event *start, td_event *end, double *ms); /* (optional) waits for end */
    void (*event_free)(td_event *ev);                                          /* (optional) */
    /* (optional) make dev's queue wait for ev, recorded on any device of this backend, without a host wait.
    ** NULL slot: the core synchronizes ev's device on the host instead. */
    td_status (*event_wait)(int dev, td_event *ev);
    /* (optional) make a native queue the caller owns (a cudaStream_t; (void *)1 and 2 are CUDA's legacy and
    ** per-thread default streams) wait for ev without a host wait. NULL slot: the core synchronizes ev's device
    ** on the host instead. */
    td_status (*event_wait_native)(void *stream, td_event *ev);

    /* ---- capture (optional; NULL: td_capture_* report TD_ERR_UNSUPPORTED) ---- */
    td_status (*capture_begin)(int dev);
    td_status (*capture_end)(int dev, td_graph **out);
    td_status (*graph_replay)(td_graph *g);
    void (*graph_free)(td_graph *g);

    /* ---- custom kernels (optional; NULL: TD_ERR_UNSUPPORTED) ---- */
    /* Compile source in lang (TD_LANG_*) with opts (NULL: none); on TD_ERR_COMPILE the log holds the compiler
    ** output. */
    td_status (*kernel_compile)(int dev, int lang, const char *source, const char *entry, const td_kernel_options *opts,
                                td_kernel **out, char *log, size_t log_size);
    /* Launch over grid[3] workgroups (blocks) of block[3] threads (GLSL: {0,0,0} keeps the shader's local size;
    ** otherwise it sets specialization constants 0..2) with shared_bytes of dynamic shared memory (CUDA).
    ** views are bound in order; push data goes by value (GLSL: the push-constant block; CUDA: the parameters
    ** after the view pointers, laid out as a C struct). */
    td_status (*kernel_launch)(td_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                               int n_views, const td_operand *views, const void *push, size_t push_size);
    void (*kernel_free)(td_kernel *k);
    /* TD_OK when k can launch with block (as kernel_launch checks it), else TD_ERR_MISUSE naming both sizes: a
    ** GLSL shader whose literal local size differs, a CUDA kernel whose __launch_bounds__ or registers allow
    ** fewer threads. NULL: no check. */
    td_status (*kernel_check_block)(const td_kernel *k, const uint32_t block[3]);

    /* ---- host staging without host waits (optional, version 5: all three slots or none; NULL: the core reads
    ** and writes device tensors' bytes with read() and write(), and read() waits) ---- */
    /* A buffer of nbytes in host-visible memory of dev that copy() takes as src or dst, ordered on dev's queue
    ** like any other buffer. OUT *host: the host address of its byte 0, valid until buffer_free (which waits for
    ** the queued work that uses the buffer). The host may touch those bytes only when no queued copy uses them:
    ** after a fence_wait on a fence recorded after the copies. */
    td_status (*host_buffer_alloc)(int dev, size_t nbytes, td_buffer **out, void **host);
    /* A fence after every piece of work queued on dev so far, which is submitted now (so it starts without a
    ** later host wait); once it signals, device writes to host buffers are visible to the host. OUT *out,
    ** owned by the caller until fence_wait. Fails during a capture. */
    td_status (*fence_record)(int dev, td_fence **out);
    /* Wait on the host until f signals, then free f (NULL: no-op). Thread safe: any thread may wait, while
    ** other threads queue work on the device; the device is not locked while it waits. */
    td_status (*fence_wait)(td_fence *f);
} td_backend_i;

typedef struct td_backend {
    uint32_t api_version; /* TD_BACKEND_API_VERSION */
    const char *name;     /* "cpu", "cuda", "vulkan" */
    int device_type;      /* td_device_type it serves */
    /* (optional) once, on load: TD_OK, or TD_ERR_UNAVAILABLE with why[] filled. */
    td_status (*init)(char *why, size_t why_size);
    const td_backend_i *iface;
} td_backend;

typedef const td_backend *(*td_backend_plugin_fn)(void);

/* ---- Helpers for backend implementers (exported by the core) ---- */

TD_API int64_t td_operand_numel(const td_operand *v);
TD_API bool td_operand_is_contiguous(const td_operand *v);
/* METHOD. The backend registered for a device type, or NULL (with why in the error). */
TD_API const td_backend *td_backend_for(int device_type);

/* ---- Kernel cache (shared service) ----
** Compiled kernels (SPIR-V, cubins, PTX) kept by a 64-bit key: in memory (the
** max_entries most recently used, the least recently used dropped first) and on
** disk as <dir>/<name>-<key as 16 hex digits><suffix>, dir being
** td_kernel_cache_dir's. A disk file is a header (magic "TDKC", the cache's
** format version, the owner's version, the key, the data size, an FNV-1a
** checksum of the data) then the data. A file that is short or long, of another
** version or key, whose checksum or validate() fails, is a miss: it is deleted
** and the next put writes it anew, so nothing corrupt reaches a driver. Files
** are written under a temporary name and renamed, so a reader never sees half
** of one. A backend keys an entry by everything its compile depends on (source,
** entry, defines, architecture) through td_kernel_cache_hash; data that needs
** more than bytes (a lowered entry name beside an image) is packed into them. */

/* The seed of td_kernel_cache_hash chains (FNV-1a's offset basis). */
#define TD_KERNEL_CACHE_SEED 0xCBF29CE484222325ull

typedef struct td_kernel_cache td_kernel_cache;

typedef struct td_kernel_cache_config {
    const char *name;        /* file-name prefix, letters, digits and '_' ("spirv", "cuda"), under 32 bytes */
    const char *suffix;      /* file-name suffix (".spv", ".bin"), under 16 bytes */
    uint32_t version;        /* the owner's data format: files of another version are misses */
    size_t max_entries;      /* entries held in memory (0 counts as 1) */
    const char *disable_env; /* (optional) an environment variable that, set to "0", turns the disk cache off */
    /* (optional) a check of data read from disk beyond the checksum (a SPIR-V module's structure); false: the
    ** file is treated as corrupt. NULL: none. */
    bool (*validate)(const void *data, size_t size);
} td_kernel_cache_config;

/* METHOD. FNV-1a of n bytes of data continuing from h (TD_KERNEL_CACHE_SEED to
** start a key); chain calls to key several parts. Pure, thread safe. */
TD_API uint64_t td_kernel_cache_hash(uint64_t h, const void *data, size_t n);
/* METHOD. The directory of Trident's disk caches: $XDG_CACHE_HOME/trident,
** else $HOME/.cache/trident, created if absent. OUT dir (n bytes). Returns
** false, the disk cache being off, when disable_env (NULL: none) is set to "0"
** or neither variable is set. Thread safe. */
TD_API bool td_kernel_cache_dir(const char *disable_env, char *dir, size_t n);
/* CONSTRUCTOR. A cache as IN cfg describes (copied; cfg->validate must stay
** callable). OUT *out, NULL on failure. TD_ERR_MISUSE for a NULL argument or a
** bad name/suffix, TD_ERR_OOM. The cache is thread safe (one lock inside);
** free it with td_kernel_cache_free. */
TD_API td_status td_kernel_cache_new(const td_kernel_cache_config *cfg, td_kernel_cache **out);
/* DESTRUCTOR. Frees the cache and its in-memory entries (disk files stay). NULL: no-op. */
TD_API void td_kernel_cache_free(td_kernel_cache *c);
/* METHOD. The entry of key: from memory (a hit becomes the most recent), else
** from disk (kept in memory then). OUT *data, a copy the caller frees with
** free(), and *size, its bytes. Returns false on a miss (*data = NULL), which
** includes a corrupt file (deleted) and running out of host memory. Thread safe. */
TD_API bool td_kernel_cache_get(td_kernel_cache *c, uint64_t key, void **data, size_t *size);
/* METHOD. Store size bytes of IN data (copied) as key's entry, the most recent
** in memory, and write its disk file (where the disk cache is on; a failed write
** only leaves no file). TD_ERR_MISUSE for NULL c or data, TD_ERR_OOM. Thread safe. */
TD_API td_status td_kernel_cache_put(td_kernel_cache *c, uint64_t key, const void *data, size_t size);

/* ---- Shared services for backends (exported by the core) ----
** Pieces that every backend would otherwise write again: a caching allocator
** over the backend's raw alloc/free, and the folding of a tensor's dims around
** one axis. The CPU and CUDA backends use the allocator (cpu_memory.c, cu_memory.c); every backend's reduce
** folds dims. */

/* One block of a td_alloc_cache: the header that begins each backend's buffer
** struct. The cache allocates headers of td_alloc_cache_config.header_size
** bytes, zeroed when new; a reused block keeps what the backend left past this
** part. The backend reads ptr, size and capacity and writes none of them. */
typedef struct td_alloc_block {
    void *ptr;                        /* the raw memory: capacity bytes */
    size_t size;                      /* bytes the current owner asked for */
    size_t capacity;                  /* bytes of the raw allocation (its size class) */
    int size_class;                   /* free list it returns to; -1: given back to raw_free at once */
    uintptr_t stream;                 /* tag of the free list it waits in while cached */
    struct td_alloc_block *next_free; /* free-list link while cached */
} td_alloc_block;

/* How a td_alloc_cache sizes and gets its memory. */
typedef struct td_alloc_cache_config {
    size_t header_size; /* bytes of the backend's buffer struct, which begins with a td_alloc_block */
    size_t min_block;   /* a power of two: requests up to it share class 0; above it, 8 classes per power of two */
    int classes;        /* number of size classes, at most 256 */
    size_t align;       /* an uncached block's capacity rounds up to a multiple of this */
    /* above the last class: 0 leaves blocks uncached; else they share the last class, their
    ** capacity rounded up to a multiple of large_round, reused by the first one large enough */
    size_t large_round;
    size_t cache_limit; /* most bytes kept in free lists (a free beyond it goes to raw_free); 0: no limit */
    bool disabled;      /* cache nothing (under AddressSanitizer, which must see every free) */
    bool oom_retry;     /* when raw_alloc fails, empty the cache and, if that gave memory back, try once more (counted
                        ** in oom_retries) */
    void *(*raw_alloc)(void *ctx, size_t bytes); /* bytes > 0; NULL when out of memory */
    void (*raw_free)(void *ctx, void *ptr);      /* ptr from raw_alloc */
    void *ctx;                                   /* passed to raw_alloc and raw_free */
} td_alloc_cache_config;

/* A size-class caching allocator (opaque). Freed blocks wait in a free list of
** their size class and stream tag for reuse, so a loop that allocates the same
** shapes every step stops paying for the driver's allocation. The tag is the
** backend's: a block freed with tag s is reused only by an allocation with tag
** s, so a backend whose work runs on queues can tag each queue (or a graph
** capture's pool) and keep reuse ordered after the work that used the block;
** waiting for other queues (events) stays with the backend. Every call but
** td_alloc_cache_destroy is thread-safe (one mutex per cache). A NULL cache is
** accepted by td_alloc_cache_destroy only; a NULL block by _release only. */
typedef struct td_alloc_cache td_alloc_cache;

/* CONSTRUCTOR. A new, empty cache over cfg (copied).
** OUT: *out, +1 (free with td_alloc_cache_destroy), NULL on failure.
** Returns TD_OK, TD_ERR_MISUSE (a NULL or inconsistent cfg), TD_ERR_OOM. */
TD_API td_status td_alloc_cache_new(const td_alloc_cache_config *cfg, td_alloc_cache **out);
/* DESTRUCTOR. Gives every cached block back (raw_free); blocks still held by
** the backend are its own to free. NULL is a no-op. */
TD_API void td_alloc_cache_destroy(td_alloc_cache *c);
/* METHOD. A block of at least nbytes: one freed with tag stream, else a new one
** from raw_alloc (after emptying the cache, with oom_retry). Counts it in the
** stats. Returns the block (owned by the caller until td_alloc_cache_release),
** or NULL when out of memory, with no error message set: the backend words it. */
TD_API td_alloc_block *td_alloc_cache_alloc(td_alloc_cache *c, size_t nbytes, uintptr_t stream);
/* METHOD. Like td_alloc_cache_alloc, but only a cached block freed with tag
** stream, else NULL (nothing is allocated): for a backend that looks in
** several free lists (a capture's pool, then the eager one) before allocating. */
TD_API td_alloc_block *td_alloc_cache_reuse(td_alloc_cache *c, size_t nbytes, uintptr_t stream);
/* METHOD. Return block b (NULL is a no-op) to the free list of its class and
** tag stream, or to raw_free (uncached, disabled, or past cache_limit). */
TD_API void td_alloc_cache_release(td_alloc_cache *c, td_alloc_block *b, uintptr_t stream);
/* METHOD. Keep the blocks cached with tag stream from td_alloc_cache_empty and
** the OOM retry until td_alloc_cache_retag moves them out: memory that queued
** work may still write (a captured graph's pool, which its replays use).
** Returns TD_OK, TD_ERR_OOM. */
TD_API td_status td_alloc_cache_keep(td_alloc_cache *c, uintptr_t stream);
/* METHOD. Move every block cached with tag from into the free lists of tag to
** (a captured graph's pool returning to the eager cache); tag from is forgotten
** (no longer kept) and may be used again. */
TD_API void td_alloc_cache_retag(td_alloc_cache *c, uintptr_t from, uintptr_t to);
/* METHOD. Turn cfg.oom_retry on or off from now on (off while a CUDA graph is
** captured: giving memory back to the driver then would break the capture). */
TD_API void td_alloc_cache_set_oom_retry(td_alloc_cache *c, bool on);
/* METHOD. Give every cached block back to raw_free, whatever its tag, but for kept tags'. */
TD_API void td_alloc_cache_empty(td_alloc_cache *c);
/* METHOD. OUT: *out, the statistics: allocated and peak_allocated count
** capacities of blocks held, reserved adds the cached ones. reset_peak: start a
** new peak window at the current allocation. */
TD_API void td_alloc_cache_stats(td_alloc_cache *c, bool reset_peak, td_memory_stats *out);

/* METHOD. Dimension folding: append dim (size, st) to the list (shape, stride, *n), dropping a size-1 dim and
** merging into the last entry when that one steps over this dim exactly (stride[*n-1] == st * size),
** so a reduction or copy loops over as few, as long dims as the layout allows. Used dim by dim in
** row-major order, it keeps the row-major order of the elements. shape and stride hold TD_MAX_DIMS. */
static inline void td_dim_fold(int64_t *shape, int64_t *stride, int *n, int64_t size, int64_t st) {
    if (size == 1) return;
    if (*n > 0 && stride[*n - 1] == st * size) {
        shape[*n - 1] *= size;
        stride[*n - 1] = st;
        return;
    }
    shape[*n] = size;
    stride[*n] = st;
    (*n)++;
}

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_BACKEND_H */
