/*
** The matmul family on CUDA: MATMUL, LINEAR, LINEAR_GELU, LINEAR_WGRAD, LINEAR_DGELU and LINEAR_RESIDUAL, on the
** cuBLASLt GEMM of cu_blaslt.c (cu_lt_matmul, cu_lt_matmul_add); none has a capability test.
** MATMUL: out[..., M, N] = a[..., M, K] @ b[..., K, N], batch dims broadcast
** (stride 0), each matrix row- or column-major (TD_LAYOUT_MATRIX).
** LINEAR: in = (x [M, K], w [N, K], b [N]?), out = y [M, N]: y = x w^T + b,
** LINEAR_GELU's GEMM and bias epilogue without the GELU (f64, K = 0 or no
** epilogue algorithm: the plain GEMM, then ADD's kernel).
** LINEAR_GELU: in = (x [M, K], w [N, K], b [N]?), out = (y, h) [M, N]:
**   h = x w^T + b, y = gelu(h). The GEMM is MATMUL's (w read as the column-major
** [K, N] it is) with the bias in Lt's epilogue (EPILOGUE_BIAS, added in fp32
** before the one rounding), then one GELU pass h -> y (GELU's kernel). The
** tanh form in f16 / bf16 with a bias and N % 8 == 0 takes EPILOGUE_GELU_AUX_BIAS
** instead: one GEMM writes y and keeps h as its aux output (Lt's GELU is the
** tanh form, so the erf form cannot use it). f32 keeps the separate pass: its
** GEMM runs on the FMA units, where the epilogue's tanh is not free
** (bench/gemm_epilogue_sweep, H100: W5's fc1 1.83 ms with it, 1.55 + 0.14
** without; bf16 0.156 with, 0.113 + 0.068 without). f64, K = 0, or a shape Lt
** has no epilogue algorithm for: the plain GEMM, then ADD's and GELU's kernels.
** LINEAR_WGRAD: in = (dy [M, N], x [M, K]), out = (dw [N, K], db? [N]):
**   dw = dy^T x is MATMUL's GEMM with dy read transposed (column-major [N, M]);
**   db = sum over m of dy comes out of the same GEMM (EPILOGUE_BGRADB: Lt's B
** is dy^T, summed over the GEMM's k = M), so dy is read once. f64, no
** db, or a shape Lt has no BGRADB algorithm for: the plain GEMM, then SUM's
** kernel over dim 0. dw and db in f32 for f16/bf16 dy (the op table's 'a':
** gradients bound for f32 parameters): Lt's D and bias gradient written in
** f32 from the same fp32 sums; where BGRADB cannot give db, the plain GEMM
** writes dw in f32 and wgrad_db_f32_kernel sums db (SUM's kernel writes dy's
** dtype only).
** LINEAR_DGELU: in = (dy [M, N], w [N, K], h [M, K]), out = dh [M, K]:
**   dh = (dy w) gelu'(h) is MATMUL's GEMM (w row-major [N, K]) with the tanh
** form's derivative in Lt's epilogue (EPILOGUE_DGELU, aux = h as GELU_AUX_BIAS
** wrote it, applied to the fp32 product before the one rounding), so the MLP's
** input gradient through fc2 and the GELU is one GEMM in f16 / bf16. The erf
** form, f32 (as LINEAR_GELU: W5's fc2 2.08 ms with the epilogue, 1.69 + 0.20
** without), f64, K % 8 != 0 (aux's ld) or a shape Lt has no DGELU algorithm
** for: the plain GEMM, then GELU_BACKWARD's kernel in place.
** LINEAR_RESIDUAL: in = (x [M, K], w [N, K], b [N]?, r [M, N]), out = y [M, N],
** y, b and r of x's dtype or f32 for f16/bf16 x: y = x w^T + b + r is MATMUL's
** GEMM with r as Lt's C (beta = 1) and b in the BIAS epilogue, both added to
** the fp32 product before its one rounding (to f32 under autocast: no bf16 y),
** so a transformer block's residual add costs no pass of its own. f64 (no bias
** epilogue) or a shape Lt has no BIAS algorithm for: the GEMM onto r, then
** ADD's kernel; K = 0: y = r (a copy), then ADD's kernel. No algorithm at all:
** TD_ERR_UNSUPPORTED, and the core composes the ops.
*/
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cu.h"

extern "C" td_status cu_op_MATMUL(cu_dev *d, const td_op *op) { return cu_lt_matmul(d, op, CU_EPI_NONE, NULL, NULL); }

