/*
** The derivative table (one formula per differentiable op of TD_OP_LIST,
** filled from the rows of the family files formulas_*.c) and helpers the formulas share.
*/
#include <pthread.h>

#include "autograd_internal.h"

static td__formula table[TD_OP_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void) {
    const td__formula_row *families[] = {td__formulas_elementwise, td__formulas_reduce, td__formulas_nn,
                                         td__formulas_index};
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        for (const td__formula_row *r = families[i]; r->kind != TD_OP_COUNT; r++) table[r->kind] = r->f;
}

const td__formula *td__formula_for(td_op_kind kind) {
    pthread_once(&table_once, fill_table);
    return (unsigned)kind < TD_OP_COUNT && table[kind].fn ? &table[kind] : NULL;
}

td_tensor *td__sum_to(td_tensor *g, int ndim, const int64_t *shape) {
    if (!g) return NULL;
    int lead = g->ndim - ndim, dims[TD_MAX_DIMS], nd = 0;
    for (int i = 0; i < g->ndim; i++)
        if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1)) dims[nd++] = i;
    if (nd == 0) return lead == 0 ? g : td_reshape(g, ndim, shape);
    return td_reshape(td_sum(g, nd, dims, true), ndim, shape);
}

td_tensor *td__scalar_like(td_tensor *like, double value) {
    return like ? td_scalar(value, like->dtype, like->storage->device) : NULL;
}

td_tensor *td__mask_as(td_tensor *mask, td_tensor *like) { return like ? td_cast(mask, like->dtype) : NULL; }

td_tensor *td__zeros_meta(const td__tmeta *m, td_dtype dt) { return td_zeros(m->ndim, m->shape, dt, m->device); }

td_status td__done(const td_node *n, td_tensor *const *gx) {
    for (int i = 0; i < n->n_in && i < 64; i++)
        if (td__needs(n, i) && !gx[i])
            return td_last_status() != TD_OK
                       ? td_last_status()
                       : TD_ERR(TD_ERR_STATE, "%s backward: no gradient for input %d", n->name, i);
    return TD_OK;
}
