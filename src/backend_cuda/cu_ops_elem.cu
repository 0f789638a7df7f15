/*
** Binary elementwise ops on CUDA, mirroring src/backend_cpu/cpu_binary.c and
** cpu_compare.c:
**   ADD a+b, SUB a-b, MUL a*b, DIV a/b, POW a^b,
**   MAXIMUM / MINIMUM (NaN propagates: a NaN a wins, else a NaN b wins),
**   EQ, NE, LT, LE, GT, GE -> bool (false against NaN, except NE),
**   WHERE cond ? a : b (cond bool; a, b and out of one dtype).
** Shapes: out, a and b (and cond) all have out's shape; the core broadcasts
** the inputs with stride-0 dims. out is contiguous (TD_LAYOUT_ANY).
** Arithmetic: f32/f16/bf16 compute in float, f64 in double, rounded once to
** the dtype; integers compute in 64 bits and wrap (add/sub/mul in uint64_t).
** DIV and POW take floats only. Comparisons load f16/bf16 as float. WHERE
** moves raw elements of the dtype's size.
** Kernels: cu_ew_run (cu_ew.cuh): vectorized when contiguous (a or b may be
** a broadcast scalar), strided otherwise.
*/
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

static bool binary_ok(const td_op *op, bool float_only) {
    if (op->n_in != 2 || op->n_out != 1) return false;
    td_dtype dt = op->in[0].dtype;
    bool fl = dt == TD_F32 || dt == TD_F64 || dt == TD_F16 || dt == TD_BF16;
    return op->in[1].dtype == dt && op->out[0].dtype == dt && dt != TD_BOOL && (fl || !float_only);
}

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
    extern "C" bool cu_supports_##NAME(cu_dev *d, const td_op *op) { return (void)d, binary_ok(op, OP::float_only); }  \
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

/* a, b of one dtype -> bool; ordering comparisons are not defined on bool */
static bool compare_ok(const td_op *op, bool ordered) {
    if (op->n_in != 2 || op->n_out != 1) return false;
    td_dtype dt = op->in[0].dtype;
    return op->in[1].dtype == dt && op->out[0].dtype == TD_BOOL && !(ordered && dt == TD_BOOL);
}

template <typename Op> static td_status compare(cu_dev *d, const td_op *op, const char *name) {
    const td_operand *views[3] = {&op->out[0], &op->in[0], &op->in[1]};
    cu_bool *o = (cu_bool *)cu_data(&op->out[0]);
    const void *a = cu_data(&op->in[0]), *b = cu_data(&op->in[1]);
    td_status st = TD_OK;
    CU_SWITCH_ALL(op->in[0].dtype, st = cu_ew_run(d, name, cu_compare_f<T, Op>(), views, o, (const T *)a, (const T *)b))
    return st;
}

#define CU_COMPARE_(NAME, OP, ordered, name)                                                                           \
    extern "C" bool cu_supports_##NAME(cu_dev *d, const td_op *op) { return (void)d, compare_ok(op, ordered); }        \
    extern "C" td_status cu_op_##NAME(cu_dev *d, const td_op *op) { return compare<OP>(d, op, name); }

CU_COMPARE_(EQ, cu_eq_op, false, "eq")
CU_COMPARE_(NE, cu_ne_op, false, "ne")
CU_COMPARE_(LT, cu_lt_op, true, "lt")
CU_COMPARE_(LE, cu_le_op, true, "le")
CU_COMPARE_(GT, cu_gt_op, true, "gt")
CU_COMPARE_(GE, cu_ge_op, true, "ge")

/* ---- WHERE: in = (cond, a, b), out[i] = cond[i] ? a[i] : b[i] on raw elements U ---- */

namespace { /* file-local types and kernels */

template <typename U> struct cu_where_f {
    __device__ U operator()(cu_bool c, U a, U b) const { return c.v ? a : b; }
};

} // namespace

extern "C" bool cu_supports_WHERE(cu_dev *d, const td_op *op) {
    (void)d;
    return op->n_in == 3 && op->n_out == 1 && op->in[0].dtype == TD_BOOL && op->in[1].dtype == op->in[2].dtype &&
           op->out[0].dtype == op->in[1].dtype;
}

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
