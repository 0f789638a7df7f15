/*
** Helpers shared by the convolution, pooling and indexing kernel files
** (cu_ops_conv.cu, cu_ops_pool.cu, cu_ops_index.cu).
** defines: NN_LOOP, nn_round.
*/
#ifndef TRIDENT_CU_NN_CUH
#define TRIDENT_CU_NN_CUH

#include "cu_kernels.cuh"

/* Grid-stride loop: i takes every value in [0, n) once over the whole grid (int64 indices). */
#define NN_LOOP(i, n)                                                                                                  \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* acc (n) fp32 sums -> out (n): out[i] = acc[i] rounded to T (f16/bf16 results summed in an fp32 scratch). */
template <typename T> __global__ void nn_round(const float *acc, T *out, int64_t n) {
    NN_LOOP(i, n) out[i] = cu_from<T>(acc[i]);
}

#endif /* TRIDENT_CU_NN_CUH */
