/*
** The CPU runner of a fused region (kernel_ir.h): no compiler at run time,
** a vectorized interpreter. The domain is cut into blocks of BLK elements; a
** block runs each instruction over all its elements into a scratch array per
** live value (slots, reused once a value dies), so the block's values stay
** in L1 and each instruction is one tight loop the compiler vectorizes.
** Blocks spread over the CPU backend's threads (td_parallel_for).
** A reduction cuts the domain [outer, K, inner] into tasks (o, chunk of K);
** each task accumulates its [inner] partials in double, and one pass combines
** the chunks into the output.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu.h"
#include "math/kernel_ir.h"
#include "trident/kernel.h"

#define BLK 1024

/* float32 outputs of at least this many bytes are written with non-temporal stores (no read for ownership) */
#define STREAM_BYTES ((int64_t)16 << 20)

#if defined(__SSE2__)
#include <emmintrin.h>
/* dst[0..n) = src[0..n) bypassing the cache (dst 16-byte aligned); the caller fences */
static void stream_f32(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}
static void stream_fence(void) { _mm_sfence(); }
#define CAN_STREAM_ 1
#else
#define CAN_STREAM_ 0
static void stream_f32(float *dst, const float *src, int64_t n) { memcpy(dst, src, sizeof *dst * (size_t)n); }
static void stream_fence(void) {}
#endif

/* The hot loops twice on x86-64, for AVX2 and the baseline, picked at load time (an ifunc). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT_ __attribute__((target_clones("avx2", "default")))
#else
#define HOT_
#endif

/* Element offset of flat domain index i for strides s, as a multi-index walk
** (idx: the index of i, advanced by the caller). */
static void unflatten(const td_kernel_ir *ir, int64_t i, int64_t *idx) {
    for (int d = ir->ndim - 1; d >= 0; d--) {
        idx[d] = i % ir->shape[d];
        i /= ir->shape[d];
    }
}

#define BOOL_IN_(x) ((x) != 0)
/* clamp(x, lo, hi) = min(max(x, lo), hi), NaN x stays NaN */
#define CLAMP_(x, lo, hi) ((x) < (lo) ? ((lo) > (hi) ? (hi) : (lo)) : (x) > (hi) ? (hi) : (x))

/* Convert n elements of dtype dt from src (stride s elements) into dst of T. */
#define CONVERT_IN_(T, dst, src, dt, s, n)                                                                             \
    do {                                                                                                               \
        switch (dt) {                                                                                                  \
        case TD_F32: CONVERT_RUN_(T, dst, (const float *)(src), s, n, (T)); break;                                     \
        case TD_F64: CONVERT_RUN_(T, dst, (const double *)(src), s, n, (T)); break;                                    \
        case TD_F16: CONVERT_RUN_(T, dst, (const uint16_t *)(src), s, n, (T)cpu_f16_to_f32); break;                    \
        case TD_BF16: CONVERT_RUN_(T, dst, (const uint16_t *)(src), s, n, (T)cpu_bf16_to_f32); break;                  \
        case TD_I32: CONVERT_RUN_(T, dst, (const int32_t *)(src), s, n, (T)); break;                                   \
        case TD_I64: CONVERT_RUN_(T, dst, (const int64_t *)(src), s, n, (T)); break;                                   \
        case TD_U8: CONVERT_RUN_(T, dst, (const uint8_t *)(src), s, n, (T)); break;                                    \
        case TD_BOOL: CONVERT_RUN_(T, dst, (const uint8_t *)(src), s, n, (T)BOOL_IN_); break;                          \
        default: break;                                                                                                \
        }                                                                                                              \
    } while (0)
#define CONVERT_RUN_(T, dst, src, s, n, F)                                                                             \
    do {                                                                                                               \
        if ((s) == 1)                                                                                                  \
            for (int64_t j_ = 0; j_ < (n); j_++) (dst)[j_] = F((src)[j_]);                                             \
        else                                                                                                           \
            for (int64_t j_ = 0; j_ < (n); j_++) (dst)[j_] = F((src)[j_ * (s)]);                                       \
    } while (0)

