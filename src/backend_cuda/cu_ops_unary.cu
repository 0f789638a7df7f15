/*
** Unary elementwise ops on CUDA, mirroring src/backend_cpu/cpu_unary.c:
**   NEG -x, ABS |x|, EXP, LOG, SQRT, RSQRT 1/sqrt(x), SIN, COS, TANH,
**   SIGMOID 1/(1+e^-x), RELU max(x,0) (NaN stays NaN, -0 becomes 0),
**   SILU x/(1+e^-x),
**   GELU x*Phi(x) with Phi(x) = erfc(-x/sqrt2)/2 (no cancellation for x << 0),
**        or the tanh form
**        x*(1 + tanh(k*(x + 0.044715 x^3)))/2 with k = sqrt(2/pi),
**   CLAMP min(max(x, lo), hi) with either side optional (NaN stays NaN; hi
**        wins when lo > hi),
** and GELU_BACKWARD: in = (dy, x) -> dy * gelu'(x).
** Shapes: x (and dy) have out's shape, any strides (broadcast dims stride 0);
** out is contiguous (TD_LAYOUT_ANY).
** f32/f16/bf16 compute in float (expf, erfcf, ...), f64 in double; NEG, ABS,
** RELU and CLAMP also take integers, computed in int64 (NEG and ABS wrap).
** Kernels: cu_ew_run (cu_ew.cuh).
*/
#include <math.h>

#include "cu_ew.cuh"

#define CU_GELU_K       0.7978845608028654 /* sqrt(2/pi) */
#define CU_GELU_C       0.044715
#define CU_INV_SQRT2    0.7071067811865476
#define CU_INV_SQRT_2PI 0.3989422804014327

#define CU_INT_(C) std::is_integral<C>::value

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

static bool is_float(td_dtype dt) { return dt == TD_F32 || dt == TD_F64 || dt == TD_F16 || dt == TD_BF16; }

/* x and out of one dtype; integers only for the ops that define them */
static bool unary_ok(const td_op *op, bool ints) {
    if (op->n_in != 1 || op->n_out != 1 || op->in[0].dtype != op->out[0].dtype) return false;
    td_dtype dt = op->in[0].dtype;
    return is_float(dt) || (ints && dt != TD_BOOL);
}

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
    extern "C" bool cu_supports_##NAME(cu_dev *d, const td_op *op) { return (void)d, unary_ok(op, ints); }             \
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

extern "C" bool cu_supports_GELU(cu_dev *d, const td_op *op) { return (void)d, unary_ok(op, false); }
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

extern "C" bool cu_supports_CLAMP(cu_dev *d, const td_op *op) { return (void)d, unary_ok(op, true); }
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

/* ---- GELU_BACKWARD, differentiating y = x*Phi(x) ----
**   erf form:  dx = dy * (Phi(x) + x*phi(x)), phi(x) = e^(-x^2/2)/sqrt(2pi)
**   tanh form: y = x*(1+t)/2 with t = tanh(u), u = k*(x + c*x^3):
**              dx = dy * ((1+t)/2 + x/2 * (1-t^2) * k*(1 + 3c*x^2))
** in = (dy, x), both of out's shape. */
namespace { /* file-local types and kernels */

template <typename T, bool TANH> struct cu_gelu_backward_f {
    __device__ T operator()(T dy_, T x_) const {
        typedef typename cu_compute<T>::type C;
        const C one = 1, half = 0.5, k = (C)CU_GELU_K, c = (C)CU_GELU_C;
        C x = cu_to<C>(x_), g = cu_to<C>(dy_), dx;
        if constexpr (TANH) {
            C t = cu_ew_tanh(k * (x + c * x * x * x));
            dx = half * (one + t) + half * x * (one - t * t) * k * (one + 3 * c * x * x);
        } else {
            dx = half * cu_ew_erfc(-x * (C)CU_INV_SQRT2) + x * (C)CU_INV_SQRT_2PI * cu_ew_exp(-half * x * x);
        }
        return cu_from<T>(g * dx);
    }
};

} // namespace

extern "C" bool cu_supports_GELU_BACKWARD(cu_dev *d, const td_op *op) {
    (void)d;
    return op->n_in == 2 && op->n_out == 1 && is_float(op->out[0].dtype) && op->in[0].dtype == op->out[0].dtype &&
           op->in[1].dtype == op->out[0].dtype;
}

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
