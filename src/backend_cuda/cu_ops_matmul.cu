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
**   f32: db = sum over m of dy comes out of the same GEMM (EPILOGUE_BGRADB:
** Lt's B is dy^T, summed over the GEMM's k = M), so dy is read once. f64, or
** a shape Lt has no BGRADB algorithm for: the plain GEMM, then SUM's kernel
** over dim 0. f16/bf16: the plain GEMM, then wgrad_db's column sums (one read
** of dy): on the tensor cores BGRADB costs more than that pass
** (`gemm_epilogue_sweep wgrad`, H100: W5's weight gradients at 704-752
** TFLOP/s without it, 358-598 with; the pass ~0.01-0.03 ms). dw and db in f32
** for f16/bf16 dy (the op table's 'a': gradients bound for f32 parameters):
** Lt's D in f32 from the same fp32 sums, and db rounded once from fp32.
** LINEAR_DGELU: in = (dy [M, N], w [N, K], h [M, K]), out = (dh [M, K], db? [K]):
**   dh = (dy w) gelu'(h) is MATMUL's GEMM (w row-major [N, K]) with the tanh
** form's derivative in Lt's epilogue (EPILOGUE_DGELU, aux = h as GELU_AUX_BIAS
** wrote it, applied to the fp32 product before the one rounding), so the MLP's
** input gradient through fc2 and the GELU is one GEMM in f16 / bf16 (then
** wgrad_db's column sums of dh for db). The erf form, f32 (as LINEAR_GELU: W5's
** fc2 2.08 ms with the epilogue, 1.69 + 0.20 without), f64, K % 8 != 0 (aux's
** ld) or a shape Lt has no DGELU algorithm for: the plain GEMM, then
** GELU_BACKWARD's kernel in place; with db (fc1's bias gradient, sum over m of
** dh, f32 for f16/bf16 dh under autocast) in f16/bf16/f32, one pass instead
** (dgelu_db_part_kernel) writes dh and sums it per chunk of rows, then
** wgrad_db's merge, so dh is not read again for db; f64: then SUM's kernel.
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
#include "cu_ew.cuh"

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

/* Column sums of a contiguous [M, N] matrix for a bias gradient: db[n] = sum over m in fp32, rounded once to db's
** dtype (f32, f16 or bf16). Pass 1 (a kernel of its caller: wgrad_db_part_kernel, dgelu_db_part_kernel): a block of
** (32, 8) threads owns 32 * V columns (a thread V adjacent ones: one 16-byte load a row where aligned) of one chunk
** of rows, its 8 row lanes merged through shared memory (col_part_store), the chunk's partial sums to
** part[chunk][n] (about 4 blocks an SM). Pass 2 (col_sum_merge_kernel) adds the chunks in a fixed order:
** deterministic, no atomics. */

/* Pass 1's end: thread (x, y)'s sums s of columns 32 V blockIdx.x + V x + k, merged over the 8 row lanes y in
** order, to part[blockIdx.y][n]. */
template <int V> __device__ __forceinline__ void col_part_store(const float (&s)[V], float *part, int64_t N) {
    __shared__ float tile[8][32 * V];
    int x = threadIdx.x, y = threadIdx.y;
    for (int k = 0; k < V; k++) tile[y][x * V + k] = s[k];
    __syncthreads();
    for (int c = y * 32 + x; c < 32 * V; c += 256) { /* column c of the block: its 8 row lanes, in order */
        int64_t n = (int64_t)blockIdx.x * 32 * V + c;
        if (n >= N) continue;
        float t = 0;
        for (int r = 0; r < 8; r++) t += tile[r][c];
        part[blockIdx.y * N + n] = t;
    }
}

