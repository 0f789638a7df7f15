/*
** MATMUL: out[b] = a[b] @ bm[b] for every batch index b.
**   a is (..., M, K), bm is (..., K, N), out is (..., M, N) contiguous.
** The front-end (src/core/op_matmul.c) passes both inputs expanded to the
** output's batch dims (stride 0 where broadcast), and each matrix either
** row-major (strides[-1] == 1, strides[-2] >= max(1, cols)) or column-major
** (strides[-2] == 1, strides[-1] >= max(1, rows)). So every matrix maps onto a
** BLAS operand with a transpose flag and a leading dimension.
** Threads: one big GEMM is left to OpenBLAS's threads; many small ones (which
** OpenBLAS runs on one thread anyway) are spread over OpenMP threads.
*/
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "../core/internal.h"
#include "cpu_nn.h"

/* BLAS view of one matrix of a batched operand. */
typedef struct mm_mat {
    CBLAS_TRANSPOSE trans;
    int64_t ld;
} mm_mat;

static mm_mat mm_layout(const td_operand *v) {
    int nd = v->ndim;
    bool col_major = v->strides[nd - 1] != 1;
    return (mm_mat){col_major ? CblasTrans : CblasNoTrans, col_major ? v->strides[nd - 1] : v->strides[nd - 2]};
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

/* Runs the batched product on raw element pointers pa, pb, pc (pc contiguous),
** with shapes and strides taken from the views a and b. */
#define MM_BATCHED_(T, GEMM)                                                                                           \
    do {                                                                                                               \
        const T *pa_ = pa, *pb_ = pb;                                                                                  \
        T *pc_ = pc;                                                                                                   \
        bool many_small = batches > 1 && M * N * K < (1 << 18);                                                        \
        int nt = many_small ? cpu_threads_for(batches, M * N * K) : 1;                                                 \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t bi = 0; bi < batches; bi++)                           \
            GEMM(CblasRowMajor, la.trans, lb.trans, (int)M, (int)N, (int)K, 1, pa_ + mm_batch_offset(a, bi),           \
                 (int)la.ld, pb_ + mm_batch_offset(b, bi), (int)lb.ld, 0, pc_ + bi * M * N, (int)N);                   \
    } while (0)

static void mm_run(const td_operand *a, const void *pa, const td_operand *b, const void *pb, td_dtype dt, void *pc) {
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t batches = td__numel(nd - 2, a->shape);
    mm_mat la = mm_layout(a), lb = mm_layout(b);
    if (dt == TD_F64)
        MM_BATCHED_(double, cblas_dgemm);
    else
        MM_BATCHED_(float, cblas_sgemm);
}

td_status td_cpu_MATMUL(const td_op *op) {
    const td_operand *a = &op->in[0], *b = &op->in[1], *out = &op->out[0];
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
    int64_t n_out = td__numel(nd - 2, a->shape) * M * N;
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
    td__contiguous_strides(nd, a->shape, ca.strides);
    td__contiguous_strides(nd, b->shape, cb.strides);
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
