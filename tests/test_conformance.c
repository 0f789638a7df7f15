/*
** Conformance: every op of the op table, on every available device and every
** dtype of its class, against the CPU float64 reference (see conformance.h for
** the method, the limits and the environment variables).
**
**   test_conformance [case ...]        check (one runner case per op)
**   test_conformance --perf [case ...] print GFLOP/s or GB/s per op and device
**
** Shapes: broadcasting, transposed / stepped / expanded views, 0-d, size 1,
** size 0 and odd sizes (1, 7, 33, 1000). Adding an op to TD_OP_LIST without a
** row in OP_CASES (tests/op_cases.h) fails the op_coverage case. `trident devices --selftest`
** runs the same case table (tools/devices_selftest.c, with CONF_TABLE_ONLY).
*/
#include "conformance.h"
#include "core/internal.h"
#include "core/linear_dgelu.h"
#include "core/linear_wgrad.h"
#include "core/norm_backward.h"
#include "op_cases.h"

#define VARIANT(s) (c->variant = (s))
/* Store one result and report it: NULL means a Trident call failed. */
#define RETURN1(expr)                                                                                                  \
    do {                                                                                                               \
        out[0] = (expr);                                                                                               \
        return out[0] ? 1 : -1;                                                                                        \
    } while (0)
#define PERF_N(c) BIG(c, (int64_t)1 << 24, 1 << 16) /* elements of a bandwidth-bound perf variant */

/* ---- creation ---- */

static int case_fill(conf_ctx *c, int v, td_tensor **out) {
    double value = c->dt == TD_BOOL ? 1 : conf_is_int(c->dt) ? 7 : -1.625;
    switch (v) {
    case 0: VARIANT("[33,7]"); RETURN1(td_full(SHAPE(33, 7), value, c->odt, c->dev));
    case 1: VARIANT("0-d"); RETURN1(td_full(SCALAR, value, c->odt, c->dev));
    case 2: VARIANT("size 0 [0,3]"); RETURN1(td_full(SHAPE(0, 3), value, c->odt, c->dev));
    case 3: VARIANT("odd [1000]"); RETURN1(td_full(SHAPE(BIG(c, 1000, 33)), value, c->odt, c->dev));
    case CONF_PERF: VARIANT("[2^24]"); RETURN1(TIMED(c, td_full(SHAPE(PERF_N(c)), value, c->odt, c->dev)));
    default: return 0;
    }
}

static int case_arange(conf_ctx *c, int v, td_tensor **out) {
    bool ints = conf_is_int(c->dt);
    switch (v) {
    case 0:
        VARIANT("[-3, 30) step 0.25 (ints: step 3)");
        RETURN1(td_arange(c->dt == TD_U8 ? 0 : -3, 30, ints ? 3 : 0.25, c->odt, c->dev));
    case 1:
        VARIANT("descending, step -1.5 (ints: -2)");
        RETURN1(td_arange(20, c->dt == TD_U8 ? 0 : -5, ints ? -2 : -1.5, c->odt, c->dev));
    case 2: VARIANT("empty [5, 5)"); RETURN1(td_arange(5, 5, 1, c->odt, c->dev));
    case 3: VARIANT("one element"); RETURN1(td_arange(2, 3, 1, c->odt, c->dev));
    case 4:
        VARIANT("odd, 1000 elements (u8: 251)");
        RETURN1(td_arange(0, c->dt == TD_U8 ? 251 : (double)BIG(c, 1000, 33), 1, c->odt, c->dev));
    case CONF_PERF: VARIANT("[2^24]"); RETURN1(TIMED(c, td_arange(0, (double)PERF_N(c), 1, c->odt, c->dev)));
    default: return 0;
    }
}

/* rand and randn: the same Philox stream (seed, offset) on every device */
static int random_case(conf_ctx *c, int v, td_tensor **out, bool normal) {
    td_tensor *(*fn)(int, const int64_t *, uint64_t, uint64_t, td_dtype, td_device) = normal ? td_randn : td_rand;
    switch (v) {
    case 0: VARIANT("[33,7] offset 0"); RETURN1(fn(SHAPE(33, 7), c->seed, 0, c->odt, c->dev));
    case 1: VARIANT("odd [1000] offset 5"); RETURN1(fn(SHAPE(BIG(c, 1000, 33)), c->seed, 5, c->odt, c->dev));
    case 2: VARIANT("size 1, offset 3"); RETURN1(fn(SHAPE(1), c->seed, 3, c->odt, c->dev));
    case 3: VARIANT("odd [7] offset 2^32+1"); RETURN1(fn(SHAPE(7), c->seed, ((uint64_t)1 << 32) + 1, c->odt, c->dev));
    case 4: VARIANT("size 0"); RETURN1(fn(SHAPE(0), c->seed, 0, c->odt, c->dev));
    case CONF_PERF: VARIANT("[2^24]"); RETURN1(TIMED(c, fn(SHAPE(PERF_N(c)), c->seed, 0, c->odt, c->dev)));
    default: return 0;
    }
}
static int case_rand(conf_ctx *c, int v, td_tensor **out) { return random_case(c, v, out, false); }
static int case_randn(conf_ctx *c, int v, td_tensor **out) { return random_case(c, v, out, true); }

/* copy: contiguous copies of views, casts to every dtype, copy_ into views */
static int case_copy(conf_ctx *c, int v, td_tensor **out) {
    if (v >= 1 && v <= TD_DTYPE_COUNT) {
        VARIANT(conf_name(c, "cast [33,7] to %s", conf_dt_short((td_dtype)(v - 1))));
        RETURN1(td_cast(conf_in(c, -100, 300, SHAPE(33, 7)), (td_dtype)(v - 1)));
    }
    switch (v) {
    case 0: VARIANT("contiguous() of a transposed [33,7]"); RETURN1(td_contiguous(conf_in_t(c, -9, 9, 33, 7)));
    case 9: {
        VARIANT("copy_ [33,7] into a step-2 slice of [66,7]");
        td_tensor *dst = td_zeros(SHAPE(66, 7), c->odt, c->dev), *src = conf_in(c, -9, 9, SHAPE(33, 7));
        if (td_copy_(td_slice(dst, 0, 0, INT64_MAX, 2), src) != TD_OK) return -1;
        RETURN1(dst);
    }
    case 10: {
        VARIANT("copy_ broadcast [7] into transposed [33,7]");
        td_tensor *dst = td_zeros(SHAPE(7, 33), c->odt, c->dev), *src = conf_in(c, -9, 9, SHAPE(7));
        if (td_copy_(td_transpose(dst, 0, 1), src) != TD_OK) return -1;
        RETURN1(dst);
    }
    case 11:
        VARIANT("expanded [1,7] -> [33,7]");
        RETURN1(td_contiguous(td_expand(conf_in(c, -9, 9, SHAPE(1, 7)), SHAPE(33, 7))));
    case 12: VARIANT("0-d clone"); RETURN1(td_clone(conf_in(c, -9, 9, SCALAR)));
    case 13: VARIANT("size 0 clone [0,7]"); RETURN1(td_clone(conf_in(c, -9, 9, SHAPE(0, 7))));
    case 14:
        VARIANT("odd: step-3 slice of [3000] clone");
        RETURN1(td_clone(conf_in_step(c, -9, 9, 3, SHAPE(BIG(c, 1000, 33)))));
    case CONF_PERF: {
        VARIANT("contiguous() of transposed [4096,4096]");
        int64_t n = BIG(c, 4096, 256);
        td_tensor *x = conf_in_t(c, -1, 1, n, n);
        RETURN1(TIMED(c, td_contiguous(x)));
    }
    default: return 0;
    }
}

/* ---- binary ops ---- */

typedef td_tensor *(*binary_fn)(td_tensor *, td_tensor *);

/* Inputs of variant v for a broadcasting binary op: a in [lo_a, hi_a], b in
** [lo_b, hi_b] (ties: values from a small set). false past the last variant. */
static bool binary_inputs(conf_ctx *c, int v, double lo_a, double hi_a, double lo_b, double hi_b, bool ties,
                          td_tensor **a, td_tensor **b) {
#define IN_A(...) (ties ? conf_ties(c, __VA_ARGS__) : conf_in(c, lo_a, hi_a, __VA_ARGS__))
#define IN_B(...) (ties ? conf_ties(c, __VA_ARGS__) : conf_in(c, lo_b, hi_b, __VA_ARGS__))
    int64_t big = BIG(c, 1000, 33);
    switch (v) {
    case 0:
        VARIANT("[33,7] . [33,7]");
        *a = IN_A(SHAPE(33, 7));
        *b = IN_B(SHAPE(33, 7));
        return true;
    case 1:
        VARIANT("broadcast [4,1,7] . [5,1]");
        *a = IN_A(SHAPE(4, 1, 7));
        *b = IN_B(SHAPE(5, 1));
        return true;
    case 2:
        VARIANT("transposed [7,33]^T . [33,7]");
        *a = ties ? td_transpose(conf_ties(c, SHAPE(7, 33)), 0, 1) : conf_in_t(c, lo_a, hi_a, 33, 7);
        *b = IN_B(SHAPE(33, 7));
        return true;
    case 3:
        VARIANT("step-2 rows [33,7] . expanded [1,7]");
        *a = ties ? td_slice(conf_ties(c, SHAPE(66, 7)), 0, 0, INT64_MAX, 2)
                  : conf_in_step(c, lo_a, hi_a, 2, SHAPE(33, 7));
        *b = td_expand(IN_B(SHAPE(1, 7)), SHAPE(33, 7));
        return true;
    case 4:
        VARIANT("0-d . [1000]");
        *a = IN_A(SCALAR);
        *b = IN_B(SHAPE(big));
        return true;
    case 5:
        VARIANT("size 1 [1] . [1]");
        *a = IN_A(SHAPE(1));
        *b = IN_B(SHAPE(1));
        return true;
    case 6:
        VARIANT("size 0 [0,7] . [1,7]");
        *a = IN_A(SHAPE(0, 7));
        *b = IN_B(SHAPE(1, 7));
        return true;
    case 7:
        VARIANT("odd [3,1000] . [1000]");
        *a = IN_A(SHAPE(3, big));
        *b = IN_B(SHAPE(big));
        return true;
    case CONF_PERF:
        VARIANT("[2^24] . [2^24]");
        *a = IN_A(SHAPE(PERF_N(c)));
        *b = IN_B(SHAPE(PERF_N(c)));
        return true;
    default: return false;
    }
#undef IN_A
#undef IN_B
}

static int binary_case(conf_ctx *c, int v, td_tensor **out, binary_fn fn, double lo_a, double hi_a, double lo_b,
                       double hi_b, bool ties) {
    td_tensor *a, *b;
    if (!binary_inputs(c, v, lo_a, hi_a, lo_b, hi_b, ties, &a, &b)) return 0;
    RETURN1(TIMED(c, fn(a, b)));
}

static int case_add(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_add, -9, 9, -9, 9, false); }
static int case_sub(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_sub, -9, 9, -9, 9, false); }
static int case_mul(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_mul, -9, 9, -9, 9, false); }
static int case_div(conf_ctx *c, int v, td_tensor **out) {
    return binary_case(c, v, out, td_div, -9, 9, 0.25, 4, false);
}
static int case_pow(conf_ctx *c, int v, td_tensor **out) {
    return binary_case(c, v, out, td_pow, 0.25, 3, -2.5, 2.5, false);
}
static int case_maximum(conf_ctx *c, int v, td_tensor **out) {
    return binary_case(c, v, out, td_maximum, 0, 0, 0, 0, true);
}
static int case_minimum(conf_ctx *c, int v, td_tensor **out) {
    return binary_case(c, v, out, td_minimum, 0, 0, 0, 0, true);
}
static int case_eq(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_eq, 0, 0, 0, 0, true); }
static int case_ne(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_ne, 0, 0, 0, 0, true); }
static int case_lt(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_lt, 0, 0, 0, 0, true); }
static int case_le(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_le, 0, 0, 0, 0, true); }
static int case_gt(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_gt, 0, 0, 0, 0, true); }
static int case_ge(conf_ctx *c, int v, td_tensor **out) { return binary_case(c, v, out, td_ge, 0, 0, 0, 0, true); }

static int case_where(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0: {
        VARIANT("cond [33,1], a [33,7], b [7]");
        td_tensor *m = conf_in_as(c, TD_BOOL, 0, 1, SHAPE(33, 1));
        RETURN1(td_where(m, conf_in(c, -9, 9, SHAPE(33, 7)), conf_in(c, -9, 9, SHAPE(7))));
    }
    case 1: {
        VARIANT("transposed cond and a, 0-d b");
        td_tensor *m = td_transpose(conf_in_as(c, TD_BOOL, 0, 1, SHAPE(7, 33)), 0, 1);
        RETURN1(td_where(m, conf_in_t(c, -9, 9, 33, 7), conf_in(c, -9, 9, SCALAR)));
    }
    case 2: {
        VARIANT("size 0 [0,7]");
        td_tensor *m = conf_in_as(c, TD_BOOL, 0, 1, SHAPE(0, 7));
        RETURN1(td_where(m, conf_in(c, -9, 9, SHAPE(0, 7)), conf_in(c, -9, 9, SHAPE(1))));
    }
    case 3: {
        VARIANT("odd [1000], step-2 b");
        int64_t n = BIG(c, 1000, 33);
        td_tensor *m = conf_in_as(c, TD_BOOL, 0, 1, SHAPE(n));
        RETURN1(td_where(m, conf_in(c, -9, 9, SHAPE(n)), conf_in_step(c, -9, 9, 2, SHAPE(n))));
    }
    case CONF_PERF: {
        VARIANT("[2^24]");
        td_tensor *m = conf_in_as(c, TD_BOOL, 0, 1, SHAPE(PERF_N(c))), *a = conf_in(c, -9, 9, SHAPE(PERF_N(c)));
        td_tensor *b = conf_in(c, -9, 9, SHAPE(PERF_N(c)));
        RETURN1(TIMED(c, td_where(m, a, b)));
    }
    default: return 0;
    }
}

