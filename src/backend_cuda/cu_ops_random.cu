/*
** Random ops on CUDA: RAND, RANDN, DROPOUT, drawn from Philox4x32-10
** (cu_philox, cu_kernels.cuh) on the stream defined at the top of
** src/backend_cpu/cpu_random.c, which these kernels follow exactly:
**   element i of stream (seed, offset) uses word i % 4 of
**   cu_philox(seed, offset + i/4), u_i = (w_i >> 8) * 2^-24 in [0, 1).
**   RAND    out[i] = u_i; f16/bf16 round to nearest even and a result of 1.0
**           becomes the largest value below 1 (f16 0x3BFF, bf16 0x3F7F).
**   RANDN   Box-Muller on pairs (2j, 2j+1): u1 = 1 - u_2j, u2 = u_2j+1,
**           r = sqrt(-2 ln u1), out[2j] = r cos(2 pi u2), out[2j+1] =
**           r sin(2 pi u2) (dropped when numel is odd); float math for
**           f32/f16/bf16, double for f64 (matches the CPU to a few ulp).
**   DROPOUT out[i] = (w_i >> 8) >= ceil(p 2^24) ? x[i] * scale : 0 with
**           scale = 1/(1-p) in double, rounded to float except for f64.
** Shapes: out (and x) contiguous [n]. One thread per Philox counter (4
** elements), written as one vector when the pointers are aligned; RAND and
** DROPOUT are bit-exact with the CPU.
*/
#include <math.h>

#include "cu_ew.cuh"

#define CU_TWO_PI_F 6.28318530717958647692f
#define CU_TWO_PI   6.28318530717958647692

namespace { /* file-local types and kernels */

/* the four words of counter c as an array */
struct cu_words {
    uint32_t w[4];
};
__device__ __forceinline__ cu_words cu_draw(uint64_t seed, uint64_t offset, int64_t c) {
    uint4 x = cu_philox(seed, offset + (uint64_t)c);
    return cu_words{{x.x, x.y, x.z, x.w}};
}

/* ---- RAND ---- */

/* u in [0,1) stored as T, never reaching 1.0 */
template <typename T> __device__ __forceinline__ T cu_unit(float u) { return cu_from<T>(u); }
template <> __device__ __forceinline__ __half cu_unit<__half>(float u) {
    __half h = __float2half_rn(u);
    return __half_as_ushort(h) >= 0x3C00 ? __ushort_as_half(0x3BFF) : h;
}
template <> __device__ __forceinline__ __nv_bfloat16 cu_unit<__nv_bfloat16>(float u) {
    __nv_bfloat16 h = __float2bfloat16_rn(u);
    return __bfloat16_as_ushort(h) >= 0x3F80 ? __ushort_as_bfloat16(0x3F7F) : h;
}

/* out [n]: out[4c + k] = unit(u(word k of counter c)); VEC: out aligned to 4 elements */
template <typename T, bool VEC>
__global__ void __launch_bounds__(CU_BLOCK) cu_rand(int64_t n, uint64_t seed, uint64_t offset, T *out) {
    int64_t nc = (n + 3) / 4;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < nc; c += (int64_t)gridDim.x * blockDim.x) {
        cu_words w = cu_draw(seed, offset, c);
        if (VEC && 4 * c + 4 <= n) {
            cu_ew_vec<T, 4> o;
#pragma unroll
            for (int k = 0; k < 4; k++) o.v[k] = cu_unit<T>(cu_uniform(w.w[k]));
            reinterpret_cast<cu_ew_vec<T, 4> *>(out)[c] = o;
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (4 * c + k < n) out[4 * c + k] = cu_unit<T>(cu_uniform(w.w[k]));
        }
    }
}

/* ---- RANDN ---- */

/* Box-Muller of words (wa, wb) -> two normal samples */
template <typename T> __device__ __forceinline__ void cu_box_muller(uint32_t wa, uint32_t wb, T &z0, T &z1) {
    float u1 = 1.0f - cu_uniform(wa), u2 = cu_uniform(wb);
    if constexpr (std::is_same<T, double>::value) {
        double r = sqrt(-2.0 * log((double)u1));
        z0 = r * cos(CU_TWO_PI * (double)u2);
        z1 = r * sin(CU_TWO_PI * (double)u2);
    } else {
        float r = sqrtf(-2.0f * logf(u1));
        z0 = cu_from<T>(r * cosf(CU_TWO_PI_F * u2));
        z1 = cu_from<T>(r * sinf(CU_TWO_PI_F * u2));
    }
}

/* out [n]: counter c gives elements 4c..4c+3 from pairs (w0, w1), (w2, w3) */
template <typename T, bool VEC>
__global__ void __launch_bounds__(CU_BLOCK) cu_randn(int64_t n, uint64_t seed, uint64_t offset, T *out) {
    int64_t nc = (n + 3) / 4;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < nc; c += (int64_t)gridDim.x * blockDim.x) {
        cu_words w = cu_draw(seed, offset, c);
        cu_ew_vec<T, 4> o;
        cu_box_muller(w.w[0], w.w[1], o.v[0], o.v[1]);
        cu_box_muller(w.w[2], w.w[3], o.v[2], o.v[3]);
        if (VEC && 4 * c + 4 <= n)
            reinterpret_cast<cu_ew_vec<T, 4> *>(out)[c] = o;
        else
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (4 * c + k < n) out[4 * c + k] = o.v[k];
    }
}

