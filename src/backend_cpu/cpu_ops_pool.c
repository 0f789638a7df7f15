/*
** MAX_POOL2D, AVG_POOL2D and their backward ops (PyTorch's semantics, no
** dilation, floor mode).
**   x is (N, C, H, W), y and indices are (N, C, Ho, Wo), all contiguous;
**   window (oh, ow) covers rows [oh*sh - ph, oh*sh - ph + kh) and columns
**   likewise, clipped to the input.
**   max: y = max over the window (padding counts as -inf, NaN wins);
**        indices = h*W + w of the max inside its plane (int64).
**   avg: y = sum over the window / divisor, where the divisor counts the
**        window clipped to the padded input (count_include_pad) or to the
**        input itself.
** Reference: torch.nn.functional.max_pool2d / avg_pool2d.
*/
#include <stdlib.h>
#include <string.h>

#include "cpu_nn.h"
#include "cpu_pool.h"

typedef struct pool_geom {
    int64_t planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
} pool_geom;

typedef struct pool_window {
    int64_t h0, h1, w0, w1; /* clipped to the input: [h0, h1) x [w0, w1) */
    int64_t divisor;        /* for avg */
} pool_window;

static pool_geom pool_geom_of(const td_op *op, const int64_t *x, const int64_t *y) {
    return (pool_geom){.planes = x[0] * x[1],
                       .H = x[2],
                       .W = x[3],
                       .Ho = y[2],
                       .Wo = y[3],
                       .kh = op->p.pool.kernel[0],
                       .kw = op->p.pool.kernel[1],
                       .sh = op->p.pool.stride[0],
                       .sw = op->p.pool.stride[1],
                       .ph = op->p.pool.padding[0],
                       .pw = op->p.pool.padding[1],
                       .count_include_pad = op->p.pool.count_include_pad};
}

static pool_window pool_window_at(const pool_geom *q, int64_t oh, int64_t ow) {
    int64_t h0 = oh * q->sh - q->ph, w0 = ow * q->sw - q->pw;
    int64_t h1 = h0 + q->kh, w1 = w0 + q->kw;
    /* the padded window, clipped to the padded input */
    int64_t hp = (h1 < q->H + q->ph ? h1 : q->H + q->ph) - h0, wp = (w1 < q->W + q->pw ? w1 : q->W + q->pw) - w0;
    pool_window win = {h0 < 0 ? 0 : h0, h1 < q->H ? h1 : q->H, w0 < 0 ? 0 : w0, w1 < q->W ? w1 : q->W, 0};
    win.divisor = q->count_include_pad ? hp * wp : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
}

/* For each plane pl (in parallel) declare PLANE (its pointer into x or dx), then for each output
** (oh, ow) of the plane run the body with win, the window of (oh, ow), and o, the output's index.
** A plane costs Ho*Wo*kh*kw. */
#define POOL_FOR_WINDOWS_(q, PLANE, ...)                                                                               \
    do {                                                                                                               \
        int nt_ = cpu_threads_for((q)->planes, (q)->Ho * (q)->Wo * (q)->kh * (q)->kw);                                 \
        _Pragma("omp parallel for num_threads(nt_)") for (int64_t pl = 0; pl < (q)->planes; pl++) {                    \
            PLANE;                                                                                                     \
            for (int64_t oh = 0; oh < (q)->Ho; oh++)                                                                   \
                for (int64_t ow = 0; ow < (q)->Wo; ow++) {                                                             \
                    pool_window win = pool_window_at((q), oh, ow);                                                     \
                    int64_t o = (pl * (q)->Ho + oh) * (q)->Wo + ow;                                                    \
                    __VA_ARGS__                                                                                        \
                }                                                                                                      \
        }                                                                                                              \
    } while (0)

/* POOL_HAS_VEC / POOL_VEC_ROW_2X2: the AVX2 row of a 2x2/stride-2 max pool (f32 only) */
#define POOL_T           float
#define POOL_FN(name)    name##_f32
#define POOL_HAS_VEC     cpu_has_avx2()
#define POOL_VEC_ROW_2X2 cpu_max_pool_2x2_row_f32_avx2
#include "cpu_pool_impl.h"
#undef POOL_T
#undef POOL_FN
#undef POOL_HAS_VEC
#undef POOL_VEC_ROW_2X2
#define POOL_T                double
#define POOL_FN(name)         name##_f64
#define POOL_HAS_VEC          false
#define POOL_VEC_ROW_2X2(...) (void)0
#include "cpu_pool_impl.h"
#undef POOL_T
#undef POOL_FN
#undef POOL_HAS_VEC
#undef POOL_VEC_ROW_2X2

