/*
** The CPU backend's strided iteration (cpu_iter in cpu.h): an operand set's
** dims folded into as few, as long rows as every operand's strides allow.
*/
#include "cpu.h"

void cpu_iter_init(cpu_iter *it, int nops, const td_operand *const *views) {
    const td_operand *v0 = views[0];
    it->nops = nops;
    it->ndim = 0;
    /* drop size-1 dims, then merge dim i into i+1 when every operand allows */
    for (int d = 0; d < v0->ndim; d++) {
        if (v0->shape[d] == 1) continue;
        int n = it->ndim;
        bool merge = n > 0;
        for (int k = 0; k < nops && merge; k++) merge = it->strides[k][n - 1] == views[k]->strides[d] * v0->shape[d];
        if (merge) {
            it->shape[n - 1] *= v0->shape[d];
            for (int k = 0; k < nops; k++) it->strides[k][n - 1] = views[k]->strides[d];
        } else {
            it->shape[n] = v0->shape[d];
            for (int k = 0; k < nops; k++) it->strides[k][n] = views[k]->strides[d];
            it->ndim++;
        }
    }
    if (it->ndim == 0) { /* a single element (or all dims of size 1) */
        it->shape[0] = td_operand_numel(v0);
        for (int k = 0; k < nops; k++) it->strides[k][0] = 1;
        it->ndim = 1;
    }
    it->inner = it->shape[it->ndim - 1];
    it->rows = 1;
    for (int d = 0; d < it->ndim - 1; d++) it->rows *= it->shape[d];
    for (int k = 0; k < nops; k++) it->inner_strides[k] = it->strides[k][it->ndim - 1];
}

void cpu_iter_row_offsets(const cpu_iter *it, int64_t row, int64_t *offsets) {
    for (int k = 0; k < it->nops; k++) offsets[k] = 0;
    for (int d = it->ndim - 2; d >= 0; d--) {
        int64_t i = row % it->shape[d];
        row /= it->shape[d];
        for (int k = 0; k < it->nops; k++) offsets[k] += i * it->strides[k][d];
    }
}
