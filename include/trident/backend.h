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

#define TD_BACKEND_API_VERSION 4 /* 4: LINEAR_GELU, SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD renumber the op kinds */

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

/* METHOD. Record an error message for this thread, as td_last_error() shows it
** (one line: control bytes are escaped). An argument may be td_last_error(). */
TD_API td_status td_error_set(td_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* METHOD. Prefix the current message with fmt's text and ": ", keeping the
** status; returns it. Chains: "step 2: adam step, parameter 0: <cause>". */
TD_API td_status td_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TD_API int64_t td_operand_numel(const td_operand *v);
TD_API bool td_operand_is_contiguous(const td_operand *v);
/* METHOD. The backend registered for a device type, or NULL (with why in the error). */
TD_API const td_backend *td_backend_for(int device_type);
/* METHOD. Why a backend is unavailable ("plugin not loaded: ..."), or NULL if it is available. */
TD_API const char *td_backend_unavailable_reason(int device_type);
/* METHOD. A symbol that an available plugin exports beside td_backend_plugin (a backend's own
** tools, such as the Vulkan self-test hooks of backend_vulkan/vk_selftest.h), or NULL. */
TD_API void *td_backend_symbol(int device_type, const char *name);

/* Philox4x32-10, the RNG every backend reproduces (see docs/ARCHITECTURE.md):
** element i of a stream (seed, offset) uses counter (offset + i/4) and word i%4. */
TD_API void td_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* uniform float in [0,1) from a 32-bit word: (w >> 8) * 2^-24 */
static inline float td_philox_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_BACKEND_H */