/* ---- unary ops ---- */

/* Input of variant v for an elementwise unary op, values in [lo, hi]; NULL
** with *end set past the last variant. */
static td_tensor *unary_input(conf_ctx *c, int v, double lo, double hi, bool *end) {
    *end = false;
    switch (v) {
    case 0: VARIANT("[33,7]"); return conf_in(c, lo, hi, SHAPE(33, 7));
    case 1: VARIANT("transposed [7,33]^T"); return conf_in_t(c, lo, hi, 33, 7);
    case 2: VARIANT("step-3 rows [11,7]"); return conf_in_step(c, lo, hi, 3, SHAPE(11, 7));
    case 3: VARIANT("expanded [1,7] -> [33,7]"); return td_expand(conf_in(c, lo, hi, SHAPE(1, 7)), SHAPE(33, 7));
    case 4: VARIANT("0-d"); return conf_in(c, lo, hi, SCALAR);
    case 5: VARIANT("size 0 [0,5]"); return conf_in(c, lo, hi, SHAPE(0, 5));
    case 6: VARIANT("size 1 [1]"); return conf_in(c, lo, hi, SHAPE(1));
    case 7: VARIANT("odd [1000]"); return conf_in(c, lo, hi, SHAPE(BIG(c, 1000, 33)));
    case CONF_PERF: VARIANT("[2^24]"); return conf_in(c, lo, hi, SHAPE(PERF_N(c)));
    default: *end = true; return NULL;
    }
}
#define UNARY_VARIANTS 8

typedef td_tensor *(*unary_fn)(td_tensor *);

static int unary_case(conf_ctx *c, int v, td_tensor **out, unary_fn fn, double lo, double hi) {
    bool end;
    td_tensor *x = unary_input(c, v, lo, hi, &end);
    if (end) return 0;
    RETURN1(TIMED(c, fn(x)));
}

static int case_neg(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_neg, -9, 9); }
static int case_abs(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_abs, -9, 9); }
static int case_exp(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_exp, -6, 6); }
static int case_log(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_log, 0.01, 50); }
static int case_sqrt(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_sqrt, 0, 50); }
static int case_rsqrt(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_rsqrt, 0.01, 50); }
static int case_sin(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_sin, -7, 7); }
static int case_cos(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_cos, -7, 7); }
static int case_tanh(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_tanh, -5, 5); }
static int case_sigmoid(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_sigmoid, -9, 9); }
static int case_relu(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_relu, -9, 9); }
static int case_silu(conf_ctx *c, int v, td_tensor **out) { return unary_case(c, v, out, td_silu, -9, 9); }

/* gelu: the erf form on every unary variant, then the tanh form */
static int case_gelu(conf_ctx *c, int v, td_tensor **out) {
    bool tanh_form = v >= UNARY_VARIANTS, end;
    td_tensor *x = unary_input(c, v == CONF_PERF ? v : v % UNARY_VARIANTS, -3, 3, &end);
    if (end || v >= 2 * UNARY_VARIANTS) return 0;
    VARIANT(conf_name(c, "%s, %s form", c->variant, tanh_form ? "tanh" : "erf"));
    RETURN1(TIMED(c, td_gelu(x, tanh_form)));
}

static int case_gelu_backward(conf_ctx *c, int v, td_tensor **out) {
    bool tanh_form = v >= UNARY_VARIANTS, end;
    td_tensor *x = unary_input(c, v == CONF_PERF ? v : v % UNARY_VARIANTS, -3, 3, &end);
    if (end || v >= 2 * UNARY_VARIANTS) return 0;
    VARIANT(conf_name(c, "%s, %s form", c->variant, tanh_form ? "tanh" : "erf"));
    if (!x) return -1;
    td_tensor *dy = conf_in(c, -2, 2, td_ndim(x), td_shape(x));
    RETURN1(TIMED(c, td__gelu_backward(dy, x, tanh_form)));
}

static int case_clamp(conf_ctx *c, int v, td_tensor **out) {
    bool ints = conf_is_int(c->dt);
    double lo = ints ? -3 : -0.5, hi = ints ? 5 : 0.75;
    if (v == UNARY_VARIANTS) {
        VARIANT("upper side open (hi NaN)");
        RETURN1(td_clamp(conf_in(c, -9, 9, SHAPE(33, 7)), lo, NAN));
    }
    if (v == UNARY_VARIANTS + 1) {
        VARIANT("lower side open (lo NaN)");
        RETURN1(td_clamp(conf_in_t(c, -9, 9, 33, 7), NAN, hi));
    }
    bool end;
    td_tensor *x = unary_input(c, v, -9, 9, &end);
    if (end) return 0;
    RETURN1(TIMED(c, td_clamp(x, lo, hi)));
}

/* ---- reductions ---- */

typedef td_tensor *(*reduce_fn)(td_tensor *, int, const int *, bool);

/* Input and dims of variant v of a reduction; false past the last. empty:
** whether to include the size-0 variant (sum/mean/var/logsumexp). */
static bool reduce_inputs(conf_ctx *c, int v, bool empty, td_tensor **x, int *nd, int *dims, bool *keep) {
    *keep = false;
    *nd = 1;
    switch (v) {
    /* The one-output variants (0, 4) draw from [-1, 3]: a sum of values centred on 0 may cancel to near 0,
    ** where any other summation order is off by more than the tolerance relative to the result (seed 70012:
    ** f64, 2e-12); centred on 1 the sum stays near n. */
    case 0:
        VARIANT("[33,7,5] all dims");
        *x = conf_in(c, -1, 3, SHAPE(33, 7, 5));
        *nd = 0;
        return true;
    case 1:
        VARIANT("[33,7,5] dim 1, keepdim");
        *x = conf_in(c, -3, 3, SHAPE(33, 7, 5));
        dims[0] = 1;
        *keep = true;
        return true;
    case 2:
        VARIANT("[33,7,5] dims {0,2}");
        *x = conf_in(c, -3, 3, SHAPE(33, 7, 5));
        *nd = 2;
        dims[0] = 0;
        dims[1] = 2;
        return true;
    case 3:
        VARIANT("transposed [7,33]^T dim -1");
        *x = conf_in_t(c, -3, 3, 7, 33);
        dims[0] = -1;
        return true;
    case 4:
        VARIANT("odd [1000] all dims");
        *x = conf_in(c, -1, 3, SHAPE(BIG(c, 1000, 33)));
        *nd = 0;
        return true;
    case 5:
        VARIANT("size 1 dims [1,7,1] dim 0, keepdim");
        *x = conf_in(c, -3, 3, SHAPE(1, 7, 1));
        dims[0] = 0;
        *keep = true;
        return true;
    case 6:
        VARIANT("step-2 rows [16,33] dim 0");
        *x = conf_in_step(c, -3, 3, 2, SHAPE(16, 33));
        dims[0] = 0;
        return true;
    case 7:
        VARIANT("expanded [1,7] -> [33,7] dim 0");
        *x = td_expand(conf_in(c, -3, 3, SHAPE(1, 7)), SHAPE(33, 7));
        dims[0] = 0;
        return true;
    case 8: /* many short outputs (vulkan: reduce_tile.comp): a sum over the leading dim, */
        VARIANT("many short outputs [8,64,256] dim 0");
        *x = conf_in(c, -3, 3, SHAPE(8, BIG(c, 64, 4), 256));
        dims[0] = 0;
        return true;
    case 9: /* ... a bias gradient (two leading dims, 40 outputs), */
        VARIANT("bias-like [2,33,40] dims {0,1}");
        *x = conf_in(c, -3, 3, SHAPE(2, 33, 40));
        *nd = 2;
        dims[0] = 0;
        dims[1] = 1;
        return true;
    case 10: /* ... and short rows */
        VARIANT("short rows [300,5] dim -1");
        *x = conf_in(c, -3, 3, SHAPE(300, 5));
        dims[0] = -1;
        return true;
    case 11: /* column sums over many rows (vulkan: chunks of rows, then over the chunks; an odd remainder) */
        VARIANT(c->tiny ? "columns over rows [2,515,40] dims {0,1}" : "columns over rows [2,8192,40] dims {0,1}");
        *x = conf_in(c, -3, 3, SHAPE(2, BIG(c, 8192, 515), 40));
        *nd = 2;
        dims[0] = 0;
        dims[1] = 1;
        return true;
    case 12:
        if (!empty) return false;
        VARIANT("size 0 [0,7] dim 0");
        *x = conf_in(c, -3, 3, SHAPE(0, 7));
        dims[0] = 0;
        return true;
    case CONF_PERF:
        VARIANT("[2^24] all dims");
        *x = conf_in(c, -3, 3, SHAPE(PERF_N(c)));
        *nd = 0;
        return true;
    default: return false;
    }
}

static int reduce_case(conf_ctx *c, int v, td_tensor **out, reduce_fn fn, bool empty) {
    td_tensor *x;
    int nd, dims[2];
    bool keep;
    if (!reduce_inputs(c, v, empty, &x, &nd, dims, &keep)) return 0;
    RETURN1(TIMED(c, fn(x, nd, dims, keep)));
}

static int case_sum(conf_ctx *c, int v, td_tensor **out) { return reduce_case(c, v, out, td_sum, true); }
static int case_mean(conf_ctx *c, int v, td_tensor **out) { return reduce_case(c, v, out, td_mean, true); }
static int case_amax(conf_ctx *c, int v, td_tensor **out) { return reduce_case(c, v, out, td_amax, false); }
static int case_amin(conf_ctx *c, int v, td_tensor **out) { return reduce_case(c, v, out, td_amin, false); }
static int case_logsumexp(conf_ctx *c, int v, td_tensor **out) { return reduce_case(c, v, out, td_logsumexp, true); }

static int case_var(conf_ctx *c, int v, td_tensor **out) {
    td_tensor *x;
    int nd, dims[2];
    bool keep;
    int correction = v % 2; /* alternate population and unbiased variance */
    if (!reduce_inputs(c, v, false, &x, &nd, dims, &keep)) return 0;
    RETURN1(TIMED(c, td_var(x, nd, dims, correction, keep)));
}

static int arg_case(conf_ctx *c, int v, td_tensor **out, td_tensor *(*fn)(td_tensor *, int, bool)) {
    switch (v) {
    case 0: VARIANT("[33,7,5] flattened"); RETURN1(fn(conf_ties(c, SHAPE(33, 7, 5)), TD_ALL_DIMS, false));
    case 1: VARIANT("[33,7,5] dim 1, keepdim"); RETURN1(fn(conf_ties(c, SHAPE(33, 7, 5)), 1, true));
    case 2:
        VARIANT("transposed [7,33]^T dim -1");
        RETURN1(fn(td_transpose(conf_ties(c, SHAPE(33, 7)), 0, 1), -1, false));
    case 3: VARIANT("odd [1000] dim 0"); RETURN1(fn(conf_in(c, -50, 50, SHAPE(BIG(c, 1000, 33))), 0, false));
    case 4: VARIANT("size 1 [1,7] dim 0"); RETURN1(fn(conf_ties(c, SHAPE(1, 7)), 0, false));
    case 5: VARIANT("0-d"); RETURN1(fn(conf_in(c, -3, 3, SCALAR), TD_ALL_DIMS, false));
    case CONF_PERF: {
        VARIANT("[4096,4096] dim -1");
        int64_t n = BIG(c, 4096, 256);
        td_tensor *x = conf_in(c, -3, 3, SHAPE(n, n));
        RETURN1(TIMED(c, fn(x, -1, false)));
    }
    default: return 0;
    }
}
static int case_argmax(conf_ctx *c, int v, td_tensor **out) { return arg_case(c, v, out, td_argmax); }
static int case_argmin(conf_ctx *c, int v, td_tensor **out) { return arg_case(c, v, out, td_argmin); }

/* ---- linear algebra and nn primitives ---- */

