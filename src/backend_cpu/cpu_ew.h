/*
** Helpers of the elementwise and reduction kernels (cpu_ops_elementwise.c,
** cpu_ops_reduce.c): OpenMP tiles over a cpu_iter, and the AVX2/FMA
** fast paths in x86/, chosen at run time.
** defines: CPU_TILE, cpu_iter_tiles, cpu_iter_tile, cpu_elementwise, ID_/F16_IN_/F16_OUT_/BF16_IN_/BF16_OUT_,
*CPU_ROW_SWITCH_,
** cpu_has_avx2, *_avx2.
*/
#ifndef TRIDENT_BACKEND_CPU_EW_H
#define TRIDENT_BACKEND_CPU_EW_H

#include "cpu.h"

/* Elements per tile: one tile is one unit of OpenMP work. Rows longer than a
** tile are split, so a single contiguous row still uses every thread. */
#define CPU_TILE 16384

static inline int64_t cpu_iter_tiles(const cpu_iter *it) { return it->rows * ((it->inner + CPU_TILE - 1) / CPU_TILE); }

/* Offsets (elements, one per operand) of tile t's first element; returns its length. */
static inline int64_t cpu_iter_tile(const cpu_iter *it, int64_t t, int64_t *offsets) {
    int64_t per_row = (it->inner + CPU_TILE - 1) / CPU_TILE;
    int64_t start = (t % per_row) * CPU_TILE, left = it->inner - start;
    cpu_iter_row_offsets(it, t / per_row, offsets);
    for (int k = 0; k < it->nops; k++) offsets[k] += start * it->inner_strides[k];
    return left < CPU_TILE ? left : CPU_TILE;
}

/* One row of an elementwise op: n elements; p[k] is the address of operand
** k's first element (out[0] first, then the inputs), s[k] its stride in
** elements. */
typedef void (*cpu_row_fn)(const td_op *op, int64_t n, char *const *p, const int64_t *s);

/* Loads (LD) and stores (ST) of the row templates: f16/bf16 compute in f32. */
#define ID_(x)       (x)
#define F16_IN_(x)   cpu_f16_to_f32(x)
#define F16_OUT_(x)  cpu_f32_to_f16(x)
#define BF16_IN_(x)  cpu_bf16_to_f32(x)
#define BF16_OUT_(x) cpu_f32_to_bf16(x)

/* The dtype switch of a row-template family: CALL(P_<dtype>, element type)
** for the row function of dt (bool rows are u8 rows); other dtypes do nothing. */
#define CPU_ROW_SWITCH_(dt, CALL, P)                                                                                   \
    switch (dt) {                                                                                                      \
    case TD_F32: CALL(P##_f32, float); break;                                                                          \
    case TD_F64: CALL(P##_f64, double); break;                                                                         \
    case TD_F16: CALL(P##_f16, uint16_t); break;                                                                       \
    case TD_BF16: CALL(P##_bf16, uint16_t); break;                                                                     \
    case TD_I32: CALL(P##_i32, int32_t); break;                                                                        \
    case TD_I64: CALL(P##_i64, int64_t); break;                                                                        \
    case TD_U8:                                                                                                        \
    case TD_BOOL: CALL(P##_u8, uint8_t); break;                                                                        \
    default: break;                                                                                                    \
    }

/* Run fn over out[0] and in[0..n_in) (same shape, any strides), split into
** tiles across OpenMP threads; cost is the rough work per element (1 = add). */
td_status cpu_elementwise(const td_op *op, cpu_row_fn fn, int cost);

static inline bool cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* ---- AVX2/FMA kernels (src/backend_cpu/x86/); call only when cpu_has_avx2() ---- */

/* Outputs of at least this many bytes are written with non-temporal stores. */
#define CPU_STREAM_BYTES ((int64_t)16 << 20)

/* o[i] = a[i*sa] op b[i*sb] for i < n, op in ADD/SUB/MUL/DIV; sa, sb in {0, 1};
** stream: non-temporal stores. Returns false (doing nothing) for other ops. */
bool cpu_binary_f32_avx2(td_op_kind kind, int64_t n, float *o, const float *a, int64_t sa, const float *b, int64_t sb,
                         bool stream);
/* o[i] = max(x[i], 0) with NaN kept, contiguous. */
void cpu_relu_f32_avx2(int64_t n, float *o, const float *x);
/* sum of x[0..n) accumulated in double. */
double cpu_sum_f32_avx2(int64_t n, const float *x);

#endif /* TRIDENT_BACKEND_CPU_EW_H */
