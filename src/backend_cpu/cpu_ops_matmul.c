/*
** The CPU backend's matmul ops: MATMUL, LINEAR and the fused LINEAR_GELU and LINEAR_RESIDUAL (GEMMs in cpu_gemm.c).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_ew.h"
#include "cpu_gemm.h"
#include "cpu_nn.h"
#include "cpu_rows.h"

/*
** MATMUL: out[b] = a[b] @ bm[b] for every batch index b.
**   a is (..., M, K), bm is (..., K, N), out is (..., M, N) contiguous.
** The front-end (src/core/op_matmul.c) passes both inputs expanded to the
** output's batch dims (stride 0 where broadcast), and each matrix either
** row-major (strides[-1] == 1, strides[-2] >= max(1, cols)) or column-major
** (strides[-2] == 1, strides[-1] >= max(1, rows)). So every matrix maps onto a
** BLAS operand with a transpose flag and a leading dimension.
** Threads: OpenBLAS runs on its caller's thread (see cpu_backend.c), and the
** OpenMP threads share out "tasks": each of the batch's GEMMs is cut into T
** blocks of output rows (or columns, when N > M), T = 1 when there are batches
** enough for CPU_SPLIT_MAX threads, and every task is one single-threaded GEMM
** (cpu_gemm.c). The cut depends on the shapes only, never on the thread count:
** a BLAS rounds an element differently when the block around it changes (its
** kernels treat block edges and small blocks their own way), so a cut that
** followed the thread count made 1 and 16 threads differ in the last bits, and
** training amplified that (issue 15). Each output element is computed by the
** same GEMM call on any number of threads, so the result is the same bits.
*/

/* BLAS view of one matrix of a batched operand: transposed or not, and its leading dimension. */
typedef struct mm_mat {
    bool trans;
    int64_t ld;
} mm_mat;

static mm_mat mm_layout(const td_operand *v) {
    int nd = v->ndim;
    bool col_major = v->strides[nd - 1] != 1;
    int64_t ld = col_major ? v->strides[nd - 1] : v->strides[nd - 2];
    /* one row (column): its stride is never stepped, but BLAS wants ld >= the columns (rows) */
    int64_t lines = v->shape[col_major ? nd - 1 : nd - 2], len = v->shape[col_major ? nd - 2 : nd - 1];
    if (lines == 1 && ld < len) ld = len;
    return (mm_mat){col_major, ld};
}

/* Element offset of batch b (row-major over the batch dims) in view v. */
static int64_t mm_batch_offset(const td_operand *v, int64_t b) {
    int64_t off = 0;
    for (int d = v->ndim - 3; d >= 0; d--) {
        off += (b % v->shape[d]) * v->strides[d];
        b /= v->shape[d];
    }
    return off;
}

/* Blocks to cut each of the batch's GEMMs into, for `pieces` pieces of work in all: enough for
** every piece, but blocks of at least 16 rows (or columns), since every block packs all of the
** other operand. */
static int64_t mm_tiles(int64_t batches, int64_t M, int64_t N, int64_t pieces) {
    int64_t t = batches >= pieces ? 1 : (pieces + batches - 1) / batches, most = (M > N ? M : N) / 16;
    return t > most ? (most > 1 ? most : 1) : t;
}

/* [*lo, *hi): block i of T over n rows, cut on multiples of 16 when each block still gets some. */
static void mm_block(int64_t n, int64_t T, int64_t i, int64_t *lo, int64_t *hi) {
    int64_t step = (n + T - 1) / T;
    if (n >= 16 * T) step = (step + 15) / 16 * 16;
    *lo = i * step < n ? i * step : n;
    *hi = (i + 1) * step < n ? (i + 1) * step : n;
}

/* One batched product: out[bi] = a[bi] @ b[bi] on raw element pointers pa, pb, pc (pc contiguous),
** with shapes and strides taken from the views a and b, cut into `tiles` blocks per batch index. */
typedef struct mm_plan {
    const td_operand *a, *b;
    const void *pa, *pb;
    void *pc;
    td_dtype dt;
    int64_t M, N, K, tiles;
    mm_mat la, lb;
    bool by_rows; /* blocks of output rows (else of columns) */
} mm_plan;