/* Round v to dtype dt (CAST), in T. */
#define ROUND_TO_(T, dt, v)                                                                                            \
    ((dt) == TD_F16    ? (T)cpu_f16_to_f32(cpu_f32_to_f16((float)(v)))                                                 \
     : (dt) == TD_BF16 ? (T)cpu_bf16_to_f32(cpu_f32_to_bf16((float)(v)))                                               \
     : (dt) == TD_F32  ? (T)(float)(v)                                                                                 \
     : (dt) == TD_BOOL ? (T)((v) != 0)                                                                                 \
     : (dt) == TD_F64  ? (T)(v)                                                                                        \
                       : (T)cpu_to_i64((double)(v), -9223372036854775808.0, 9223372036854774784.0))

/* The runner for compute type T (float or double); SUF names its functions. */
#define RUNNER_(T, SUF)                                                                                                \
    /* load instruction p over [i0, i0 + n) into dst */                                                                \
    HOT_ static void load_##SUF(const td_kernel_ir *ir, const td_ki_insn *p, const void *base, int64_t i0, int64_t n,  \
                                T *dst) {                                                                              \
        td_dtype dt = ir->buf_dtype[p->buf];                                                                           \
        size_t es = td_dtype_size(dt);                                                                                 \
        int last = ir->ndim - 1;                                                                                       \
        int64_t idx[TD_MAX_DIMS];                                                                                      \
        unflatten(ir, i0, idx);                                                                                        \
        while (n > 0) {                                                                                                \
            int64_t off = 0, run = ir->shape[last] - idx[last];                                                        \
            for (int d = 0; d <= last; d++) off += idx[d] * p->strides[d];                                             \
            if (run > n) run = n;                                                                                      \
            const char *src = (const char *)base + off * (int64_t)es;                                                  \
            if (p->strides[last] == 0) {                                                                               \
                T v = 0;                                                                                               \
                CONVERT_IN_(T, &v, src, dt, 0, 1);                                                                     \
                for (int64_t j = 0; j < run; j++) dst[j] = v;                                                          \
            } else                                                                                                     \
                CONVERT_IN_(T, dst, src, dt, p->strides[last], run);                                                   \
            dst += run, n -= run;                                                                                      \
            idx[last] += run;                                                                                          \
            for (int d = last; d > 0 && idx[d] == ir->shape[d]; d--) idx[d] = 0, idx[d - 1]++;                         \
        }                                                                                                              \
    }                                                                                                                  \
    /* o = ew(x, y, z) over n elements (the math beside each op, as the table ops compute it) */                       \
    HOT_ static void ew_##SUF(int ew, td_dtype dt, int64_t n, T *o, const T *x, const T *y, const T *z) {              \
        switch ((td_math_ew)ew) {                                                                                      \
        case TD_MEW_NEG: EW_(o[i] = -x[i]); break;                                                                     \
        case TD_MEW_ABS: EW_(o[i] = fabs(x[i])); break;                                                                \
        case TD_MEW_EXP: EW_(o[i] = exp(x[i])); break;                                                                 \
        case TD_MEW_LOG: EW_(o[i] = log(x[i])); break;                                                                 \
        case TD_MEW_SQRT: EW_(o[i] = sqrt(x[i])); break;                                                               \
        case TD_MEW_RSQRT: EW_(o[i] = (T)1 / sqrt(x[i])); break;                                                       \
        case TD_MEW_SIN: EW_(o[i] = sin(x[i])); break;                                                                 \
        case TD_MEW_COS: EW_(o[i] = cos(x[i])); break;                                                                 \
        case TD_MEW_TANH: EW_(o[i] = tanh(x[i])); break;                                                               \
        case TD_MEW_SIGMOID: EW_(o[i] = (T)1 / ((T)1 + exp(-x[i]))); break;                                            \
        case TD_MEW_RELU: EW_(o[i] = x[i] < 0 ? (T)0 : x[i]); break; /* NaN stays NaN */                               \
        case TD_MEW_GELU: EW_(o[i] = (T)0.5 * x[i] * ((T)1 + erf(x[i] * (T)M_SQRT1_2))); break;                        \
        case TD_MEW_SILU: EW_(o[i] = x[i] / ((T)1 + exp(-x[i]))); break;                                               \
        case TD_MEW_SOFTPLUS: EW_(o[i] = x[i] > 20 ? x[i] : log1p(exp(x[i]))); break;                                  \
        case TD_MEW_ERF: EW_(o[i] = erf(x[i])); break;                                                                 \
        case TD_MEW_SIGN: EW_(o[i] = x[i] > 0 ? (T)1 : x[i] < 0 ? (T)-1 : x[i]); break;                                \
        case TD_MEW_CAST: EW_(o[i] = ROUND_TO_(T, dt, x[i])); break;                                                   \
        case TD_MEW_ADD: EW_(o[i] = x[i] + y[i]); break;                                                               \
        case TD_MEW_SUB: EW_(o[i] = x[i] - y[i]); break;                                                               \
        case TD_MEW_MUL: EW_(o[i] = x[i] * y[i]); break;                                                               \
        case TD_MEW_DIV: EW_(o[i] = x[i] / y[i]); break;                                                               \
        case TD_MEW_POW: EW_(o[i] = pow(x[i], y[i])); break;                                                           \
        case TD_MEW_MIN: EW_(o[i] = x[i] != x[i] || y[i] != y[i] ? x[i] + y[i] : x[i] < y[i] ? x[i] : y[i]); break;    \
        case TD_MEW_MAX: EW_(o[i] = x[i] != x[i] || y[i] != y[i] ? x[i] + y[i] : x[i] > y[i] ? x[i] : y[i]); break;    \
        case TD_MEW_LT: EW_(o[i] = (T)(x[i] < y[i])); break;                                                           \
        case TD_MEW_LE: EW_(o[i] = (T)(x[i] <= y[i])); break;                                                          \
        case TD_MEW_GT: EW_(o[i] = (T)(x[i] > y[i])); break;                                                           \
        case TD_MEW_GE: EW_(o[i] = (T)(x[i] >= y[i])); break;                                                          \
        case TD_MEW_EQ: EW_(o[i] = (T)(x[i] == y[i])); break;                                                          \
        case TD_MEW_NE: EW_(o[i] = (T)(x[i] != y[i])); break;                                                          \
        case TD_MEW_WHERE: EW_(o[i] = x[i] != 0 ? y[i] : z[i]); break;                                                 \
        case TD_MEW_CLAMP: EW_(o[i] = CLAMP_(x[i], y[i], z[i])); break;                                                \
        case TD_MEW_COUNT: break;                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    /* store n values of v at element i0 of buffer base of dtype dt */                                                 \
    HOT_ static void store_##SUF(td_dtype dt, void *base, int64_t i0, int64_t n, const T *v, bool stream) {            \
        if (stream && dt == TD_F32 && sizeof(T) == sizeof(float)) {                                                    \
            stream_f32((float *)base + i0, (const float *)v, n);                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        switch (dt) {                                                                                                  \
        case TD_F32: EW_(((float *)base)[i0 + i] = (float)v[i]); break;                                                \
        case TD_F64: EW_(((double *)base)[i0 + i] = (double)v[i]); break;                                              \
        case TD_F16: EW_(((uint16_t *)base)[i0 + i] = cpu_f32_to_f16((float)v[i])); break;                             \
        case TD_BF16: EW_(((uint16_t *)base)[i0 + i] = cpu_f32_to_bf16((float)v[i])); break;                           \
        default: EW_(cpu_store(base, i0 + i, dt, (double)v[i])); break;                                                \
        }                                                                                                              \
    }                                                                                                                  \
    /* the block [i0, i0 + n): every instruction, then the stores; vals[v] is value v's array */                       \
    static void block_##SUF(const td_kernel_ir *ir, void *const *bufs, T *scratch, const T **vals, int64_t i0,         \
                            int64_t n, bool stream) {                                                                  \
        for (int v = 0; v < ir->n_insns; v++) {                                                                        \
            const td_ki_insn *p = &ir->insns[v];                                                                       \
            if (p->slot < 0) { /* contiguous and of the compute dtype: read in place, the next block prefetched */     \
                vals[v] = (const T *)bufs[p->buf] + i0;                                                                \
                for (int64_t j = n; j < 2 * n && i0 + j < ir->n; j += 64 / (int64_t)sizeof(T))                         \
                    __builtin_prefetch(vals[v] + j);                                                                   \
                continue;                                                                                              \
            }                                                                                                          \
            T *o = scratch + (int64_t)p->slot * BLK;                                                                   \
            if (p->op == TD_KI_LOAD)                                                                                   \
                load_##SUF(ir, p, bufs[p->buf], i0, n, o);                                                             \
            else if (p->op == TD_KI_EW)                                                                                \
                ew_##SUF(p->ew, p->dtype, n, o, vals[p->a[0]], p->n_a > 1 ? vals[p->a[1]] : NULL,                      \
                         p->n_a > 2 ? vals[p->a[2]] : NULL);                                                           \
            vals[v] = o;                                                                                               \
        }                                                                                                              \
        for (int s = 0; s < ir->n_stores; s++)                                                                         \
            store_##SUF(ir->buf_dtype[ir->store_buf[s]], bufs[ir->store_buf[s]], i0, n, vals[ir->store_value[s]],      \
                        stream && !((uintptr_t)bufs[ir->store_buf[s]] & 15));                                          \
    }