/* Run fn_f32 / fn_f64 on native dtypes, or widen the float input `in`, run
** the f32 kernel into a temporary and narrow it into `out`. */
#define POOL_DISPATCH_(in, out, call_f32, call_f64, wide_call)                                                         \
    do {                                                                                                               \
        if ((in)->dtype == TD_F32) {                                                                                   \
            call_f32;                                                                                                  \
            return TD_OK;                                                                                              \
        }                                                                                                              \
        if ((in)->dtype == TD_F64) {                                                                                   \
            call_f64;                                                                                                  \
            return TD_OK;                                                                                              \
        }                                                                                                              \
        float *fin = cpu_nn_to_f32(in), *fout = malloc((size_t)td_operand_numel(out) * sizeof(float));                 \
        td_status st = !fin    ? td_last_status()                                                                      \
                       : !fout ? cpu_nn_oom(td_op_name(op->kind), (size_t)td_operand_numel(out) * sizeof(float))       \
                               : TD_OK;                                                                                \
        if (st == TD_OK) {                                                                                             \
            wide_call;                                                                                                 \
            cpu_nn_from_f32(out, fout);                                                                                \
        }                                                                                                              \
        free(fin), free(fout);                                                                                         \
        return st;                                                                                                     \
    } while (0)

td_status cpu_op_MAX_POOL2D(const td_op *op) {
    const td_operand *x = &op->in[0], *y = &op->out[0], *idx = &op->out[1];
    pool_geom q = pool_geom_of(op, x->shape, y->shape);
    if (td_operand_numel(y) == 0) return TD_OK;
    POOL_DISPATCH_(x, y, max_pool_f32(&q, cpu_ptr(x), cpu_ptr(y), cpu_ptr(idx)),
                   max_pool_f64(&q, cpu_ptr(x), cpu_ptr(y), cpu_ptr(idx)), max_pool_f32(&q, fin, fout, cpu_ptr(idx)));
}

td_status cpu_op_MAX_POOL2D_BACKWARD(const td_op *op) {
    const td_operand *dy = &op->in[0], *idx = &op->in[1], *dx = &op->out[0];
    pool_geom q = pool_geom_of(op, dx->shape, dy->shape);
    const int64_t *ix = cpu_ptr(idx);
    for (int64_t i = 0, n = td_operand_numel(idx); i < n; i++) /* never scatter outside a plane */
        if (ix[i] < 0 || ix[i] >= q.H * q.W)
            return td_error_set(TD_ERR_INDEX,
                                "max_pool2d_backward: index %lld at position %lld is outside a %lldx%lld plane",
                                (long long)ix[i], (long long)i, (long long)q.H, (long long)q.W);
    if (td_operand_numel(dx) == 0) return TD_OK;
    POOL_DISPATCH_(dy, dx, max_pool_backward_f32(&q, cpu_ptr(dy), ix, cpu_ptr(dx)),
                   max_pool_backward_f64(&q, cpu_ptr(dy), ix, cpu_ptr(dx)), max_pool_backward_f32(&q, fin, ix, fout));
}

td_status cpu_op_AVG_POOL2D(const td_op *op) {
    const td_operand *x = &op->in[0], *y = &op->out[0];
    pool_geom q = pool_geom_of(op, x->shape, y->shape);
    if (td_operand_numel(y) == 0) return TD_OK;
    POOL_DISPATCH_(x, y, avg_pool_f32(&q, cpu_ptr(x), cpu_ptr(y)), avg_pool_f64(&q, cpu_ptr(x), cpu_ptr(y)),
                   avg_pool_f32(&q, fin, fout));
}

td_status cpu_op_AVG_POOL2D_BACKWARD(const td_op *op) {
    const td_operand *dy = &op->in[0], *dx = &op->out[0];
    pool_geom q = pool_geom_of(op, dx->shape, dy->shape);
    if (td_operand_numel(dx) == 0) return TD_OK;
    POOL_DISPATCH_(dy, dx, avg_pool_backward_f32(&q, cpu_ptr(dy), cpu_ptr(dx)),
                   avg_pool_backward_f64(&q, cpu_ptr(dy), cpu_ptr(dx)), avg_pool_backward_f32(&q, fin, fout));
}