static int case_matmul(conf_ctx *c, int v, td_tensor **out) {
    int64_t big = BIG(c, 1000, 40);
    switch (v) {
    case 0:
        VARIANT("[33,17] @ [17,9]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(33, 17)), conf_in(c, -1, 1, SHAPE(17, 9))));
    case 1:
        VARIANT("batched [3,13,17] @ [3,17,9]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(3, 13, 17)), conf_in(c, -1, 1, SHAPE(3, 17, 9))));
    case 2:
        VARIANT("batch broadcast [2,1,8,16] @ [3,16,5]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(2, 1, 8, 16)), conf_in(c, -1, 1, SHAPE(3, 16, 5))));
    case 3:
        VARIANT("a transposed [17,33]^T @ [17,9]");
        RETURN1(td_matmul(conf_in_t(c, -1, 1, 33, 17), conf_in(c, -1, 1, SHAPE(17, 9))));
    case 4:
        VARIANT("b transposed [33,17] @ [9,17]^T");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(33, 17)), conf_in_t(c, -1, 1, 17, 9)));
    case 5:
        VARIANT("1-D @ 2-D [17] @ [17,9]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(17)), conf_in(c, -1, 1, SHAPE(17, 9))));
    case 6:
        VARIANT("2-D @ 1-D [33,17] @ [17]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(33, 17)), conf_in(c, -1, 1, SHAPE(17))));
    case 7:
        VARIANT("K = 0: [4,0] @ [0,5]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(4, 0)), conf_in(c, -1, 1, SHAPE(0, 5))));
    case 8:
        VARIANT("size 1: [1,1] @ [1,1]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(1, 1)), conf_in(c, -1, 1, SHAPE(1, 1))));
    case 9:
        VARIANT("odd [7,1000] @ [1000,33]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(7, big)), conf_in(c, -1, 1, SHAPE(big, 33))));
    case 10:
        VARIANT("step-2 rows [33,17] @ [17,9]");
        RETURN1(td_matmul(conf_in_step(c, -1, 1, 2, SHAPE(33, 17)), conf_in(c, -1, 1, SHAPE(17, 9))));
    case 11:
        VARIANT("linear x[5,33] w[9,33] b[9]");
        RETURN1(
            td_linear(conf_in(c, -1, 1, SHAPE(5, 33)), conf_in(c, -1, 1, SHAPE(9, 33)), conf_in(c, -1, 1, SHAPE(9))));
    case 12:
        VARIANT("linear x[2,3,33] w[9,33], no bias");
        RETURN1(td_linear(conf_in(c, -1, 1, SHAPE(2, 3, 33)), conf_in(c, -1, 1, SHAPE(9, 33)), NULL));
    /* a LeNet's FC layers at batch 64 (forward, input and weight gradients): cut into column or
    ** row blocks of BLAS's small-matrix sizes, differently as the thread count changes */
    case 13:
        VARIANT("lenet fc [64,256] @ [120,256]^T");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(64, 256)), conf_in_t(c, -1, 1, 256, 120)));
    case 14:
        VARIANT("lenet fc grad [64,120] @ [120,256]");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(64, 120)), conf_in(c, -1, 1, SHAPE(120, 256))));
    case 15:
        VARIANT("lenet fc wgrad [64,256]^T @ [64,120]");
        RETURN1(td_matmul(conf_in_t(c, -1, 1, 256, 64), conf_in(c, -1, 1, SHAPE(64, 120))));
    case 16:
        VARIANT("lenet fc [64,120] @ [84,120]^T");
        RETURN1(td_matmul(conf_in(c, -1, 1, SHAPE(64, 120)), conf_in_t(c, -1, 1, 120, 84)));
    /* a weight gradient folded over B*T = 4096 rows: few output tiles, long K (vulkan: split-K) */
    case 17:
        VARIANT("long K wgrad [4096,24]^T @ [4096,40]");
        RETURN1(td_matmul(conf_in_t(c, -1, 1, 24, 4096), conf_in(c, -1, 1, SHAPE(4096, 40))));
    case CONF_PERF: {
        int64_t n = BIG(c, 1024, 128);
        VARIANT(c->tiny ? "[128,128] @ [128,128]" : "[1024,1024] @ [1024,1024]");
        td_tensor *a = conf_in(c, -1, 1, SHAPE(n, n)), *b = conf_in(c, -1, 1, SHAPE(n, n));
        c->flops = 2.0 * (double)n * (double)n * (double)n;
        RETURN1(TIMED(c, td_matmul(a, b)));
    }
    default: return 0;
    }
}

/* The fused Linear + bias + GELU, y = gelu(x w^T + b), erf and tanh forms; pre-activations in about [-4, 4]
** reach both GELU tails. The one-element variant keeps x w^T and b positive: in f16/bf16 the product is
** rounded before the bias is added (as MATMUL then ADD), so x w^T ~ -b would leave one element of
** cancellation noise, which the normalized error of a one-element output cannot average out. */
static int case_linear_gelu(conf_ctx *c, int v, td_tensor **out) {
    int64_t K = 33, N = 40;
    bool bias = true, tanh_form = false;
    double lo = -1; /* w in [lo / 2, 1 / 2], b in [lo, 1] */
    td_tensor *x;
    switch (v) {
    case 0: VARIANT("x[37,33] w[40,33] b[40], erf"), x = conf_in(c, -1, 1, SHAPE(37, 33)); break;
    case 1: VARIANT("x[2,5,33] w[40,33] b[40], tanh"), x = conf_in(c, -1, 1, SHAPE(2, 5, 33)), tanh_form = true; break;
    case 2:
        VARIANT("no bias, odd K [9,1000] w[7,1000]"), K = BIG(c, 1000, 45), N = 7, bias = false;
        x = conf_in(c, -0.2, 0.2, SHAPE(9, K));
        break;
    case 3: VARIANT("size 1 [1,1] w[1,1] b[1]"), K = 1, N = 1, lo = 0.5, x = conf_in(c, 0.5, 1, SHAPE(1, 1)); break;
    case 4: VARIANT("size 0 rows [0,33]"), x = conf_in(c, -1, 1, SHAPE(0, 33)); break;
    case 5: VARIANT("K = 0 [4,0] w[40,0] b[40]"), K = 0, x = conf_in(c, -1, 1, SHAPE(4, 0)); break;
    case 6: VARIANT("transposed x [33,37]^T"), x = conf_in_t(c, -1, 1, 37, 33); break;
    case CONF_PERF: {
        int64_t m = BIG(c, 4096, 128), k = BIG(c, 768, 64);
        VARIANT(c->tiny ? "[128,64] w[256,64] b[256]" : "W5's fc [4096,768] w[3072,768] b[3072]");
        td_tensor *xp = conf_in(c, -1, 1, SHAPE(m, k)), *w = conf_in(c, -0.1, 0.1, SHAPE(4 * k, k));
        td_tensor *b = conf_in(c, -1, 1, SHAPE(4 * k));
        c->flops = 2.0 * (double)m * (double)k * (double)(4 * k);
        RETURN1(TIMED(c, td_linear_gelu(xp, w, b, false)));
    }
    default: return 0;
    }
    td_tensor *w = conf_in(c, lo * 0.5, 0.5, SHAPE(N, K)), *b = bias ? conf_in(c, lo, 1, SHAPE(N)) : NULL;
    RETURN1(td_linear_gelu(x, w, b, tanh_form));
}

/* td_linear (one LINEAR op): y = x w^T + b, the same value ranges as linear_gelu (see there) */
static int case_linear(conf_ctx *c, int v, td_tensor **out) {
    int64_t K = 33, N = 40;
    bool bias = true;
    double lo = -1; /* w in [lo / 2, 1 / 2], b in [lo, 1] */
    td_tensor *x;
    switch (v) {
    case 0: VARIANT("x[37,33] w[40,33] b[40]"), x = conf_in(c, -1, 1, SHAPE(37, 33)); break;
    case 1: VARIANT("x[2,5,33] w[40,33] b[40]"), x = conf_in(c, -1, 1, SHAPE(2, 5, 33)); break;
    case 2:
        VARIANT("no bias, odd K [9,1000] w[7,1000]"), K = BIG(c, 1000, 45), N = 7, bias = false;
        x = conf_in(c, -0.2, 0.2, SHAPE(9, K));
        break;
    case 3: VARIANT("size 1 [1,1] w[1,1] b[1]"), K = 1, N = 1, lo = 0.5, x = conf_in(c, 0.5, 1, SHAPE(1, 1)); break;
    case 4: VARIANT("size 0 rows [0,33]"), x = conf_in(c, -1, 1, SHAPE(0, 33)); break;
    case 5: VARIANT("K = 0 [4,0] w[40,0] b[40]"), K = 0, x = conf_in(c, -1, 1, SHAPE(4, 0)); break;
    case 6: VARIANT("transposed x [33,37]^T"), x = conf_in_t(c, -1, 1, 37, 33); break;
    case 7: VARIANT("1-d x [33] w[40,33] b[40]"), x = conf_in(c, -1, 1, SHAPE(33)); break;
    case CONF_PERF: {
        int64_t m = BIG(c, 4096, 128), k = BIG(c, 768, 64);
        VARIANT(c->tiny ? "[128,64] w[64,64] b[64]" : "W5's projection [4096,768] w[768,768] b[768]");
        td_tensor *xp = conf_in(c, -1, 1, SHAPE(m, k)), *w = conf_in(c, -0.1, 0.1, SHAPE(k, k));
        td_tensor *b = conf_in(c, -1, 1, SHAPE(k));
        c->flops = 2.0 * (double)m * (double)k * (double)k;
        RETURN1(TIMED(c, td_linear(xp, w, b)));
    }
    default: return 0;
    }
    td_tensor *w = conf_in(c, lo * 0.5, 0.5, SHAPE(N, K)), *b = bias ? conf_in(c, lo, 1, SHAPE(N)) : NULL;
    RETURN1(td_linear(x, w, b));
}

/* linear's weight and bias gradients (td__linear_wgrad): dw = dy^T x [N,K], db = sum over rows of dy [N];
** the "f32 out" variants ask td__linear_wgrad_to for float32 dw and db of f16/bf16 dy (the op table's 'a', as
** autograd does for autocast's f32 parameters), compared in f32 (no rounding to dy's dtype); a backend that
** declines them (Vulkan: the core casts the op run in dy's dtype) is compared in dy's dtype */
static int case_linear_wgrad(conf_ctx *c, int v, td_tensor **out) {
    int64_t M = 37, N = 40, K = 33;
    bool bias = true, wide = false;
    switch (v) {
    case 0: VARIANT("dy[37,40] x[37,33]"); break;
    case 1: VARIANT("no db, odd M: dy[1000,7] x[1000,9]"), M = BIG(c, 1000, 45), N = 7, K = 9, bias = false; break;
    case 2: VARIANT("size 1 dy[1,1] x[1,1]"), M = N = K = 1; break;
    case 3: VARIANT("no rows: dy[0,40] x[0,33] (zeros)"), M = 0; break;
    case 4: VARIANT("K = 0: dy[37,40] x[37,0]"), K = 0; break;
    case 5: VARIANT("f32 out: dy[64,48] x[64,32]"), M = 64, N = 48, K = 32, wide = true; break;
    case 6:
        VARIANT("f32 out, no db, odd: dy[1000,7] x[1000,9]"), M = BIG(c, 1000, 45), N = 7, K = 9, wide = true,
                                                              bias = false;
        break;
    case 7: VARIANT("f32 out, odd: dy[37,40] x[37,33]"), wide = true; break;
    case 8: VARIANT("f32 out, no rows: dy[0,40] x[0,33] (zeros)"), M = 0, wide = true; break;
    case 9: VARIANT("f32 out, K = 0: dy[37,40] x[37,0]"), K = 0, wide = true; break;
    case CONF_PERF:
        VARIANT(c->tiny ? "dy[128,256] x[128,64]" : "W5's fc: dy[4096,3072] x[4096,768]");
        M = BIG(c, 4096, 128), K = BIG(c, 768, 64), N = 4 * K;
        c->flops = 2.0 * (double)M * (double)N * (double)K;
        break;
    default: return 0;
    }
    td_tensor *dy = conf_in(c, -1, 1, SHAPE(M, N)), *x = conf_in(c, -1, 1, SHAPE(M, K)), *dw = NULL, *db = NULL;
    if (!dy || !x) return -1;
    td_dtype dt = td_tensor_dtype(dy);
    bool half = dt == TD_F16 || dt == TD_BF16;
    if (TIMED_ST(c, td__linear_wgrad_to(dy, x, bias, wide && half ? TD_F32 : dt, &dw, &db)) != TD_OK) return -1;
    if (wide && half && (td_tensor_dtype(dw) != TD_F32 || (db && td_tensor_dtype(db) != TD_F32))) {
        fprintf(stderr, "linear_wgrad: f32 out gave %s dw\n", td_dtype_name(td_tensor_dtype(dw)));
        return -1;
    }
    td_tensor *in[2] = {dy, x}, *probe[2] = {td_empty(SHAPE(N, K), TD_F32, c->dev), td_empty(SHAPE(N), TD_F32, c->dev)};
    if (wide && half && !td__supports(TD_OP_LINEAR_WGRAD, 2, in, bias ? 2 : 1, probe, NULL))
        dw = td_cast(dw, dt), db = db ? td_cast(db, dt) : NULL;
    out[0] = dw, out[1] = db;
    return bias ? 2 : 1;
}