/* ---- DROPOUT ---- */

/* x * scale in T's precision: float scale_f for f32/f16/bf16, double scale for f64 */
template <typename T> __device__ __forceinline__ T cu_scaled(T x, float scale_f, double scale) {
    if constexpr (std::is_same<T, double>::value)
        return x * scale;
    else
        return cu_from<T>(cu_to<float>(x) * scale_f);
}

/* x, out [n]: out[i] = keep_i ? x[i] * scale : 0, keep_i = (w_i >> 8) >= threshold */
template <typename T, bool VEC>
__global__ void __launch_bounds__(CU_BLOCK) cu_dropout(int64_t n, uint64_t seed, uint64_t offset, uint32_t threshold,
                                                       float scale_f, double scale, const T *x, T *out) {
    int64_t nc = (n + 3) / 4;
    const T zero = cu_from<T>(0.0f);
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < nc; c += (int64_t)gridDim.x * blockDim.x) {
        cu_words w = cu_draw(seed, offset, c);
        if (VEC && 4 * c + 4 <= n) {
            cu_ew_vec<T, 4> v = reinterpret_cast<const cu_ew_vec<T, 4> *>(x)[c];
#pragma unroll
            for (int k = 0; k < 4; k++) v.v[k] = (w.w[k] >> 8) >= threshold ? cu_scaled(v.v[k], scale_f, scale) : zero;
            reinterpret_cast<cu_ew_vec<T, 4> *>(out)[c] = v;
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int64_t i = 4 * c + k;
                if (i < n) out[i] = (w.w[k] >> 8) >= threshold ? cu_scaled(x[i], scale_f, scale) : zero;
            }
        }
    }
}

} // namespace

/* ---- launchers ---- */

CU_SUPPORTS(RAND) { return td_operand_is_contiguous(&op->out[0]); }
CU_SUPPORTS(RANDN) { return td_operand_is_contiguous(&op->out[0]); }

/* NORMAL: RANDN, else RAND */
template <bool NORMAL> static td_status rand_op(cu_dev *d, const td_op *op) {
    const td_operand *out = &op->out[0];
    int64_t n = td_operand_numel(out);
    if (n == 0) return TD_OK;
    uint64_t seed = op->p.rng.seed, offset = op->p.rng.offset;
    unsigned grid = cu_grid(d, (n + 3) / 4, CU_BLOCK);
    void *o = cu_data(out);
    CU_SWITCH_FLOAT(out->dtype, {
        bool vec = cu_ew_aligned(o, 4 * sizeof(T));
        if (NORMAL && vec)
            cu_randn<T, true><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, (T *)o);
        else if (NORMAL)
            cu_randn<T, false><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, (T *)o);
        else if (vec)
            cu_rand<T, true><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, (T *)o);
        else
            cu_rand<T, false><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, (T *)o);
    })
    return CU_LAUNCHED(NORMAL ? "randn" : "rand");
}

extern "C" td_status cu_op_RAND(cu_dev *d, const td_op *op) { return rand_op<false>(d, op); }
extern "C" td_status cu_op_RANDN(cu_dev *d, const td_op *op) { return rand_op<true>(d, op); }

CU_SUPPORTS(DROPOUT) {
    return op->p.rng.p >= 0 && op->p.rng.p < 1 && td_operand_is_contiguous(&op->in[0]) &&
           td_operand_is_contiguous(&op->out[0]);
}

extern "C" td_status cu_op_DROPOUT(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *out = &op->out[0];
    int64_t n = td_operand_numel(out);
    if (n == 0) return TD_OK;
    uint64_t seed = op->p.rng.seed, offset = op->p.rng.offset;
    double p = op->p.rng.p, scale = 1.0 / (1.0 - p);
    uint32_t threshold = (uint32_t)ceil(p * 16777216.0);
    unsigned grid = cu_grid(d, (n + 3) / 4, CU_BLOCK);
    const void *xi = cu_data(x);
    void *o = cu_data(out);
    CU_SWITCH_FLOAT(out->dtype, {
        if (cu_ew_aligned(o, 4 * sizeof(T)) && cu_ew_aligned(xi, 4 * sizeof(T)))
            cu_dropout<T, true><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, threshold, (float)scale, scale,
                                                                  (const T *)xi, (T *)o);
        else
            cu_dropout<T, false><<<grid, CU_BLOCK, 0, d->stream>>>(n, seed, offset, threshold, (float)scale, scale,
                                                                   (const T *)xi, (T *)o);
    })
    return CU_LAUNCHED("dropout");
}
