/*
** Random kernels: RAND, RANDN and DROPOUT, all drawn from Philox4x32-10.
**
** ---- The stream (every backend reproduces this exactly) -------------------
** A stream is a pair (seed, offset) of uint64. Element i (row-major, i >= 0)
** of a stream uses
**     words   = td_philox4x32(seed, offset + i/4)   (counter wraps mod 2^64)
**     w_i     = words[i % 4]
**     u_i     = td_philox_uniform(w_i) = (w_i >> 8) * 2^-24     in [0, 1), 24 bits
**
** RAND   out[i] = u_i. f32 and f64 hold exactly this value, so they agree bit
**        for bit. f16/bf16 store u_i rounded to nearest even; a result that
**        rounds up to 1.0 is stored as the largest value below 1 instead
**        (f16 0x3BFF = 1 - 2^-11, bf16 0x3F7F = 1 - 2^-8), keeping [0, 1).
** RANDN  Box-Muller on pairs j = 0, 1, ...: elements 2j and 2j+1 use
**            u1 = 1 - u_{2j}    in (0, 1]   (exact in float)
**            u2 = u_{2j+1}
**            r  = sqrt(-2 ln u1)
**            out[2j]   = r cos(2 pi u2)
**            out[2j+1] = r sin(2 pi u2)      (dropped when numel is odd)
**        f32/f16/bf16 compute in float (sqrtf, logf, cosf, sinf; 2 pi as the
**        float 6.28318530717958647692f) and round the float to the dtype;
**        f64 computes in double from the same u values. Transcendentals are
**        not correctly rounded everywhere, so other backends match RANDN to a
**        few ulp, not bit for bit.
** DROPOUT with p in (0, 1) (the front-end handles p == 0):
**            keep_i  = (w_i >> 8) >= ceil(p * 2^24)   (i.e. u_i >= p, exactly)
**            scale   = 1 / (1 - p), computed in double, rounded to float for
**                      f32/f16/bf16 (kept in double for f64)
**            out[i]  = keep_i ? x[i] * scale : 0
**        The mask is a pure function of (seed, offset, p), so the backward of
**        dropout is dropout(dy) with the same seed, offset and p.
** ---------------------------------------------------------------------------
** Shapes: out (and x) are contiguous with n elements; work is split by
** counters (4 elements each), so threads never share a Philox call.
*/
#include "cpu.h"

#define TWO_PI_F 6.28318530717958647692f
#define TWO_PI   6.28318530717958647692

/* For each counter c of out's n elements, in parallel (cost per counter): the
** words w of Philox(seed, offset + c), then the body (the last arguments) for
** the elements i = 4c + k, k = 0, STEP, ... < 4, while i < n. */
#define PHILOX_FOR_(out, cost, STEP, ...)                                                                              \
    do {                                                                                                               \
        int64_t n = td_operand_numel(out), nc = (n + 3) / 4;                                                           \
        uint64_t seed = op->p.rng.seed, offset = op->p.rng.offset;                                                     \
        int nt = cpu_threads_for(nc, cost);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t c = 0; c < nc; c++) {                                 \
            uint32_t w[4];                                                                                             \
            td_philox4x32(seed, offset + (uint64_t)c, w);                                                              \
            for (int k = 0; k < 4 && 4 * c + k < n; k += STEP) {                                                       \
                int64_t i = 4 * c + k;                                                                                 \
                __VA_ARGS__                                                                                            \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

/* Store a float sample in [0,1) as a half dtype, never reaching 1.0. */
static inline uint16_t unit_f16(float u) {
    uint16_t h = cpu_f32_to_f16(u);
    return h >= 0x3C00 ? 0x3BFF : h;
}
static inline uint16_t unit_bf16(float u) {
    uint16_t h = cpu_f32_to_bf16(u);
    return h >= 0x3F80 ? 0x3F7F : h;
}

/* out[i] = u_i; one Philox call per counter c covers elements 4c .. 4c+3. */
td_status cpu_op_RAND(const td_op *op) {
    const td_operand *out = &op->out[0];
    void *dst = cpu_ptr(out);
    td_dtype dt = out->dtype;
    PHILOX_FOR_(out, 40, 1, {
        float u = td_philox_uniform(w[k]);
        switch (dt) {
        case TD_F32: ((float *)dst)[i] = u; break;
        case TD_F64: ((double *)dst)[i] = u; break;
        case TD_F16: ((uint16_t *)dst)[i] = unit_f16(u); break;
        case TD_BF16: ((uint16_t *)dst)[i] = unit_bf16(u); break;
        default: break;
        }
    });
    return TD_OK;
}

/* Box-Muller: words (2j, 2j+1) -> elements (2j, 2j+1); a counter holds pairs
** (w0, w1) and (w2, w3). */
td_status cpu_op_RANDN(const td_op *op) {
    const td_operand *out = &op->out[0];
    void *dst = cpu_ptr(out);
    td_dtype dt = out->dtype;
    PHILOX_FOR_(out, 120, 2, {
        float u1 = 1.0f - td_philox_uniform(w[k]), u2 = td_philox_uniform(w[k + 1]);
        double z[2];
        if (dt == TD_F64) {
            double r = sqrt(-2.0 * log((double)u1));
            z[0] = r * cos(TWO_PI * (double)u2);
            z[1] = r * sin(TWO_PI * (double)u2);
        } else {
            float r = sqrtf(-2.0f * logf(u1));
            z[0] = r * cosf(TWO_PI_F * u2);
            z[1] = r * sinf(TWO_PI_F * u2);
        }
        /* z holds exact float values for the float path, so cpu_store's
        ** double -> float -> half rounding equals float -> half rounding */
        cpu_store(dst, i, dt, z[0]);
        if (i + 1 < n) cpu_store(dst, i + 1, dt, z[1]);
    });
    return TD_OK;
}

/* in = (x), out = y, both contiguous [n]: y[i] = keep_i ? x[i] * scale : 0. */
td_status cpu_op_DROPOUT(const td_op *op) {
    const td_operand *x = &op->in[0], *out = &op->out[0];
    double p = op->p.rng.p, scale = 1.0 / (1.0 - p);
    uint32_t threshold = (uint32_t)ceil(p * 16777216.0);
    float scale_f = (float)scale;
    const void *src = cpu_ptr(x);
    void *dst = cpu_ptr(out);
    td_dtype dt = out->dtype;
    PHILOX_FOR_(out, 40, 1, {
        bool keep = (w[k] >> 8) >= threshold;
        switch (dt) {
        case TD_F32: ((float *)dst)[i] = keep ? ((const float *)src)[i] * scale_f : 0.0f; break;
        case TD_F64: ((double *)dst)[i] = keep ? ((const double *)src)[i] * scale : 0.0; break;
        default: cpu_store(dst, i, dt, keep ? (float)cpu_load(src, i, dt) * scale_f : 0.0f); break;
        }
    });
    return TD_OK;
}