/* The MLP's input gradient through fc2 and the GELU (td__linear_dgelu): dh = (dy w) gelu'(h), erf and tanh
** forms; h in [-4, 4] reaches both GELU tails. K % 8 == 0 takes cuBLASLt's DGELU epilogue on CUDA (tanh). The
** "db" variants ask for the bias gradient db = sum over rows of dh too (LINEAR_DGELU's optional output), "f32 db"
** in float32 for f16/bf16 dy (the op table's 'a', as autograd does for autocast's f32 parameters), checked to be
** float32 and compared in dy's dtype: it sums dh, which rounds to dy's dtype (the CPU and Vulkan sum the rounded dh,
** CUDA the fp32 products), so it is not the f64 reference's sum to float32 precision. tests/test_linear_dgelu.c
** holds it to the sum of dh. */
static int case_linear_dgelu(conf_ctx *c, int v, td_tensor **out) {
    int64_t M = 37, N = 40, K = 32;
    bool tanh_form = true, three_d = false, bias = false, wide = false;
    switch (v) {
    case 0: VARIANT("dy[37,40] w[40,32] h[37,32], tanh"); break;
    case 1: VARIANT("dy[37,40] w[40,32] h[37,32], erf"), tanh_form = false; break;
    case 2: VARIANT("dy[2,5,40] w[40,32] h[2,5,32], tanh"), M = 10, three_d = true; break;
    case 3: VARIANT("odd K: dy[9,7] w[7,33] h[9,33], tanh"), M = 9, N = 7, K = 33; break;
    case 4: VARIANT("size 1 dy[1,1] w[1,1] h[1,1]"), M = N = K = 1; break;
    case 5: VARIANT("size 0 rows dy[0,40] h[0,32]"), M = 0; break;
    case 6: VARIANT("N = 0: dy[4,0] w[0,32] (zeros)"), M = 4, N = 0; break;
    case 7: VARIANT("db, erf: dy[37,40] w[40,32] h[37,32]"), tanh_form = false, bias = true; break;
    case 8: VARIANT("db, tanh: dy[37,40] w[40,32] h[37,32]"), bias = true; break;
    case 9:
        VARIANT("f32 db, erf, odd: dy[1000,7] w[7,33] h[1000,33]"), M = BIG(c, 1000, 45), N = 7, K = 33,
                                                                    tanh_form = false, bias = wide = true;
        break;
    case 10: VARIANT("f32 db, tanh: dy[64,48] w[48,32] h[64,32]"), M = 64, N = 48, bias = wide = true; break;
    case 11:
        VARIANT("f32 db, erf: dy[2,5,40] w[40,32] h[2,5,32]"), M = 10, three_d = true, tanh_form = false,
                                                               bias = wide = true;
        break;
    case 12: VARIANT("db, no rows: dy[0,40] h[0,32] (zeros)"), M = 0, bias = true; break;
    case 13: VARIANT("f32 db, N = 0: dy[4,0] w[0,32] (zeros)"), M = 4, N = 0, bias = wide = true; break;
    case CONF_PERF:
        VARIANT(c->tiny ? "dy[128,64] w[64,256] h[128,256]" : "W5's fc2: dy[4096,768] w[768,3072] h[4096,3072]");
        M = BIG(c, 4096, 128), N = BIG(c, 768, 64), K = 4 * N;
        c->flops = 2.0 * (double)M * (double)N * (double)K;
        break;
    default: return 0;
    }
    td_tensor *dy = three_d ? conf_in(c, -1, 1, SHAPE(2, 5, N)) : conf_in(c, -1, 1, SHAPE(M, N));
    td_tensor *h = three_d ? conf_in(c, -4, 4, SHAPE(2, 5, K)) : conf_in(c, -4, 4, SHAPE(M, K));
    td_tensor *w = conf_in(c, -0.5, 0.5, SHAPE(N, K)), *db = NULL;
    if (!dy || !h || !w) return -1;
    if (v == CONF_PERF) RETURN1(TIMED(c, td__linear_dgelu(dy, w, h, tanh_form, NULL, c->dt)));
    td_dtype dt = td_tensor_dtype(dy);
    bool half = dt == TD_F16 || dt == TD_BF16;
    if (!(out[0] = td__linear_dgelu(dy, w, h, tanh_form, bias ? &db : NULL, wide && half ? TD_F32 : dt))) return -1;
    if (!bias) return 1;
    if (td_tensor_dtype(db) != (wide && half ? TD_F32 : dt)) {
        fprintf(stderr, "linear_dgelu: %s db for %s dy\n", td_dtype_name(td_tensor_dtype(db)), td_dtype_name(dt));
        return -1;
    }
    out[1] = wide && half ? td_cast(db, dt) : db;
    return 2;
}

/* td_linear_residual (one LINEAR_RESIDUAL op): y = x w^T + b + r. "wide r": b and r float32 under f16/bf16 x and
** w (autocast's residual stream; y float32), y compared in x's dtype, since a backend without the op (Vulkan)
** rounds the product to it before the adds; tests/test_linear_residual.c holds the CPU's and CUDA's float32 y to
** float32 tolerances. */
static int case_linear_residual(conf_ctx *c, int v, td_tensor **out) {
    int64_t M = 37, K = 33, N = 40;
    bool bias = true, three_d = false, wide = false;
    switch (v) {
    case 0: VARIANT("x[37,33] w[40,33] b[40] r[37,40]"); break;
    case 1: VARIANT("x[2,5,33] w[40,33] b[40] r[2,5,40]"), three_d = true; break;
    case 2:
        VARIANT("no bias, long K: x[9,1000] w[7,1000] r[9,7]"), M = 9, K = BIG(c, 1000, 45), N = 7, bias = false;
        break;
    case 3: VARIANT("wide r: b[40] and r[37,40] f32, x and w f16/bf16"), wide = true; break;
    case 4: VARIANT("wide r, no bias: x[9,32] w[7,32] r[9,7]"), M = 9, K = 32, N = 7, wide = true, bias = false; break;
    case 5: VARIANT("size 1 x[1,1] w[1,1] b[1] r[1,1]"), M = K = N = 1; break;
    case 6: VARIANT("size 0 rows x[0,33] r[0,40]"), M = 0; break;
    case 7: VARIANT("K = 0: x[4,0] w[40,0] b[40] r[4,40]"), M = 4, K = 0; break;
    case CONF_PERF:
        VARIANT(c->tiny ? "x[128,256] w[64,256] b[64] r[128,64]" : "W5's fc2: x[4096,3072] w[768,3072] r[4096,768]");
        M = BIG(c, 4096, 128), N = BIG(c, 768, 64), K = 4 * N;
        c->flops = 2.0 * (double)M * (double)N * (double)K;
        break;
    default: return 0;
    }
    td_tensor *x = three_d ? conf_in(c, -1, 1, SHAPE(2, 5, K)) : conf_in(c, -1, 1, SHAPE(M, K));
    td_tensor *w = conf_in(c, -0.5, 0.5, SHAPE(N, K)), *b = bias ? conf_in(c, -1, 1, SHAPE(N)) : NULL;
    /* size 1: r in [4, 5] keeps y = x w + b + r in [2.5, 6.5], away from the cancellation that a lone element's
    ** nmse cannot absorb (Vulkan rounds x w and x w + b to bf16 first, as torch's composed ops: with y near 0 some
    ** seeds gave 30 bf16 ulps of y, 44635 among them) */
    td_tensor *r = three_d  ? conf_in(c, -1, 1, SHAPE(2, 5, N))
                   : v == 5 ? conf_in(c, 4, 5, SHAPE(M, N))
                            : conf_in(c, -1, 1, SHAPE(M, N));
    bool widen = wide && !c->ref && (c->dt == TD_F16 || c->dt == TD_BF16);
    if (widen) b = b ? td_cast(b, TD_F32) : NULL, r = td_cast(r, TD_F32);
    if (v == CONF_PERF) RETURN1(TIMED(c, td_linear_residual(x, w, b, r)));
    td_tensor *y = td_linear_residual(x, w, b, r);
    RETURN1(widen ? td_cast(y, c->dt) : y);
}

/* softmax and log_softmax over the last dim; inputs in [-20, 20] test the max shift */
static int softmax_case(conf_ctx *c, int v, td_tensor **out, td_tensor *(*fn)(td_tensor *, int)) {
    switch (v) {
    case 0: VARIANT("[33,7]"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(33, 7)), -1));
    case 1: VARIANT("odd rows [4,1000]"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(4, BIG(c, 1000, 33))), -1));
    case 2: VARIANT("[2,3,33], dim 2"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(2, 3, 33)), 2));
    case 3: VARIANT("transposed [7,33]^T"); RETURN1(fn(conf_in_t(c, -20, 20, 7, 33), -1));
    case 4: VARIANT("size 1 [1,1]"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(1, 1)), -1));
    case 5: VARIANT("size 0 rows [0,7]"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(0, 7)), -1));
    case 6: VARIANT("1-D [33]"); RETURN1(fn(conf_in(c, -20, 20, SHAPE(33)), 0));
    case 7:
        VARIANT("rows past the registers [2,20000]");
        RETURN1(fn(conf_in(c, -20, 20, SHAPE(2, BIG(c, 20000, 1031))), -1));
    case CONF_PERF: {
        VARIANT("rows of 4096 [4096,4096]");
        int64_t n = BIG(c, 4096, 256);
        td_tensor *x = conf_in(c, -5, 5, SHAPE(n, 4096));
        RETURN1(TIMED(c, fn(x, -1)));
    }
    default: return 0;
    }
}
static int case_softmax(conf_ctx *c, int v, td_tensor **out) { return softmax_case(c, v, out, td_softmax); }
static int case_log_softmax(conf_ctx *c, int v, td_tensor **out) { return softmax_case(c, v, out, td_log_softmax); }

/* softmax_backward / log_softmax_backward over the last dim: dy in [-1, 1],
** y in [lo, hi] (probabilities, or log-probabilities); short rows (W3's 256),
** odd and long rows (CUDA's warp, block and in-memory paths), strided and
** broadcast operands */
static int softmax_backward_case(conf_ctx *c, int v, td_tensor **out, td_tensor *(*fn)(td_tensor *, td_tensor *),
                                 double lo, double hi) {
#define SMBW(dy, shape_y) RETURN1(fn((dy), conf_in(c, lo, hi, shape_y)))
    switch (v) {
    case 0: VARIANT("[33,7]"); SMBW(conf_in(c, -1, 1, SHAPE(33, 7)), SHAPE(33, 7));
    case 1: VARIANT("rows of 256 [24,256]"); SMBW(conf_in(c, -1, 1, SHAPE(24, 256)), SHAPE(24, 256));
    case 2: {
        int64_t n = BIG(c, 1000, 33);
        VARIANT("odd rows [4,1000]");
        SMBW(conf_in(c, -1, 1, SHAPE(4, n)), SHAPE(4, n));
    }
    case 3: {
        int64_t n = BIG(c, 5001, 129);
        VARIANT("long odd rows [3,5001]");
        SMBW(conf_in(c, -1, 1, SHAPE(3, n)), SHAPE(3, n));
    }
    case 4: {
        int64_t n = BIG(c, 20000, 1031);
        VARIANT("rows past the registers [2,20000]");
        SMBW(conf_in(c, -1, 1, SHAPE(2, n)), SHAPE(2, n));
    }
    case 5: VARIANT("transposed dy [7,33]^T"); SMBW(conf_in_t(c, -1, 1, 7, 33), SHAPE(7, 33));
    case 6:
        VARIANT("expanded dy [1,7] -> [33,7]");
        SMBW(td_expand(conf_in(c, -1, 1, SHAPE(1, 7)), SHAPE(33, 7)), SHAPE(33, 7));
    case 7: {
        VARIANT("stepped y, every 2nd row of [10,33]");
        td_tensor *dy = conf_in(c, -1, 1, SHAPE(5, 33));
        RETURN1(fn(dy, conf_in_step(c, lo, hi, 2, SHAPE(5, 33))));
    }
    case 8: VARIANT("[2,3,33]"); SMBW(conf_in(c, -1, 1, SHAPE(2, 3, 33)), SHAPE(2, 3, 33));
    case 9: VARIANT("size 1 [1,1]"); SMBW(conf_in(c, -1, 1, SHAPE(1, 1)), SHAPE(1, 1));
    case 10: VARIANT("size 0 rows [0,7]"); SMBW(conf_in(c, -1, 1, SHAPE(0, 7)), SHAPE(0, 7));
    case 11: VARIANT("1-D [33]"); SMBW(conf_in(c, -1, 1, SHAPE(33)), SHAPE(33));
    case 12: VARIANT("0-d"); SMBW(conf_in(c, -1, 1, SCALAR), SCALAR);
    case CONF_PERF: {
        int64_t r = BIG(c, 98304, 256);
        VARIANT("W3's attention rows [98304,256]");
        td_tensor *dy = conf_in(c, -1, 1, SHAPE(r, 256)), *y = conf_in(c, lo, hi, SHAPE(r, 256));
        RETURN1(TIMED(c, fn(dy, y)));
    }
    default: return 0;
    }
#undef SMBW
}
static int case_softmax_backward(conf_ctx *c, int v, td_tensor **out) {
    return softmax_backward_case(c, v, out, td__softmax_backward, 0, 1);
}
static int case_log_softmax_backward(conf_ctx *c, int v, td_tensor **out) {
    return softmax_backward_case(c, v, out, td__log_softmax_backward, -6, 0);
}

