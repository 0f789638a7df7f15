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
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_nn.h"

/* BLAS view of one matrix of a batched operand: transposed or not, and its leading dimension. */
typedef struct mm_mat {
    bool trans;
    int64_t ld;
} mm_mat;

static mm_mat mm_layout(const td_operand *v) {
    int nd = v->ndim;
    bool col_major = v->strides[nd - 1] != 1;
    return (mm_mat){col_major, col_major ? v->strides[nd - 1] : v->strides[nd - 2]};
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

td_status td_cpu_MATMUL(const td_op *op) {
    const td_operand *a = &op->in[0], *b = &op->in[1], *out = &op->out[0];
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t n_out = cpu_numel(nd - 2, a->shape) * M * N;
    if (n_out == 0) return TD_OK;
    if (K == 0) { /* an empty sum */
        memset(cpu_ptr(out), 0, (size_t)n_out * td_dtype_size(out->dtype));
        return TD_OK;
    }
    if (a->dtype == TD_F32 || a->dtype == TD_F64) {
        mm_run(a, cpu_ptr(a), b, cpu_ptr(b), a->dtype, cpu_ptr(out));
        return TD_OK;
    }
    /* f16/bf16: widen both operands to contiguous f32 (broadcast batches materialized) */
    td_operand ca = *a, cb = *b;
    cpu_contiguous_strides(nd, a->shape, ca.strides);
    cpu_contiguous_strides(nd, b->shape, cb.strides);
    float *fa = cpu_nn_to_f32(a), *fb = cpu_nn_to_f32(b), *fc = malloc((size_t)n_out * sizeof(float));
    td_status st = TD_OK;
    if (!fa || !fb || !fc)
        st = fc ? td_last_status() : cpu_nn_oom("matmul", (size_t)n_out * sizeof(float));
    else {
        mm_run(&ca, fa, &cb, fb, TD_F32, fc);
        cpu_nn_from_f32(out, fc);
    }
    free(fa), free(fb), free(fc);
    return st;
}
