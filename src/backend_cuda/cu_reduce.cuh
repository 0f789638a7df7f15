/*
** Device helpers of the reduction, row-op and optimizer kernels
** (cu_ops_reduce.cu, cu_ops_softmax.cu, cu_ops_xent.cu, cu_ops_optim.cu).
**
** - cu_lowest<C>() / cu_highest<C>(): the identities of max and min (-inf and
**   +inf for floats, the int64 limits for integers);
** - cu_vec<T>: 16 bytes of T, for one vector load or store;
** - row groups: a row of n elements handled by TPR threads, either one warp
**   (TPR == 32, several rows per block) or the whole block (TPR ==
**   blockDim.x). Adjacent threads take adjacent elements (or adjacent 16-byte
**   vectors), so loads coalesce; with VPT > 0 the row is held in registers,
**   VPT per thread (n <= TPR * VPT), so it is read from memory once
**   (cu_row_load, cu_row_store). cu_row_each visits a thread's elements,
**   cu_row_sum / cu_row_max combine over the group, cu_row_max_sumexp is the
**   online softmax statistic of a row in memory, CU_ROWS_LAUNCH picks TPR,
**   VPT and V from the row length and alignment.
** defines: cu_lowest, cu_highest, cu_vec, cu_max_nan, cu_row_lane,
**          cu_row_first, cu_row_stride, cu_row_each, cu_row_load, cu_row_store,
**          cu_row_sum, cu_row_max, cu_row_max_sumexp, CU_ROW_SETUP, CU_ROWS_LAUNCH,
**          CU_ROWS_BOUNDS, cu_rows_aligned, cu_rows_of.
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

/* The start of a row-group kernel over T: C (T's compute type), the scratch of
** cu_row_sum / cu_row_max and t, this thread's lane in its group. */
#define CU_ROW_SETUP(T, TPR)                                                                                           \
    typedef typename cu_compute<T>::type C;                                                                            \
    __shared__ C scratch[32];                                                                                          \
    int t = cu_row_lane<TPR>()

/* f(k, j) for each element j < n of thread t, k its register slot (0 when
** VPT == 0). Slot k holds j = ((k / V) TPR + t) V + k % V: with V = 1 the
** elements t, t + TPR, ...; with V = cu_vec<T>::N runs of V adjacent
** elements, one 16-byte vector each (rows 16-byte aligned, n % V == 0). */
template <int TPR, int VPT, int V, typename F> __device__ __forceinline__ void cu_row_each(int64_t n, int t, F f) {
    if (VPT > 0) {
#pragma unroll
        for (int k = 0; k < (VPT > 0 ? VPT : 1); k++) {
            int64_t j = ((int64_t)(k / V) * TPR + t) * V + k % V;
            if (j < n) f(k, j);
        }
    } else {
        for (int64_t j = t; j < n; j += TPR) f(0, j);
    }
}

/* f(q, i) for thread t's 16-byte vectors i of the row (V elements each, in
** slots q V .. q V + V - 1): cu_row_load and cu_row_store with V > 1. */
template <int TPR, int VPT, int V, typename F> __device__ __forceinline__ void cu_row_vecs(int64_t n, int t, F f) {
#pragma unroll
    for (int q = 0; q < VPT / V; q++) {
        int64_t i = (int64_t)q * TPR + t;
        if (i * V >= n) continue;
        f(q, i);
    }
}