static int case_layer_norm(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0:
        VARIANT("[33,7], w and b [7]");
        RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(33, 7)), 1, conf_in(c, 0.5, 2, SHAPE(7)),
                              conf_in(c, -1, 1, SHAPE(7)), 1e-5));
    case 1:
        VARIANT("[4,5,6] over 2 dims, w and b [5,6]");
        RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(4, 5, 6)), 2, conf_in(c, 0.5, 2, SHAPE(5, 6)),
                              conf_in(c, -1, 1, SHAPE(5, 6)), 1e-5));
    case 2:
        VARIANT("odd rows [2,1000], no affine");
        RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(2, BIG(c, 1000, 33))), 1, NULL, NULL, 1e-5));
    case 3:
        VARIANT("transposed [7,33]^T, w only");
        RETURN1(td_layer_norm(conf_in_t(c, -3, 5, 7, 33), 1, conf_in(c, 0.5, 2, SHAPE(33)), NULL, 1e-5));
    case 4:
        VARIANT("size 1 row [3,1], eps 0.1");
        RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(3, 1)), 1, NULL, conf_in(c, -1, 1, SHAPE(1)), 0.1));
    case 5: VARIANT("size 0 [0,7]"); RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(0, 7)), 1, NULL, NULL, 1e-5));
    case 6:
        VARIANT("rows past the registers [2,20000], w and b");
        RETURN1(td_layer_norm(conf_in(c, -3, 5, SHAPE(2, BIG(c, 20000, 1031))), 1,
                              conf_in(c, 0.5, 2, SHAPE(BIG(c, 20000, 1031))),
                              conf_in(c, -1, 1, SHAPE(BIG(c, 20000, 1031))), 1e-5));
    case CONF_PERF: {
        VARIANT("[4096,1024]");
        int64_t n = BIG(c, 4096, 256);
        td_tensor *x = conf_in(c, -3, 5, SHAPE(n, 1024)), *w = conf_in(c, 0.5, 2, SHAPE(1024)),
                  *b = conf_in(c, -1, 1, SHAPE(1024));
        RETURN1(TIMED(c, td_layer_norm(x, 1, w, b, 1e-5)));
    }
    default: return 0;
    }
}

/* The fused residual add + layer_norm: both outputs, y and s = x + r. */
static int case_add_layer_norm(conf_ctx *c, int v, td_tensor **out) {
    int64_t R = 33, D = 7;
    bool affine = true;
    switch (v) {
    case 0: VARIANT("[33,7] + [33,7], w and b [7]"); break;
    case 1: VARIANT("odd rows [2,1000], no affine"), R = 2, D = BIG(c, 1000, 33), affine = false; break;
    case 2: VARIANT("size 0 [0,7]"), R = 0; break;
    case CONF_PERF: VARIANT("[4096,1024]"), R = BIG(c, 4096, 256), D = 1024; break;
    default: return 0;
    }
    td_tensor *x = conf_in(c, -3, 5, SHAPE(R, D)), *r = conf_in(c, -2, 2, SHAPE(R, D));
    td_tensor *w = affine ? conf_in(c, 0.5, 2, SHAPE(D)) : NULL, *b = affine ? conf_in(c, -1, 1, SHAPE(D)) : NULL;
    td_tensor *s = NULL;
    out[0] = TIMED(c, td_add_layer_norm(x, r, 1, w, b, 1e-5, &s));
    out[1] = s;
    return out[0] && s ? 2 : -1;
}

/* layer_norm's backward (td__layer_norm_backward) from given mean and rstd (the formula holds for any):
** dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)) + ds, dw = sum_R dy xhat, db = sum_R dy */
static int case_layer_norm_backward(conf_ctx *c, int v, td_tensor **out) {
    int64_t R = 33, D = 7;
    bool w = true, ds = false, need_w = true, need_b = true;
    switch (v) {
    case 0: VARIANT("[33,7], w [7], dw and db"); break;
    case 1: VARIANT("add_layer_norm's ds [33,7], w, db only"), ds = true, need_w = false; break;
    case 2: VARIANT("odd rows [2,1000], no w, db"), R = 2, D = BIG(c, 1000, 33), w = false; break;
    case 3:
        VARIANT("many rows [1000,5], w and ds, dx only"), R = BIG(c, 1000, 45), D = 5, ds = true,
                                                          need_w = need_b = false;
        break;
    case 4: VARIANT("rows past the registers [2,20000], w"), R = 2, D = BIG(c, 20000, 1031); break;
    case 5: VARIANT("size 1 rows [3,1], w"), R = 3, D = 1; break;
    case CONF_PERF: VARIANT("W5's [8192,768], w, ds, dw and db"), R = BIG(c, 8192, 256), D = 768, ds = true; break;
    default: return 0;
    }
    td_tensor *dy = conf_in(c, -1, 1, SHAPE(R, D)), *x = conf_in(c, -3, 5, SHAPE(R, D));
    td_tensor *wt = w ? conf_in(c, 0.5, 2, SHAPE(D)) : NULL, *mean = conf_in(c, -1, 1, SHAPE(R));
    td_tensor *rstd = conf_in(c, 0.5, 2, SHAPE(R)), *dst = ds ? conf_in(c, -1, 1, SHAPE(R, D)) : NULL;
    td_tensor *dx = NULL, *dw = NULL, *db = NULL;
    if (TIMED_ST(c, td__layer_norm_backward(dy, x, wt, mean, rstd, dst, D, need_w, need_b, &dx, &dw, &db)) != TD_OK)
        return -1;
    int k = 0;
    out[k++] = dx;
    if (dw) out[k++] = dw;
    if (db) out[k++] = db;
    return k;
}

/* group_norm: x [N, C, *] in groups of C/G channels, w and b [C] */
static int case_group_norm(conf_ctx *c, int v, td_tensor **out) {
    int64_t N = 2, C = 6, L = BIG(c, 20000, 1031);
    int G = 3;
    bool w = true, b = true;
    td_tensor *x = NULL;
    switch (v) {
    case 0: VARIANT("[2,6,5,7] G 3, w and b [6]"), x = conf_in(c, -3, 5, SHAPE(N, C, 5, 7)); break;
    case 1: VARIANT("no spatial dims [4,6] G 2, w and b"), N = 4, G = 2, x = conf_in(c, -3, 5, SHAPE(N, C)); break;
    case 2:
        VARIANT("G 1 [3,4,5], w only"), N = 3, C = 4, G = 1, b = false, x = conf_in(c, -3, 5, SHAPE(N, C, 5));
        break;
    case 3: VARIANT("G = C [2,5,9], b only"), C = 5, G = 5, w = false, x = conf_in(c, -3, 5, SHAPE(N, C, 9)); break;
    case 4:
        VARIANT("odd [3,7,1001] G 7, no affine"), N = 3, C = 7, G = 7, w = b = false;
        x = conf_in(c, -3, 5, SHAPE(N, C, BIG(c, 1001, 33)));
        break;
    case 5: VARIANT("transposed [7,33]^T G 11"), N = 7, C = 33, G = 11, x = conf_in_t(c, -3, 5, N, C); break;
    case 6: VARIANT("size 0 [0,4,3] G 2"), N = 0, C = 4, G = 2, x = conf_in(c, -3, 5, SHAPE(N, C, 3)); break;
    case 7:
        VARIANT("rows past the registers [2,4,20000] G 2"), C = 4, G = 2, x = conf_in(c, -3, 5, SHAPE(N, C, L));
        break;
    case CONF_PERF:
        VARIANT("[32,64,32,32] G 32"), N = BIG(c, 32, 2), C = 64, G = 32;
        x = conf_in(c, -3, 5, SHAPE(N, C, 32, 32));
        break;
    default: return 0;
    }
    td_tensor *wt = w ? conf_in(c, 0.5, 2, SHAPE(C)) : NULL, *bt = b ? conf_in(c, -1, 1, SHAPE(C)) : NULL;
    RETURN1(TIMED(c, td_group_norm(x, G, wt, bt, 1e-5)));
}

/* cross_entropy variants: logits [N, C], int64 targets, options */
typedef struct xent_variant {
    const char *name;
    int64_t n, c; /* n < 0: 1-D logits [C] with a 0-d target */
    bool weight;
    int64_t ignore_index; /* a class id to ignore, or -100 (none present) */
    double smoothing;
    int reduction;
} xent_variant;

static const xent_variant xent_variants[] = {
    {"[33,7] mean", 33, 7, false, -100, 0, TD_REDUCTION_MEAN},
    {"[33,7] sum, weight", 33, 7, true, -100, 0, TD_REDUCTION_SUM},
    {"[33,7] none", 33, 7, false, -100, 0, TD_REDUCTION_NONE},
    {"[33,7] mean, weight, ignore_index 2", 33, 7, true, 2, 0, TD_REDUCTION_MEAN},
    {"[33,7] mean, weight, smoothing 0.1", 33, 7, true, -100, 0.1, TD_REDUCTION_MEAN},
    {"[33,7] none, smoothing 0.2, ignore 0", 33, 7, false, 0, 0.2, TD_REDUCTION_NONE},
    {"1-D logits [7], 0-d target", -1, 7, false, -100, 0, TD_REDUCTION_MEAN},
    {"size 1 [1,1]", 1, 1, false, -100, 0, TD_REDUCTION_SUM},
    {"odd classes [4,1000]", 4, 1000, false, -100, 0, TD_REDUCTION_MEAN},
};
#define XENT_VARIANTS ((int)(sizeof xent_variants / sizeof xent_variants[0]))

/* Inputs of a cross_entropy variant (also used by its backward). */
static const xent_variant *xent_inputs(conf_ctx *c, int v, td_tensor **logits, td_tensor **target, td_tensor **w) {
    static const xent_variant perf = {"[4096,1000] mean", 4096, 1000, false, -100, 0, TD_REDUCTION_MEAN};
    if (v >= XENT_VARIANTS) return NULL;
    const xent_variant *xv = v == CONF_PERF ? &perf : &xent_variants[v];
    VARIANT(xv->name);
    int64_t classes = xv->c == 1000 ? BIG(c, 1000, 33) : xv->c, n = xv == &perf ? BIG(c, xv->n, 64) : xv->n;
    if (n < 0) {
        *logits = conf_in(c, -4, 4, SHAPE(classes));
        *target = conf_in_as(c, TD_I64, 0, (double)classes - 1, SCALAR);
    } else {
        *logits = conf_in(c, -4, 4, SHAPE(n, classes));
        *target = conf_in_as(c, TD_I64, 0, (double)classes - 1, SHAPE(n));
    }
    *w = xv->weight ? conf_in(c, 0.5, 2, SHAPE(classes)) : NULL;
    return xv;
}

static int case_cross_entropy(conf_ctx *c, int v, td_tensor **out) {
    td_tensor *logits, *target, *w;
    const xent_variant *xv = xent_inputs(c, v, &logits, &target, &w);
    if (!xv) return 0;
    RETURN1(TIMED(c, td__cross_entropy(logits, target, w, xv->ignore_index, xv->smoothing, xv->reduction)));
}

/* the backward from the logits alone, then (variants past XENT_VARIANTS) from the rows' saved logsumexp too */
static int case_cross_entropy_backward(conf_ctx *c, int v, td_tensor **out) {
    static char names[XENT_VARIANTS][96];
    td_tensor *logits, *target, *w;
    bool with_lse = v != CONF_PERF && v >= XENT_VARIANTS;
    const xent_variant *xv = xent_inputs(c, with_lse ? v - XENT_VARIANTS : v, &logits, &target, &w);
    if (!xv) return 0;
    td_tensor *lse = NULL;
    if (with_lse) {
        snprintf(names[v - XENT_VARIANTS], sizeof names[0], "%s, saved lse", xv->name);
        VARIANT(names[v - XENT_VARIANTS]);
        td_dtype acc = td_tensor_dtype(logits) == TD_F64 ? TD_F64 : TD_F32;
        lse = td_logsumexp(td_cast(logits, acc), 1, (int[]){-1}, false);
    }
    /* dloss has the loss's shape: [N] for reduction none, else 0-d */
    int64_t n = td_ndim(logits) == 2 ? td_size(logits, 0) : 1;
    td_tensor *dloss = xv->reduction == TD_REDUCTION_NONE && td_ndim(logits) == 2 ? conf_in(c, -2, 2, SHAPE(n))
                                                                                  : conf_in(c, 0.5, 2, SCALAR);
    RETURN1(TIMED(c, td__cross_entropy_backward_lse(dloss, logits, target, w, lse, xv->ignore_index, xv->smoothing,
                                                    xv->reduction)));
}

/* conv2d variants: x [N,C,H,W], w [O,C/g,kh,kw] */
typedef struct conv_variant {
    const char *name;
    int64_t n, ci, h, w, co, kh, kw;
    int stride[2], pad[2], dil[2], groups;
    bool bias, transposed_x;
} conv_variant;

