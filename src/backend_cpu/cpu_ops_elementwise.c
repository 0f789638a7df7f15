/*
** The CPU backend's elementwise ops: unary math and activations (with CLAMP and GELU_BACKWARD),
** binary arithmetic, comparisons and WHERE. The tiled driver is cpu_ew.c.
*/
#include "cpu_convert.h"
#include "cpu_ew.h"
#include "cpu_rows.h"
#include "x86/binary_half_avx2.h"

/*
** Unary elementwise ops, x and out of one shape and dtype:
**   NEG -x, ABS |x|, EXP, LOG, SQRT, RSQRT 1/sqrt(x), SIN, COS, TANH,
**   SIGMOID 1/(1+e^-x), RELU max(x,0) (NaN stays NaN), SILU x*sigmoid(x),
**   GELU x*Phi(x) with Phi(x) = erfc(-x/sqrt2)/2 (= (1 + erf(x/sqrt2))/2 without
**        its cancellation for x << 0), or the tanh form
**        x*(1 + tanh(k*(x + 0.044715 x^3)))/2 with k = sqrt(2/pi),
**   CLAMP min(max(x, lo), hi) with either side optional (NaN stays NaN),
** and GELU_BACKWARD: in = (dy, x) -> dy * gelu'(x).
** Floats compute in their own precision (f16/bf16 in f32); NEG, ABS, RELU and
** CLAMP also take integers.
*/

