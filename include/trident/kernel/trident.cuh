/*
** trident.cuh: the Trident header for CUDA kernels of custom ops
** (include/trident/kernel.h). A kernel writes `#include <trident.cuh>`;
** td_kernel_compile puts this text in its place (NVRTC needs no include path).
**
** Defines (each overridable by a define of the compile options):
**   TD_BLOCK   threads per block (the custom op's block, default 256)
**   scalar_t   the compute type (float; double when the op runs in f64)
** td_args: the last kernel parameter a custom op passes, after one pointer per
** input and output (C mirror: td_custom_args in kernel.h):
**   a.n  elements of output 0    a.rows, a.cols  input 0 as [rows, cols]
**   a.n_params, a.p[8]           the float parameters of the call
** Helpers: td_offset (strided indexing), f16/bf16 <-> f32, warp reductions,
** Philox4x32-10 and the uniform of Trident's random streams.
*/
#ifndef TRIDENT_CUH
#define TRIDENT_CUH

#ifndef TD_BLOCK
#define TD_BLOCK 256
#endif
#ifndef scalar_t
#define scalar_t float
#endif

struct td_args {
    unsigned n, rows, cols, n_params;
    float p[8];
};

/* The thread's element (TD_GRID_ELEMENTS) and row (TD_GRID_ROWS): a grid of
** more than 65535 blocks comes as 2-D, which these fold back. */
__device__ inline unsigned td_global_id() { return (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline unsigned td_row_id() { return blockIdx.y * gridDim.x + blockIdx.x; }

/* Element offset of linear (row-major) index i in a tensor of ndim dims. */
__device__ inline long long td_offset(long long i, int ndim, const long long *shape, const long long *strides) {
    long long off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        off += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    return off;
}

/* f16 and bf16 as unsigned short bits (round to nearest even, as the CPU). */
__device__ inline float td_f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ inline unsigned short td_f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ inline float td_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ inline unsigned short td_f32_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Sum and max over the 32 lanes of a warp (every lane gets the result). */
__device__ inline float td_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
__device__ inline float td_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

/* Philox4x32-10 of (seed, counter), as src/core/philox.c; out[0..4). */
__device__ inline void td_philox(unsigned long long seed, unsigned long long counter, unsigned out[4]) {
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    unsigned c0 = (unsigned)counter, c1 = (unsigned)(counter >> 32), c2 = 0, c3 = 0;
    for (int r = 0; r < 10; r++) {
        unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}
/* Uniform in [0, 1): element i of stream (seed, offset) is word i % 4 of td_philox(seed, offset + i / 4). */
__device__ inline float td_uniform(unsigned w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#endif
