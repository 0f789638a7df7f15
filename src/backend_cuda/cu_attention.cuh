/*
** Shared by the attention kernel files: the arguments of one ATTENTION or
** ATTENTION_BACKWARD launch (cu_ops_attention.cu builds them from the td_op)
** and the optional tensor-core forward (cu_ops_attention_mma.cu).
** defines: cu_attn_args, cu_attn_mma_fwd.
*/
#ifndef TRIDENT_CU_ATTENTION_CUH
#define TRIDENT_CU_ATTENTION_CUH

#include "cu.h"

typedef struct cu_attn_args {
    int64_t N, n1, L, S, E, Ev; /* N = N0 * N1 batch*heads; n1 splits n for the mask's strides */
    double scale, zs;           /* scores q.k * scale; zs = 1 / (1 - p) */
    float scale_f, zs_f;        /* the same, rounded to float */
    uint32_t threshold;         /* dropout: keep when (w >> 8) >= threshold */
    bool dropout, causal, mask_bool;
    uint64_t seed, offset;
    const void *mask; /* element (0, 0, 0, 0) of the mask, NULL: none */
    int64_t ms[4];    /* its strides over [N0, N1, L, S] */
} cu_attn_args;

/* The tensor-core forward (f16/bf16): launches and returns true when it takes the op, false to leave it to the
** generic kernel. Weak: absent when cu_ops_attention_mma.cu is not linked. */
extern "C" bool cu_attn_mma_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a) __attribute__((weak));

#endif /* TRIDENT_CU_ATTENTION_CUH */