/* Task (bi, i) computes block i of out[bi]: rows [lo, hi) of op(a) when by_rows, else columns
** [lo, hi) of op(b). A row of a sits at r*ld (untransposed) or r (transposed), a column of b at
** c (untransposed) or c*ld (transposed). The block is zeroed and the GEMM adds to it:
** OpenBLAS's own beta-0 pass over C is slower than memset. */
static void mm_task(const mm_plan *p, int64_t task) {
    int64_t bi = task / p->tiles, lo, hi, M = p->M, N = p->N, K = p->K;
    mm_block(p->by_rows ? M : N, p->tiles, task % p->tiles, &lo, &hi);
    if (lo == hi) return;
    size_t es = td_dtype_size(p->dt);
    int64_t ao = mm_batch_offset(p->a, bi), bo = mm_batch_offset(p->b, bi), co = bi * M * N, m = M, n = N;
    if (p->by_rows) {
        ao += lo * (!p->la.trans ? p->la.ld : 1), co += lo * N, m = hi - lo;
        memset((char *)p->pc + (size_t)co * es, 0, (size_t)(m * N) * es);
    } else {
        bo += lo * (!p->lb.trans ? 1 : p->lb.ld), co += lo, n = hi - lo;
        for (int64_t r = 0; r < M; r++) memset((char *)p->pc + (size_t)(co + r * N) * es, 0, (size_t)n * es);
    }
    const char *A = (const char *)p->pa + (size_t)ao * es, *B = (const char *)p->pb + (size_t)bo * es;
    char *C = (char *)p->pc + (size_t)co * es;
    if (p->dt == TD_F64)
        cpu_gemm_f64(p->la.trans, p->lb.trans, m, n, K, (const double *)A, p->la.ld, (const double *)B, p->lb.ld,
                     (double *)C, N);
    else
        cpu_gemm_f32(p->la.trans, p->lb.trans, m, n, K, (const float *)A, p->la.ld, (const float *)B, p->lb.ld,
                     (float *)C, N);
}

static void mm_run(const td_operand *a, const void *pa, const td_operand *b, const void *pb, td_dtype dt, void *pc) {
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t batches = cpu_numel(nd - 2, a->shape);
    /* about 256k multiply-adds per piece (and per thread) before another one pays */
    int64_t pieces = cpu_splits_for(batches * M * N, K / 8 + 1, CPU_SPLIT_MAX);
    mm_plan p = {a, b, pa, pb, pc, dt, M, N, K, mm_tiles(batches, M, N, pieces), mm_layout(a), mm_layout(b), M >= N};
    int64_t tasks = batches * p.tiles;
    int nt = cpu_threads_for(batches * M * N, K / 8 + 1);
    if (tasks < nt) nt = (int)tasks;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t task = 0; task < tasks; task++) mm_task(&p, task);
}

/* The product a @ b (MATMUL's views, K > 0) into pc, contiguous in f64 for f64 operands, else f32: f16/bf16
** operands are widened to contiguous f32 (broadcast batches materialized) and the product is not rounded to them. */
static td_status mm_wide(const td_operand *a, const td_operand *b, void *pc) {
    if (a->dtype == TD_F32 || a->dtype == TD_F64) {
        mm_run(a, cpu_ptr(a), b, cpu_ptr(b), a->dtype, pc);
        return TD_OK;
    }
    td_operand ca = *a, cb = *b;
    cpu_contiguous_strides(a->ndim, a->shape, ca.strides);
    cpu_contiguous_strides(b->ndim, b->shape, cb.strides);
    float *fa = cpu_nn_to_f32(a), *fb = cpu_nn_to_f32(b);
    if (fa && fb) mm_run(&ca, fa, &cb, fb, TD_F32, pc);
    free(fa), free(fb);
    return fa && fb ? TD_OK : td_last_status();
}

td_status cpu_op_MATMUL(const td_op *op) {
    const td_operand *a = &op->in[0], *b = &op->in[1], *out = &op->out[0];
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t n_out = cpu_numel(nd - 2, a->shape) * M * N;
    if (n_out == 0) return TD_OK;
    if (K == 0) { /* an empty sum */
        memset(cpu_ptr(out), 0, (size_t)n_out * td_dtype_size(out->dtype));
        return TD_OK;
    }
    if (a->dtype == TD_F32 || a->dtype == TD_F64) return mm_wide(a, b, cpu_ptr(out));
    /* f16/bf16: the f32 product, rounded to out's dtype */
    float *fc = malloc((size_t)n_out * sizeof(float));
    if (!fc) return cpu_nn_oom("matmul", (size_t)n_out * sizeof(float));
    td_status st = mm_wide(a, b, fc);
    if (st == TD_OK) cpu_nn_from_f32(out, fc);
    free(fc);
    return st;
}

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

