/*
** LINEAR_GELU: in = (x [M, K], w [N, K], b [N] or absent), out = (y, h), both
** [M, N], all contiguous:
**   h = x w^T + b   (the GEMM, then the bias rounded to the dtype, as ADD)
**   y = gelu(h)     (erf form x Phi(x) or the tanh form, as GELU)
** The GEMM is MATMUL's (w read transposed in place); then one pass over the
** rows adds the bias and applies GELU while the row is in cache (f32, the AVX2
** GELU where the CPU has it); other dtypes run ADD and GELU. So y and h equal
** MATMUL, ADD and GELU bit for bit.
*/
#include <math.h>

#include "cpu.h"
#include "cpu_ew.h"
#include "cpu_rows.h"

#define GELU_K    0.7978845608028654f /* sqrt(2/pi), as cpu_unary.c */
#define GELU_C    0.044715f
#define INV_SQRT2 0.7071067811865476f

/* h[r, :] += b (when b); y[r, :] = gelu(h[r, :]), for f32 rows of n */
static void bias_gelu_rows_f32(float *h, const float *b, float *y, int64_t M, int64_t N, bool tanh_form) {
    bool avx2 = !tanh_form && cpu_has_avx2();
    int nt = cpu_threads_for(M * N, 16);
#pragma omp parallel for num_threads(nt)
    for (int64_t r = 0; r < M; r++) {
        float *hr = h + r * N, *yr = y + r * N;
        if (b)
            for (int64_t j = 0; j < N; j++) hr[j] += b[j];
        if (avx2) {
            cpu_gelu_f32_avx2(N, yr, hr);
            continue;
        }
        for (int64_t j = 0; j < N; j++) {
            float x = hr[j];
            yr[j] = tanh_form ? 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x)))
                              : 0.5f * x * erfcf(-x * INV_SQRT2);
        }
    }
}

td_status td_cpu_LINEAR_GELU(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    td_operand y = op->out[0], h = op->out[1];
    int64_t M = x->shape[0], N = w->shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &h);
    td_status st = td_cpu_MATMUL(&mm);
    if (st != TD_OK) return st;
    if (x->dtype == TD_F32) {
        bias_gelu_rows_f32(cpu_ptr(&h), b->buf ? cpu_ptr(b) : NULL, cpu_ptr(&y), M, N,
                           op->p.gelu.approximate == TD_GELU_TANH);
        return TD_OK;
    }
    if (b->buf) { /* h += b, broadcast over the rows */
        td_operand add_in[2] = {h, *b};
        add_in[1].ndim = 2;
        add_in[1].shape[0] = M, add_in[1].shape[1] = N;
        add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
        td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = add_in, .out = &h};
        if ((st = td_cpu_ADD(&add)) != TD_OK) return st;
    }
    td_op gelu = {.kind = TD_OP_GELU, .n_in = 1, .n_out = 1, .in = &h, .out = &y, .p = op->p};
    return td_cpu_GELU(&gelu);
}
