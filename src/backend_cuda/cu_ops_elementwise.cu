/*
** Elementwise ops on CUDA, mirroring src/backend_cpu/cpu_binary.c,
** cpu_compare.c and cpu_unary.c:
**   binary: ADD a+b, SUB a-b, MUL a*b, DIV a/b, POW a^b,
**     MAXIMUM / MINIMUM (NaN propagates: a NaN a wins, else a NaN b wins),
**   comparisons: EQ, NE, LT, LE, GT, GE -> bool (false against NaN, except NE),
**   WHERE cond ? a : b (cond bool; a, b and out of one dtype),
**   unary: NEG -x, ABS |x|, EXP, LOG, SQRT, RSQRT 1/sqrt(x), SIN, COS, TANH,
**     SIGMOID 1/(1+e^-x), RELU max(x,0) (NaN stays NaN, -0 becomes 0),
**     SILU x/(1+e^-x),
**     GELU x*Phi(x) with Phi(x) = erfc(-x/sqrt2)/2 (no cancellation for x << 0),
**          or the tanh form
**          x*(1 + tanh(k*(x + 0.044715 x^3)))/2 with k = sqrt(2/pi),
**     CLAMP min(max(x, lo), hi) with either side optional (NaN stays NaN; hi
**          wins when lo > hi),
**   and GELU_BACKWARD: in = (dy, x) -> dy * gelu'(x).
** Shapes: every input has out's shape; the core broadcasts the inputs with
** stride-0 dims. out is contiguous (TD_LAYOUT_ANY).
** Arithmetic: f32/f16/bf16 compute in float (expf, erfcf, ...), f64 in
** double, rounded once to the dtype; integers compute in 64 bits and wrap
** (add/sub/mul/neg/abs in uint64_t). Comparisons load f16/bf16 as float.
** WHERE moves raw elements of the dtype's size. The dtypes are op_list.h's
** (the dispatcher checked them): none of these ops has a capability test.
** Kernels: cu_ew_run (cu_ew.cuh): vectorized when contiguous (an input may be
** a broadcast scalar), strided otherwise.
*/
#include <math.h>

#include "cu_ew.cuh"

/* ---- arithmetic: x, y in the compute type C ---- */

#define CU_INT_(C) std::is_integral<C>::value

namespace { /* file-local types and kernels */

struct cu_add_op {
    static constexpr bool float_only = false;
    template <typename C> __device__ C operator()(C x, C y) const {
        if constexpr (CU_INT_(C))
            return (C)((uint64_t)x + (uint64_t)y);
        else
            return x + y;
    }
};
struct cu_sub_op {
    static constexpr bool float_only = false;
    template <typename C> __device__ C operator()(C x, C y) const {
        if constexpr (CU_INT_(C))
            return (C)((uint64_t)x - (uint64_t)y);
        else
            return x - y;
    }
};
struct cu_mul_op {
    static constexpr bool float_only = false;
    template <typename C> __device__ C operator()(C x, C y) const {
        if constexpr (CU_INT_(C))
            return (C)((uint64_t)x * (uint64_t)y);
        else
            return x * y;
    }
};
struct cu_div_op {
    static constexpr bool float_only = true;
    template <typename C> __device__ C operator()(C x, C y) const { return x / y; }
};
struct cu_pow_op {
    static constexpr bool float_only = true;
    template <typename C> __device__ C operator()(C x, C y) const { return cu_ew_pow(x, y); }
};
/* max(x, y): x when x is NaN; y when y is NaN (x > NaN is false) */
struct cu_maximum_op {
    static constexpr bool float_only = false;
    template <typename C> __device__ C operator()(C x, C y) const { return x != x || x > y ? x : y; }
};
struct cu_minimum_op {
    static constexpr bool float_only = false;
    template <typename C> __device__ C operator()(C x, C y) const { return x != x || x < y ? x : y; }
};

/* out = op(a, b) in the compute type of T */
template <typename T, typename Op> struct cu_binary_f {
    __device__ T operator()(T a, T b) const {
        typedef typename cu_compute<T>::type C;
        return cu_from<T>(Op()(cu_to<C>(a), cu_to<C>(b)));
    }
};

} // namespace