#define GELU_K    0.7978845608028654f /* sqrt(2/pi), as cpu_ops_elementwise.c */
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

/* LINEAR: in = (x [M, K], w [N, K], b [N]?), out = y [M, N], contiguous:
**   y = x w^T  (MATMUL's kernel, w read as the column-major [K, N] it is)
**   y += b     (ADD's kernel, b broadcast over the rows): MATMUL then ADD bit for bit */
td_status cpu_op_LINEAR(const td_op *op) {
    const td_operand *b = &op->in[2];
    td_operand *y = &op->out[0];
    int64_t M = op->in[0].shape[0], N = op->in[1].shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    td_status st = cpu_op_MATMUL(&mm);
    if (st != TD_OK || !b->buf) return st;
    td_operand add_in[2] = {*y, *b};
    add_in[1].ndim = 2;
    add_in[1].shape[0] = M, add_in[1].shape[1] = N;
    add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
    td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = add_in, .out = y};
    return cpu_op_ADD(&add);
}

td_status cpu_op_LINEAR_GELU(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
    td_operand y = op->out[0], h = op->out[1];
    int64_t M = x->shape[0], N = w->shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &h);
    td_status st = cpu_op_MATMUL(&mm);
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
        if ((st = cpu_op_ADD(&add)) != TD_OK) return st;
    }
    td_op gelu = {.kind = TD_OP_GELU, .n_in = 1, .n_out = 1, .in = &h, .out = &y, .p = op->p};
    return cpu_op_GELU(&gelu);
}

/* LINEAR_RESIDUAL: in = (x [M, K], w [N, K], b [N]?, r [M, N]), out = y [M, N], contiguous; y, b and r in one
** dtype, x's or f32 for f16/bf16 x:
**   acc = x w^T       (MATMUL's GEMM in f64 for f64, else f32; f16/bf16 x and w widened, the product not rounded)
**   y = acc + b + r   (one pass over the rows in acc's precision, then one rounding to y's dtype)
** acc is y itself when y is f32 or f64. */
td_status cpu_op_LINEAR_RESIDUAL(const td_op *op) {
    const td_operand *x = &op->in[0], *b = &op->in[2], *r = &op->in[3];
    td_operand *y = &op->out[0];
    int64_t M = x->shape[0], K = x->shape[1], N = op->in[1].shape[0];
    if (M == 0 || N == 0) return TD_OK;
    bool f64 = y->dtype == TD_F64, direct = f64 || y->dtype == TD_F32;
    size_t es = f64 ? sizeof(double) : sizeof(float), bytes = (size_t)(M * N) * es;
    void *acc = direct ? cpu_ptr(y) : malloc(bytes);
    /* f16/bf16 b and r (y of their dtype) widened; f32 and f64 ones read in place */
    float *fb = direct ? NULL : cpu_nn_to_f32(b), *fr = direct ? NULL : cpu_nn_to_f32(r);
    td_status st = !acc                                  ? cpu_nn_oom("linear_residual", bytes)
                   : !direct && (!fr || (b->buf && !fb)) ? td_last_status()
                                                         : TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    if (st == TD_OK && K == 0)
        memset(acc, 0, bytes); /* an empty sum */
    else if (st == TD_OK)
        st = mm_wide(&mm.in[0], &mm.in[1], acc);
    if (st == TD_OK) {
        int nt = cpu_threads_for(M * N, 2);
        if (f64) {
            const double *pb = b->buf ? cpu_ptr(b) : NULL, *pr = cpu_ptr(r);
#pragma omp parallel for num_threads(nt)
            for (int64_t i = 0; i < M; i++) {
                double *ar = (double *)acc + i * N;
                const double *rr = pr + i * N;
                for (int64_t j = 0; j < N; j++) ar[j] = (ar[j] + (pb ? pb[j] : 0.0)) + rr[j];
            }
        } else {
            const float *pb = direct ? (b->buf ? cpu_ptr(b) : NULL) : fb, *pr = direct ? cpu_ptr(r) : fr;
#pragma omp parallel for num_threads(nt)
            for (int64_t i = 0; i < M; i++) {
                float *ar = (float *)acc + i * N;
                const float *rr = pr + i * N;
                for (int64_t j = 0; j < N; j++) ar[j] = (ar[j] + (pb ? pb[j] : 0.0f)) + rr[j];
            }
            if (!direct) cpu_nn_from_f32(y, acc);
        }
    }
    if (!direct) free(acc);
    free(fb), free(fr);
    return st;
}
