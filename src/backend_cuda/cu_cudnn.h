/*
** cuDNN inside the CUDA plugin, through cuDNN's backend (graph) C API only, loaded with dlopen at first use: no
** link-time dependency, so a machine without cuDNN runs the plugin unchanged. cu_cudnn.c is the loader, the
** per-device handles, a small graph builder (tensor, pointwise, matmul, reduction and reshape nodes that record the
** first failure as one readable line) and plan finalization through the engine heuristics (mode A);
** cu_attention_cudnn.c builds the fused flash-attention graphs of ATTENTION and ATTENTION_BACKWARD on it.
** Without cudnn_graph.h at build time (TRIDENT_HAVE_CUDNN undefined) only the attention entry points exist and
** they always decline.
** defines: cu_dnn_attn, cu_dnn_attn_fwd, cu_dnn_attn_bwd and, with TRIDENT_HAVE_CUDNN, the loader and builder.
*/
#ifndef TRIDENT_CU_CUDNN_H
#define TRIDENT_CU_CUDNN_H

#include "cu.h"
#include "trident/attn_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One attention call as cuDNN sees it: q [n0,n1,L,E], k and v [n0,n1,S,E], out [n0,n1,L,E] (B = n0, H = n1,
** BHSD) with the strides of op's operands (any, the last dim's 1: td_attn_dense), lse [n0,n1,L] float contiguous,
** the natural-log logsumexp of row i's scaled, masked scores (Stats). */
typedef struct cu_dnn_attn {
    const td_op *op; /* ATTENTION or ATTENTION_BACKWARD: the operands' strides */
    int64_t n0, n1, L, S, E, Ev;
    td_dtype dt;        /* cuDNN takes TD_F16 and TD_BF16 */
    bool causal;        /* key j is masked for j > i (top-left aligned) */
    bool mask, dropout; /* a mask tensor, dropout p > 0: cuDNN declines */
    float scale;
} cu_dnn_attn;

/* ATTENTION on cuDNN: true when cuDNN took the call (*st: the status of the enqueue), false to leave it to our own
** kernels (cuDNN missing, the shape unsupported, a graph cuDNN refuses: the reason is printed once under
** TRIDENT_CUDA_ATTN_DEBUG=1). TRIDENT_CUDA_ATTN=own never takes it. */
bool cu_dnn_attn_fwd(cu_dev *d, const cu_dnn_attn *a, const void *q, const void *k, const void *v, void *out,
                     float *lse, td_status *st);
/* supports() of ATTENTION* with strided operands (td_attn_dense false): whether cuDNN takes this call (its plan
** built now, or cached); where neither it nor our kernels (cu_attn_own_takes) do, the core makes the operands
** contiguous. A strided call cuDNN then fails at run time goes to our kernels where they take it, else returns an
** error. */
bool cu_dnn_attn_takes_strided(cu_dev *d, const td_op *op);
/* Whether our own attention kernels (cu_ops_attention*.cu) take op's operands as laid out: contiguous, or strided
** with the last dims' stride 1 and 16-byte aligned rows (cu_ops_attention.cu). */
bool cu_attn_own_takes(const td_op *op);
/* ATTENTION_BACKWARD on cuDNN, the same contract: dq, dk, dv from dout, q, k, v, out and lse. */
bool cu_dnn_attn_bwd(cu_dev *d, const cu_dnn_attn *a, const void *dout, const void *q, const void *k, const void *v,
                     const void *out, const float *lse, void *dq, void *dk, void *dv, td_status *st);

/* CONV2D (without its bias: the caller adds b), CONV2D_BACKWARD_INPUT or CONV2D_BACKWARD_WEIGHT on cuDNN
** (cu_conv_cudnn.c): true when the call is taken (*st: the status of the enqueue, or the error under
** TRIDENT_CUDA_CONV=cudnn when cuDNN does not take it), false to leave it to the im2col + cuBLAS path. The caller
** passes only calls without an empty operand. */
bool cu_dnn_conv(cu_dev *d, const td_op *op, td_status *st);

#ifdef TRIDENT_HAVE_CUDNN
#include <cudnn_graph.h>

/* ---- loader (cu_cudnn.c) ---- */
typedef struct cu_dnn_api {
    size_t version; /* cudnnGetVersion(): 91400 for 9.14.0 */
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*create_desc)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*destroy_desc)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*set_attr)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                              int64_t, const void *);
    cudnnStatus_t (*get_attr)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                              int64_t, int64_t *, void *);
    cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
    const char *(*error_string)(cudnnStatus_t);
    void (*last_error)(char *, size_t); /* cudnnGetLastErrorString, NULL when absent */
} cu_dnn_api;