template <typename Op> static td_status binary(cu_dev *d, const td_op *op, const char *name) {
    const td_operand *views[3] = {&op->out[0], &op->in[0], &op->in[1]};
    void *o = cu_data(&op->out[0]);
    const void *a = cu_data(&op->in[0]), *b = cu_data(&op->in[1]);
    td_status st = TD_OK;
    if constexpr (Op::float_only)
        CU_SWITCH_FLOAT(op->in[0].dtype,
                        st = cu_ew_run(d, name, cu_binary_f<T, Op>(), views, (T *)o, (const T *)a, (const T *)b))
    else
        CU_SWITCH_NUM(op->in[0].dtype,
                      st = cu_ew_run(d, name, cu_binary_f<T, Op>(), views, (T *)o, (const T *)a, (const T *)b))
    return st;
}

#define CU_BINARY_(NAME, OP, name)                                                                                     \
    extern "C" td_status cu_op_##NAME(cu_dev *d, const td_op *op) { return binary<OP>(d, op, name); }

CU_BINARY_(ADD, cu_add_op, "add")
CU_BINARY_(SUB, cu_sub_op, "sub")
CU_BINARY_(MUL, cu_mul_op, "mul")
CU_BINARY_(DIV, cu_div_op, "div")
CU_BINARY_(POW, cu_pow_op, "pow")
CU_BINARY_(MAXIMUM, cu_maximum_op, "maximum")
CU_BINARY_(MINIMUM, cu_minimum_op, "minimum")

/* ---- comparisons: bool out = x OP y in the compute type of T ---- */

namespace { /* file-local types and kernels */

#define CU_CMP_OP_(name, OP)                                                                                           \
    struct name {                                                                                                      \
        template <typename C> __device__ bool operator()(C x, C y) const { return x OP y; }                            \
    };
CU_CMP_OP_(cu_eq_op, ==)
CU_CMP_OP_(cu_ne_op, !=)
CU_CMP_OP_(cu_lt_op, <)
CU_CMP_OP_(cu_le_op, <=)
CU_CMP_OP_(cu_gt_op, >)
CU_CMP_OP_(cu_ge_op, >=)

template <typename T, typename Op> struct cu_compare_f {
    __device__ cu_bool operator()(T a, T b) const {
        typedef typename cu_compute<T>::type C;
        return cu_bool{(uint8_t)Op()(cu_to<C>(a), cu_to<C>(b))};
    }
};

} // namespace

template <typename Op> static td_status compare(cu_dev *d, const td_op *op, const char *name) {
    const td_operand *views[3] = {&op->out[0], &op->in[0], &op->in[1]};
    cu_bool *o = (cu_bool *)cu_data(&op->out[0]);
    const void *a = cu_data(&op->in[0]), *b = cu_data(&op->in[1]);
    td_status st = TD_OK;
    CU_SWITCH_ALL(op->in[0].dtype, st = cu_ew_run(d, name, cu_compare_f<T, Op>(), views, o, (const T *)a, (const T *)b))
    return st;
}

#define CU_COMPARE_(NAME, OP, name)                                                                                    \
    extern "C" td_status cu_op_##NAME(cu_dev *d, const td_op *op) { return compare<OP>(d, op, name); }

CU_COMPARE_(EQ, cu_eq_op, "eq")
CU_COMPARE_(NE, cu_ne_op, "ne")
CU_COMPARE_(LT, cu_lt_op, "lt")
CU_COMPARE_(LE, cu_le_op, "le")
CU_COMPARE_(GT, cu_gt_op, "gt")
CU_COMPARE_(GE, cu_ge_op, "ge")

/* ---- WHERE: in = (cond, a, b), out[i] = cond[i] ? a[i] : b[i] on raw elements U ---- */

namespace { /* file-local types and kernels */

template <typename U> struct cu_where_f {
    __device__ U operator()(cu_bool c, U a, U b) const { return c.v ? a : b; }
};

} // namespace

template <typename U> static td_status where(cu_dev *d, const td_op *op) {
    const td_operand *views[4] = {&op->out[0], &op->in[0], &op->in[1], &op->in[2]};
    return cu_ew_run(d, "where", cu_where_f<U>(), views, (U *)cu_data(&op->out[0]),
                     (const cu_bool *)cu_data(&op->in[0]), (const U *)cu_data(&op->in[1]),
                     (const U *)cu_data(&op->in[2]));
}