extern "C" td_status cu_op_LINEAR(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    td_operand *y = &op->out[0];
    int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    bool lt_bias = b->buf && x->dtype != TD_F64 && K > 0;
    td_status st = cu_lt_matmul(d, &mm, lt_bias ? CU_EPI_BIAS : CU_EPI_NONE, lt_bias ? cu_data(b) : NULL, NULL);
    if (st == TD_ERR_UNSUPPORTED && lt_bias) { /* no bias epilogue for this shape: the plain GEMM, then ADD */
        td_clear_error();
        lt_bias = false;
        st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL);
    }
    if (st != TD_OK || !b->buf || lt_bias) return st;
    td_operand add_in[2] = {*y, *b}; /* y += b, broadcast over the rows */
    add_in[1].ndim = 2;
    add_in[1].shape[0] = M, add_in[1].shape[1] = N;
    add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
    td_op add = {};
    add.kind = TD_OP_ADD, add.n_in = 2, add.n_out = 1, add.in = add_in, add.out = y;
    return cu_op_ADD(d, &add);
}

extern "C" td_status cu_op_LINEAR_GELU(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    td_operand y = op->out[0], h = op->out[1];
    int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &y);
    bool tanh_form = op->p.gelu.approximate == TD_GELU_TANH, half = x->dtype == TD_F16 || x->dtype == TD_BF16;
    bool lt_bias = b->buf && x->dtype != TD_F64 && K > 0;
    td_status st;
    if (tanh_form && half && lt_bias && N % 8 == 0) { /* y and h from one GEMM */
        st = cu_lt_matmul(d, &mm, CU_EPI_GELU_AUX_BIAS, cu_data(b), cu_data(&h));
        if (st != TD_ERR_UNSUPPORTED) return st;
        td_clear_error();
    }
    mm.out = &h;
    st = cu_lt_matmul(d, &mm, lt_bias ? CU_EPI_BIAS : CU_EPI_NONE, lt_bias ? cu_data(b) : NULL, NULL);
    if (st == TD_ERR_UNSUPPORTED && lt_bias) { /* no bias epilogue for this shape: the plain GEMM, then ADD */
        td_clear_error();
        lt_bias = false;
        st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL);
    }
    td_op step = {};                         /* ADD, then GELU */
    if (st == TD_OK && b->buf && !lt_bias) { /* h += b, broadcast over the rows */
        td_operand add_in[2] = {h, *b};
        add_in[1].ndim = 2;
        add_in[1].shape[0] = M, add_in[1].shape[1] = N;
        add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
        step.kind = TD_OP_ADD, step.n_in = 2, step.n_out = 1, step.in = add_in, step.out = &h;
        st = cu_op_ADD(d, &step);
    }
    if (st != TD_OK) return st;
    step.kind = TD_OP_GELU, step.n_in = 1, step.n_out = 1, step.in = &h, step.out = &y, step.p = op->p;
    return cu_op_GELU(d, &step);
}

/* LINEAR_WGRAD's f32 db of f16/bf16 dy [M, N] without BGRADB: db[n] = sum over m of dy[m, n], in fp32; a thread a
** column, so a warp reads 32 adjacent columns of each row */
template <typename T> __global__ void wgrad_db_f32_kernel(const T *dy, float *db, int64_t M, int64_t N) {
    for (int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; n < N; n += (int64_t)gridDim.x * blockDim.x) {
        float s = 0;
        for (int64_t m = 0; m < M; m++) s += (float)dy[m * N + n];
        db[n] = s;
    }
}

static td_status wgrad_db_f32(cu_dev *d, const td_operand *dy, td_operand *db) {
    int64_t M = dy->shape[0], N = dy->shape[1];
    unsigned grid = cu_grid(d, N, CU_BLOCK);
    if (dy->dtype == TD_BF16)
        wgrad_db_f32_kernel<<<grid, CU_BLOCK, 0, d->stream>>>((const __nv_bfloat16 *)cu_data(dy), (float *)cu_data(db),
                                                              M, N);
    else
        wgrad_db_f32_kernel<<<grid, CU_BLOCK, 0, d->stream>>>((const __half *)cu_data(dy), (float *)cu_data(db), M, N);
    return CU_LAUNCHED("linear_wgrad (f32 db)");
}

