/*
** SOFTMAX and LOG_SOFTMAX over the last dim.
**   x is (R, C) contiguous (R = product of the leading dims), y is (R, C).
**   softmax:     y[r,j] = exp(x[r,j] - m_r) / s_r
**   log_softmax: y[r,j] = x[r,j] - m_r - log(s_r)
** with m_r = max_j x[r,j] and s_r = sum_j exp(x[r,j] - m_r). Subtracting the
** row max keeps every exp() in (0, 1], so nothing overflows; s_r >= 1.
** Rows run in parallel. f32 rows use the AVX2 kernel of x86/rows_avx2.c when
** the CPU has it (one read of x from memory, exp() to 1.26 ulp).
*/
#include <stdlib.h>

#include "cpu_nn.h"
#include "cpu_rows.h"

#define SOFTMAX_ROWS_(T, EXP, LOG)                                                                             \
    static void softmax_rows_##T(const T *x, T *y, int64_t R, int64_t C, bool log_out) {                       \
        int nt = cpu_threads_for(R, C * 8);                                                                    \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                         \
            const T *xr = x + r * C;                                                                           \
            T *yr = y + r * C;                                                                                 \
            T m = -INFINITY, s = 0; /* pass 1: the row max */                                                  \
            for (int64_t j = 0; j < C; j++) m = xr[j] > m ? xr[j] : m;                                         \
            for (int64_t j = 0; j < C; j++) { /* pass 2: shifted exponentials and their sum */                 \
                T e = EXP(xr[j] - m);                                                                          \
                s += e;                                                                                        \
                if (!log_out) yr[j] = e;                                                                       \
            }                                                                                                  \
            if (log_out) { /* pass 3: normalize */                                                             \
                T ls = m + LOG(s);                                                                             \
                for (int64_t j = 0; j < C; j++) yr[j] = xr[j] - ls;                                            \
            } else {                                                                                           \
                T inv = 1 / s;                                                                                 \
                for (int64_t j = 0; j < C; j++) yr[j] *= inv;                                                  \
            }                                                                                                  \
        }                                                                                                      \
    }
SOFTMAX_ROWS_(float, expf, logf)
SOFTMAX_ROWS_(double, exp, log)

static void softmax_rows_f32(const float *x, float *y, int64_t R, int64_t C, bool log_out) {
    if (!cpu_has_avx2()) {
        softmax_rows_float(x, y, R, C, log_out);
        return;
    }
    /* outputs far larger than the cache bypass it, each thread staging its row in a scratch buffer */
    bool stream = R * C * (int64_t)sizeof(float) >= CPU_STREAM_BYTES && x != y;
    int nt = cpu_threads_for(R, C * 8);
#pragma omp parallel num_threads(nt)
    {
        float *scratch = stream ? cpu_nn_workspace((size_t)C * sizeof(float)) : NULL; /* NULL: plain stores */
#pragma omp for
        for (int64_t r = 0; r < R; r++) cpu_softmax_row_f32_avx2(x + r * C, y + r * C, C, log_out, scratch);
        if (scratch) cpu_rows_stream_fence();
    }
}

static td_status softmax_run(const td_op *op, bool log_out) {
    const td_operand *x = &op->in[0], *y = &op->out[0];
    int64_t n = td_operand_numel(x), C = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (n == 0) return TD_OK;
    int64_t R = n / C;
    switch (x->dtype) {
    case TD_F32: softmax_rows_f32(cpu_ptr(x), cpu_ptr(y), R, C, log_out); return TD_OK;
    case TD_F64: softmax_rows_double(cpu_ptr(x), cpu_ptr(y), R, C, log_out); return TD_OK;
    default: break;
    }
    float *fx = cpu_nn_to_f32(x);
    if (!fx) return td_last_status();
    softmax_rows_f32(fx, fx, R, C, log_out); /* in place: each row reads x before writing y */
    cpu_nn_from_f32(y, fx);
    free(fx);
    return TD_OK;
}

td_status td_cpu_SOFTMAX(const td_op *op) { return softmax_run(op, false); }
td_status td_cpu_LOG_SOFTMAX(const td_op *op) { return softmax_run(op, true); }
