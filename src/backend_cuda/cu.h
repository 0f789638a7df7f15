/*
** Internals of the CUDA backend plugin (libtrident-cuda.so), shared by its C
** runtime files (cu_*.c) and its kernel files (cu_ops_*.cu).
**
** One stream per device; every op is enqueued on it, so work on a device runs
** in submission order and a buffer freed by the caching allocator can be
** reused by the next allocation without a host wait (stream-ordered frees).
** Each op of TD_OP_LIST has a launcher cu_op_<NAME> in a cu_ops_<family>.cu
** file, declared here as an ordinary symbol: a kernel that the op table names
** but nothing defines fails the link (the plugin links with --no-undefined).
** The dispatcher has checked the operands against op_list.h (dtypes, arity)
** and skipped empty outputs; the ops of CU_CHECKED_OPS add a capability test
** cu_supports_<NAME> (a shape limit, a layout), the others take every op the
** dispatcher lets through.
**
** defines: cu_dev, error helpers, operand pointers, scratch memory, launch
** sizing, cu_copy_view, the per-op declarations, CU_CHECKED_OPS, CU_SUPPORTS.
*/
#ifndef TRIDENT_CU_H
#define TRIDENT_CU_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "trident/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CU_MAX_DEVICES 16

typedef struct cu_dev {
    int index;   /* Trident's ordinal (cuda:index) */
    int ordinal; /* CUDA runtime ordinal, after TRIDENT_CUDA_DEVICE remapping */
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cublasHandle_t blas; /* for the few calls Lt lacks (none on the hot path) */
    void *lt_workspace;  /* cuBLASLt workspace, lt_workspace_size bytes */
    size_t lt_workspace_size;
    struct cudaDeviceProp prop;
    int sm_count, cc_major, cc_minor;
    pthread_mutex_t lock; /* the allocator and staging buffers */
    bool capturing;       /* inside capture_begin/capture_end: no host waits allowed */
    struct cu_alloc *alloc;
    struct cu_staging *staging;
    bool created;     /* stream and handles made (on first use) */
    td_status failed; /* creation failed: why in fail_msg */
    char fail_msg[512];
} cu_dev;

/* The device of Trident ordinal dev, made current on this thread; NULL with
** TD_ERR_UNAVAILABLE when it does not exist. */
cu_dev *cu_get(int dev);

