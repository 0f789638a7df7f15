/*
** Device helpers of the reduction, row-op and optimizer kernels
** (cu_ops_reduce.cu, cu_ops_softmax.cu, cu_ops_xent.cu, cu_ops_optim.cu).
**
** - cu_lowest<C>() / cu_highest<C>(): the identities of max and min (-inf and
**   +inf for floats, the int64 limits for integers);
** - cu_vec<T>: 16 bytes of T, for one vector load or store;
** - row groups: a row of n elements handled by TPR threads, either one warp
**   (TPR == 32, several rows per block) or the whole block (TPR ==
**   blockDim.x). Thread t takes elements t, t + TPR, t + 2 TPR, ... (loads
**   coalesce); with VPT > 0 the row is held in registers, VPT per thread
**   (n <= TPR * VPT), so the row is read from memory once. cu_row_each visits
**   a thread's elements, cu_row_sum / cu_row_max combine over the group,
**   CU_ROWS_LAUNCH picks TPR and VPT from the row length.
** defines: cu_lowest, cu_highest, cu_vec, cu_row_each, cu_row_sum, cu_row_max,
**          cu_row_first, cu_row_stride, cu_row_lane, cu_max_nan, CU_ROWS_LAUNCH,
**          CU_ROWS_BOUNDS.
*/
#ifndef TRIDENT_CU_REDUCE_CUH
#define TRIDENT_CU_REDUCE_CUH

#include <math.h>
#include <stdint.h>

#include "cu_kernels.cuh"

template <typename C> __device__ __forceinline__ C cu_lowest() { return (C)-INFINITY; }
template <typename C> __device__ __forceinline__ C cu_highest() { return (C)INFINITY; }
template <> __device__ __forceinline__ int64_t cu_lowest<int64_t>() { return INT64_MIN; }
template <> __device__ __forceinline__ int64_t cu_highest<int64_t>() { return INT64_MAX; }

/* max(a, b) where a NaN in either wins */
template <typename C> __device__ __forceinline__ C cu_max_nan(C a, C b) { return b > a || b != b ? b : a; }

/* 16 bytes of T: one 128-bit load or store at a 16-byte aligned address */
template <typename T> struct __align__(16) cu_vec {
    static const int N = 16 / sizeof(T);
    T v[N];
};

/* ---- row groups ---- */

/* This thread's index within its row group. */
template <int TPR> __device__ __forceinline__ int cu_row_lane() {
    return TPR == 32 ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
}
/* The first row of this thread's group, and the step to its next row (grid-stride). */
template <int TPR> __device__ __forceinline__ int64_t cu_row_first() {
    return TPR == 32 ? (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32 : (int64_t)blockIdx.x;
}
template <int TPR> __device__ __forceinline__ int64_t cu_row_stride() {
    return TPR == 32 ? (int64_t)gridDim.x * (blockDim.x / 32) : (int64_t)gridDim.x;
}

/* f(k, j) for each element j < n of thread t, k its register slot (0 when VPT == 0). */
template <int TPR, int VPT, typename F> __device__ __forceinline__ void cu_row_each(int64_t n, int t, F f) {
    if (VPT > 0) {
#pragma unroll
        for (int k = 0; k < (VPT > 0 ? VPT : 1); k++) {
            int64_t j = t + (int64_t)k * TPR;
            if (j < n) f(k, j);
        }
    } else {
        for (int64_t j = t; j < n; j += TPR) f(0, j);
    }
}

/* Sum / NaN-propagating max over the row group; every thread of the group
** gets the result. scratch: 32 values of C in shared memory (block groups). */
template <int TPR, typename C> __device__ __forceinline__ C cu_row_sum(C v, C *scratch) {
    if (TPR == 32) return cu_warp_sum(v);
    return cu_block_sum(v, scratch);
}
template <int TPR, typename C> __device__ __forceinline__ C cu_row_max(C v, C *scratch) {
    if (TPR == 32) return cu_warp_max(v);
    return cu_block_max(v, scratch, cu_lowest<C>());
}

/* Launch KERNEL<T, TPR, VPT><<<...>>>(args) over `rows` rows of n elements
** (T bound by a CU_SWITCH_*): a warp per row holding the row in registers up
** to 1024 elements, a block of 512 holding it up to 16384, else a block of 512
** that reads the row from memory at each pass (VPT 0). KERNEL's block size is
** 256 for TPR 32, else TPR. */
#define CU_ROWS_LAUNCH(d, rows, n, KERNEL, ...)                                                                        \
    do {                                                                                                               \
        unsigned gw_ = cu_grid((d), (rows), 8), gb_ = cu_grid((d), (rows), 1);                                         \
        cudaStream_t s_ = (d)->stream;                                                                                 \
        int64_t n_ = (n);                                                                                              \
        if (n_ <= 32)                                                                                                  \
            KERNEL<T, 32, 1><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                        \
        else if (n_ <= 64)                                                                                             \
            KERNEL<T, 32, 2><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                        \
        else if (n_ <= 128)                                                                                            \
            KERNEL<T, 32, 4><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                        \
        else if (n_ <= 256)                                                                                            \
            KERNEL<T, 32, 8><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                        \
        else if (n_ <= 512)                                                                                            \
            KERNEL<T, 32, 16><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                       \
        else if (n_ <= 1024)                                                                                           \
            KERNEL<T, 32, 32><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                       \
        else if (n_ <= 2048)                                                                                           \
            KERNEL<T, 512, 4><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                       \
        else if (n_ <= 4096)                                                                                           \
            KERNEL<T, 512, 8><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                       \
        else if (n_ <= 8192)                                                                                           \
            KERNEL<T, 512, 16><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                      \
        else if (n_ <= 16384)                                                                                          \
            KERNEL<T, 512, 32><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                      \
        else                                                                                                           \
            KERNEL<T, 512, 0><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                       \
    } while (0)
/* __launch_bounds__ of a CU_ROWS_LAUNCH kernel */
#define CU_ROWS_BOUNDS(TPR) __launch_bounds__((TPR) == 32 ? 256 : (TPR))

#endif /* TRIDENT_CU_REDUCE_CUH */