#define EW_(stmt)                                                                                                      \
    for (int64_t i = 0; i < n; i++) stmt

RUNNER_(float, f32)
RUNNER_(double, f64)

typedef struct run_ctx {
    const td_kernel_ir *ir;
    void *const *bufs;
    int64_t chunks, chunk; /* reduction: K cut into chunks of chunk */
    double *partials;      /* [outer * chunks, inner] */
    _Atomic bool oom;      /* a worker found no memory for its scratch */
} run_ctx;

static double red_init(int op) { return op == TD_MRED_AMAX ? -INFINITY : op == TD_MRED_AMIN ? INFINITY : 0; }

/* one piece of work: blocks [b0, b1) of the domain, or reduction tasks [b0, b1) */
static void run_piece(void *user, int64_t b0, int64_t b1) {
    run_ctx *c = user;
    const td_kernel_ir *ir = c->ir;
    bool f64 = ir->compute == TD_F64, stream = CAN_STREAM_ && ir->n * (int64_t)sizeof(float) >= STREAM_BYTES;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    void *scratch = malloc(es * BLK * (size_t)(ir->n_slots ? ir->n_slots : 1));
    const void **vals = malloc(sizeof *vals * (size_t)(ir->n_insns ? ir->n_insns : 1));
    if (!scratch || !vals) {
        free(scratch), free(vals);
        c->oom = true;
        return;
    }
    for (int v = 0; v < ir->n_insns; v++) /* literals: filled once */
        if (ir->insns[v].op == TD_KI_CONST)
            for (int64_t i = 0; i < BLK; i++) {
                if (f64)
                    ((double *)scratch)[ir->insns[v].slot * BLK + i] = ir->insns[v].value;
                else
                    ((float *)scratch)[ir->insns[v].slot * BLK + i] = (float)ir->insns[v].value;
            }
    for (int64_t b = b0; b < b1; b++) {
        int64_t lo, hi, o = 0;
        if (ir->red_value < 0) {
            lo = b * BLK, hi = lo + BLK < ir->n ? lo + BLK : ir->n;
        } else {
            o = b / c->chunks;
            int64_t k0 = (b % c->chunks) * c->chunk, k1 = k0 + c->chunk < ir->k ? k0 + c->chunk : ir->k;
            lo = (o * ir->k + k0) * ir->inner, hi = (o * ir->k + k1) * ir->inner;
        }
        double *acc = ir->red_value >= 0 ? c->partials + b * ir->inner : NULL;
        for (int64_t i0 = lo, j = 0; i0 < hi; i0 += BLK) {
            int64_t n = hi - i0 < BLK ? hi - i0 : BLK;
            if (f64)
                block_f64(ir, c->bufs, scratch, (const double **)vals, i0, n, stream);
            else
                block_f32(ir, c->bufs, scratch, (const float **)vals, i0, n, stream);
            if (!acc) continue;
            /* fold the block's reduced value into the task's partials: acc[j] op= v, j = i % inner */
            const void *rv = vals[ir->red_value];
            for (int64_t i = 0; i < n; i++) {
                double v = f64 ? ((const double *)rv)[i] : ((const float *)rv)[i];
                double *a = &acc[j];
                if (ir->red_op == TD_MRED_SUM || ir->red_op == TD_MRED_MEAN)
                    *a += v;
                else if (ir->red_op == TD_MRED_AMAX ? (v > *a || v != v) : (v < *a || v != v))
                    *a = *a != *a ? *a : v; /* NaN propagates */
                if (++j == ir->inner) j = 0;
            }
        }
    }
    if (stream) stream_fence();
    free(scratch), free(vals);
}

