/*
** SOFTMAX_BACKWARD and LOG_SOFTMAX_BACKWARD over the last dim: in = (dy, y),
** out = dx, all (R, C) contiguous (R = product of the leading dims), y the
** forward op's output:
**   softmax:     dx[r,j] = y[r,j] (dy[r,j] - s_r),       s_r = sum_j dy[r,j] y[r,j]
**   log_softmax: dx[r,j] = dy[r,j] - exp(y[r,j]) s_r,    s_r = sum_j dy[r,j]
** Rows run in parallel, each in two passes (the sum, then dx) while the row
** sits in cache. f32 rows use the AVX2 kernel of x86/rows_avx2.c when the CPU
** has it; f16/bf16 run through f32 copies.
*/
#include <stdlib.h>

#include "cpu_nn.h"
#include "cpu_rows.h"

#define SOFTMAX_BW_ROWS_(T, EXP)                                                                                       \
    static void softmax_bw_rows_##T(const T *dy, const T *y, T *dx, int64_t R, int64_t C, bool log_out) {              \
        int nt = cpu_threads_for(R, C * 4);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < R; r++) {                                  \
            const T *g = dy + r * C, *v = y + r * C;                                                                   \
            T *o = dx + r * C;                                                                                         \
            double s = 0;                                                                                              \
            for (int64_t j = 0; j < C; j++) s += log_out ? (double)g[j] : (double)g[j] * v[j];                         \
            T st = (T)s;                                                                                               \
            for (int64_t j = 0; j < C; j++) o[j] = log_out ? g[j] - EXP(v[j]) * st : v[j] * (g[j] - st);               \
        }                                                                                                              \
    }
SOFTMAX_BW_ROWS_(float, expf)
SOFTMAX_BW_ROWS_(double, exp)

static void softmax_bw_rows_f32(const float *dy, const float *y, float *dx, int64_t R, int64_t C, bool log_out) {
    if (!cpu_has_avx2()) {
        softmax_bw_rows_float(dy, y, dx, R, C, log_out);
        return;
    }
    /* outputs far larger than the cache bypass it (no read of dx's lines before writing them) */
    bool stream = R * C * (int64_t)sizeof(float) >= CPU_STREAM_BYTES && dx != dy;
    int nt = cpu_threads_for(R, C * 4);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for
        for (int64_t r = 0; r < R; r++)
            cpu_softmax_backward_row_f32_avx2(dy + r * C, y + r * C, dx + r * C, C, log_out, stream);
        if (stream) cpu_rows_stream_fence();
    }
}

static td_status softmax_backward_run(const td_op *op, bool log_out) {
    const td_operand *dy = &op->in[0], *y = &op->in[1], *dx = &op->out[0];
    int64_t n = td_operand_numel(dy), C = dy->ndim ? dy->shape[dy->ndim - 1] : 1;
    if (n == 0) return TD_OK;
    int64_t R = n / C;
    switch (dy->dtype) {
    case TD_F32: softmax_bw_rows_f32(cpu_ptr(dy), cpu_ptr(y), cpu_ptr(dx), R, C, log_out); return TD_OK;
    case TD_F64: softmax_bw_rows_double(cpu_ptr(dy), cpu_ptr(y), cpu_ptr(dx), R, C, log_out); return TD_OK;
    default: break;
    }
    float *fg = cpu_nn_to_f32(dy), *fy = fg ? cpu_nn_to_f32(y) : NULL;
    if (!fy) {
        free(fg);
        return td_last_status();
    }
    softmax_bw_rows_f32(fg, fy, fg, R, C, log_out); /* in place: each element of dy is read before dx overwrites it */
    cpu_nn_from_f32(dx, fg);
    free(fg);
    free(fy);
    return TD_OK;
}

td_status td_cpu_SOFTMAX_BACKWARD(const td_op *op) { return softmax_backward_run(op, false); }
td_status td_cpu_LOG_SOFTMAX_BACKWARD(const td_op *op) { return softmax_backward_run(op, true); }
