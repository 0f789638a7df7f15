/*
** bf16 / f16 ADD, SUB, MUL, DIV on contiguous rows (one side may be a
** broadcast scalar), 16 elements a step: the halves widened to float32 in
** registers, one float32 op, rounded back to nearest even (half8_avx2.h, the
** same bits as cpu_ops_elementwise.c's scalar rows: o = round(float(a) op
** float(b))). The op's result is a quiet NaN or a number whatever the NaN
** payloads it reads, so the loads and the rounding skip half8's NaN fixups
** (half8_f16_load_op, half8_bf16_pack16_quiet). The tail (and, for streamed
** outputs, the head up to 32-byte alignment) goes through the same vector
** step on a padded copy, so every element takes one path.
*/
#include <string.h>

#include "../cpu_ew.h"
#include "binary_half_avx2.h"
#include "half8_avx2.h"

enum { STEP = 16 };

/* 16 lanes of a (broadcast: av) op 16 of b (bv) rounded into 32 bytes at o; LD / PACK16 the dtype's conversions */
#define HALF_STEP_(LD, PACK16, OP, o, a, sa, av, b, sb, bv, st)                                                        \
    do {                                                                                                               \
        __m256 x0_ = (sa) ? LD(a) : (av), x1_ = (sa) ? LD((a) + 8) : (av);                                             \
        __m256 y0_ = (sb) ? LD(b) : (bv), y1_ = (sb) ? LD((b) + 8) : (bv);                                             \
        __m256i p_ = PACK16(OP(x0_, y0_), OP(x1_, y1_));                                                               \
        if (st)                                                                                                        \
            _mm256_stream_si256((__m256i *)(o), p_);                                                                   \
        else                                                                                                           \
            _mm256_storeu_si256((__m256i *)(o), p_);                                                                   \
    } while (0)

/* elements [i, i + m) (m < STEP) through one step on padded copies */
#define HALF_RAGGED_(LD, PACK16, OP, i, m)                                                                             \
    do {                                                                                                               \
        uint16_t ta_[STEP] = {0}, tb_[STEP] = {0}, to_[STEP];                                                          \
        if (sa) memcpy(ta_, a + (i), sizeof *ta_ * (size_t)(m));                                                       \
        if (sb) memcpy(tb_, b + (i), sizeof *tb_ * (size_t)(m));                                                       \
        HALF_STEP_(LD, PACK16, OP, to_, ta_, sa, av, tb_, sb, bv, false);                                              \
        memcpy(o + (i), to_, sizeof *to_ * (size_t)(m));                                                               \
    } while (0)

/* the row for one dtype (LD, PACK16) and op (OP); stream: o + i 32-byte aligned after the head */
#define HALF_ROW_(NAME, LD, PACK16, OP)                                                                                \
    HALF8_TARGET_ static void NAME(int64_t n, uint16_t *o, const uint16_t *a, int64_t sa, const uint16_t *b,           \
                                   int64_t sb, __m256 av, __m256 bv, bool stream) {                                    \
        int64_t i = 0;                                                                                                 \
        stream = stream && !((uintptr_t)o & 1);                                                                        \
        if (stream) {                                                                                                  \
            int64_t h = (int64_t)((32 - ((uintptr_t)o & 31)) & 31) / 2;                                                \
            i = h < n ? h : n;                                                                                         \
            if (i > 0) HALF_RAGGED_(LD, PACK16, OP, 0, i);                                                             \
        }                                                                                                              \
        for (; i + STEP <= n; i += STEP)                                                                               \
            HALF_STEP_(LD, PACK16, OP, o + i, a + i * sa, sa, av, b + i * sb, sb, bv, stream);                         \
        if (i < n) HALF_RAGGED_(LD, PACK16, OP, i, n - i);                                                             \
        if (stream) _mm_sfence();                                                                                      \
    }
#define ROWS_(P, LD, PACK16)                                                                                           \
    HALF_ROW_(P##_add, LD, PACK16, _mm256_add_ps)                                                                      \
    HALF_ROW_(P##_sub, LD, PACK16, _mm256_sub_ps)                                                                      \
    HALF_ROW_(P##_mul, LD, PACK16, _mm256_mul_ps)                                                                      \
    HALF_ROW_(P##_div, LD, PACK16, _mm256_div_ps)
ROWS_(bf16, half8_bf16_load, half8_bf16_pack16_quiet)
ROWS_(f16, half8_f16_load_op, half8_f16_pack16)

typedef void (*half_row_fn)(int64_t, uint16_t *, const uint16_t *, int64_t, const uint16_t *, int64_t, __m256, __m256,
                            bool);

HALF8_TARGET_ bool cpu_binary_half_avx2(td_op_kind kind, td_dtype dt, int64_t n, uint16_t *o, const uint16_t *a,
                                        int64_t sa, const uint16_t *b, int64_t sb, bool stream) {
    static const half_row_fn rows[2][4] = {{bf16_add, bf16_sub, bf16_mul, bf16_div},
                                           {f16_add, f16_sub, f16_mul, f16_div}};
    int k = kind == TD_OP_ADD ? 0 : kind == TD_OP_SUB ? 1 : kind == TD_OP_MUL ? 2 : kind == TD_OP_DIV ? 3 : -1;
    if (k < 0 || (dt != TD_BF16 && dt != TD_F16) || (sa != 0 && sa != 1) || (sb != 0 && sb != 1)) return false;
    if (n <= 0) return true;
    /* a broadcast side: its one element widened once (the scalar conversion gives the vector's bits) */
    float as = dt == TD_BF16 ? cpu_bf16_to_f32(a[0]) : cpu_f16_to_f32(a[0]);
    float bs = dt == TD_BF16 ? cpu_bf16_to_f32(b[0]) : cpu_f16_to_f32(b[0]);
    rows[dt == TD_F16][k](n, o, a, sa, b, sb, _mm256_set1_ps(as), _mm256_set1_ps(bs), stream);
    return true;
}
