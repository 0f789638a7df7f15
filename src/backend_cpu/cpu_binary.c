/*
** Binary arithmetic: ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM.
** a, b and out have one shape (the core broadcasts a and b with stride-0
** dims) and one dtype. Floats compute in their own precision (f16/bf16 in
** f32); integers wrap around like PyTorch's. MAXIMUM/MINIMUM propagate NaN.
** Contiguous f32 ADD/SUB/MUL/DIV (one side may be a broadcast scalar) take the
** AVX2 path in x86/binary_avx2.c.
*/
#include "cpu_ew.h"

/* o[i] = EXPR with x = a[i], y = b[i] loaded as C */
#define LOOP_(C, LD, ST, EXPR)                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
        C x = LD(a[i * sa]), y = LD(b[i * sb]);                                                                        \
        o[i * so] = ST(EXPR);                                                                                          \
    }

#define FLOAT_ROW_(NAME, T, C, LD, ST, POW)                                                                            \
    static void NAME(td_op_kind k, int64_t n, T *o, int64_t so, const T *a, int64_t sa, const T *b, int64_t sb) {      \
        switch (k) {                                                                                                   \
        case TD_OP_ADD: LOOP_(C, LD, ST, x + y); break;                                                                \
        case TD_OP_SUB: LOOP_(C, LD, ST, x - y); break;                                                                \
        case TD_OP_MUL: LOOP_(C, LD, ST, x *y); break;                                                                 \
        case TD_OP_DIV: LOOP_(C, LD, ST, x / y); break;                                                                \
        case TD_OP_POW: LOOP_(C, LD, ST, POW(x, y)); break;                                                            \
        case TD_OP_MAXIMUM: LOOP_(C, LD, ST, x != x || x > y ? x : y); break;                                          \
        case TD_OP_MINIMUM: LOOP_(C, LD, ST, x != x || x < y ? x : y); break;                                          \
        default: break;                                                                                                \
        }                                                                                                              \
    }
FLOAT_ROW_(row_f32, float, float, ID_, ID_, powf)
FLOAT_ROW_(row_f64, double, double, ID_, ID_, pow)
FLOAT_ROW_(row_f16, uint16_t, float, F16_IN_, F16_OUT_, powf)
FLOAT_ROW_(row_bf16, uint16_t, float, BF16_IN_, BF16_OUT_, powf)

/* integers: add/sub/mul in uint64_t, so overflow wraps instead of being undefined */
#define INT_ROW_(NAME, T)                                                                                              \
    static void NAME(td_op_kind k, int64_t n, T *o, int64_t so, const T *a, int64_t sa, const T *b, int64_t sb) {      \
        switch (k) {                                                                                                   \
        case TD_OP_ADD: LOOP_(uint64_t, (uint64_t), (T), x + y); break;                                                \
        case TD_OP_SUB: LOOP_(uint64_t, (uint64_t), (T), x - y); break;                                                \
        case TD_OP_MUL: LOOP_(uint64_t, (uint64_t), (T), x *y); break;                                                 \
        case TD_OP_MAXIMUM: LOOP_(T, ID_, ID_, x > y ? x : y); break;                                                  \
        case TD_OP_MINIMUM: LOOP_(T, ID_, ID_, x < y ? x : y); break;                                                  \
        default: break;                                                                                                \
        }                                                                                                              \
    }
INT_ROW_(row_i32, int32_t)
INT_ROW_(row_i64, int64_t)
INT_ROW_(row_u8, uint8_t)

#define CALL_(fn, T) fn(k, n, (T *)p[0], s[0], (const T *)p[1], s[1], (const T *)p[2], s[2])

static void binary_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    td_op_kind k = op->kind;
    td_dtype dt = op->out[0].dtype;
    if (dt == TD_F32 && s[0] == 1 && (s[1] | s[2]) <= 1 && cpu_has_avx2() &&
        cpu_binary_f32_avx2(k, n, (float *)p[0], (const float *)p[1], s[1], (const float *)p[2], s[2],
                            td_operand_numel(&op->out[0]) * 4 >= CPU_STREAM_BYTES))
        return;
    CPU_ROW_SWITCH_(dt, CALL_, row)
}

/* DIV/POW are float-only (the op table); integer inputs never reach them. */
td_status td_cpu_ADD(const td_op *op) { return cpu_elementwise(op, binary_row, 1); }
td_status td_cpu_SUB(const td_op *op) { return cpu_elementwise(op, binary_row, 1); }
td_status td_cpu_MUL(const td_op *op) { return cpu_elementwise(op, binary_row, 1); }
td_status td_cpu_DIV(const td_op *op) { return cpu_elementwise(op, binary_row, 2); }
td_status td_cpu_POW(const td_op *op) { return cpu_elementwise(op, binary_row, 16); }
td_status td_cpu_MAXIMUM(const td_op *op) { return cpu_elementwise(op, binary_row, 1); }
td_status td_cpu_MINIMUM(const td_op *op) { return cpu_elementwise(op, binary_row, 1); }
