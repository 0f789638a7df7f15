/*
** Softmax over the last dim: SOFTMAX, LOG_SOFTMAX and their backward ops
** (SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD) (references:
** src/backend_cpu/cpu_softmax.c, cpu_softmax_backward.c). The softmax
** family's cross-entropy (CROSS_ENTROPY and its backward) is in its own
** file, cu_ops_xent.cu.
** x is (R, n) contiguous (R = product of the leading dims). One row group per
** row (cu_reduce.cuh): a warp for n <= 1024, else a block of 512; rows up to
** 16384 elements (8192 for f64) stay in registers, so x is read from memory once, with
** 16-byte loads and stores when rows are aligned. Math in float for
** f32/f16/bf16, in double for f64.
*/
#include "cu_reduce.cuh"

/* softmax / log_softmax: x, y (R, n);
**   m = max_j x[j]            (subtracting it keeps every exp() in (0, 1])
**   s = sum_j exp(x[j] - m)   (s >= 1)
**   softmax y[j] = exp(x[j] - m) * (1 / s);  log_softmax y[j] = x[j] - (m + log s)
** Rows in registers: pass 1 max, pass 2 exponentials and sum, pass 3 scale,
** then one store. Longer rows: m and s in one read (cu_row_max_sumexp), then
** a second read to write y. */
template <typename T, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR) softmax_kernel(const T *x, T *y, int64_t R, int64_t n, bool log_out) {
    CU_ROW_SETUP(T, TPR);
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        C v[VPT > 0 ? VPT : 1], m = cu_lowest<C>(), s = 0;
        if (VPT > 0) {
            cu_row_load<TPR, VPT, V>(xr, n, t, v);
            cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t) { m = cu_max_nan(m, v[k]); });
            m = cu_row_max<TPR>(m, scratch);
            cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t) {
                C e = exp(v[k] - m);
                if (!log_out) v[k] = e;
                s += e;
            });
            s = cu_row_sum<TPR>(s, scratch);
        } else {
            cu_row_max_sumexp<TPR>(xr, n, t, scratch, &m, &s);
        }
        C ls = m + log(s), inv = (C)1 / s;
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            if (VPT > 0)
                v[k] = log_out ? v[k] - ls : v[k] * inv;
            else
                yr[j] = cu_from<T>(log_out ? cu_to<C>(xr[j]) - ls : exp(cu_to<C>(xr[j]) - m) * inv);
        });
        cu_row_store<TPR, VPT, V>(yr, n, t, v);
    }
}

/* y has x's elements */
static bool softmax_ok(const td_op *op) { return td_operand_numel(&op->out[0]) == td_operand_numel(&op->in[0]); }

static td_status softmax_run(cu_dev *d, const td_op *op, bool log_out) {
    const td_operand *x = &op->in[0];
    int64_t R, n;
    if (!cu_rows_of(x, &R, &n)) return TD_OK;
    CU_SWITCH_FLOAT(x->dtype, {
        const T *px = (const T *)cu_data(x);
        T *py = (T *)cu_data(&op->out[0]);
        CU_ROWS_LAUNCH(d, R, n, cu_rows_aligned(n, sizeof(T), px, py), softmax_kernel, px, py, R, n, log_out);
        return CU_LAUNCHED(log_out ? "log_softmax" : "softmax");
    });
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda softmax: dtype %s", td_dtype_name(x->dtype));
}

CU_SUPPORTS(SOFTMAX) { return softmax_ok(op); }
extern "C" td_status cu_op_SOFTMAX(cu_dev *d, const td_op *op) { return softmax_run(d, op, false); }
CU_SUPPORTS(LOG_SOFTMAX) { return softmax_ok(op); }
extern "C" td_status cu_op_LOG_SOFTMAX(cu_dev *d, const td_op *op) { return softmax_run(d, op, true); }

/* softmax / log_softmax backward: dy, y, dx (R, n), y the forward's output;
**   softmax:     s = sum_j dy[j] y[j],  dx[j] = y[j] (dy[j] - s)
**   log_softmax: s = sum_j dy[j],       dx[j] = dy[j] - exp(y[j]) s
** Rows in registers (dy and y): one read, the sum, one store. Longer rows
** read dy and y twice (the second read mostly from L2). */
template <typename T, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR)
    softmax_backward_kernel(const T *dy, const T *y, T *dx, int64_t R, int64_t n, bool log_out) {
    CU_ROW_SETUP(T, TPR);
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        const T *gr = dy + r * n, *yr = y + r * n;
        T *xr = dx + r * n;
        C g[VPT > 0 ? VPT : 1], v[VPT > 0 ? VPT : 1], s = 0;
        cu_row_load<TPR, VPT, V>(gr, n, t, g);
        cu_row_load<TPR, VPT, V>(yr, n, t, v);
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            C gj = VPT > 0 ? g[k] : cu_to<C>(gr[j]);
            s += log_out ? gj : gj * (VPT > 0 ? v[k] : cu_to<C>(yr[j]));
        });
        s = cu_row_sum<TPR>(s, scratch);
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            C gj = VPT > 0 ? g[k] : cu_to<C>(gr[j]), yj = VPT > 0 ? v[k] : cu_to<C>(yr[j]);
            C o = log_out ? gj - exp(yj) * s : yj * (gj - s);
            if (VPT > 0)
                g[k] = o;
            else
                xr[j] = cu_from<T>(o);
        });
        cu_row_store<TPR, VPT, V>(xr, n, t, g);
    }
}

/* dy, y and dx of as many elements */
static bool softmax_backward_ok(const td_op *op) {
    int64_t n = td_operand_numel(&op->in[0]);
    return td_operand_numel(&op->in[1]) == n && td_operand_numel(&op->out[0]) == n;
}

static td_status softmax_backward_run(cu_dev *d, const td_op *op, bool log_out) {
    const td_operand *dy = &op->in[0];
    int64_t R, n;
    if (!cu_rows_of(dy, &R, &n)) return TD_OK;
    CU_SWITCH_FLOAT(dy->dtype, {
        const T *pg = (const T *)cu_data(dy), *py = (const T *)cu_data(&op->in[1]);
        T *px = (T *)cu_data(&op->out[0]);
        bool vec = cu_rows_aligned(n, sizeof(T), pg, py) && cu_rows_aligned(n, sizeof(T), px, nullptr);
        CU_ROWS_LAUNCH(d, R, n, vec, softmax_backward_kernel, pg, py, px, R, n, log_out);
        return CU_LAUNCHED(log_out ? "log_softmax_backward" : "softmax_backward");
    });
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda softmax_backward: dtype %s", td_dtype_name(dy->dtype));
}

CU_SUPPORTS(SOFTMAX_BACKWARD) { return softmax_backward_ok(op); }
extern "C" td_status cu_op_SOFTMAX_BACKWARD(cu_dev *d, const td_op *op) { return softmax_backward_run(d, op, false); }
CU_SUPPORTS(LOG_SOFTMAX_BACKWARD) { return softmax_backward_ok(op); }
extern "C" td_status cu_op_LOG_SOFTMAX_BACKWARD(cu_dev *d, const td_op *op) {
    return softmax_backward_run(d, op, true);
}
