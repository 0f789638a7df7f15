/*
** Op encoders of the Vulkan backend, one family per vk_ops_<family>.c file:
** vk_op_<NAME> records the op. Every op of TD_OP_LIST has one, declared here
** (not weak): the table in vk_backend.c names each, so a missing or misspelt
** encoder fails the link. vk_supports_<NAME> exists only for the ops of
** VK_SUPPORTS_LIST, and tests what this backend can run (shape limits, layout
** needs); operand dtypes and arity are checked by the core against op_list.h,
** and dtypes the device cannot store by vk_supports in vk_backend.c.
** defines: the encoder prototypes, the capability-check list, events/capture/kernel slots, shared helpers.
*/
#ifndef TRIDENT_VK_OPS_H
#define TRIDENT_VK_OPS_H

#include "vk.h"

#define VK_OP_DECLARE_(N, ...) td_status vk_op_##N(vk_dev *d, const td_op *op);
TD_OP_LIST(VK_OP_DECLARE_)
#undef VK_OP_DECLARE_

/* The ops with a capability check vk_supports_<NAME>; any other op runs
** whenever the device stores its dtypes. */
/* clang-format off */
#define VK_SUPPORTS_LIST(X)                                                                                            \
    X(CAT) X(MATMUL) X(LINEAR) X(LINEAR_GELU) X(LAYER_NORM) X(ADD_LAYER_NORM) X(CROSS_ENTROPY) X(CROSS_ENTROPY_BACKWARD)         \
    X(CONV2D) X(CONV2D_BACKWARD_INPUT) X(CONV2D_BACKWARD_WEIGHT)                                                       \
    X(MAX_POOL2D) X(MAX_POOL2D_BACKWARD) X(AVG_POOL2D) X(AVG_POOL2D_BACKWARD)                                          \
    X(EMBEDDING) X(EMBEDDING_BACKWARD) X(INDEX_SELECT) X(GATHER) X(SCATTER_ADD) X(ONE_HOT)                             \
    X(ATTENTION) X(ATTENTION_BACKWARD) X(ADAM_STEP) X(SGD_STEP) X(RMSPROP_STEP) X(AMP_UNSCALE)                         \
    X(LINEAR_WGRAD) X(LINEAR_DGELU)
/* clang-format on */

#define VK_SUPPORTS_DECLARE_(N) bool vk_supports_##N(vk_dev *d, const td_op *op);
VK_SUPPORTS_LIST(VK_SUPPORTS_DECLARE_)
#undef VK_SUPPORTS_DECLARE_

/* vk_event.c */
td_status vk_event_create(int dev, td_event **out);
td_status vk_event_record(td_event *ev);
td_status vk_event_elapsed_ms(td_event *start, td_event *end, double *ms);
void vk_event_free(td_event *ev);
td_status vk_event_wait(int dev, td_event *ev);

/* COPY of any view into any view of the same shape, converting dtypes. */
td_status vk_copy_view(vk_dev *d, const td_operand *in, const td_operand *out);

/* vk_capture.c */
td_status vk_capture_begin(int dev);
td_status vk_capture_end(int dev, td_graph **out);
td_status vk_graph_replay(td_graph *g);
void vk_graph_free(td_graph *g);

/* vk_glsl.c: user kernels */
td_status vk_kernel_compile(int dev, int lang, const char *source, const char *entry, const td_kernel_options *opts,
                            td_kernel **out, char *log, size_t log_size);
td_status vk_kernel_check_block(const td_kernel *k, const uint32_t block[3]);
td_status vk_kernel_launch(td_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                           int n_views, const td_operand *views, const void *push, size_t push_size);
void vk_kernel_free(td_kernel *k);

/* Shader variant of a dtype family: base + dtype code (variants are listed in
** td_dtype order in shaders.cmake). */
/* The workgroup size of a one-workgroup-per-row kernel (softmax, layer_norm)
** for rows of n: the power of two >= n within [64, 256], so short rows leave
** few invocations idle (rows of 32 took 8x the work of the row at 256). */
static inline uint32_t vk_row_wg(int64_t n) {
    uint32_t wg = 64;
    while (wg < 256 && wg < n) wg *= 2;
    return wg;
}
/* out[j] (dt, at out_off) = sum over r < rows of in's f32 [rows, n] (from 0), r in order: reduce_tile.comp
** (vk_ops_reduce.c); split-K products add their f32 slices with it. */
td_status vk_sum_f32_rows(vk_dev *d, vk_bind in, vk_bind out, uint32_t out_off, int64_t rows, int64_t n, td_dtype dt);
#define VK_DT_SHADER(first, dt) ((int)(first) + (int)(dt))
/* Whether bf16 `what` runs natively on d (bf16 cooperative matrices, the retyped f16 kernels) in *native: the GEMM's
** rule with the switch in environment variable var (TRIDENT_VK_BF16; vk_ops_matmul.c), which bf16 attention shares
** (vk_ops_attention.c). */
td_status vk_bf16_native(vk_dev *d, const char *var, const char *what, bool *native);

/* Float dtypes of the op class TD_DTS_FLOAT that the float shaders take. */
static inline bool vk_is_float(td_dtype dt) { return td_dtype_is_float(dt); }

#endif /* TRIDENT_VK_OPS_H */