/* The loaded library, or NULL with the reason (e.g. "dlopen libcudnn.so.9: ...") in *why; loads once. */
const cu_dnn_api *cu_dnn_load(const char **why);
/* The handle of device d (made on first use, not while d captures); NULL with the reason in why[n]. */
cudnnHandle_t cu_dnn_handle(cu_dev *d, char *why, size_t n);
/* "what: CUDNN_STATUS_X: cuDNN's last error message" into buf. */
void cu_dnn_describe(cudnnStatus_t s, const char *what, char *buf, size_t n);
/* TRIDENT_CUDA_ATTN_DEBUG=1: print "trident cudnn: <msg>" to stderr, each distinct message once. */
void cu_dnn_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool cu_dnn_debug(void);

/* ---- graph builder (cu_cudnn.c) ----
** Every call is a no-op once one has failed; the first failure is kept in err as one line. */
#define CU_DNN_MAX_DESCS 96
#define CU_DNN_MAX_OPS   40
typedef struct cu_dnn_graph {
    const cu_dnn_api *api;
    cudnnStatus_t st; /* CUDNN_STATUS_SUCCESS until a call fails */
    char err[512];
    cudnnBackendDescriptor_t descs[CU_DNN_MAX_DESCS]; /* owned: tensors, node descriptors, operations */
    int ndescs;
    cudnnBackendDescriptor_t ops[CU_DNN_MAX_OPS]; /* the operations, in order */
    int nops;
    int64_t next_virtual_uid; /* virtual tensors get uids from here up */
} cu_dnn_graph;

/* A tensor of 4 dims; uid 0: a virtual one with the next virtual uid. by_value: a host scalar [1,1,1,1]. */
cudnnBackendDescriptor_t cu_dnn_tensor(cu_dnn_graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                       const int64_t strides[4], bool by_value);
/* A virtual tensor like x (dims, strides) of type dt, or with dims and strides given. */
cudnnBackendDescriptor_t cu_dnn_virtual(cu_dnn_graph *g, cudnnDataType_t dt, const int64_t dims[4],
                                        const int64_t strides[4]);
/* y = mode(x[, b[, t]]) (t: BINARY_SELECT's condition), computed in prec; axis for GEN_INDEX (else ignored). */
void cu_dnn_pointwise(cu_dnn_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                      cudnnBackendDescriptor_t y);
/* c = a @ b (batched over the first two dims), accumulated in float. */
void cu_dnn_matmul(cu_dnn_graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);
/* y = reduce(x) over the dims where y has size 1, in float. */
void cu_dnn_reduce(cu_dnn_graph *g, cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
/* y = x seen with y's dims and strides (a transposed view). */
void cu_dnn_reshape(cu_dnn_graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
/* The operation graph, the heuristics' engine configs (mode A) tried in order: the first plan that finalizes, its
** workspace size in *ws. NULL when none does (the reasons in g->err). The returned plan is the caller's. */
cudnnBackendDescriptor_t cu_dnn_plan(cu_dnn_graph *g, cudnnHandle_t h, int64_t *ws);
/* Destroys the builder's descriptors (not a plan it returned). */
void cu_dnn_graph_free(cu_dnn_graph *g);
/* Runs plan on handle h (whose stream is set) with n (uid, pointer) pairs and the workspace: the status, and on
** failure one line (the status and cuDNN's message) in err. */
cudnnStatus_t cu_dnn_execute(const cu_dnn_api *api, cudnnHandle_t h, cudnnBackendDescriptor_t plan, int n,
                             const int64_t *uids, void *const *ptrs, void *ws, char *err, size_t errn);
/* A convolution node (cross-correlation over 2 spatial dims, computed in comp, alpha 1 and beta 0):
** dir 0 forward y = conv(x, w), 1 backward data x = conv^T(y, w) (x the output), 2 backward filter w from x and y
** (w the output). Groups are C / w's dim 1, as the tensors' dims give them. */
void cu_dnn_convolution(cu_dnn_graph *g, int dir, cudnnDataType_t comp, const int64_t pre[2], const int64_t post[2],
                        const int64_t stride[2], const int64_t dilation[2], cudnnBackendDescriptor_t x,
                        cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y);
/* cu_dnn_plan, skipping engine configs whose engine has a numerical note in avoid (bit 1 << CUDNN_NUMERICAL_NOTE_X:
** e.g. DOWN_CONVERT_INPUTS, TF32 for float data), and trying the fallback heuristics after mode A's. */
cudnnBackendDescriptor_t cu_dnn_plan_avoiding(cu_dnn_graph *g, cudnnHandle_t h, unsigned avoid, int64_t *ws);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_CU_CUDNN_H */
