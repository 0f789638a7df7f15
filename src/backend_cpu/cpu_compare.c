/*
** Comparisons EQ, NE, LT, LE, GT, GE (a, b of one dtype -> bool out) and
** WHERE (cond bool, a, b of one dtype -> out of that dtype). All operands have
** one shape; broadcast inputs come with stride-0 dims. Comparisons with NaN
** are false except NE, as in IEEE and PyTorch.
*/
#include "cpu_ew.h"

/* contiguous a against contiguous or scalar b get their own loops, which the compiler vectorizes */
#define CMP_LOOP_(LD, OP)                                                                                              \
    do {                                                                                                               \
        if (so == 1 && sa == 1 && sb == 0)                                                                             \
            for (int64_t i = 0; i < n; i++) o[i] = LD(a[i]) OP LD(b[0]);                                               \
        else if (so == 1 && sa == 1 && sb == 1)                                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = LD(a[i]) OP LD(b[i]);                                               \
        else                                                                                                           \
            for (int64_t i = 0; i < n; i++) o[i * so] = LD(a[i * sa]) OP LD(b[i * sb]);                                \
    } while (0)

#define CMP_ROW_(NAME, T, LD)                                                                                          \
    static void NAME(td_op_kind k, int64_t n, uint8_t *o, int64_t so, const T *a, int64_t sa, const T *b,              \
                     int64_t sb) {                                                                                     \
        switch (k) {                                                                                                   \
        case TD_OP_EQ: CMP_LOOP_(LD, ==); break;                                                                       \
        case TD_OP_NE: CMP_LOOP_(LD, !=); break;                                                                       \
        case TD_OP_LT: CMP_LOOP_(LD, <); break;                                                                        \
        case TD_OP_LE: CMP_LOOP_(LD, <=); break;                                                                       \
        case TD_OP_GT: CMP_LOOP_(LD, >); break;                                                                        \
        case TD_OP_GE: CMP_LOOP_(LD, >=); break;                                                                       \
        default: break;                                                                                                \
        }                                                                                                              \
    }
CMP_ROW_(cmp_f32, float, ID_)
CMP_ROW_(cmp_f64, double, ID_)
CMP_ROW_(cmp_f16, uint16_t, cpu_f16_to_f32)
CMP_ROW_(cmp_bf16, uint16_t, cpu_bf16_to_f32)
CMP_ROW_(cmp_i32, int32_t, ID_)
CMP_ROW_(cmp_i64, int64_t, ID_)
CMP_ROW_(cmp_u8, uint8_t, ID_) /* also bool, stored as 0/1 */

#define CMP_CALL_(fn, T) fn(op->kind, n, (uint8_t *)p[0], s[0], (const T *)p[1], s[1], (const T *)p[2], s[2])

static void compare_row(const td_op *op, int64_t n, char *const *p,
                        const int64_t *s){CPU_ROW_SWITCH_(op->in[0].dtype, CMP_CALL_, cmp)}

td_status td_cpu_EQ(const td_op *op) {
    return cpu_elementwise(op, compare_row, 1);
}
td_status td_cpu_NE(const td_op *op) { return cpu_elementwise(op, compare_row, 1); }
td_status td_cpu_LT(const td_op *op) { return cpu_elementwise(op, compare_row, 1); }
td_status td_cpu_LE(const td_op *op) { return cpu_elementwise(op, compare_row, 1); }
td_status td_cpu_GT(const td_op *op) { return cpu_elementwise(op, compare_row, 1); }
td_status td_cpu_GE(const td_op *op) { return cpu_elementwise(op, compare_row, 1); }

/* out[i] = cond[i] ? a[i] : b[i], moving raw elements of the dtype's size */
#define WHERE_LOOP_(T)                                                                                                 \
    do {                                                                                                               \
        T *o = (T *)p[0];                                                                                              \
        const uint8_t *c = (const uint8_t *)p[1];                                                                      \
        const T *a = (const T *)p[2], *b = (const T *)p[3];                                                            \
        /* contiguous operands (b possibly a scalar, as in relu's backward) select by bit masks, */                    \
        /* without branches, so the compiler vectorizes the loop */                                                    \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && (s[3] == 0 || s[3] == 1)) {                                         \
            int64_t sb = s[3];                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                T m = (T)0 - (T)(c[i] != 0);                                                                           \
                o[i] = (T)((a[i] & m) | (b[i * sb] & (T)~m));                                                          \
            }                                                                                                          \
        } else {                                                                                                       \
            for (int64_t i = 0; i < n; i++) o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]];                     \
        }                                                                                                              \
    } while (0)

static void where_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    switch (td_dtype_size(op->out[0].dtype)) {
    case 1: WHERE_LOOP_(uint8_t); break;
    case 2: WHERE_LOOP_(uint16_t); break;
    case 4: WHERE_LOOP_(uint32_t); break;
    case 8: WHERE_LOOP_(uint64_t); break;
    }
}

td_status td_cpu_WHERE(const td_op *op) { return cpu_elementwise(op, where_row, 1); }
