/*
** nn.Flatten(start_dim, end_dim) and nn.Unflatten(dim, sizes): views that
** merge or split dims (copies only when the strides do not allow a view).
*/
#include <string.h>

#include "nn_internal.h"

typedef struct reshape_ctx {
    int dim, end_dim; /* Flatten: start and end; Unflatten: dim */
    int n;            /* Unflatten: number of sizes */
    int64_t sizes[TD_MAX_DIMS];
} reshape_ctx;

static td_tensor *flatten_forward(td_module *m, td_tensor *x) {
    reshape_ctx *c = m->ctx;
    return td_flatten(x, c->dim, c->end_dim);
}

static td_tensor *unflatten_forward(td_module *m, td_tensor *x) {
    reshape_ctx *c = m->ctx;
    int nd = td_ndim(x), dim = c->dim;
    if (!td__wrap_dim(&dim, nd, "Unflatten")) return NULL;
    if (nd - 1 + c->n > TD_MAX_DIMS)
        TD_FAIL_NULL(TD_ERR_SHAPE, "Unflatten: result would have %d dims (at most %d)", nd - 1 + c->n, TD_MAX_DIMS);
    int64_t shape[TD_MAX_DIMS], known = 1;
    int k = 0, infer = -1;
    for (int i = 0; i < dim; i++) shape[k++] = td_size(x, i);
    for (int i = 0; i < c->n; i++) {
        if (c->sizes[i] == -1)
            infer = k;
        else
            known *= c->sizes[i];
        shape[k++] = c->sizes[i];
    }
    for (int i = dim + 1; i < nd; i++) shape[k++] = td_size(x, i);
    int64_t have = td_size(x, dim);
    if (infer >= 0 && known > 0 && have % known == 0) shape[infer] = have / known;
    if ((infer >= 0 && (known == 0 || have % known)) || (infer < 0 && known != have)) {
        char s[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "Unflatten: dim %d of input %s has size %lld, which the sizes do not split", dim,
                     td__shape_str(nd, td_shape(x), s, sizeof s), (long long)have);
    }
    return td_reshape(x, k, shape);
}

static const td_module_i flatten_iface = {.type = "Flatten", .forward = flatten_forward, .free_ctx = NULL};
static const td_module_i unflatten_iface = {.type = "Unflatten", .forward = unflatten_forward, .free_ctx = NULL};

td_module *td_flatten_new(int start_dim, int end_dim) {
    td_module *m = td__module_alloc(&flatten_iface, sizeof(reshape_ctx));
    if (!m) return NULL;
    reshape_ctx *c = m->ctx;
    c->dim = start_dim;
    c->end_dim = end_dim;
    return m;
}

td_module *td_unflatten_new(int dim, int n, const int64_t *sizes) {
    if (n < 1 || n > TD_MAX_DIMS || !sizes)
        TD_FAIL_NULL(TD_ERR_MISUSE, "Unflatten: needs 1 to %d sizes, got %d", TD_MAX_DIMS, n);
    int inferred = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < -1) TD_FAIL_NULL(TD_ERR_MISUSE, "Unflatten: size %lld is negative", (long long)sizes[i]);
        inferred += sizes[i] == -1;
    }
    if (inferred > 1) TD_FAIL_NULL(TD_ERR_MISUSE, "Unflatten: only one size may be -1");
    td_module *m = td__module_alloc(&unflatten_iface, sizeof(reshape_ctx));
    if (!m) return NULL;
    reshape_ctx *c = m->ctx;
    c->dim = dim;
    c->n = n;
    memcpy(c->sizes, sizes, (size_t)n * sizeof *sizes);
    return m;
}
