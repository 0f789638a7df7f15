/*
** The elementwise driver shared by the binary, comparison, where and unary
** kernels: one cpu_iter over out[0] and the inputs, cut into tiles of at most
** CPU_TILE elements, each handed to the op's row function.
*/
#include "cpu_ew.h"

td_status cpu_elementwise(const td_op *op, cpu_row_fn fn, int cost) {
    const td_operand *views[CPU_ITER_MAX];
    int nops = 1 + op->n_in;
    int64_t numel = td_operand_numel(&op->out[0]);
    if (numel == 0) return TD_OK;
    views[0] = &op->out[0];
    for (int k = 1; k < nops; k++) views[k] = &op->in[k - 1];
    cpu_iter it;
    cpu_iter_init(&it, nops, views);
    char *base[CPU_ITER_MAX];
    size_t esize[CPU_ITER_MAX];
    for (int k = 0; k < nops; k++) {
        base[k] = cpu_ptr(views[k]);
        esize[k] = td_dtype_size(views[k]->dtype);
    }
    int64_t tiles = cpu_iter_tiles(&it);
    int nt = cpu_threads_for(numel, cost);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t off[CPU_ITER_MAX];
        char *p[CPU_ITER_MAX];
        int64_t n = cpu_iter_tile(&it, t, off);
        for (int k = 0; k < nops; k++) p[k] = base[k] + off[k] * (int64_t)esize[k];
        fn(op, n, p, it.inner_strides);
    }
    return TD_OK;
}
