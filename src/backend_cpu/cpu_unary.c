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
#include "cpu_ew.h"
#include "cpu_rows.h"

#define FNF_(name) name##f /* the float flavour of a libm function */
#define FND_(name) name    /* the double flavour */

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
FLOAT_ROW_(row_f32, float, float, ID_, ID_, FNF_)
FLOAT_ROW_(row_f64, double, double, ID_, ID_, FND_)
FLOAT_ROW_(row_f16, uint16_t, float, F16_IN_, F16_OUT_, FNF_)
FLOAT_ROW_(row_bf16, uint16_t, float, BF16_IN_, BF16_OUT_, FNF_)

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

td_status td_cpu_NEG(const td_op *op) { return cpu_elementwise(op, unary_row, 1); }
td_status td_cpu_ABS(const td_op *op) { return cpu_elementwise(op, unary_row, 1); }
td_status td_cpu_EXP(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_LOG(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_SQRT(const td_op *op) { return cpu_elementwise(op, unary_row, 4); }
td_status td_cpu_RSQRT(const td_op *op) { return cpu_elementwise(op, unary_row, 4); }
td_status td_cpu_SIN(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_COS(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_TANH(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_SIGMOID(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_RELU(const td_op *op) { return cpu_elementwise(op, unary_row, 1); }
td_status td_cpu_GELU(const td_op *op) { return cpu_elementwise(op, unary_row, 16); }
td_status td_cpu_SILU(const td_op *op) { return cpu_elementwise(op, unary_row, 8); }
td_status td_cpu_CLAMP(const td_op *op) { return cpu_elementwise(op, unary_row, 1); }

/* GELU_BACKWARD, differentiating y = x*Phi(x):
**   erf form:  dx = dy * (Phi(x) + x*phi(x)), phi(x) = e^(-x^2/2)/sqrt(2pi)
**   tanh form: y = x*(1+t)/2 with t = tanh(u), u = k*(x + c*x^3):
**              dx = dy * ((1+t)/2 + x/2 * (1-t^2) * k*(1 + 3c*x^2)) */
#define GELU_BWD_ROW_(NAME, T, C, LD, ST, F)                                                                           \
    static void NAME(bool tanh_form, int64_t n, T *o, int64_t so, const T *dy, int64_t sd, const T *xs, int64_t sx) {  \
        const C one = 1, half = 0.5, k = (C)GELU_K, c = (C)GELU_C, r2 = (C)INV_SQRT2, r2pi = (C)INV_SQRT_2PI;          \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            C x = LD(xs[i * sx]), g = LD(dy[i * sd]), d;                                                               \
            if (tanh_form) {                                                                                           \
                C t = F(tanh)(k * (x + c * x * x * x));                                                                \
                d = half * (one + t) + half * x * (one - t * t) * k * (one + 3 * c * x * x);                           \
            } else {                                                                                                   \
                d = half * F(erfc)(-x * r2) + x * r2pi * F(exp)(-half * x * x);                                        \
            }                                                                                                          \
            o[i * so] = ST(g * d);                                                                                     \
        }                                                                                                              \
    }
GELU_BWD_ROW_(gelu_bwd_f32, float, float, ID_, ID_, FNF_)
GELU_BWD_ROW_(gelu_bwd_f64, double, double, ID_, ID_, FND_)
GELU_BWD_ROW_(gelu_bwd_f16, uint16_t, float, F16_IN_, F16_OUT_, FNF_)
GELU_BWD_ROW_(gelu_bwd_bf16, uint16_t, float, BF16_IN_, BF16_OUT_, FNF_)

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

td_status td_cpu_GELU_BACKWARD(const td_op *op) { return cpu_elementwise(op, gelu_backward_row, 16); }
