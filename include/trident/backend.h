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
** device executes in submission order.
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

#include "op_list.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TD_BACKEND_API_VERSION 1

typedef enum td_op_kind {
#define TD_OP_ENUM_(N, ni, no, g, dts, lay, s) TD_OP_##N,
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

enum { TD_REDUCTION_NONE = 0, TD_REDUCTION_MEAN = 1, TD_REDUCTION_SUM = 2 };
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
    } gelu; /* GELU, GELU_BACKWARD: TD_GELU_* */
    struct {
        uint32_t dims;
        int correction;
    } reduce; /* reductions: bit k = reduce dim k */
    struct {
        double eps;
    } norm; /* LAYER_NORM: rows are the last dim */
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
} td_op_params;

/* One op invocation. in and out point to n_in / n_out views. */
typedef struct td_op {
    td_op_kind kind;
    int n_in, n_out;
    const td_operand *in;
    td_operand *out;
    td_op_params p;
} td_op;

typedef struct td_device_info {
    char name[128];          /* "NVIDIA H100 80GB HBM3", "llvmpipe", "AMD EPYC ..." */
    char driver[64];         /* driver or library version */
    uint64_t total_memory;   /* bytes; 0 if unknown */
    uint64_t free_memory;    /* bytes; 0 if unknown */
    int compute_units;       /* SMs, CUs or CPU threads */
    int subgroup_size;       /* warp/subgroup width; SIMD lanes (f32) on CPU */
    bool fp16, bf16, int8;   /* native arithmetic of these types */
    bool cooperative_matrix; /* tensor-core style matrix ops */
    bool timestamps;         /* event timing is available */
    bool unified_memory;     /* host can address device buffers */
    bool emulated;           /* a software device on the host CPU (lavapipe): "auto" never picks it */
    char features[256];      /* free-form extras, e.g. "avx2 fma openblas" */
} td_device_info;

enum { TD_LANG_GLSL = 1, TD_LANG_CUDA = 2 };

typedef struct td_backend_i {
    /* ---- devices ---- */
    int (*device_count)(void);                              /* >= 0 */
    td_status (*device_info)(int dev, td_device_info *out); /* fills *out */

    /* ---- memory (bytes) ---- */
    td_status (*buffer_alloc)(int dev, size_t nbytes, td_buffer **out); /* TD_ERR_OOM on failure; nbytes may be 0 */
    void (*buffer_free)(td_buffer *buf); /* NULL is a no-op; may be deferred until work ends */
    /* (optional) host address of the buffer's byte 0, or NULL. NULL slot: never host-addressable. */
    void *(*buffer_host_ptr)(td_buffer *buf);
    td_status (*write)(td_buffer *dst, size_t offset, const void *src, size_t nbytes); /* host -> device, ordered */
    td_status (*read)(td_buffer *src, size_t offset, void *dst, size_t nbytes);        /* device -> host, waits */
    td_status (*copy)(td_buffer *src, size_t src_offset, td_buffer *dst, size_t dst_offset, size_t nbytes);
    td_status (*memset)(td_buffer *dst, size_t offset, uint8_t byte, size_t nbytes);

    /* ---- ops ---- */
    bool (*supports)(int dev, const td_op *op); /* can run() take this op with these dtypes? */
    td_status (*run)(int dev, const td_op *op); /* enqueue; errors are TD_ERR_* with a message */

    /* ---- streams and timing ---- */
    td_status (*synchronize)(int dev);                                         /* wait for all queued work */
    td_status (*event_create)(int dev, td_event **out);                        /* (optional) NULL: no timing */
    td_status (*event_record)(td_event *ev);                                   /* (optional) mark the queue */
    td_status (*event_elapsed_ms)(td_event *start, td_event *end, double *ms); /* (optional) waits for end */
    void (*event_free)(td_event *ev);                                          /* (optional) */

    /* ---- capture (optional; NULL: td_capture_* report TD_ERR_UNSUPPORTED) ---- */
    td_status (*capture_begin)(int dev);
    td_status (*capture_end)(int dev, td_graph **out);
    td_status (*graph_replay)(td_graph *g);
    void (*graph_free)(td_graph *g);

    /* ---- custom kernels (optional; NULL: TD_ERR_UNSUPPORTED) ---- */
    /* Compile source in lang (TD_LANG_*); on TD_ERR_COMPILE the log holds the compiler output. */
    td_status (*kernel_compile)(int dev, int lang, const char *source, const char *entry, td_kernel **out, char *log,
                                size_t log_size);
    /* Launch over grid (workgroups/blocks); views bound in order; push data by value. */
    td_status (*kernel_launch)(td_kernel *k, const uint32_t grid[3], int n_views, const td_operand *views,
                               const void *push, size_t push_size);
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

/* Philox4x32-10, the RNG every backend reproduces (see docs/ARCHITECTURE.md):
** element i of a stream (seed, offset) uses counter (offset + i/4) and word i%4. */
TD_API void td_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* uniform float in [0,1) from a 32-bit word: (w >> 8) * 2^-24 */
static inline float td_philox_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_BACKEND_H */