/* LINEAR_WGRAD's pass 1 for f16/bf16 dy: the sums of dy's columns over one chunk of rows. */
template <typename T, int V>
__global__ void __launch_bounds__(256)
    wgrad_db_part_kernel(const T *dy, float *part, int64_t M, int64_t N, int64_t chunk) {
    int x = threadIdx.x, y = threadIdx.y;
    int64_t n0 = ((int64_t)blockIdx.x * 32 + x) * V, m0 = (int64_t)blockIdx.y * chunk;
    int64_t m1 = m0 + chunk < M ? m0 + chunk : M;
    float s[V];
    for (int k = 0; k < V; k++) s[k] = 0;
    if (n0 < N)
#pragma unroll 4
        for (int64_t m = m0 + y; m < m1; m += 8) {
            alignas(16) T e[V];
            if constexpr (V * sizeof(T) == 16)
                *(uint4 *)e = *(const uint4 *)(dy + m * N + n0);
            else
                e[0] = dy[m * N + n0];
            for (int k = 0; k < V; k++) s[k] += (float)e[k];
        }
    col_part_store<V>(s, part, N);
}

/* LINEAR_DGELU's pass after the plain GEMM g = dy w (in dh [M, K]) when db is asked for: dh = g gelu'(h) in place
** (cu_gelu_grad in the compute type: GELU_BACKWARD's kernel's arithmetic, dh as it writes) and pass 1 of db = sum
** over m of dh, over one chunk of rows. db sums the products in fp32 before they round to dh's dtype (LINEAR_WGRAD
** sums the rounded dh: the two differ by about one rounding of each term, well within the bias gradient's
** tolerance). T: f16, bf16 or f32 (V elements a thread: 16 bytes, or 1 where unaligned). */
template <typename T, int V, bool TANH>
__global__ void __launch_bounds__(256)
    dgelu_db_part_kernel(T *dh, const T *h, float *part, int64_t M, int64_t K, int64_t chunk) {
    typedef typename cu_compute<T>::type C;
    int x = threadIdx.x, y = threadIdx.y;
    int64_t n0 = ((int64_t)blockIdx.x * 32 + x) * V, m0 = (int64_t)blockIdx.y * chunk;
    int64_t m1 = m0 + chunk < M ? m0 + chunk : M;
    float s[V];
    for (int k = 0; k < V; k++) s[k] = 0;
    if (n0 < K)
#pragma unroll 2
        for (int64_t m = m0 + y; m < m1; m += 8) {
            alignas(16) T g[V], a[V];
            if constexpr (V * sizeof(T) == 16) {
                *(uint4 *)g = *(const uint4 *)(dh + m * K + n0);
                *(uint4 *)a = *(const uint4 *)(h + m * K + n0);
            } else {
                g[0] = dh[m * K + n0], a[0] = h[m * K + n0];
            }
            for (int k = 0; k < V; k++) {
                C v = cu_to<C>(g[k]) * cu_gelu_grad<C, TANH>(cu_to<C>(a[k]));
                s[k] += (float)v;
                g[k] = cu_from<T>(v);
            }
            if constexpr (V * sizeof(T) == 16)
                *(uint4 *)(dh + m * K + n0) = *(const uint4 *)g;
            else
                dh[m * K + n0] = g[0];
        }
    col_part_store<V>(s, part, K);
}

/* Pass 2: block (32, 32) owns 32 columns; thread (x, y) adds chunks y, y + 32, ... of column x, and the 32 lanes
** merge in order through shared memory (a thread a column would walk every chunk serially: latency-bound). */
template <typename O>
__global__ void __launch_bounds__(1024) col_sum_merge_kernel(const float *part, O *db, int64_t N, int split) {
    __shared__ float tile[32][33];
    int x = threadIdx.x, y = threadIdx.y;
    int64_t n = (int64_t)blockIdx.x * 32 + x;
    float t = 0;
    if (n < N)
        for (int c = y; c < split; c += 32) t += part[c * N + n];
    tile[y][x] = t;
    __syncthreads();
    if (y != 0 || n >= N) return;
    for (int r = 1; r < 32; r++) t += tile[r][x];
    db[n] = (O)t;
}