extern "C" td_status cu_op_WHERE(cu_dev *d, const td_op *op) {
    switch (td_dtype_size(op->out[0].dtype)) {
    case 1: return where<uint8_t>(d, op);
    case 2: return where<uint16_t>(d, op);
    case 4: return where<uint32_t>(d, op);
    case 8: return where<uint64_t>(d, op);
    default: return td_error_set(TD_ERR_UNSUPPORTED, "cuda where: no kernel for %s", td_dtype_name(op->out[0].dtype));
    }
}

/* ==== unary ==== */

/* ---- the ops on the compute type C ---- */

namespace { /* file-local types and kernels */

struct cu_neg_op {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (CU_INT_(C))
            return (C)(0 - (uint64_t)x);
        else
            return -x;
    }
};
struct cu_abs_op {
    template <typename C> __device__ C operator()(C x) const {
        if constexpr (CU_INT_(C))
            return x < 0 ? (C)(0 - (uint64_t)x) : x;
        else
            return cu_ew_fabs(x);
    }
};
/* !(x <= 0): NaN passes through */
struct cu_relu_op {
    template <typename C> __device__ C operator()(C x) const { return !(x <= (C)0) ? x : (C)0; }
};

#define CU_UNARY_OP_(name, EXPR)                                                                                       \
    struct name {                                                                                                      \
        template <typename C> __device__ C operator()(C x) const {                                                     \
            const C one = 1, half = 0.5;                                                                               \
            (void)one, (void)half;                                                                                     \
            return EXPR;                                                                                               \
        }                                                                                                              \
    };
CU_UNARY_OP_(cu_exp_op, cu_ew_exp(x))
CU_UNARY_OP_(cu_log_op, cu_ew_log(x))
CU_UNARY_OP_(cu_sqrt_op, cu_ew_sqrt(x))
CU_UNARY_OP_(cu_rsqrt_op, one / cu_ew_sqrt(x))
CU_UNARY_OP_(cu_sin_op, cu_ew_sin(x))
CU_UNARY_OP_(cu_cos_op, cu_ew_cos(x))
CU_UNARY_OP_(cu_tanh_op, cu_ew_tanh(x))
CU_UNARY_OP_(cu_sigmoid_op, one / (one + cu_ew_exp(-x)))
CU_UNARY_OP_(cu_silu_op, x / (one + cu_ew_exp(-x)))
CU_UNARY_OP_(cu_gelu_erf_op, half *x *cu_ew_erfc(-x *(C)CU_INV_SQRT2))
CU_UNARY_OP_(cu_gelu_tanh_op, half *x *(one + cu_ew_tanh((C)CU_GELU_K * (x + (C)CU_GELU_C * x * x * x))))
#undef CU_UNARY_OP_

/* min(max(x, lo), hi) as cpu_unary.c's CLAMP_; an open side is +-inf (floats) or the int64 range */
template <typename C> struct cu_clamp_op {
    C lo, hi;
    __device__ C operator()(C x) const {
        C y = x < lo ? lo : x;
        return y > hi ? hi : y;
    }
};

/* out = op(x) in the compute type of T */
template <typename T, typename Op> struct cu_unary_f {
    Op op;
    __device__ T operator()(T x) const {
        typedef typename cu_compute<T>::type C;
        return cu_from<T>(op(cu_to<C>(x)));
    }
};

} // namespace

template <typename T, typename Op> static td_status unary_run(cu_dev *d, const td_op *op, const char *name, Op f) {
    const td_operand *views[2] = {&op->out[0], &op->in[0]};
    return cu_ew_run(d, name, cu_unary_f<T, Op>{f}, views, (T *)cu_data(&op->out[0]), (const T *)cu_data(&op->in[0]));
}

/* the dtypes of the op's class: floats, or every numeric dtype when INTS */
template <typename Op, bool INTS> static td_status unary(cu_dev *d, const td_op *op, const char *name) {
    td_status st = TD_OK;
    if constexpr (INTS)
        CU_SWITCH_NUM(op->in[0].dtype, st = unary_run<T>(d, op, name, Op()))
    else
        CU_SWITCH_FLOAT(op->in[0].dtype, st = unary_run<T>(d, op, name, Op()))
    return st;
}

#define CU_UNARY_(NAME, OP, ints, name)                                                                                \
    extern "C" td_status cu_op_##NAME(cu_dev *d, const td_op *op) { return unary<OP, ints>(d, op, name); }