bool td_ki_run_cpu(const td_kernel_ir *ir, void *const *bufs) {
    run_ctx c = {.ir = ir, .bufs = bufs};
    int64_t cost = (int64_t)ir->n_insns + ir->n_stores + 1;
    if (ir->red_value < 0) {
        td_parallel_for((ir->n + BLK - 1) / BLK, cost * BLK, run_piece, &c);
        return !c.oom;
    }
    /* enough tasks for the threads: cut K into chunks when there are few outputs rows */
    int64_t outputs = ir->outer * ir->inner, chunks = 1;
    while (ir->outer * chunks < 64 && ir->k / (chunks * 2) * ir->inner >= BLK && outputs * chunks * 2 <= (1 << 22))
        chunks *= 2;
    c.chunks = chunks;
    c.chunk = (ir->k + chunks - 1) / chunks;
    int64_t tasks = ir->outer * chunks;
    c.partials = malloc(sizeof(double) * (size_t)(tasks * ir->inner > 0 ? tasks * ir->inner : 1));
    if (!c.partials) return false;
    for (int64_t i = 0; i < tasks * ir->inner; i++) c.partials[i] = red_init(ir->red_op);
    if (ir->k > 0) td_parallel_for(tasks, cost * c.chunk * ir->inner, run_piece, &c);
    /* combine the chunks of each output */
    void *out = bufs[ir->red_buf];
    td_dtype dt = ir->buf_dtype[ir->red_buf];
    for (int64_t o = 0; o < ir->outer; o++)
        for (int64_t j = 0; j < ir->inner; j++) {
            double a = red_init(ir->red_op);
            for (int64_t ch = 0; ch < chunks; ch++) {
                double v = c.partials[(o * chunks + ch) * ir->inner + j];
                if (ir->red_op == TD_MRED_SUM || ir->red_op == TD_MRED_MEAN)
                    a += v;
                else if (v != v || a != a)
                    a = a != a ? a : v;
                else if (ir->red_op == TD_MRED_AMAX ? v > a : v < a)
                    a = v;
            }
            if (ir->red_op == TD_MRED_MEAN) a /= (double)ir->k;
            cpu_store(out, o * ir->inner + j, dt, a);
        }
    free(c.partials);
    return !c.oom;
}
