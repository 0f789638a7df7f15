/*
** Shared helpers of the CPU backend: buffers, dtype conversion, strided
** iteration, the kernels (one cpu_op_<OP> function per op) and the entry
** points of cpu_device.c and cpu_memory.c that the vtable (cpu_backend.c) names.
** defines: td_buffer (CPU), cpu_ptr, half conversions, cpu_iter.
*/
#ifndef TRIDENT_BACKEND_CPU_H
#define TRIDENT_BACKEND_CPU_H

#include <math.h>
#include <string.h>

#include "trident/backend.h"

struct td_buffer {
    td_alloc_block block;       /* first: the allocator's header (cpu_memory.c); block.ptr is the data */
    void (*deleter)(void *ctx); /* foreign memory (buffer_import): run on free instead of freeing the data */
    void *ctx;
    bool foreign;
};

/* Host address of a view's element 0. */
static inline void *cpu_ptr(const td_operand *v) {
    return (char *)v->buf->block.ptr + (size_t)v->offset * td_dtype_size(v->dtype);
}

/* Kernels, one per op (cpu_ops_<family>.c); each returns TD_OK or an error with a message.
** The table of cpu_backend.c names every one, so a missing kernel fails the link. */
#define CPU_DECLARE_(N, ...) td_status cpu_op_##N(const td_op *op);
TD_OP_LIST(CPU_DECLARE_)
#undef CPU_DECLARE_

/* Device facts (cpu_device.c). */
int cpu_device_count(void);
td_status cpu_device_info(int dev, td_device_info *out);

/* Memory (cpu_memory.c): buffers from the caching allocator, and transfers. */
td_status cpu_buffer_alloc(int dev, size_t nbytes, td_buffer **out);
td_status cpu_buffer_import(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *), void *ctx,
                            td_buffer **out);
void cpu_buffer_free(td_buffer *b);
void *cpu_buffer_host_ptr(td_buffer *b);
uint64_t cpu_buffer_address(td_buffer *b);
td_status cpu_memory_stats(int dev, bool reset_peak, td_memory_stats *out);
td_status cpu_empty_cache(int dev);
td_status cpu_write(td_buffer *dst, size_t offset, const void *src, size_t n);
td_status cpu_read(td_buffer *src, size_t offset, void *dst, size_t n);
td_status cpu_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n);
td_status cpu_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t n);

/* Number of OpenMP threads worth using for n units of work of cost c each. */
int cpu_threads_for(int64_t n, int64_t cost_per_unit);

/* Kernels whose result depends on how the work is cut (a GEMM cut into blocks, a sum cut into
** partial sums) cut it the same way whatever the thread count, into pieces sized for at most
** CPU_SPLIT_MAX threads; so a run gives the same bits on 1 thread and on 64. */
#define CPU_SPLIT_MAX 16
/* Pieces worth cutting n units of cost c into, from 1 to most: cpu_threads_for without the thread count. */
int64_t cpu_splits_for(int64_t n, int64_t cost_per_unit, int64_t most);

/* ---- half-precision conversion (round to nearest even) ---- */

/* A float's bits, and the float of some bits. */
static inline uint32_t cpu_f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}
static inline float cpu_bits_f32(uint32_t x) {
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline float cpu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
    if (exp == 0x1F)
        bits = sign | 0x7F800000u | (mant << 13); /* inf, nan */
    else if (exp)
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    else if (!mant)
        bits = sign;
    else { /* subnormal: normalize */
        int e = -1;
        do {
            mant <<= 1;
            e++;
        } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3FF) << 13);
    }
    return cpu_bits_f32(bits);
}

static inline uint16_t cpu_f32_to_f16(float f) {
    uint32_t x = cpu_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) return (uint16_t)(sign | 0x7C00 | (ax > 0x7F800000u ? 0x200 : 0)); /* inf/nan */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00);                                  /* overflow */
    if (ax < 0x38800000u) /* subnormal or zero: scale into the 2^-24 grid */
        return (uint16_t)(sign | (uint32_t)lrintf(cpu_bits_f32(ax) * 16777216.0f));
    uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1); /* round to nearest even on bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float cpu_bf16_to_f32(uint16_t h) { return cpu_bits_f32((uint32_t)h << 16); }

static inline uint16_t cpu_f32_to_bf16(float f) {
    uint32_t x = cpu_f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1)) >> 16);
}

/* Load element i (in elements from p) of dtype dt as double, and store. */
static inline double cpu_load(const void *p, int64_t i, td_dtype dt) {
    switch (dt) {
    case TD_F32: return ((const float *)p)[i];
    case TD_F64: return ((const double *)p)[i];
    case TD_F16: return cpu_f16_to_f32(((const uint16_t *)p)[i]);
    case TD_BF16: return cpu_bf16_to_f32(((const uint16_t *)p)[i]);
    case TD_I32: return ((const int32_t *)p)[i];
    case TD_I64: return (double)((const int64_t *)p)[i];
    case TD_U8: return ((const uint8_t *)p)[i];
    case TD_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return NAN;
    }
}

/* Float to integer conversion saturates and maps NaN to 0 (C leaves it undefined). */
static inline int64_t cpu_to_i64(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

static inline void cpu_store(void *p, int64_t i, td_dtype dt, double v) {
    switch (dt) {
    case TD_F32: ((float *)p)[i] = (float)v; break;
    case TD_F64: ((double *)p)[i] = v; break;
    case TD_F16: ((uint16_t *)p)[i] = cpu_f32_to_f16((float)v); break;
    case TD_BF16: ((uint16_t *)p)[i] = cpu_f32_to_bf16((float)v); break;
    case TD_I32: ((int32_t *)p)[i] = (int32_t)cpu_to_i64(v, -2147483648.0, 2147483647.0); break;
    case TD_I64: ((int64_t *)p)[i] = cpu_to_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case TD_U8: ((uint8_t *)p)[i] = (uint8_t)cpu_to_i64(v, 0, 255); break;
    case TD_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

/* Elements of a shape (its dims are sizes of a tensor that exists, so the product fits). */
static inline int64_t cpu_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Strides (elements) of a contiguous tensor of that shape; size-0 dims count as 1. */
static inline void cpu_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
}

/* ---- strided iteration over up to CPU_ITER_MAX operands ----
** cpu_iter_init() merges dims that are contiguous in every operand, so that
** the innermost loop is as long as possible. Then each "row" r in
** [0, cpu_iter_rows) has offsets (in elements) from cpu_iter_row_offsets()
** and cpu_iter_inner elements spaced by inner_strides[k]. */
#define CPU_ITER_MAX 4
typedef struct cpu_iter {
    int nops, ndim;
    int64_t shape[TD_MAX_DIMS];
    int64_t strides[CPU_ITER_MAX][TD_MAX_DIMS];
    int64_t rows, inner;
    int64_t inner_strides[CPU_ITER_MAX];
} cpu_iter;

/* views[k] all have the same shape (inputs already broadcast). */
void cpu_iter_init(cpu_iter *it, int nops, const td_operand *const *views);
void cpu_iter_row_offsets(const cpu_iter *it, int64_t row, int64_t *offsets);

#endif /* TRIDENT_BACKEND_CPU_H */