/* ---- errors: every CUDA, cuBLAS and NVRTC code becomes a td_status ---- */
/* TD_OK, or TD_ERR_OOM / TD_ERR_DEVICE with "what: cudaErrorX: its string". */
td_status cu_status(cudaError_t e, const char *what);
td_status cu_blas_status(cublasStatus_t s, const char *what);
#define CU_TRY(expr)                                                                                                   \
    do {                                                                                                               \
        td_status cu_try_st_ = cu_status((expr), #expr);                                                               \
        if (cu_try_st_ != TD_OK) return cu_try_st_;                                                                    \
    } while (0)
/* After a <<<...>>> launch: reports a bad configuration or a sticky error. */
#define CU_LAUNCHED(name) cu_status(cudaGetLastError(), name)

/* ---- operands ---- */
struct td_buffer {
    td_alloc_block block; /* ptr: device address of byte 0; size: usable bytes (td_alloc_cache, cu_memory.c) */
    int dev;
    bool foreign;               /* imported (buffer_import): not the allocator's */
    void (*deleter)(void *ctx); /* foreign memory: run on free */
    void *ctx;
    struct cu_pool *pool; /* the capture pool it belongs to, or NULL */
};

/* Device address of element v->offset of v (element 0 of the view). */
static inline void *cu_data(const td_operand *v) {
    return v->buf ? (char *)v->buf->block.ptr + v->offset * (int64_t)td_dtype_size(v->dtype) : NULL;
}

/* ---- memory (cu_memory.c) ---- */
/* Stream-ordered scratch from the caching allocator: usable by work enqueued
** on d->stream after this call; cu_temp_free may be called right after the
** last launch that uses it (later allocations are ordered behind that work). */
td_status cu_temp_alloc(cu_dev *d, size_t nbytes, void **out);
void cu_temp_free(cu_dev *d, void *ptr);

/* ---- launch sizing ---- */
#define CU_BLOCK 256
/* Blocks for a grid-stride loop over n items with CU_BLOCK threads: enough to
** fill the device several times over, never more than needed. */
static inline unsigned cu_grid(const cu_dev *d, int64_t n, int block) {
    int64_t want = (n + block - 1) / block, cap = (int64_t)d->sm_count * 32;
    if (want < 1) want = 1;
    return (unsigned)(want < cap ? want : cap);
}

/* ---- elementwise iteration (cu_iter.c) ----
** Merged geometry of n operands (n <= CU_MAX_OPERANDS) that share the shape of
** views[0]: size-1 dims dropped, dims folded where every operand allows it.
** A kernel turns a linear index i in [0, numel) into per-operand element
** offsets with cu_offset (cu_kernels.cuh). */
#define CU_MAX_OPERANDS 4
typedef struct cu_geom {
    int ndim; /* >= 1 */
    int64_t numel;
    int64_t shape[TD_MAX_DIMS];
    int64_t strides[CU_MAX_OPERANDS][TD_MAX_DIMS];
    bool contiguous; /* every operand is dense and in order: offset == i */
} cu_geom;
void cu_geom_make(int n, const td_operand *const *views, cu_geom *g);

/* ---- GEMM on cuBLASLt (cu_blaslt.c) ---- */
/* What the GEMM's epilogue adds: nothing, bias [N] per output column, or
** bias and then tanh-GELU with the pre-activation kept in aux ([M, N]);
** DGELU multiplies the product by tanh-GELU's derivative at aux ([M, N], read). */
enum { CU_EPI_NONE, CU_EPI_BIAS, CU_EPI_GELU_AUX_BIAS, CU_EPI_BGRADB, CU_EPI_DGELU };
/* op's MATMUL (in = (a, b), out = c; TD_LAYOUT_MATRIX) with epilogue epi;
** TD_ERR_UNSUPPORTED when Lt has no algorithm for the shape. */
td_status cu_lt_matmul(cu_dev *d, const td_op *op, int epi, const void *bias, void *aux);
/* The same, 2-D, accumulating: out = a @ b + bias + c, with c [M, N] of out's
** layout and dtype (f32 for f16/bf16 a and b, or theirs) read as Lt's C with
** beta = 1, and bias (epi CU_EPI_BIAS or NONE) of out's dtype too; K > 0.
** TD_ERR_UNSUPPORTED when Lt has no algorithm, K = 0 or batch dims. */
td_status cu_lt_matmul_add(cu_dev *d, const td_op *op, int epi, const void *bias, const void *c);

/* ---- copies (cu_ops_fill.cu) ---- */
/* out = cast(in) elementwise; in and out of one shape, any strides and dtypes
** (COPY, and CAT's slices). */
td_status cu_copy_view(cu_dev *d, const td_operand *in, const td_operand *out);

/* ---- the ops ---- */
#define CU_OP_DECLARE_(N, ...) td_status cu_op_##N(cu_dev *d, const td_op *op);
TD_OP_LIST(CU_OP_DECLARE_)
#undef CU_OP_DECLARE_

/* The ops with a capability test cu_supports_<NAME>, true when the device
** runs the op (the dispatcher has checked dtypes and arity). */
// clang-format off
#define CU_CHECKED_OPS(X)                                                                                              \
    X(ARANGE) X(COPY)                                                                           /* fill */             \
    X(RAND) X(RANDN) X(DROPOUT)                                                                 /* random */           \
    X(SUM) X(MEAN) X(MAX) X(MIN) X(ARGMAX) X(ARGMIN) X(VAR) X(LOGSUMEXP)                        /* reduce */           \
    X(SOFTMAX) X(LOG_SOFTMAX) X(SOFTMAX_BACKWARD) X(LOG_SOFTMAX_BACKWARD)                       /* softmax */          \
    X(CROSS_ENTROPY) X(CROSS_ENTROPY_BACKWARD)                                                  /* softmax (xent) */   \
    X(LAYER_NORM) X(ADD_LAYER_NORM)                                                             /* norm */             \
    X(CONV2D) X(CONV2D_BACKWARD_INPUT) X(CONV2D_BACKWARD_WEIGHT)                                /* conv */             \
    X(MAX_POOL2D) X(MAX_POOL2D_BACKWARD) X(AVG_POOL2D) X(AVG_POOL2D_BACKWARD)                   /* pool */             \
    X(EMBEDDING) X(EMBEDDING_BACKWARD) X(INDEX_SELECT) X(GATHER) X(SCATTER_ADD) X(CAT) X(ONE_HOT) /* index */          \
    X(ATTENTION) X(ATTENTION_BACKWARD)                                                          /* attention */        \
    X(ADAM_STEP) X(SGD_STEP) X(RMSPROP_STEP) X(AMP_UNSCALE)                                     /* optim */
// clang-format on
#define CU_SUPPORTS_DECLARE_(N) bool cu_supports_##N(cu_dev *d, const td_op *op);
CU_CHECKED_OPS(CU_SUPPORTS_DECLARE_)
#undef CU_SUPPORTS_DECLARE_

#ifdef __cplusplus
/* The head of cu_supports_<N>(d, op); N must be in CU_CHECKED_OPS, or the
** definition does not compile (a test that the table would not call). */
#define CU_CHECKED_(N) cu_checked_##N = 1,
enum { CU_CHECKED_OPS(CU_CHECKED_) };
#undef CU_CHECKED_
#define CU_SUPPORTS(N)                                                                                                 \
    static_assert(cu_checked_##N, #N " is not in CU_CHECKED_OPS");                                                     \
    extern "C" bool cu_supports_##N([[maybe_unused]] cu_dev *d, const td_op *op)
#endif

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_CU_H */