#define FNF_(name) name##f /* the float flavour of a libm function */
#define FND_(name) name    /* the double flavour */
/* ROW(P_<dtype>, T, C, LD, ST, F) for each float dtype: T stored, C computed in,
** LD/ST the conversions between them, F(name) the libm flavour of C. */
#define FLOAT_ROWS_(ROW, P)                                                                                            \
    ROW(P##_f32, float, float, ID_, ID_, FNF_)                                                                         \
    ROW(P##_f64, double, double, ID_, ID_, FND_)                                                                       \
    ROW(P##_f16, uint16_t, float, F16_IN_, F16_OUT_, FNF_)                                                             \
    ROW(P##_bf16, uint16_t, float, BF16_IN_, BF16_OUT_, FNF_)

#define GELU_K       0.7978845608028654 /* sqrt(2/pi) */
#define GELU_C       0.044715
#define INV_SQRT2    0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

/* min(max(x, lo), hi): hi wins when lo > hi, and NaN stays NaN (comparisons are false) */
#define CLAMP_(x, lo, hi) (((x) < (lo) ? (lo) : (x)) > (hi) ? (hi) : ((x) < (lo) ? (lo) : (x)))

/* o[i] = EXPR with x = in[i] loaded as C */
#define LOOP_(C, LD, ST, EXPR)                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
        C x = LD(in[i * si]);                                                                                          \
        o[i * so] = ST(EXPR);                                                                                          \
    }

#define FLOAT_ROW_(NAME, T, C, LD, ST, F)                                                                              \
    static void NAME(const td_op *op, int64_t n, T *o, int64_t so, const T *in, int64_t si) {                          \
        const C one = 1, half = 0.5, k = (C)GELU_K, c = (C)GELU_C, r2 = (C)INV_SQRT2;                                  \
        /* an open side is an infinite bound */                                                                        \
        const C lo = op->p.clamp.has_lo ? (C)op->p.clamp.lo : -(C)INFINITY;                                            \
        const C hi = op->p.clamp.has_hi ? (C)op->p.clamp.hi : (C)INFINITY;                                             \
        switch (op->kind) {                                                                                            \
        case TD_OP_NEG: LOOP_(C, LD, ST, -x); break;                                                                   \
        case TD_OP_ABS: LOOP_(C, LD, ST, F(fabs)(x)); break;                                                           \
        case TD_OP_EXP: LOOP_(C, LD, ST, F(exp)(x)); break;                                                            \
        case TD_OP_LOG: LOOP_(C, LD, ST, F(log)(x)); break;                                                            \
        case TD_OP_SQRT: LOOP_(C, LD, ST, F(sqrt)(x)); break;                                                          \
        case TD_OP_RSQRT: LOOP_(C, LD, ST, one / F(sqrt)(x)); break;                                                   \
        case TD_OP_SIN: LOOP_(C, LD, ST, F(sin)(x)); break;                                                            \
        case TD_OP_COS: LOOP_(C, LD, ST, F(cos)(x)); break;                                                            \
        case TD_OP_TANH: LOOP_(C, LD, ST, F(tanh)(x)); break;                                                          \
        case TD_OP_SIGMOID: LOOP_(C, LD, ST, one / (one + F(exp)(-x))); break;                                         \
        case TD_OP_RELU: LOOP_(C, LD, ST, !(x <= 0) ? x : 0); break;                                                   \
        case TD_OP_SILU: LOOP_(C, LD, ST, x / (one + F(exp)(-x))); break;                                              \
        case TD_OP_GELU:                                                                                               \
            if (op->p.gelu.approximate == TD_GELU_TANH)                                                                \
                LOOP_(C, LD, ST, half *x *(one + F(tanh)(k * (x + c * x * x * x))))                                    \
            else                                                                                                       \
                LOOP_(C, LD, ST, half *x *F(erfc)(-x * r2))                                                            \
            break;                                                                                                     \
        case TD_OP_CLAMP: LOOP_(C, LD, ST, CLAMP_(x, lo, hi)); break;                                                  \
        default: break;                                                                                                \
        }                                                                                                              \
    }
FLOAT_ROWS_(FLOAT_ROW_, row)

/* Integers: NEG wraps (in uint64_t); CLAMP bounds are whole numbers (the core
** promotes to float otherwise), applied as int64_t. */
#define INT_ROW_(NAME, T)                                                                                              \
    static void NAME(const td_op *op, int64_t n, T *o, int64_t so, const T *in, int64_t si) {                          \
        int64_t lo = op->p.clamp.has_lo ? cpu_to_i64(op->p.clamp.lo, -9.2e18, 9.2e18) : INT64_MIN;                     \
        int64_t hi = op->p.clamp.has_hi ? cpu_to_i64(op->p.clamp.hi, -9.2e18, 9.2e18) : INT64_MAX;                     \
        switch (op->kind) {                                                                                            \
        case TD_OP_NEG: LOOP_(uint64_t, (uint64_t), (T), 0 - x); break;                                                \
        case TD_OP_ABS: LOOP_(int64_t, ID_, (T), x < 0 ? (int64_t)(0 - (uint64_t)x) : x); break;                       \
        case TD_OP_RELU: LOOP_(T, ID_, ID_, x > 0 ? x : 0); break;                                                     \
        case TD_OP_CLAMP: LOOP_(int64_t, ID_, (T), CLAMP_(x, lo, hi)); break;                                          \
        default: break;                                                                                                \
        }                                                                                                              \
    }
INT_ROW_(row_i32, int32_t)
INT_ROW_(row_i64, int64_t)
INT_ROW_(row_u8, uint8_t)

#define CALL_(fn, T) fn(op, n, (T *)p[0], s[0], (const T *)p[1], s[1])

static void unary_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    td_dtype dt = op->out[0].dtype;
    if (dt == TD_F32 && s[0] == 1 && s[1] == 1 && cpu_has_avx2()) {
        if (op->kind == TD_OP_RELU) {
            cpu_relu_f32_avx2(n, (float *)p[0], (const float *)p[1]);
            return;
        }
        if (op->kind == TD_OP_EXP) { /* 1.26 ulp, x86/exp_avx2.h */
            cpu_exp_f32_avx2(n, (float *)p[0], (const float *)p[1]);
            return;
        }
        if (op->kind == TD_OP_GELU && op->p.gelu.approximate == TD_GELU_ERF) { /* erf to 1.5e-7, x86/gelu_avx2.c */
            cpu_gelu_f32_avx2(n, (float *)p[0], (const float *)p[1]);
            return;
        }
    }
    CPU_ROW_SWITCH_(dt, CALL_, row)
}

/* GELU_BACKWARD, differentiating y = x*Phi(x):
**   erf form:  dx = dy * (Phi(x) + x*phi(x)), phi(x) = e^(-x^2/2)/sqrt(2pi)
**   tanh form: y = x*(1+t)/2 with t = tanh(u), u = k*(x + c*x^3):
**              dx = dy * ((1+t)/2 + x/2 * (1-t^2) * k*(1 + 3c*x^2)),
**              as s + 2x s s' k*(1 + 3c*x^2) with s = (1+t)/2 = sigmoid(2u), s' = 1 - s = sigmoid(-2u):
**              1 + t cancels where t is near -1 (x below about -2), the sigmoids keep their relative precision */
#define GELU_BWD_ROW_(NAME, T, C, LD, ST, F)                                                                           \
    static void NAME(bool tanh_form, int64_t n, T *o, int64_t so, const T *dy, int64_t sd, const T *xs, int64_t sx) {  \
        const C one = 1, half = 0.5, k = (C)GELU_K, c = (C)GELU_C, r2 = (C)INV_SQRT2, r2pi = (C)INV_SQRT_2PI;          \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            C x = LD(xs[i * sx]), g = LD(dy[i * sd]), d;                                                               \
            if (tanh_form) {                                                                                           \
                C u2 = 2 * k * (x + c * x * x * x), sp = one / (one + F(exp)(-u2)), sm = one / (one + F(exp)(u2));     \
                d = sp + 2 * x * sp * sm * k * (one + 3 * c * x * x);                                                  \
            } else {                                                                                                   \
                d = half * F(erfc)(-x * r2) + x * r2pi * F(exp)(-half * x * x);                                        \
            }                                                                                                          \
            o[i * so] = ST(g * d);                                                                                     \
        }                                                                                                              \
    }
FLOAT_ROWS_(GELU_BWD_ROW_, gelu_bwd)

#define BWD_CALL_(fn, T) fn(tf, n, (T *)p[0], s[0], (const T *)p[1], s[1], (const T *)p[2], s[2])

static void gelu_backward_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    bool tf = op->p.gelu.approximate == TD_GELU_TANH;
    if (!tf && op->out[0].dtype == TD_F32 && s[0] == 1 && s[1] == 1 && s[2] == 1 && cpu_has_avx2()) {
        cpu_gelu_backward_f32_avx2(n, (float *)p[0], (const float *)p[1], (const float *)p[2]);
        return;
    }
    switch (op->out[0].dtype) {
    case TD_F32: BWD_CALL_(gelu_bwd_f32, float); break;
    case TD_F64: BWD_CALL_(gelu_bwd_f64, double); break;
    case TD_F16: BWD_CALL_(gelu_bwd_f16, uint16_t); break;
    case TD_BF16: BWD_CALL_(gelu_bwd_bf16, uint16_t); break;
    default: break;
    }
}