/* The two passes over M rows of N columns, with pass1(grid, block, part, chunk) launching pass 1 for blocks of 32 *
** v columns; db (N elements, f32, f16 or bf16) gets the sums; what names the op in a launch error. */
template <typename P>
static td_status col_sums(cu_dev *d, int64_t M, int64_t N, int v, td_operand *db, const char *what, P pass1) {
    int64_t bx = (N + 32 * v - 1) / (32 * v);
    /* about 4 blocks an SM (W5's profile tried 1 to 16 for each pass 1), each chunk at least 64 rows */
    int64_t split = (4 * (int64_t)d->sm_count + bx - 1) / bx, most = (M + 63) / 64;
    if (split > most) split = most;
    if (split < 1) split = 1;
    int64_t chunk = ((M + split - 1) / split + 7) / 8 * 8;
    float *part = NULL;
    td_status st = cu_temp_alloc(d, (size_t)(split * N) * sizeof(float), (void **)&part);
    if (st != TD_OK) return st;
    pass1(dim3((unsigned)bx, (unsigned)split), dim3(32, 8), part, chunk);
    dim3 grid((unsigned)((N + 31) / 32)), block(32, 32);
    if (db->dtype == TD_F32)
        col_sum_merge_kernel<float><<<grid, block, 0, d->stream>>>(part, (float *)cu_data(db), N, (int)split);
    else if (db->dtype == TD_BF16)
        col_sum_merge_kernel<__nv_bfloat16>
            <<<grid, block, 0, d->stream>>>(part, (__nv_bfloat16 *)cu_data(db), N, (int)split);
    else
        col_sum_merge_kernel<__half><<<grid, block, 0, d->stream>>>(part, (__half *)cu_data(db), N, (int)split);
    cu_temp_free(d, part);
    return CU_LAUNCHED(what);
}

/* LINEAR_WGRAD's db for f16/bf16 dy [M, N] (contiguous), in f32 or dy's dtype; also LINEAR_DGELU's after the DGELU
** epilogue's GEMM. */
template <typename T> static td_status wgrad_db(cu_dev *d, const td_operand *dy, td_operand *db, const char *what) {
    int64_t M = dy->shape[0], N = dy->shape[1];
    const T *p = (const T *)cu_data(dy);
    if (N % 8 == 0 && (uintptr_t)p % 16 == 0)
        return col_sums(d, M, N, 8, db, what, [&](dim3 g, dim3 b, float *part, int64_t chunk) {
            wgrad_db_part_kernel<T, 8><<<g, b, 0, d->stream>>>(p, part, M, N, chunk);
        });
    return col_sums(d, M, N, 1, db, what, [&](dim3 g, dim3 b, float *part, int64_t chunk) {
        wgrad_db_part_kernel<T, 1><<<g, b, 0, d->stream>>>(p, part, M, N, chunk);
    });
}

static td_status wgrad_db_half(cu_dev *d, const td_operand *dy, td_operand *db, const char *what) {
    return dy->dtype == TD_BF16 ? wgrad_db<__nv_bfloat16>(d, dy, db, what) : wgrad_db<__half>(d, dy, db, what);
}