extern "C" td_status cu_op_LINEAR_WGRAD(cu_dev *d, const td_op *op) {
    const td_operand *dy = &op->in[0], *x = &op->in[1];
    td_operand *db = &op->out[1];
    int64_t M = dy->shape[0], N = dy->shape[1], K = x->shape[1];
    td_operand mm_in[2] = {*dy, *x};
    mm_in[0].shape[0] = N, mm_in[0].shape[1] = M; /* dy^T [N, M]: column-major */
    mm_in[0].strides[0] = 1, mm_in[0].strides[1] = N;
    td_op mm = {};
    mm.kind = TD_OP_MATMUL, mm.n_in = 2, mm.n_out = 1, mm.in = mm_in, mm.out = &op->out[0], mm.flags = op->flags;
    if (N == 0) return TD_OK;
    td_status st = TD_OK;
    if (db->buf && dy->dtype != TD_F64 && M > 0 && K > 0) { /* dw and db from one GEMM */
        st = cu_lt_matmul(d, &mm, CU_EPI_BGRADB, cu_data(db), NULL);
        if (st != TD_ERR_UNSUPPORTED) return st;
        td_clear_error();
    }
    if (K > 0 && (st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL)) != TD_OK) return st;
    if (!db->buf) return TD_OK;
    if (db->dtype != dy->dtype) return wgrad_db_f32(d, dy, db);
    td_operand sum = *db;
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = N, sum.strides[0] = N, sum.strides[1] = 1;
    td_op red = {};
    red.kind = TD_OP_SUM, red.n_in = 1, red.n_out = 1, red.in = dy, red.out = &sum, red.p.reduce.dims = 1;
    return cu_op_SUM(d, &red);
}

extern "C" td_status cu_op_LINEAR_DGELU(cu_dev *d, const td_op *op) {
    const td_operand *dy = &op->in[0], *h = &op->in[2];
    td_operand *dh = &op->out[0];
    int64_t M = dy->shape[0], N = dy->shape[1], K = h->shape[1];
    if (M == 0 || K == 0) return TD_OK;
    td_op mm = {};
    mm.kind = TD_OP_MATMUL, mm.n_in = 2, mm.n_out = 1, mm.in = op->in, mm.out = dh, mm.flags = op->flags;
    td_status st;
    bool half = dy->dtype == TD_F16 || dy->dtype == TD_BF16;
    if (op->p.gelu.approximate == TD_GELU_TANH && half && N > 0 && K % 8 == 0) {
        st = cu_lt_matmul(d, &mm, CU_EPI_DGELU, NULL, cu_data(h)); /* dh from one GEMM */
        if (st != TD_ERR_UNSUPPORTED) return st;
        td_clear_error();
    }
    if ((st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL)) != TD_OK) return st;
    td_operand bw_in[2] = {*dh, *h}; /* dh = g gelu'(h), in place */
    td_op bw = {};
    bw.kind = TD_OP_GELU_BACKWARD, bw.n_in = 2, bw.n_out = 1, bw.in = bw_in, bw.out = dh, bw.p = op->p;
    return cu_op_GELU_BACKWARD(d, &bw);
}

extern "C" td_status cu_op_LINEAR_RESIDUAL(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *b = &op->in[2], *r = &op->in[3];
    td_operand *y = &op->out[0];
    int64_t M = x->shape[0], K = x->shape[1], N = op->in[1].shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    bool lt_bias = b->buf && x->dtype != TD_F64 && K > 0;
    td_status st;
    if (K == 0) /* an empty product: y = r */
        st = cu_copy_view(d, r, y);
    else {
        st = cu_lt_matmul_add(d, &mm, lt_bias ? CU_EPI_BIAS : CU_EPI_NONE, lt_bias ? cu_data(b) : NULL, cu_data(r));
        if (st == TD_ERR_UNSUPPORTED && lt_bias) { /* no bias epilogue for this shape: the GEMM onto r, then ADD */
            td_clear_error();
            lt_bias = false;
            st = cu_lt_matmul_add(d, &mm, CU_EPI_NONE, NULL, cu_data(r));
        }
    }
    if (st != TD_OK || !b->buf || lt_bias) return st;
    td_operand add_in[2] = {*y, *b}; /* y += b, broadcast over the rows */
    add_in[1].ndim = 2;
    add_in[1].shape[0] = M, add_in[1].shape[1] = N;
    add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
    td_op add = {};
    add.kind = TD_OP_ADD, add.n_in = 2, add.n_out = 1, add.in = add_in, add.out = y;
    return cu_op_ADD(d, &add);
}