/*
** Binary arithmetic: ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM.
** a, b and out have one shape (the core broadcasts a and b with stride-0
** dims) and one dtype. Floats compute in their own precision (f16/bf16 in
** f32); integers wrap around like PyTorch's. MAXIMUM/MINIMUM propagate NaN.
** Contiguous f32 ADD/SUB/MUL/DIV (one side may be a broadcast scalar) take the
** AVX2 path in x86/binary_avx2.c, and bf16 / f16 ones x86/binary_half_avx2.c
** (the conversions in registers, the same bits as these rows).
*/

/* o[i] = EXPR with x = a[i], y = b[i] loaded as C */
#define BIN_LOOP_(C, LD, ST, EXPR)                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
        C x = LD(a[i * sa]), y = LD(b[i * sb]);                                                                        \
        o[i * so] = ST(EXPR);                                                                                          \
    }

#define BIN_FLOAT_ROW_(NAME, T, C, LD, ST, F)                                                                          \
    static void NAME(td_op_kind k, int64_t n, T *o, int64_t so, const T *a, int64_t sa, const T *b, int64_t sb) {      \
        switch (k) {                                                                                                   \
        case TD_OP_ADD: BIN_LOOP_(C, LD, ST, x + y); break;                                                            \
        case TD_OP_SUB: BIN_LOOP_(C, LD, ST, x - y); break;                                                            \
        case TD_OP_MUL: BIN_LOOP_(C, LD, ST, x *y); break;                                                             \
        case TD_OP_DIV: BIN_LOOP_(C, LD, ST, x / y); break;                                                            \
        case TD_OP_POW: BIN_LOOP_(C, LD, ST, F(pow)(x, y)); break;                                                     \
        case TD_OP_MAXIMUM: BIN_LOOP_(C, LD, ST, x != x || x > y ? x : y); break;                                      \
        case TD_OP_MINIMUM: BIN_LOOP_(C, LD, ST, x != x || x < y ? x : y); break;                                      \
        default: break;                                                                                                \
        }                                                                                                              \
    }
FLOAT_ROWS_(BIN_FLOAT_ROW_, bin_row)

