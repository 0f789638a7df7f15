/*
** Random ops that take an input: dropout. (rand and randn, which take none,
** live with the other creation functions in tensor.c.) The Philox stream and
** the exact keep rule are written down in src/backend_cpu/cpu_random.c.
*/
#include "internal.h"

td_tensor *td_dropout(td_tensor *x, double p, uint64_t seed, uint64_t offset) {
    TD_CHECK_ARG(x, "dropout");
    if (!(p >= 0 && p < 1)) TD_FAIL_NULL(TD_ERR_MISUSE, "dropout: p must be in [0, 1), got %g", p);
    if (!td_dtype_is_float(x->dtype))
        TD_FAIL_NULL(TD_ERR_DTYPE, "dropout: x has dtype %s, need a floating type", td_dtype_name(x->dtype));
    if (p == 0) return td__scope_add(td_retain(x));
    td_tensor *out = td__alloc(x->ndim, x->shape, x->dtype, x->storage->device);
    td_op_params params = {.rng = {seed, offset, p}};
    return td__finish(td__dispatch_contig(TD_OP_DROPOUT, 1, &x, 1, &out, &params), out);
}