/* v[k] = x[j] for thread t's slots (a no-op when VPT == 0) */
template <int TPR, int VPT, int V, typename T, typename C>
__device__ __forceinline__ void cu_row_load(const T *x, int64_t n, int t, C *v) {
    if constexpr (VPT == 0) {
        return; /* cu_row_each would visit the whole row, all into slot 0 */
    } else if constexpr (V == 1) {
        cu_row_each<TPR, VPT, 1>(n, t, [&](int k, int64_t j) { v[k] = cu_to<C>(x[j]); });
    } else {
        cu_row_vecs<TPR, VPT, V>(n, t, [&](int q, int64_t i) {
            cu_vec<T> p = ((const cu_vec<T> *)x)[i];
#pragma unroll
            for (int e = 0; e < V; e++) v[q * V + e] = cu_to<C>(p.v[e]);
        });
    }
}
/* x[j] = v[k] for thread t's slots (a no-op when VPT == 0) */
template <int TPR, int VPT, int V, typename T, typename C>
__device__ __forceinline__ void cu_row_store(T *x, int64_t n, int t, const C *v) {
    if constexpr (VPT == 0) {
        return; /* the kernel stored each element itself; slot 0 must not overwrite them */
    } else if constexpr (V == 1) {
        cu_row_each<TPR, VPT, 1>(n, t, [&](int k, int64_t j) { x[j] = cu_from<T>(v[k]); });
    } else {
        cu_row_vecs<TPR, VPT, V>(n, t, [&](int q, int64_t i) {
            cu_vec<T> p;
#pragma unroll
            for (int e = 0; e < V; e++) p.v[e] = cu_from<T>(v[q * V + e]);
            ((cu_vec<T> *)x)[i] = p;
        });
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

/* m = max_j x[j] and s = sum_j exp(x[j] - m) over a row in memory, in one
** read: each thread keeps a running (m_t, s_t), rescaling s_t by
** exp(m_t - x) when x exceeds m_t (online softmax); the group then takes
** m = max m_t and s = sum s_t exp(m_t - m). A NaN makes m NaN; an all -inf
** row gives m = -inf, s = 0. */
template <int TPR, typename T, typename C>
__device__ __forceinline__ void cu_row_max_sumexp(const T *x, int64_t n, int t, C *scratch, C *m_out, C *s_out) {
    C m = cu_lowest<C>(), s = 0;
    for (int64_t j = t; j < n; j += TPR) {
        C e = cu_to<C>(x[j]);
        if (e > m) {
            s = s * exp(m - e) + (C)1; /* exp(-inf) = 0 for the first element */
            m = e;
        } else if (e != e) {
            m = e;
        } else if (s != 0) {
            s += exp(e - m);
        }
    }
    C mg = cu_row_max<TPR>(m, scratch);
    *s_out = cu_row_sum<TPR>(s != 0 ? s * exp(m - mg) : (C)0, scratch);
    *m_out = mg;
}

/* Launch KERNEL<T, TPR, VPT, V><<<...>>>(args) over `rows` rows of n elements
** (T bound by a CU_SWITCH_*): a warp per row holding the row in registers up
** to 1024 elements, a block of 512 holding it up to 16384 (8192 for 8-byte
** types), else a block of 512
** that reads the row from memory at each pass (VPT 0). vec: every row the
** kernel loads or stores is 16-byte aligned and n a multiple of cu_vec<T>::N,
** so V = cu_vec<T>::N where VPT allows (else 1). KERNEL's block size is 256
** for TPR 32, else TPR. */
#define CU_ROWS_CASE_(vec, TPR, VPT, grid, KERNEL, ...)                                                                \
    do {                                                                                                               \
        const int n_vec_ = VPT % cu_vec<T>::N == 0 ? cu_vec<T>::N : 1;                                                 \
        if ((vec) && n_vec_ > 1)                                                                                       \
            KERNEL<T, TPR, VPT, n_vec_><<<grid, TPR == 32 ? 256 : TPR, 0, s_>>>(__VA_ARGS__);                          \
        else                                                                                                           \
            KERNEL<T, TPR, VPT, 1><<<grid, TPR == 32 ? 256 : TPR, 0, s_>>>(__VA_ARGS__);                               \
    } while (0)
/* The else-ifs of TPR threads a row holding it in VPT = 4, 8, 16 and (when
** big) 32 registers a thread: the rows up to TPR * VPT elements. */
#define CU_ROWS_TIER_(vec, TPR, big, grid, KERNEL, ...)                                                                \
    else if (n_ <= (TPR)*4) CU_ROWS_CASE_(vec, TPR, 4, grid, KERNEL, __VA_ARGS__);                                     \
    else if (n_ <= (TPR)*8) CU_ROWS_CASE_(vec, TPR, 8, grid, KERNEL, __VA_ARGS__);                                     \
    else if (n_ <= (TPR)*16) CU_ROWS_CASE_(vec, TPR, 16, grid, KERNEL, __VA_ARGS__);                                   \
    else if (n_ <= (TPR)*32 && (big)) CU_ROWS_CASE_(vec, TPR, 32, grid, KERNEL, __VA_ARGS__);
#define CU_ROWS_LAUNCH(d, rows, n, vec, KERNEL, ...)                                                                   \
    do {                                                                                                               \
        unsigned gw_ = cu_grid((d), (rows), 8), gb_ = cu_grid((d), (rows), 1);                                         \
        cudaStream_t s_ = (d)->stream;                                                                                 \
        int64_t n_ = (n);                                                                                              \
        if (n_ <= 32)                                                                                                  \
            KERNEL<T, 32, 1, 1><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                                     \
        else if (n_ <= 64)                                                                                             \
            CU_ROWS_CASE_(vec, 32, 2, gw_, KERNEL, __VA_ARGS__);                                                       \
        CU_ROWS_TIER_(vec, 32, true, gw_, KERNEL, __VA_ARGS__)                                                         \
        /* 32 doubles a thread would spill at 512 threads */                                                           \
        CU_ROWS_TIER_(vec, 512, sizeof(T) < 8, gb_, KERNEL, __VA_ARGS__)                                               \
        else KERNEL<T, 512, 0, 1><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                                   \
    } while (0)
/* __launch_bounds__ of a CU_ROWS_LAUNCH kernel */
#define CU_ROWS_BOUNDS(TPR) __launch_bounds__((TPR) == 32 ? 256 : (TPR))
/* Whether rows of n elements of dtype dt starting at every pointer given (NULL
** ignored) are all 16-byte aligned: CU_ROWS_LAUNCH's vec. */
static inline bool cu_rows_aligned(int64_t n, size_t esize, const void *a, const void *b) {
    return (n * (int64_t)esize) % 16 == 0 && (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0;
}

/* The rows of x's last dim: *n its length (1 for a scalar), *R = numel / n.
** False when x has no elements (nothing to launch). */
static inline bool cu_rows_of(const td_operand *x, int64_t *R, int64_t *n) {
    int64_t numel = td_operand_numel(x);
    *n = x->ndim ? x->shape[x->ndim - 1] : 1;
    *R = numel ? numel / *n : 0;
    return numel != 0;
}

#endif /* TRIDENT_CU_REDUCE_CUH */
