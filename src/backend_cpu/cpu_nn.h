/*
** Helpers shared by the CPU nn kernels (matmul, softmax, layer_norm,
** cross_entropy, conv2d, pooling).
** defines: cpu_nn_to_f32, cpu_nn_from_f32, cpu_nn_workspace, cpu_nn_oom.
**
** f32 and f64 run natively (f64 in double: it is the reference for every
** backend); f16 and bf16 are widened to f32 buffers, computed by the f32 path,
** and narrowed back.
*/
#ifndef TRIDENT_BACKEND_CPU_NN_H
#define TRIDENT_BACKEND_CPU_NN_H

#include "cpu.h"

/* A malloc'd f32 copy of view v (any strides, row-major order of its shape),
** or NULL with TD_ERR_OOM set. An absent view (buf == NULL) gives NULL, no error. */
float *cpu_nn_to_f32(const td_operand *v);
/* Store n f32 values into the contiguous view out, converting to its dtype. */
void cpu_nn_from_f32(const td_operand *out, const float *src);
/* A thread-local, grow-only scratch buffer of at least nbytes (64-byte
** aligned), valid until the next call on this thread; NULL with TD_ERR_OOM set.
** Reusing it spares large kernels (conv2d's im2col) fresh pages on every call. */
void *cpu_nn_workspace(size_t nbytes);
/* TD_ERR_OOM with a message naming the op and the byte count. */
td_status cpu_nn_oom(const char *op, size_t nbytes);

#endif /* TRIDENT_BACKEND_CPU_NN_H */