static const conv_variant conv_variants[] = {
    {"x[2,3,9,9] w[4,3,3,3] pad 1, bias", 2, 3, 9, 9, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"stride 2, dilation 2, no bias", 1, 3, 11, 10, 5, 3, 3, {2, 2}, {0, 0}, {2, 2}, 1, false, false},
    {"groups 2 x[2,4,7,7] w[6,2,3,3]", 2, 4, 7, 7, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, false},
    {"1x1 x[2,8,5,5] w[3,8,1,1]", 2, 8, 5, 5, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"odd x[1,1,33,33] w[2,1,5,3] stride (2,1) pad (2,0)",
     1,
     1,
     33,
     33,
     2,
     5,
     3,
     {2, 1},
     {2, 0},
     {1, 1},
     1,
     false,
     false},
    {"depthwise x[1,4,8,8] w[4,1,3,3]", 1, 4, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, true, false},
    {"non-contiguous x (H and W swapped)", 2, 3, 7, 6, 4, 3, 2, {1, 1}, {1, 0}, {1, 1}, 1, true, true},
    /* small channel counts and 5x5 kernels, a LeNet's two layers, at batches that cut the weight
    ** gradient into several partial sums */
    {"lenet conv1 x[16,1,28,28] w[6,1,5,5]", 16, 1, 28, 28, 6, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"lenet conv2 x[24,6,12,12] w[16,6,5,5]", 24, 6, 12, 12, 16, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"5x5 pad 2 x[9,2,10,10] w[3,2,5,5]", 9, 2, 10, 10, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, false, false},
    /* depthwise and few channels per group (Vulkan's grouped kernels): several tiles each way, strides,
    ** dilations, odd sizes, and enough pixels to split the weight gradient into slabs */
    {"depthwise stride 2 dilation 2 x[2,6,37,45] w[6,1,3,3] pad 2",
     2,
     6,
     37,
     45,
     6,
     3,
     3,
     {2, 2},
     {2, 2},
     {2, 2},
     6,
     true,
     false},
    {"depthwise x2 x[3,4,19,70] w[8,1,5,3] stride (1,2) pad (2,1)",
     3,
     4,
     19,
     70,
     8,
     5,
     3,
     {1, 2},
     {2, 1},
     {1, 1},
     4,
     false,
     false},
    {"groups 3 x[2,6,40,33] w[6,2,3,3] stride (3,1) dilation (1,3)",
     2,
     6,
     40,
     33,
     6,
     3,
     3,
     {3, 1},
     {1, 3},
     {1, 3},
     3,
     true,
     false},
    {"depthwise 7x7 pad 3 x[4,3,64,64]", 4, 3, 64, 64, 3, 7, 7, {1, 1}, {3, 3}, {1, 1}, 3, false, false},
    {"transposed-conv geometry k 2 stride 2 x[2,6,16,18] w[5,6,2,2]",
     2,
     6,
     16,
     18,
     5,
     2,
     2,
     {2, 2},
     {0, 0},
     {1, 1},
     1,
     true,
     false},
    {"k 3 stride 2 pad 1 x[2,5,17,20] w[7,5,3,3]", 2, 5, 17, 20, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, false},
    {"k 3 stride 3 pad 2 x[1,4,13,11] w[3,4,3,5] stride (3,2)",
     1,
     4,
     13,
     11,
     3,
     3,
     5,
     {3, 2},
     {2, 2},
     {1, 1},
     1,
     false,
     false},
};
#define CONV_VARIANTS ((int)(sizeof conv_variants / sizeof conv_variants[0]))

static const conv_variant *conv_pick(conf_ctx *c, int v) {
    static conv_variant perf = {
        "x[8,64,56,56] w[64,64,3,3] pad 1", 8, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false};
    if (v == CONF_PERF) {
        if (c->tiny)
            perf = (conv_variant){
                "x[2,16,16,16] w[16,16,3,3] pad 1", 2, 16, 16, 16, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false};
        VARIANT(perf.name);
        return &perf;
    }
    if (v >= CONV_VARIANTS) return NULL;
    VARIANT(conv_variants[v].name);
    return &conv_variants[v];
}

static int64_t conv_out_size(int64_t in, int64_t k, int stride, int pad, int dil) {
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

static td_tensor *conv_x(conf_ctx *c, const conv_variant *cv) {
    if (cv->transposed_x) return td_transpose(conf_in(c, -1, 1, SHAPE(cv->n, cv->ci, cv->w, cv->h)), 2, 3);
    return conf_in(c, -1, 1, SHAPE(cv->n, cv->ci, cv->h, cv->w));
}

static int case_conv2d(conf_ctx *c, int v, td_tensor **out) {
    const conv_variant *cv = conv_pick(c, v);
    if (!cv) return 0;
    td_tensor *x = conv_x(c, cv), *w = conf_in(c, -1, 1, SHAPE(cv->co, cv->ci / cv->groups, cv->kh, cv->kw));
    td_tensor *b = cv->bias ? conf_in(c, -1, 1, SHAPE(cv->co)) : NULL;
    int64_t ho = conv_out_size(cv->h, cv->kh, cv->stride[0], cv->pad[0], cv->dil[0]);
    int64_t wo = conv_out_size(cv->w, cv->kw, cv->stride[1], cv->pad[1], cv->dil[1]);
    c->flops = 2.0 * (double)(cv->n * cv->co * ho * wo) * (double)(cv->ci / cv->groups * cv->kh * cv->kw);
    RETURN1(TIMED(c, td_conv2d(x, w, b, cv->stride, cv->pad, cv->dil, cv->groups)));
}

/* dy [N,O,Ho,Wo] with the forward's geometry */
static td_tensor *conv_dy(conf_ctx *c, const conv_variant *cv) {
    int64_t ho = conv_out_size(cv->h, cv->kh, cv->stride[0], cv->pad[0], cv->dil[0]);
    int64_t wo = conv_out_size(cv->w, cv->kw, cv->stride[1], cv->pad[1], cv->dil[1]);
    c->flops = 2.0 * (double)(cv->n * cv->co * ho * wo) * (double)(cv->ci / cv->groups * cv->kh * cv->kw);
    return conf_in(c, -1, 1, SHAPE(cv->n, cv->co, ho, wo));
}

static int case_conv2d_backward_input(conf_ctx *c, int v, td_tensor **out) {
    const conv_variant *cv = conv_pick(c, v);
    if (!cv) return 0;
    td_tensor *w = conf_in(c, -1, 1, SHAPE(cv->co, cv->ci / cv->groups, cv->kh, cv->kw)), *dy = conv_dy(c, cv);
    const int64_t x_shape[4] = {cv->n, cv->ci, cv->h, cv->w};
    RETURN1(TIMED(c, td__conv2d_backward_input(dy, w, x_shape, cv->stride, cv->pad, cv->dil, cv->groups)));
}

static int case_conv2d_backward_weight(conf_ctx *c, int v, td_tensor **out) {
    const conv_variant *cv = conv_pick(c, v);
    if (!cv) return 0;
    td_tensor *x = conv_x(c, cv), *dy = conv_dy(c, cv);
    const int64_t w_shape[4] = {cv->co, cv->ci / cv->groups, cv->kh, cv->kw};
    RETURN1(TIMED(c, td__conv2d_backward_weight(dy, x, w_shape, cv->stride, cv->pad, cv->dil, cv->groups)));
}

/* pooling variants: x [N,C,H,W] */
typedef struct pool_variant {
    const char *name;
    int64_t n, ch, h, w;
    int kernel[2], stride[2], pad[2];
    bool include_pad;
} pool_variant;

static const pool_variant pool_variants[] = {
    {"x[2,3,8,8] k2 s2", 2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}, true},
    {"x[2,3,9,9] k3 s2 pad 1", 2, 3, 9, 9, {3, 3}, {2, 2}, {1, 1}, true},
    {"x[1,2,7,9] k(2,3) s(1,2) pad (1,1), pad not counted", 1, 2, 7, 9, {2, 3}, {1, 2}, {1, 1}, false},
    {"odd x[1,1,33,33] k3 s3", 1, 1, 33, 33, {3, 3}, {3, 3}, {0, 0}, true},
    {"size 1 x[1,1,1,1] k1", 1, 1, 1, 1, {1, 1}, {1, 1}, {0, 0}, true},
};
#define POOL_VARIANTS ((int)(sizeof pool_variants / sizeof pool_variants[0]))

static const pool_variant *pool_pick(conf_ctx *c, int v) {
    static pool_variant perf = {"x[32,64,56,56] k2 s2", 32, 64, 56, 56, {2, 2}, {2, 2}, {0, 0}, true};
    if (v == CONF_PERF) {
        if (c->tiny) perf.n = 1;
        VARIANT(perf.name);
        return &perf;
    }
    if (v >= POOL_VARIANTS) return NULL;
    VARIANT(pool_variants[v].name);
    return &pool_variants[v];
}

static int case_max_pool2d(conf_ctx *c, int v, td_tensor **out) {
    const pool_variant *pv = pool_pick(c, v);
    if (!pv) return 0;
    td_tensor *x = conf_ties(c, SHAPE(pv->n, pv->ch, pv->h, pv->w));
    out[0] = TIMED(c, td_max_pool2d(x, pv->kernel, pv->stride, pv->pad, &out[1]));
    return out[0] && out[1] ? 2 : -1;
}

static int case_max_pool2d_backward(conf_ctx *c, int v, td_tensor **out) {
    const pool_variant *pv = pool_pick(c, v);
    if (!pv) return 0;
    td_tensor *idx = NULL, *x = conf_in(c, -3, 3, SHAPE(pv->n, pv->ch, pv->h, pv->w));
    td_tensor *y = td_max_pool2d(x, pv->kernel, pv->stride, pv->pad, &idx);
    if (!y) return -1;
    td_tensor *dy = conf_in(c, -2, 2, td_ndim(y), td_shape(y));
    const int64_t x_shape[4] = {pv->n, pv->ch, pv->h, pv->w};
    RETURN1(TIMED(c, td__max_pool2d_backward(dy, idx, x_shape)));
}

static int case_avg_pool2d(conf_ctx *c, int v, td_tensor **out) {
    const pool_variant *pv = pool_pick(c, v);
    if (!pv) return 0;
    td_tensor *x = conf_in(c, -3, 3, SHAPE(pv->n, pv->ch, pv->h, pv->w));
    RETURN1(TIMED(c, td_avg_pool2d(x, pv->kernel, pv->stride, pv->pad, pv->include_pad)));
}

static int case_avg_pool2d_backward(conf_ctx *c, int v, td_tensor **out) {
    const pool_variant *pv = pool_pick(c, v);
    if (!pv) return 0;
    int64_t ho = conv_out_size(pv->h, pv->kernel[0], pv->stride[0], pv->pad[0], 1);
    int64_t wo = conv_out_size(pv->w, pv->kernel[1], pv->stride[1], pv->pad[1], 1);
    td_tensor *dy = conf_in(c, -2, 2, SHAPE(pv->n, pv->ch, ho, wo));
    const int64_t x_shape[4] = {pv->n, pv->ch, pv->h, pv->w};
    RETURN1(TIMED(c, td__avg_pool2d_backward(dy, x_shape, pv->kernel, pv->stride, pv->pad, pv->include_pad)));
}

/* ---- indexing ---- */

static int case_embedding(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0:
        VARIANT("w[10,7], int64 idx [4,5]");
        RETURN1(td_embedding(conf_in(c, -2, 2, SHAPE(10, 7)), conf_in_as(c, TD_I64, 0, 9, SHAPE(4, 5))));
    case 1:
        VARIANT("int32 idx [6]");
        RETURN1(td_embedding(conf_in(c, -2, 2, SHAPE(10, 7)), conf_in_as(c, TD_I32, 0, 9, SHAPE(6))));
    case 2:
        VARIANT("odd w[50,1000], idx [33]");
        RETURN1(td_embedding(conf_in(c, -2, 2, SHAPE(50, BIG(c, 1000, 33))), conf_in_as(c, TD_I64, 0, 49, SHAPE(33))));
    case 3:
        VARIANT("size 0 idx [0]");
        RETURN1(td_embedding(conf_in(c, -2, 2, SHAPE(10, 7)), conf_in_as(c, TD_I64, 0, 9, SHAPE(0))));
    case 4:
        VARIANT("size 1 w[1,1], 0-d idx");
        RETURN1(td_embedding(conf_in(c, -2, 2, SHAPE(1, 1)), conf_in_as(c, TD_I64, 0, 0, SCALAR)));
    case CONF_PERF: {
        VARIANT("w[50000,768], idx [8192]");
        td_tensor *w = conf_in(c, -2, 2, SHAPE(BIG(c, 50000, 100), 768));
        td_tensor *idx = conf_in_as(c, TD_I64, 0, (double)BIG(c, 50000, 100) - 1, SHAPE(8192));
        RETURN1(TIMED(c, td_embedding(w, idx)));
    }
    default: return 0;
    }
}

static int case_embedding_backward(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0: {
        VARIANT("dy[4,5,7], idx [4,5] with repeats, V 10");
        td_tensor *dy = conf_in(c, -2, 2, SHAPE(4, 5, 7)), *idx = conf_in_as(c, TD_I64, 0, 9, SHAPE(4, 5));
        RETURN1(td__embedding_backward(dy, idx, 10, -1));
    }
    case 1: {
        VARIANT("padding_idx 3, int32 idx [33]");
        td_tensor *dy = conf_in(c, -2, 2, SHAPE(33, 7)), *idx = conf_in_as(c, TD_I32, 0, 5, SHAPE(33));
        RETURN1(td__embedding_backward(dy, idx, 6, 3));
    }
    case 2: {
        VARIANT("odd D 1000, V 50");
        int64_t d = BIG(c, 1000, 33);
        td_tensor *dy = conf_in(c, -2, 2, SHAPE(7, d)), *idx = conf_in_as(c, TD_I64, 0, 49, SHAPE(7));
        RETURN1(td__embedding_backward(dy, idx, 50, -1));
    }
    case 3: {
        VARIANT("size 0 idx");
        td_tensor *dy = conf_in(c, -2, 2, SHAPE(0, 7)), *idx = conf_in_as(c, TD_I64, 0, 9, SHAPE(0));
        RETURN1(td__embedding_backward(dy, idx, 10, -1));
    }
    case CONF_PERF: {
        VARIANT("dy[8192,768] into V 50000");
        td_tensor *dy = conf_in(c, -2, 2, SHAPE(8192, 768));
        td_tensor *idx = conf_in_as(c, TD_I64, 0, (double)BIG(c, 50000, 100) - 1, SHAPE(8192));
        RETURN1(TIMED(c, td__embedding_backward(dy, idx, BIG(c, 50000, 100), -1)));
    }
    default: return 0;
    }
}