/* LINEAR_DGELU's pass over dh [M, K] and h (dgelu_db_part_kernel), and db's merge */
template <typename T, bool TANH>
static td_status dgelu_db(cu_dev *d, td_operand *dh, const td_operand *h, td_operand *db) {
    int64_t M = dh->shape[0], K = dh->shape[1];
    constexpr int V = 16 / sizeof(T);
    T *g = (T *)cu_data(dh);
    const T *a = (const T *)cu_data(h);
    if (K % V == 0 && (uintptr_t)g % 16 == 0 && (uintptr_t)a % 16 == 0)
        return col_sums(d, M, K, V, db, "linear_dgelu", [&](dim3 grid, dim3 block, float *part, int64_t chunk) {
            dgelu_db_part_kernel<T, V, TANH><<<grid, block, 0, d->stream>>>(g, a, part, M, K, chunk);
        });
    return col_sums(d, M, K, 1, db, "linear_dgelu", [&](dim3 grid, dim3 block, float *part, int64_t chunk) {
        dgelu_db_part_kernel<T, 1, TANH><<<grid, block, 0, d->stream>>>(g, a, part, M, K, chunk);
    });
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
    bool half = dy->dtype == TD_F16 || dy->dtype == TD_BF16;
    if (db->buf && dy->dtype == TD_F32 && M > 0 && K > 0) { /* dw and db from one GEMM */
        st = cu_lt_matmul(d, &mm, CU_EPI_BGRADB, cu_data(db), NULL);
        if (st != TD_ERR_UNSUPPORTED) return st;
        td_clear_error();
    }
    if (K > 0 && (st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL)) != TD_OK) return st;
    if (!db->buf) return TD_OK;
    if (half) return wgrad_db_half(d, dy, db, "linear_wgrad (db)");
    td_operand sum = *db;
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = N, sum.strides[0] = N, sum.strides[1] = 1;
    td_op red = {};
    red.kind = TD_OP_SUM, red.n_in = 1, red.n_out = 1, red.in = dy, red.out = &sum, red.p.reduce.dims = 1;
    return cu_op_SUM(d, &red);
}

extern "C" td_status cu_op_LINEAR_DGELU(cu_dev *d, const td_op *op) {
    const td_operand *dy = &op->in[0], *h = &op->in[2];
    td_operand *dh = &op->out[0], *db = &op->out[1];
    int64_t M = dy->shape[0], N = dy->shape[1], K = h->shape[1];
    if (M == 0 || K == 0) return TD_OK; /* no rows: the core's db is zeros */
    td_op mm = {};
    mm.kind = TD_OP_MATMUL, mm.n_in = 2, mm.n_out = 1, mm.in = op->in, mm.out = dh, mm.flags = op->flags;
    td_status st;
    bool half = dy->dtype == TD_F16 || dy->dtype == TD_BF16, tanh_form = op->p.gelu.approximate == TD_GELU_TANH;
    if (tanh_form && half && N > 0 && K % 8 == 0) {
        st = cu_lt_matmul(d, &mm, CU_EPI_DGELU, NULL, cu_data(h)); /* dh from one GEMM */
        if (st != TD_ERR_UNSUPPORTED) return st != TD_OK || !db->buf ? st : wgrad_db_half(d, dh, db, "linear_dgelu");
        td_clear_error();
    }
    if ((st = cu_lt_matmul(d, &mm, CU_EPI_NONE, NULL, NULL)) != TD_OK) return st;
    if (db->buf && half) /* dh = g gelu'(h) in place and db's partial sums in one pass */
        return tanh_form ? (dy->dtype == TD_BF16 ? dgelu_db<__nv_bfloat16, true>(d, dh, h, db)
                                                 : dgelu_db<__half, true>(d, dh, h, db))
                         : (dy->dtype == TD_BF16 ? dgelu_db<__nv_bfloat16, false>(d, dh, h, db)
                                                 : dgelu_db<__half, false>(d, dh, h, db));
    if (db->buf && dy->dtype == TD_F32)
        return tanh_form ? dgelu_db<float, true>(d, dh, h, db) : dgelu_db<float, false>(d, dh, h, db);
    td_operand bw_in[2] = {*dh, *h}; /* dh = g gelu'(h), in place */
    td_op bw = {};
    bw.kind = TD_OP_GELU_BACKWARD, bw.n_in = 2, bw.n_out = 1, bw.in = bw_in, bw.out = dh, bw.p = op->p;
    if ((st = cu_op_GELU_BACKWARD(d, &bw)) != TD_OK || !db->buf) return st;
    td_operand sum = *db; /* f64: SUM's kernel over dim 0 */
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = K, sum.strides[0] = K, sum.strides[1] = 1;
    td_op red = {};
    red.kind = TD_OP_SUM, red.n_in = 1, red.n_out = 1, red.in = dh, red.out = &sum, red.p.reduce.dims = 1;
    return cu_op_SUM(d, &red);
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
