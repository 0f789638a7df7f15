/*
** Shared by the attention kernel files: the arguments of one ATTENTION or
** ATTENTION_BACKWARD launch (cu_ops_attention.cu builds them from the td_op)
** and the tensor-core forwards and backwards (cu_ops_attention_fa*.cu, cu_ops_attention_mma*.cu).
** Every kernel reads q, k, v, out, dout and writes out, dq, dk, dv through their strides (cu_attn_lay: batch n0,
** head n1, row; the element stride is 1), so heads split from a [N,T,3,H,E] projection are read in place.
** defines: cu_attn_lay, cu_attn_args, cu_attn_at, cu_attn_lay_of, cu_attn_aligned, cu_attn_fa_fwd, cu_attn_fa_bwd,
** cu_attn_mma_fwd, cu_attn_mma_bwd, the device helpers cu_attn_mask and cu_attn_drop.
*/
#ifndef TRIDENT_CU_ATTENTION_CUH
#define TRIDENT_CU_ATTENTION_CUH

#include "cu_kernels.cuh"
#include <type_traits>

/* An operand [N0,N1,rows,D]'s strides in elements over N0, N1 and rows; its last dim's stride is 1 */
typedef struct cu_attn_lay {
    int64_t n0, n1, r;
} cu_attn_lay;

typedef struct cu_attn_args {
    int64_t N, n1, L, S, E, Ev; /* N = N0 * N1 batch*heads; n1 splits n for the mask's strides */
    double scale, zs;           /* scores q.k * scale; zs = 1 / (1 - p) */
    float scale_f, zs_f;        /* the same, rounded to float */
    uint32_t threshold;         /* dropout: keep when (w >> 8) >= threshold */
    bool dropout, causal, mask_bool;
    uint64_t seed, offset;
    const void *mask;          /* element (0, 0, 0, 0) of the mask, NULL: none */
    int64_t ms[4];             /* its strides over [N0, N1, L, S] */
    cu_attn_lay q, k, v, o, g; /* q, k, v, out, dout (g: the backward's only) */
    cu_attn_lay dq, dk, dv;    /* the backward's outputs */
} cu_attn_args;

/* The offset of row 0 of head n = n0 N1 + n1 in an operand laid out s: row i starts i s.r further */
__host__ __device__ __forceinline__ int64_t cu_attn_at(const cu_attn_args &a, const cu_attn_lay &s, int64_t n) {
    return (n / a.n1) * s.n0 + (n % a.n1) * s.n1;
}

/* x's layout (a 4-d operand) */
static inline cu_attn_lay cu_attn_lay_of(const td_operand *x) { return {x->strides[0], x->strides[1], x->strides[2]}; }

/* Whether every row of x starts 16-byte aligned (cp.async and vector loads and stores): its first element, and its
** strides over the dims of more than one element in multiples of 16 bytes */
static inline bool cu_attn_aligned(const td_operand *x) {
    int64_t es = (int64_t)td_dtype_size(x->dtype);
    if (((uintptr_t)cu_data(x) & 15) != 0) return false;
    for (int d = 0; d < 3; d++)
        if (x->shape[d] > 1 && (x->strides[d] * es) % 16 != 0) return false;
    return true;
}

/* The mma.sync forward (f16/bf16, cu_ops_attention_fa.cu): launches and returns true when it takes the op, false
** to leave it to the next path. */
extern "C" bool cu_attn_fa_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a);
/* The mma.sync backward (f16/bf16, cu_ops_attention_fa_bwd.cu): the same contract for ATTENTION_BACKWARD, *st
** set to the launches' status when it takes the op. */
extern "C" bool cu_attn_fa_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a, td_status *st);
/* The 3xTF32 WMMA forward and backward (f32, cu_ops_attention_mma.cu, cu_ops_attention_mma_bwd.cu): the forward's
** contract. */
extern "C" bool cu_attn_mma_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a);
extern "C" bool cu_attn_mma_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a);

template <typename C> __device__ __forceinline__ C cu_attn_neg_inf() { return (C)-INFINITY; }

/* The additive mask term of (n, i, j): 0, -inf (causal and j > i, or a false bool) or the float mask's value. */
template <typename T, typename C>
__device__ __forceinline__ C cu_attn_mask(const cu_attn_args &a, int64_t n, int64_t i, int64_t j) {
    if (a.causal && j > i) return cu_attn_neg_inf<C>();
    if (!a.mask) return (C)0;
    int64_t off = (n / a.n1) * a.ms[0] + (n % a.n1) * a.ms[1] + i * a.ms[2] + j * a.ms[3];
    if (a.mask_bool) return ((const uint8_t *)a.mask)[off] ? (C)0 : cu_attn_neg_inf<C>();
    return cu_to<C>(((const T *)a.mask)[off]);
}

/* z_ij: 1 without dropout, else keep_ij / (1 - p) (td_dropout's rule on element (n L + i) S + j) */
template <typename C>
__device__ __forceinline__ C cu_attn_drop(const cu_attn_args &a, int64_t n, int64_t i, int64_t j) {
    if (!a.dropout) return (C)1;
    uint64_t idx = ((uint64_t)n * (uint64_t)a.L + (uint64_t)i) * (uint64_t)a.S + (uint64_t)j;
    uint4 w = cu_philox(a.seed, a.offset + idx / 4);
    uint32_t word = (idx & 3) == 0 ? w.x : (idx & 3) == 1 ? w.y : (idx & 3) == 2 ? w.z : w.w;
    return (word >> 8) >= a.threshold ? (sizeof(C) == 8 ? (C)a.zs : (C)a.zs_f) : (C)0;
}

/* The head dims the tensor-core kernels are instantiated for: calls f(std::integral_constant<int, D>()) for
** E = D in {32, 64, 128} and returns true; false for any other E. */
template <typename F> static bool cu_attn_head_dim(int64_t E, F &&f) {
    switch (E) {
    case 32: f(std::integral_constant<int, 32>()); return true;
    case 64: f(std::integral_constant<int, 64>()); return true;
    case 128: f(std::integral_constant<int, 128>()); return true;
    default: return false;
    }
}

#endif /* TRIDENT_CU_ATTENTION_CUH */