static int case_index_select(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0:
        VARIANT("x[10,7] dim 0, int64 idx [5] with repeats");
        RETURN1(td_index_select(conf_in(c, -9, 9, SHAPE(10, 7)), 0, conf_in_as(c, TD_I64, 0, 9, SHAPE(5))));
    case 1:
        VARIANT("x[3,10,4] dim 1, int32 idx [12]");
        RETURN1(td_index_select(conf_in(c, -9, 9, SHAPE(3, 10, 4)), 1, conf_in_as(c, TD_I32, 0, 9, SHAPE(12))));
    case 2:
        VARIANT("transposed x[7,10]^T dim -1");
        RETURN1(td_index_select(conf_in_t(c, -9, 9, 7, 10), -1, conf_in_as(c, TD_I64, 0, 9, SHAPE(4))));
    case 3:
        VARIANT("size 0 idx");
        RETURN1(td_index_select(conf_in(c, -9, 9, SHAPE(10, 7)), 0, conf_in_as(c, TD_I64, 0, 9, SHAPE(0))));
    case 4:
        VARIANT("odd x[1000,3], idx [33]");
        RETURN1(td_index_select(conf_in(c, -9, 9, SHAPE(BIG(c, 1000, 40), 3)), 0,
                                conf_in_as(c, TD_I64, 0, (double)BIG(c, 1000, 40) - 1, SHAPE(33))));
    default: return 0;
    }
}

static int case_gather(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0:
        VARIANT("x[5,7] dim 1, idx [5,4]");
        RETURN1(td_gather(conf_in(c, -9, 9, SHAPE(5, 7)), 1, conf_in_as(c, TD_I64, 0, 6, SHAPE(5, 4))));
    case 1:
        VARIANT("x[5,7] dim 0, idx [3,7]");
        RETURN1(td_gather(conf_in(c, -9, 9, SHAPE(5, 7)), 0, conf_in_as(c, TD_I64, 0, 4, SHAPE(3, 7))));
    case 2:
        VARIANT("3-D x[2,3,33] dim -1, idx [2,3,5]");
        RETURN1(td_gather(conf_in(c, -9, 9, SHAPE(2, 3, 33)), -1, conf_in_as(c, TD_I64, 0, 32, SHAPE(2, 3, 5))));
    case 3:
        VARIANT("transposed x[7,5]^T dim 1");
        RETURN1(td_gather(conf_in_t(c, -9, 9, 5, 7), 1, conf_in_as(c, TD_I64, 0, 6, SHAPE(5, 2))));
    case 4:
        VARIANT("size 0 idx [0,7]");
        RETURN1(td_gather(conf_in(c, -9, 9, SHAPE(5, 7)), 0, conf_in_as(c, TD_I64, 0, 4, SHAPE(0, 7))));
    default: return 0;
    }
}

static int case_scatter_add(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0:
        VARIANT("self[5,7] dim 0, idx/src [4,7]");
        RETURN1(td_scatter_add(conf_in(c, -9, 9, SHAPE(5, 7)), 0, conf_in_as(c, TD_I64, 0, 4, SHAPE(4, 7)),
                               conf_in(c, -9, 9, SHAPE(4, 7))));
    case 1:
        VARIANT("self[5,7] dim 1, idx/src [5,12]");
        RETURN1(td_scatter_add(conf_in(c, -9, 9, SHAPE(5, 7)), 1, conf_in_as(c, TD_I64, 0, 6, SHAPE(5, 12)),
                               conf_in(c, -9, 9, SHAPE(5, 12))));
    case 2:
        VARIANT("transposed self, 3-D");
        RETURN1(td_scatter_add(td_transpose(conf_in(c, -9, 9, SHAPE(2, 6, 3)), 1, 2), 2,
                               conf_in_as(c, TD_I64, 0, 5, SHAPE(2, 3, 4)), conf_in(c, -9, 9, SHAPE(2, 3, 4))));
    case 3: /* ~10 sources per slot: collisions, without the bf16 rounding of long sums */
        VARIANT("odd: 1000 sources into 100");
        RETURN1(td_scatter_add(conf_in(c, -9, 9, SHAPE(100)), 0, conf_in_as(c, TD_I64, 0, 99, SHAPE(BIG(c, 1000, 33))),
                               conf_in(c, -9, 9, SHAPE(BIG(c, 1000, 33)))));
    case 4:
        VARIANT("size 0 idx");
        RETURN1(td_scatter_add(conf_in(c, -9, 9, SHAPE(5, 7)), 0, conf_in_as(c, TD_I64, 0, 4, SHAPE(0, 7)),
                               conf_in(c, -9, 9, SHAPE(0, 7))));
    default: return 0;
    }
}

static int case_cat(conf_ctx *c, int v, td_tensor **out) {
    td_tensor *xs[4];
    switch (v) {
    case 0:
        VARIANT("[2,7] [3,7] [1,7] dim 0");
        xs[0] = conf_in(c, -9, 9, SHAPE(2, 7)), xs[1] = conf_in(c, -9, 9, SHAPE(3, 7)),
        xs[2] = conf_in(c, -9, 9, SHAPE(1, 7));
        RETURN1(td_cat(3, xs, 0));
    case 1:
        VARIANT("dim 1 with a transposed and a stepped input");
        xs[0] = conf_in_t(c, -9, 9, 5, 4), xs[1] = conf_in_step(c, -9, 9, 2, SHAPE(5, 3)),
        xs[2] = conf_in(c, -9, 9, SHAPE(5, 1));
        RETURN1(td_cat(3, xs, 1));
    case 2:
        VARIANT("3-D dim -1 with an empty input");
        xs[0] = conf_in(c, -9, 9, SHAPE(2, 3, 4)), xs[1] = conf_in(c, -9, 9, SHAPE(2, 3, 0)),
        xs[2] = conf_in(c, -9, 9, SHAPE(2, 3, 33));
        RETURN1(td_cat(3, xs, -1));
    case 3:
        VARIANT("one input, odd [1000]");
        xs[0] = conf_in(c, -9, 9, SHAPE(BIG(c, 1000, 33)));
        RETURN1(td_cat(1, xs, 0));
    case 4:
        VARIANT("expanded inputs, dim 0");
        xs[0] = td_expand(conf_in(c, -9, 9, SHAPE(1, 7)), SHAPE(4, 7)), xs[1] = conf_in(c, -9, 9, SHAPE(2, 7));
        RETURN1(td_cat(2, xs, 0));
    case CONF_PERF: {
        VARIANT("4 x [2^22] dim 0");
        for (int i = 0; i < 4; i++) xs[i] = conf_in(c, -9, 9, SHAPE(PERF_N(c) / 4));
        RETURN1(TIMED(c, td_cat(4, xs, 0)));
    }
    default: return 0;
    }
}

/* one_hot: the swept dtype is the index dtype (int32 and int64) */
static int case_one_hot(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0: VARIANT("idx [33], 7 classes"); RETURN1(td_one_hot(conf_in_as(c, c->dt, 0, 6, SHAPE(33)), 7));
    case 1: VARIANT("idx [4,5], classes inferred"); RETURN1(td_one_hot(conf_in_as(c, c->dt, 0, 9, SHAPE(4, 5)), -1));
    case 2:
        VARIANT("transposed idx [3,5]^T, 12 classes");
        RETURN1(td_one_hot(td_transpose(conf_in_as(c, c->dt, 0, 11, SHAPE(3, 5)), 0, 1), 12));
    case 3: VARIANT("0-d idx"); RETURN1(td_one_hot(conf_in_as(c, c->dt, 0, 4, SCALAR), 5));
    case 4: VARIANT("size 0 idx"); RETURN1(td_one_hot(conf_in_as(c, c->dt, 0, 4, SHAPE(0)), 5));
    default: return 0;
    }
}

static int case_dropout(conf_ctx *c, int v, td_tensor **out) {
    switch (v) {
    case 0: VARIANT("[33,7] p 0.3"); RETURN1(td_dropout(conf_in(c, -3, 3, SHAPE(33, 7)), 0.3, c->seed, 0));
    case 1:
        VARIANT("odd [1000] p 0.5, offset 9");
        RETURN1(td_dropout(conf_in(c, -3, 3, SHAPE(BIG(c, 1000, 33))), 0.5, c->seed, 9));
    case 2: VARIANT("transposed [7,33]^T p 0.1"); RETURN1(td_dropout(conf_in_t(c, -3, 3, 7, 33), 0.1, c->seed, 3));
    case 3: VARIANT("p 0 returns x"); RETURN1(td_dropout(conf_in(c, -3, 3, SHAPE(5, 7)), 0, c->seed, 0));
    case 4: VARIANT("size 0"); RETURN1(td_dropout(conf_in(c, -3, 3, SHAPE(0, 7)), 0.5, c->seed, 0));
    case 5: VARIANT("size 1, p 0.9"); RETURN1(td_dropout(conf_in(c, -3, 3, SHAPE(1)), 0.9, c->seed, 1));
    case CONF_PERF: {
        VARIANT("[2^24] p 0.1");
        td_tensor *x = conf_in(c, -3, 3, SHAPE(PERF_N(c)));
        RETURN1(TIMED(c, td_dropout(x, 0.1, c->seed, 0)));
    }
    default: return 0;
    }
}

/* attention variants: q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev], a mask of some kind (see attn_case) */
typedef struct attn_variant {
    const char *name;
    int64_t b, h, l, s, e, ev;
    int mask;       /* 0 none, 1 bool key padding [B,1,1,S], 2 float [L,S], 3 bool [B,1,H,L,S] over 3 batch dims */
    bool causal;    /* top-left causal */
    double dropout; /* 0: none */
    double scale;   /* NAN: 1/sqrt(E) */
} attn_variant;

static const attn_variant attn_variants[] = {
    {"E 32, odd L 7 S 9, no mask", 2, 3, 7, 9, 32, 32, 0, false, 0, NAN},
    {"E 64 causal, odd L = S = 33", 1, 2, 33, 33, 64, 64, 0, true, 0, NAN},
    {"E 128, key padding mask [B,1,1,S], L 5 S 11", 2, 2, 5, 11, 128, 128, 1, false, 0, NAN},
    {"E 16 Ev 24, float mask [L,S], causal, scale 0.3, L 9 S 6", 2, 1, 9, 6, 16, 24, 2, true, 0, 0.3},
    {"dropout 0.2, causal and key padding, E 32, L = S = 17", 2, 2, 17, 17, 32, 32, 1, true, 0.2, NAN},
    {"3 batch dims, mask [B,1,H,L,S], E 8, L 3 S 70", 2, 2, 3, 70, 8, 8, 3, false, 0, NAN},
    {"size 0: L 0", 1, 2, 0, 5, 32, 32, 0, false, 0, NAN},
    {"size 1: L = S = 1, E 1", 1, 1, 1, 1, 1, 1, 1, true, 0, NAN},
};

/* The inputs of variant v (NULL when past the last); q, k, v, mask in x[0..3]. */
static const attn_variant *attn_inputs(conf_ctx *c, int v, td_tensor **x) {
    static const attn_variant perf = {"[4,8,1024,64] causal", 4, 8, 1024, 64, 64, 64, 0, true, 0, NAN};
    const attn_variant *av = v == CONF_PERF                                            ? &perf
                             : v < (int)(sizeof attn_variants / sizeof *attn_variants) ? &attn_variants[v]
                                                                                       : NULL;
    if (!av) return NULL;
    VARIANT(av->name);
    int64_t s = v == CONF_PERF ? BIG(c, 1024, 64) : av->s, l = v == CONF_PERF ? s : av->l;
    if (av->mask == 3) { /* batch [B, 2, H]: q [B,2,H,L,E] */
        x[0] = conf_in(c, -1, 1, SHAPE(av->b, 2, av->h, l, av->e));
        x[1] = conf_in(c, -1, 1, SHAPE(av->b, 2, av->h, s, av->e));
        x[2] = conf_in(c, -1, 1, SHAPE(av->b, 2, av->h, s, av->ev));
        x[3] = conf_in_as(c, TD_BOOL, 0, 1, SHAPE(av->b, 1, av->h, l, s));
        return av;
    }
    x[0] = conf_in(c, -1, 1, SHAPE(av->b, av->h, l, av->e));
    x[1] = conf_in(c, -1, 1, SHAPE(av->b, av->h, s, av->e));
    x[2] = conf_in(c, -1, 1, SHAPE(av->b, av->h, s, av->ev));
    x[3] = av->mask == 1   ? conf_in_as(c, TD_BOOL, 0, 1, SHAPE(av->b, 1, 1, s))
           : av->mask == 2 ? conf_in(c, -2, 2, SHAPE(l, s))
                           : NULL;
    return av;
}

