/*
** Merged iteration geometry for elementwise kernels (cu.h: cu_geom).
** Every operand has views[0]'s shape (inputs broadcast with stride 0). Size-1
** dims are dropped, and dim k folds into dim k-1 when every operand's stride of
** k-1 equals its stride of k times the size of k, so a contiguous tensor is one
** dim and a broadcast row over a matrix is two.
*/
#include "cu.h"

void cu_geom_make(int n, const td_operand *const *views, cu_geom *g) {
    const td_operand *v0 = views[0];
    int nd = 0;
    g->numel = 1;
    for (int dim = 0; dim < v0->ndim; dim++) {
        g->numel *= v0->shape[dim];
        if (v0->shape[dim] == 1) continue;
        bool merge = nd > 0;
        for (int k = 0; k < n && merge; k++) merge = g->strides[k][nd - 1] == views[k]->strides[dim] * v0->shape[dim];
        if (merge) {
            g->shape[nd - 1] *= v0->shape[dim];
            for (int k = 0; k < n; k++) g->strides[k][nd - 1] = views[k]->strides[dim];
        } else {
            g->shape[nd] = v0->shape[dim];
            for (int k = 0; k < n; k++) g->strides[k][nd] = views[k]->strides[dim];
            nd++;
        }
    }
    if (nd == 0) {
        g->shape[0] = 1;
        for (int k = 0; k < n; k++) g->strides[k][0] = 0;
        nd = 1;
    }
    g->ndim = nd;
    g->contiguous = nd == 1;
    for (int k = 0; k < n && g->contiguous; k++) g->contiguous = g->strides[k][0] == 1;
}
