/*
** Device-side helpers for the CUDA op kernels (included by cu_ops_*.cu only).
**
** - dtype dispatch: CU_SWITCH_* run a block with `T` bound to the C++ type of a
**   td_dtype (float, double, __half, __nv_bfloat16, int32_t, int64_t, uint8_t,
**   and cu_bool for bool);
** - conversions: cu_to<C>(T) widens a stored value to a compute type C and
**   cu_from<T>(C) narrows it back with the CPU backend's rules (f16/bf16 round
**   to nearest even; float->integer truncates toward zero, as C casts do);
** - geometry: cu_offset(g, k, i), the element offset of operand k at linear
**   index i of a cu_geom (cu.h);
** - reductions: warp and block sums/maxima by shuffles;
** - Philox4x32-10, identical to td_philox4x32 (src/core/philox.c).
** Half types compute in float, f64 in double, integers in int64.
** defines: the helpers above.
*/
#ifndef TRIDENT_CU_KERNELS_CUH
#define TRIDENT_CU_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cu.h"

/* bool is stored as one byte, 0 or 1 */
struct cu_bool {
    uint8_t v;
};

/* ---- conversions ---- */
template <typename C, typename T> __device__ __forceinline__ C cu_to(T x) { return (C)x; }
template <> __device__ __forceinline__ float cu_to<float, __half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float cu_to<float, __nv_bfloat16>(__nv_bfloat16 x) {
    return __bfloat162float(x);
}
template <> __device__ __forceinline__ double cu_to<double, __half>(__half x) { return (double)__half2float(x); }
template <> __device__ __forceinline__ double cu_to<double, __nv_bfloat16>(__nv_bfloat16 x) {
    return (double)__bfloat162float(x);
}
template <> __device__ __forceinline__ float cu_to<float, cu_bool>(cu_bool x) { return (float)x.v; }
template <> __device__ __forceinline__ double cu_to<double, cu_bool>(cu_bool x) { return (double)x.v; }
template <> __device__ __forceinline__ int64_t cu_to<int64_t, cu_bool>(cu_bool x) { return (int64_t)x.v; }
template <> __device__ __forceinline__ int64_t cu_to<int64_t, __half>(__half x) { return (int64_t)__half2float(x); }
template <> __device__ __forceinline__ int64_t cu_to<int64_t, __nv_bfloat16>(__nv_bfloat16 x) {
    return (int64_t)__bfloat162float(x);
}