static int case_attention(conf_ctx *c, int v, td_tensor **out) {
    td_tensor *x[4];
    const attn_variant *av = attn_inputs(c, v, x);
    if (!av) return 0;
    if (v == CONF_PERF) c->flops = 4.0 * (double)td_numel(x[0]) * (double)td_size(x[1], 2) / 2; /* causal: half */
    RETURN1(TIMED(c, td_scaled_dot_product_attention_ext(x[0], x[1], x[2], x[3], av->dropout, av->causal, av->scale,
                                                         c->seed, 3)));
}

/* dq, dk, dv of sum(out * dout) through autograd (ATTENTION_BACKWARD) */
static int case_attention_backward(conf_ctx *c, int v, td_tensor **out) {
    td_tensor *x[4];
    const attn_variant *av = attn_inputs(c, v, x);
    if (!av) return 0;
    for (int i = 0; i < 3; i++)
        if (!(x[i] = td_detach(x[i])) || td_set_requires_grad(x[i], true) != TD_OK) return -1;
    td_tensor *y =
        td_scaled_dot_product_attention_ext(x[0], x[1], x[2], x[3], av->dropout, av->causal, av->scale, c->seed, 3);
    if (!y) return -1;
    td_tensor *dy = conf_in(c, -1, 1, td_ndim(y), td_shape(y));
    if (v == CONF_PERF) c->flops = 10.0 * (double)td_numel(x[0]) * (double)td_size(x[1], 2) / 2;
    return TIMED_ST(c, td_grad(1, &y, &dy, 3, x, out, true, false, false)) == TD_OK ? 3 : -1; /* scope-owned */
}

/* ---- fused optimizer updates: the outputs are the updated state tensors ---- */

static int case_adam(conf_ctx *c, int v, td_tensor **out) {
    static const struct {
        const char *name;
        double wd;
        int64_t step;
        bool decoupled, amsgrad, maximize;
    } av[] = {
        {"[33,7] Adam, weight decay 0.01, step 1", 0.01, 1, false, false, false},
        {"[33,7] AdamW 0.1, step 7", 0.1, 7, true, false, false},
        {"[33,7] amsgrad, step 3", 0, 3, false, true, false},
        {"[33,7] AdamW amsgrad maximize, step 2", 0.05, 2, true, true, true},
        {"odd [1000] Adam, step 100", 0, 100, false, false, false},
        {"size 0", 0.01, 1, false, false, false},
    };
    int64_t n;
    if (v == CONF_PERF)
        n = PERF_N(c), VARIANT("[2^24] AdamW");
    else if (v < (int)(sizeof av / sizeof av[0]))
        n = v == 4 ? BIG(c, 1000, 33) : v == 5 ? 0 : 33 * 7, VARIANT(av[v].name);
    else
        return 0;
    int k = v == CONF_PERF ? 1 : v;
    td_tensor *p = conf_in(c, -1, 1, SHAPE(n)), *g = conf_in(c, -1, 1, SHAPE(n)), *m = conf_in(c, -0.1, 0.1, SHAPE(n));
    td_tensor *s = conf_in(c, 0, 0.01, SHAPE(n)), *vmax = av[k].amsgrad ? conf_in(c, 0.01, 0.02, SHAPE(n)) : NULL;
    if (!p || !g || !m || !s || (av[k].amsgrad && !vmax)) return -1;
    td_status st = TIMED_ST(c, td_adam_update(p, g, m, s, vmax, 1e-2, 0.9, 0.999, 1e-8, av[k].wd, av[k].step,
                                              av[k].decoupled, av[k].amsgrad, av[k].maximize));
    if (st != TD_OK) return -1;
    out[0] = p, out[1] = m, out[2] = s, out[3] = vmax;
    return vmax ? 4 : 3;
}

static int case_sgd(conf_ctx *c, int v, td_tensor **out) {
    static const struct {
        const char *name;
        double momentum, dampening, wd;
        bool nesterov, first_step, maximize;
    } sv[] = {
        {"[33,7] plain", 0, 0, 0, false, false, false},
        {"[33,7] momentum 0.9, dampening 0.1", 0.9, 0.1, 0, false, false, false},
        {"[33,7] nesterov, weight decay 0.01", 0.9, 0, 0.01, true, false, false},
        {"[33,7] momentum, first step", 0.9, 0, 0.01, false, true, false},
        {"odd [1000] momentum, maximize", 0.5, 0, 0.1, false, false, true},
        {"size 0 momentum", 0.9, 0, 0, false, false, false},
    };
    int64_t n;
    if (v == CONF_PERF)
        n = PERF_N(c), VARIANT("[2^24] momentum");
    else if (v < (int)(sizeof sv / sizeof sv[0]))
        n = v == 4 ? BIG(c, 1000, 33) : v == 5 ? 0 : 33 * 7, VARIANT(sv[v].name);
    else
        return 0;
    int k = v == CONF_PERF ? 1 : v;
    td_tensor *p = conf_in(c, -1, 1, SHAPE(n)), *g = conf_in(c, -1, 1, SHAPE(n));
    td_tensor *buf = sv[k].momentum ? conf_in(c, -0.1, 0.1, SHAPE(n)) : NULL;
    if (!p || !g || (sv[k].momentum && !buf)) return -1;
    td_status st = TIMED_ST(c, td_sgd_update(p, g, buf, 0.1, sv[k].momentum, sv[k].dampening, sv[k].wd, sv[k].nesterov,
                                             sv[k].first_step, sv[k].maximize));
    if (st != TD_OK) return -1;
    out[0] = p, out[1] = buf;
    return buf ? 2 : 1;
}

static int case_rmsprop(conf_ctx *c, int v, td_tensor **out) {
    static const struct {
        const char *name;
        double wd, momentum;
        bool centered, maximize;
    } rv[] = {
        {"[33,7] plain", 0, 0, false, false},
        {"[33,7] momentum 0.9", 0, 0.9, false, false},
        {"[33,7] centered, momentum", 0, 0.9, true, false},
        {"odd [1000] centered, weight decay, maximize", 0.01, 0, true, true},
        {"size 0", 0, 0.9, true, false},
    };
    int64_t n;
    if (v == CONF_PERF)
        n = PERF_N(c), VARIANT("[2^24] momentum");
    else if (v < (int)(sizeof rv / sizeof rv[0]))
        n = v == 3 ? BIG(c, 1000, 33) : v == 4 ? 0 : 33 * 7, VARIANT(rv[v].name);
    else
        return 0;
    int k = v == CONF_PERF ? 1 : v;
    td_tensor *p = conf_in(c, -1, 1, SHAPE(n)), *g = conf_in(c, -1, 1, SHAPE(n)), *sq = conf_in(c, 0, 0.01, SHAPE(n));
    td_tensor *buf = rv[k].momentum ? conf_in(c, -0.1, 0.1, SHAPE(n)) : NULL;
    td_tensor *gavg = rv[k].centered ? conf_in(c, -0.01, 0.01, SHAPE(n)) : NULL;
    if (!p || !g || !sq || (rv[k].momentum && !buf) || (rv[k].centered && !gavg)) return -1;
    td_status st = TIMED_ST(c, td_rmsprop_update(p, g, sq, buf, gavg, 1e-2, 0.99, 1e-8, rv[k].wd, rv[k].momentum,
                                                 rv[k].centered, rv[k].maximize));
    if (st != TD_OK) return -1;
    int n_out = 0;
    out[n_out++] = p, out[n_out++] = sq;
    if (buf) out[n_out++] = buf;
    if (gavg) out[n_out++] = gavg;
    return n_out;
}

/* The GradScaler's unscale of three gradients with one found_inf flag; the
** variants plant an inf or a NaN in the last gradient (not compared: its
** other elements are the planted value times inv_scale). */
static int case_amp_unscale(conf_ctx *c, int v, td_tensor **out) {
    static const char *names[] = {"[33,7] [1000] [5] finite", "[33,7] [1000] + [5] with inf", "NaN, size 0"};
    double plant[] = {0, INFINITY, NAN};
    int64_t n = 1000;
    if (v == CONF_PERF)
        n = PERF_N(c), VARIANT("[2^24] finite");
    else if (v < 3)
        n = v == 2 ? 0 : BIG(c, 1000, 33), VARIANT(names[v]);
    else
        return 0;
    int k = v == CONF_PERF ? 0 : v;
    int64_t one = 1;
    td_tensor *g0 = conf_in(c, -100, 100, SHAPE(33, 7)), *g1 = conf_in(c, -100, 100, SHAPE(n));
    td_tensor *g2 = k ? td_full(SHAPE(5), plant[k], c->dt, c->dev) : conf_in(c, -1, 1, SHAPE(5));
    td_tensor *found = td_zeros(1, &one, TD_F32, c->dev);
    if (!g0 || !g1 || !g2 || !found) return -1;
    td_tensor *grads[3] = {g0, g1, g2};
    if (TIMED_ST(c, td_amp_unscale_(3, grads, found, 1.0 / 1024)) != TD_OK) return -1;
    out[0] = g0, out[1] = g1, out[2] = found;
    return 3;
}

/* ---- the runner cases ---- */

static const conf_case conf_cases[] = {
#define CONF_ENTRY_(name, K, dts, tol, ...) {#name, TD_OP_##K, dts, tol, case_##name},
    OP_CASES(CONF_ENTRY_, )
#undef CONF_ENTRY_
};
#define N_CASES ((int)(sizeof conf_cases / sizeof conf_cases[0]))

/* CONF_TABLE_ONLY: the cases without the runner, for trident devices --selftest (tools/devices_selftest.c) */
#ifndef CONF_TABLE_ONLY
enum {
#define CONF_INDEX_(nm, K, dts, tol, ...) CONF_INDEX_##nm,
    OP_CASES(CONF_INDEX_, )
#undef CONF_INDEX_
};
#define CONF_TEST_(nm, K, dts, tol, ...)                                                                               \
    static void test_##nm(void) { conf_run_case(&conf_cases[CONF_INDEX_##nm]); }
OP_CASES(CONF_TEST_, )
#undef CONF_TEST_

/* Every op kind of the op table has at least one case, and a sig whose
** operands are the op's n_in and n_out (tests/op_cases.h builds its probe). */
static void test_op_coverage(void) {
    bool covered[TD_OP_COUNT] = {false};
    for (int i = 0; i < N_CASES; i++) covered[conf_cases[i].kind] = true;
    int missing = 0;
    for (int k = 0; k < TD_OP_COUNT; k++) {
        const td_op_meta *m = td_op_info((td_op_kind)k);
        op_case pc;
        op_case_make((td_op_kind)k, TD_F32, &pc, NULL);
        if (!covered[k]) printf("  op %s has no conformance case\n", m->name), missing++;
        if ((m->n_in >= 0 && pc.op.n_in != m->n_in) || pc.op.n_out != m->n_out)
            printf("  op %s: sig \"%s\" has %d inputs and %d outputs\n", m->name, m->sig, pc.op.n_in, pc.op.n_out),
                missing++;
    }
    ASSERT_EQ_INT(missing, 0);
}

/* The dispatcher checks operand counts and dtypes against the op table before a backend sees them. */
static void test_operand_rules(void) {
    td_scope_begin();
    int64_t n = 3;
    td_tensor *f = td_zeros(1, &n, TD_F32, TD_CPU), *i = td_zeros(1, &n, TD_I32, TD_CPU);
    td_tensor *fo = td_zeros(1, &n, TD_F32, TD_CPU), *io = td_zeros(1, &n, TD_I32, TD_CPU);
    td_tensor *fff[3] = {f, f, f}, *fi[2] = {f, i};
    ASSERT_ERROR(td__dispatch(TD_OP_WHERE, 3, fff, NULL, 1, &fo, NULL), TD_ERR_DTYPE,
                 "where: in[0] has dtype float32, expected bool");
    ASSERT_ERROR(td__dispatch(TD_OP_ADD, 2, fi, NULL, 1, &fo, NULL), TD_ERR_DTYPE,
                 "add: in[1] has dtype int32, expected float32");
    ASSERT_ERROR(td__dispatch(TD_OP_ADD, 1, fi, NULL, 1, &fo, NULL), TD_ERR_MISUSE, "add: 1 input and 1 output");
    ASSERT_ERROR(td__dispatch(TD_OP_EXP, 1, &i, NULL, 1, &io, NULL), TD_ERR_UNSUPPORTED,
                 "exp: not supported for dtype");
    td_scope_end();
    td_clear_error();
}

int main(int argc, char **argv) {
    static const test_case cases[] = {{"op_coverage", test_op_coverage},
                                      {"operand_rules", test_operand_rules},
#define CONF_RUNNER_ENTRY_(name, K, dts, tol, ...) {#name, test_##name},
                                      OP_CASES(CONF_RUNNER_ENTRY_, )
#undef CONF_RUNNER_ENTRY_
    };
    if (argc > 1 && !strcmp(argv[1], "--perf")) return conf_perf(conf_cases, N_CASES, argc - 2, argv + 2);
    return test_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
#endif /* CONF_TABLE_ONLY */