CU_UNARY_(NEG, cu_neg_op, true, "neg")
CU_UNARY_(ABS, cu_abs_op, true, "abs")
CU_UNARY_(RELU, cu_relu_op, true, "relu")
CU_UNARY_(EXP, cu_exp_op, false, "exp")
CU_UNARY_(LOG, cu_log_op, false, "log")
CU_UNARY_(SQRT, cu_sqrt_op, false, "sqrt")
CU_UNARY_(RSQRT, cu_rsqrt_op, false, "rsqrt")
CU_UNARY_(SIN, cu_sin_op, false, "sin")
CU_UNARY_(COS, cu_cos_op, false, "cos")
CU_UNARY_(TANH, cu_tanh_op, false, "tanh")
CU_UNARY_(SIGMOID, cu_sigmoid_op, false, "sigmoid")
CU_UNARY_(SILU, cu_silu_op, false, "silu")

extern "C" td_status cu_op_GELU(cu_dev *d, const td_op *op) {
    if (op->p.gelu.approximate == TD_GELU_TANH) return unary<cu_gelu_tanh_op, false>(d, op, "gelu");
    return unary<cu_gelu_erf_op, false>(d, op, "gelu");
}

/* ---- CLAMP ---- */

/* an integer bound as cpu_to_i64(v, -9.2e18, 9.2e18): truncated, saturated, NaN -> 0 */
static int64_t clamp_bound_i64(double v) {
    if (v != v) return 0;
    if (v <= -9.2e18) return (int64_t)-9.2e18;
    if (v >= 9.2e18) return (int64_t)9.2e18;
    return (int64_t)v;
}

/* bounds in the compute type C of T: an open side is +-inf, or the int64 range for integers */
template <typename T> static td_status clamp(cu_dev *d, const td_op *op) {
    typedef typename cu_compute<T>::type C;
    bool has_lo = op->p.clamp.has_lo, has_hi = op->p.clamp.has_hi;
    cu_clamp_op<C> f;
    if constexpr (CU_INT_(C)) {
        f.lo = has_lo ? clamp_bound_i64(op->p.clamp.lo) : INT64_MIN;
        f.hi = has_hi ? clamp_bound_i64(op->p.clamp.hi) : INT64_MAX;
    } else {
        f.lo = has_lo ? (C)op->p.clamp.lo : -(C)INFINITY;
        f.hi = has_hi ? (C)op->p.clamp.hi : (C)INFINITY;
    }
    return unary_run<T>(d, op, "clamp", f);
}

extern "C" td_status cu_op_CLAMP(cu_dev *d, const td_op *op) {
    td_status st = TD_OK;
    CU_SWITCH_NUM(op->in[0].dtype, st = clamp<T>(d, op))
    return st;
}

/* ---- GELU_BACKWARD, differentiating y = x*Phi(x): dx = dy * gelu'(x) (cu_gelu_grad, cu_ew.cuh: erf or tanh
** form), in = (dy, x), both of out's shape. */
namespace { /* file-local types and kernels */

template <typename T, bool TANH> struct cu_gelu_backward_f {
    __device__ T operator()(T dy_, T x_) const {
        typedef typename cu_compute<T>::type C;
        return cu_from<T>(cu_to<C>(dy_) * cu_gelu_grad<C, TANH>(cu_to<C>(x_)));
    }
};

} // namespace

extern "C" td_status cu_op_GELU_BACKWARD(cu_dev *d, const td_op *op) {
    const td_operand *views[3] = {&op->out[0], &op->in[0], &op->in[1]};
    void *o = cu_data(&op->out[0]);
    const void *dy = cu_data(&op->in[0]), *x = cu_data(&op->in[1]);
    bool tanh_form = op->p.gelu.approximate == TD_GELU_TANH;
    td_status st = TD_OK;
    CU_SWITCH_FLOAT(op->out[0].dtype, {
        if (tanh_form)
            st = cu_ew_run(d, "gelu_backward", cu_gelu_backward_f<T, true>(), views, (T *)o, (const T *)dy,
                           (const T *)x);
        else
            st = cu_ew_run(d, "gelu_backward", cu_gelu_backward_f<T, false>(), views, (T *)o, (const T *)dy,
                           (const T *)x);
    })
    return st;
}