template <typename T, typename C> __device__ __forceinline__ T cu_from(C x) { return (T)x; }
template <> __device__ __forceinline__ __half cu_from<__half, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __half cu_from<__half, double>(double x) { return __double2half(x); }
template <> __device__ __forceinline__ __half cu_from<__half, int64_t>(int64_t x) { return __float2half_rn((float)x); }
template <> __device__ __forceinline__ __nv_bfloat16 cu_from<__nv_bfloat16, float>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 cu_from<__nv_bfloat16, double>(double x) {
    return __double2bfloat16(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 cu_from<__nv_bfloat16, int64_t>(int64_t x) {
    return __float2bfloat16_rn((float)x);
}
template <> __device__ __forceinline__ cu_bool cu_from<cu_bool, float>(float x) { return cu_bool{(uint8_t)(x != 0)}; }
template <> __device__ __forceinline__ cu_bool cu_from<cu_bool, double>(double x) { return cu_bool{(uint8_t)(x != 0)}; }
template <> __device__ __forceinline__ cu_bool cu_from<cu_bool, int64_t>(int64_t x) {
    return cu_bool{(uint8_t)(x != 0)};
}

/* The compute type of a storage type: float for f32/f16/bf16, double for f64,
** int64_t for integers and bool. */
template <typename T> struct cu_compute { typedef int64_t type; };
template <> struct cu_compute<float> { typedef float type; };
template <> struct cu_compute<__half> { typedef float type; };
template <> struct cu_compute<__nv_bfloat16> { typedef float type; };
template <> struct cu_compute<double> { typedef double type; };

/* ---- dtype dispatch ----
** CU_SWITCH_ALL(dt, ...) runs the block once with `typedef <type> T;` for dt;
** the _FLOAT and _NUM variants cover those classes only (others fall through to
** the default, which does nothing: the dispatcher has already filtered them). */
#define CU_CASE_(DT, TYPE, ...)                                                                                        \
    case DT: {                                                                                                         \
        typedef TYPE T;                                                                                                \
        __VA_ARGS__;                                                                                                   \
    } break;
#define CU_CASES_FLOAT_(...)                                                                                           \
    CU_CASE_(TD_F32, float, __VA_ARGS__)                                                                               \
    CU_CASE_(TD_F64, double, __VA_ARGS__)                                                                              \
    CU_CASE_(TD_F16, __half, __VA_ARGS__)                                                                              \
    CU_CASE_(TD_BF16, __nv_bfloat16, __VA_ARGS__)
#define CU_CASES_NUM_(...)                                                                                             \
    CU_CASES_FLOAT_(__VA_ARGS__)                                                                                       \
    CU_CASE_(TD_I32, int32_t, __VA_ARGS__)                                                                             \
    CU_CASE_(TD_I64, int64_t, __VA_ARGS__)                                                                             \
    CU_CASE_(TD_U8, uint8_t, __VA_ARGS__)
#define CU_SWITCH_(dt, CASES, ...)                                                                                     \
    switch (dt) {                                                                                                      \
        CASES(__VA_ARGS__)                                                                                             \
    default: break;                                                                                                    \
    }
#define CU_SWITCH_FLOAT(dt, ...) CU_SWITCH_(dt, CU_CASES_FLOAT_, __VA_ARGS__)
#define CU_SWITCH_NUM(dt, ...)   CU_SWITCH_(dt, CU_CASES_NUM_, __VA_ARGS__)
#define CU_CASES_ALL_(...)                                                                                             \
    CU_CASES_NUM_(__VA_ARGS__)                                                                                         \
    CU_CASE_(TD_BOOL, cu_bool, __VA_ARGS__)
#define CU_SWITCH_ALL(dt, ...) CU_SWITCH_(dt, CU_CASES_ALL_, __VA_ARGS__)

/* ---- geometry ---- */
/* Element offset of operand k at linear (row-major) index i of g. */
__device__ __forceinline__ int64_t cu_offset(const cu_geom &g, int k, int64_t i) {
    if (g.contiguous) return i;
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t n = g.shape[d], q = i / n;
        off += (i - q * n) * g.strides[k][d];
        i = q;
    }
    return off;
}

/* ---- reductions ---- */
template <typename C> __device__ __forceinline__ C cu_warp_sum(C v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename C> __device__ __forceinline__ C cu_warp_max(C v) {
    for (int o = 16; o > 0; o >>= 1) {
        C w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v || w != w ? w : v; /* NaN wins */
    }
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread
** gets the result. scratch holds 32 values of C. */
template <typename C> __device__ C cu_block_sum(C v, C *scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = cu_warp_sum(v);
    __syncthreads(); /* scratch may still be read by a previous call */
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : (C)0;
    return cu_warp_sum(v);
}
template <typename C> __device__ C cu_block_max(C v, C *scratch, C lowest) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = cu_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : lowest;
    return cu_warp_max(v);
}

/* ---- Philox4x32-10: td_philox4x32 (src/core/philox.c), word for word ---- */
__device__ __forceinline__ uint4 cu_philox(uint64_t seed, uint64_t counter) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
#pragma unroll
    for (int round = 0; round < 10; round++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}
/* uniform float in [0,1) from a 32-bit word: (w >> 8) * 2^-24 */
__device__ __forceinline__ float cu_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#endif /* TRIDENT_CU_KERNELS_CUH */