/* integers: add/sub/mul in uint64_t, so overflow wraps instead of being undefined */
#define BIN_INT_ROW_(NAME, T)                                                                                          \
    static void NAME(td_op_kind k, int64_t n, T *o, int64_t so, const T *a, int64_t sa, const T *b, int64_t sb) {      \
        switch (k) {                                                                                                   \
        case TD_OP_ADD: BIN_LOOP_(uint64_t, (uint64_t), (T), x + y); break;                                            \
        case TD_OP_SUB: BIN_LOOP_(uint64_t, (uint64_t), (T), x - y); break;                                            \
        case TD_OP_MUL: BIN_LOOP_(uint64_t, (uint64_t), (T), x *y); break;                                             \
        case TD_OP_MAXIMUM: BIN_LOOP_(T, ID_, ID_, x > y ? x : y); break;                                              \
        case TD_OP_MINIMUM: BIN_LOOP_(T, ID_, ID_, x < y ? x : y); break;                                              \
        default: break;                                                                                                \
        }                                                                                                              \
    }
BIN_INT_ROW_(bin_row_i32, int32_t)
BIN_INT_ROW_(bin_row_i64, int64_t)
BIN_INT_ROW_(bin_row_u8, uint8_t)

#define BIN_CALL_(fn, T) fn(k, n, (T *)p[0], s[0], (const T *)p[1], s[1], (const T *)p[2], s[2])

static void binary_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    td_op_kind k = op->kind;
    td_dtype dt = op->out[0].dtype;
    if (dt == TD_F32 && s[0] == 1 && (s[1] | s[2]) <= 1 && cpu_has_avx2() &&
        cpu_binary_f32_avx2(k, n, (float *)p[0], (const float *)p[1], s[1], (const float *)p[2], s[2],
                            td_operand_numel(&op->out[0]) * 4 >= CPU_STREAM_BYTES))
        return;
    if ((dt == TD_BF16 || dt == TD_F16) && s[0] == 1 && (s[1] == 0 || s[1] == 1) && (s[2] == 0 || s[2] == 1) &&
        cpu_has_avx2() && cpu_has_f16c() &&
        cpu_binary_half_avx2(k, dt, n, (uint16_t *)p[0], (const uint16_t *)p[1], s[1], (const uint16_t *)p[2], s[2],
                             td_operand_numel(&op->out[0]) * 4 >= CPU_STREAM_BYTES))
        return;
    CPU_ROW_SWITCH_(dt, BIN_CALL_, bin_row)
}

/*
** Comparisons EQ, NE, LT, LE, GT, GE (a, b of one dtype -> bool out) and
** WHERE (cond bool, a, b of one dtype -> out of that dtype). All operands have
** one shape; broadcast inputs come with stride-0 dims. Comparisons with NaN
** are false except NE, as in IEEE and PyTorch.
*/

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

static void compare_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    CPU_ROW_SWITCH_(op->in[0].dtype, CMP_CALL_, cmp);
}

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

/* ---- the kernels: each op, its row function and its cost per element (for the thread count) ----
** DIV and POW are float-only (the op table); integer inputs never reach them. */
#define EW_KERNEL_(NAME, row, cost)                                                                                    \
    td_status cpu_op_##NAME(const td_op *op) { return cpu_elementwise(op, row, cost); }
EW_KERNEL_(NEG, unary_row, 1)
EW_KERNEL_(ABS, unary_row, 1)
EW_KERNEL_(EXP, unary_row, 8)
EW_KERNEL_(LOG, unary_row, 8)
EW_KERNEL_(SQRT, unary_row, 4)
EW_KERNEL_(RSQRT, unary_row, 4)
EW_KERNEL_(SIN, unary_row, 8)
EW_KERNEL_(COS, unary_row, 8)
EW_KERNEL_(TANH, unary_row, 8)
EW_KERNEL_(SIGMOID, unary_row, 8)
EW_KERNEL_(RELU, unary_row, 1)
EW_KERNEL_(GELU, unary_row, 16)
EW_KERNEL_(SILU, unary_row, 8)
EW_KERNEL_(CLAMP, unary_row, 1)
EW_KERNEL_(GELU_BACKWARD, gelu_backward_row, 16)
EW_KERNEL_(ADD, binary_row, 1)
EW_KERNEL_(SUB, binary_row, 1)
EW_KERNEL_(MUL, binary_row, 1)
EW_KERNEL_(DIV, binary_row, 2)
EW_KERNEL_(POW, binary_row, 16)
EW_KERNEL_(MAXIMUM, binary_row, 1)
EW_KERNEL_(MINIMUM, binary_row, 1)
EW_KERNEL_(EQ, compare_row, 1)
EW_KERNEL_(NE, compare_row, 1)
EW_KERNEL_(LT, compare_row, 1)
EW_KERNEL_(LE, compare_row, 1)
EW_KERNEL_(GT, compare_row, 1)
EW_KERNEL_(GE, compare_row, 1)
EW_KERNEL_(WHERE, where_row, 1)
