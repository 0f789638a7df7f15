/*
** Indexing front-ends: embedding (and its backward for autograd),
** index_select, gather, scatter_add, cat and one_hot.
**
** Index tensors are int32 or int64. Shapes are checked here; index values are
** checked by the backend, which fails with TD_ERR_INDEX naming the value and
** its position (indices may live on a device, so they are not read here).
** Negative indices are out of range, as in PyTorch's index ops.
*/
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CAT_MAX_INPUTS 64 /* inputs per CAT dispatch; more are joined in rounds */

static bool check_index_dtype(const td_tensor *idx, const char *op) {
    if (idx->dtype == TD_I32 || idx->dtype == TD_I64) return true;
    TD_ERR(TD_ERR_DTYPE, "%s: indices have dtype %s, need int32 or int64", op, td_dtype_name(idx->dtype));
    return false;
}

/* Allocate out (ndim, shape, dt) on in[0]'s device, run kind on contiguous
** in[0..n), and return out (scoped) or NULL. */
static td_tensor *run_contig(td_op_kind kind, int n, td_tensor *const *in, int ndim, const int64_t *shape, td_dtype dt,
                             const td_op_params *p) {
    td_tensor *out = td__alloc(ndim, shape, dt, in[0]->storage->device);
    return td__finish(td__dispatch_contig(kind, n, in, 1, &out, p), out);
}

td_tensor *td_embedding(td_tensor *weight, td_tensor *idx) {
    TD_CHECK_ARG(weight, "embedding");
    TD_CHECK_ARG(idx, "embedding");
    char a[96];
    if (weight->ndim != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "embedding: weight must be 2-D [V, D], got %s",
                     td__shape_str(weight->ndim, weight->shape, a, sizeof a));
    if (!td_dtype_is_float(weight->dtype))
        TD_FAIL_NULL(TD_ERR_DTYPE, "embedding: weight has dtype %s, need a floating type",
                     td_dtype_name(weight->dtype));
    if (!check_index_dtype(idx, "embedding")) return NULL;
    if (idx->ndim >= TD_MAX_DIMS)
        TD_FAIL_NULL(TD_ERR_SHAPE, "embedding: idx has %d dims; the result would have more than %d", idx->ndim,
                     TD_MAX_DIMS);
    int64_t shape[TD_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    shape[idx->ndim] = weight->shape[1];
    td_tensor *in[2] = {weight, idx};
    return run_contig(TD_OP_EMBEDDING, 2, in, idx->ndim + 1, shape, weight->dtype, NULL);
}

td_tensor *td__embedding_backward(td_tensor *dy, td_tensor *idx, int64_t num_weights, int64_t padding_idx) {
    TD_CHECK_ARG(dy, "embedding_backward");
    TD_CHECK_ARG(idx, "embedding_backward");
    if (!td_dtype_is_float(dy->dtype))
        TD_FAIL_NULL(TD_ERR_DTYPE, "embedding_backward: dy has dtype %s, need a floating type",
                     td_dtype_name(dy->dtype));
    if (!check_index_dtype(idx, "embedding_backward")) return NULL;
    bool fits = dy->ndim == idx->ndim + 1;
    for (int d = 0; fits && d < idx->ndim; d++) fits = dy->shape[d] == idx->shape[d];
    if (!fits) {
        char a[96], b[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "embedding_backward: dy %s is not idx %s plus one dim",
                     td__shape_str(dy->ndim, dy->shape, a, sizeof a),
                     td__shape_str(idx->ndim, idx->shape, b, sizeof b));
    }
    if (num_weights < 0)
        TD_FAIL_NULL(TD_ERR_MISUSE, "embedding_backward: num_weights %lld < 0", (long long)num_weights);
    int64_t shape[2] = {num_weights, dy->shape[dy->ndim - 1]};
    td_op_params p = {.embedding = {padding_idx}};
    td_tensor *in[2] = {dy, idx};
    return run_contig(TD_OP_EMBEDDING_BACKWARD, 2, in, 2, shape, dy->dtype, &p);
}

td_tensor *td_index_select(td_tensor *x, int dim, td_tensor *idx) {
    TD_CHECK_ARG(x, "index_select");
    TD_CHECK_ARG(idx, "index_select");
    if (x->ndim == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "index_select: x is 0-d; need at least one dim");
    if (!td__wrap_dim(&dim, x->ndim, "index_select") || !check_index_dtype(idx, "index_select")) return NULL;
    if (idx->ndim > 1) TD_FAIL_NULL(TD_ERR_SHAPE, "index_select: idx must be 1-D, got %d dims", idx->ndim);
    int64_t shape[TD_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = td__numel(idx->ndim, idx->shape);
    td_op_params p = {.axis = {dim}};
    td_tensor *in[2] = {x, idx};
    return run_contig(TD_OP_INDEX_SELECT, 2, in, x->ndim, shape, x->dtype, &p);
}

/* idx must have x's ndim and fit inside x in every dim but `free_dim` (-1: none). */
static bool check_fits(const td_tensor *idx, const td_tensor *x, int free_dim, const char *op, const char *iname,
                       const char *xname) {
    char a[96], b[96];
    if (idx->ndim != x->ndim)
        return TD_ERR(TD_ERR_SHAPE, "%s: %s %s and %s %s differ in ndim", op, iname,
                      td__shape_str(idx->ndim, idx->shape, a, sizeof a), xname,
                      td__shape_str(x->ndim, x->shape, b, sizeof b)),
               false;
    for (int d = 0; d < x->ndim; d++)
        if (d != free_dim && idx->shape[d] > x->shape[d])
            return TD_ERR(TD_ERR_SHAPE, "%s: %s %s is larger than %s %s in dim %d (%lld > %lld)", op, iname,
                          td__shape_str(idx->ndim, idx->shape, a, sizeof a), xname,
                          td__shape_str(x->ndim, x->shape, b, sizeof b), d, (long long)idx->shape[d],
                          (long long)x->shape[d]),
                   false;
    return true;
}

td_tensor *td_gather(td_tensor *x, int dim, td_tensor *idx) {
    TD_CHECK_ARG(x, "gather");
    TD_CHECK_ARG(idx, "gather");
    if (x->ndim == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "gather: x is 0-d; need at least one dim");
    if (!td__wrap_dim(&dim, x->ndim, "gather") || !check_index_dtype(idx, "gather") ||
        !check_fits(idx, x, dim, "gather", "idx", "x"))
        return NULL;
    td_op_params p = {.axis = {dim}};
    td_tensor *in[2] = {x, idx};
    return run_contig(TD_OP_GATHER, 2, in, idx->ndim, idx->shape, x->dtype, &p);
}

td_tensor *td_scatter_add(td_tensor *self, int dim, td_tensor *idx, td_tensor *src) {
    TD_CHECK_ARG(self, "scatter_add");
    TD_CHECK_ARG(idx, "scatter_add");
    TD_CHECK_ARG(src, "scatter_add");
    if (self->ndim == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "scatter_add: self is 0-d; need at least one dim");
    if (!td__wrap_dim(&dim, self->ndim, "scatter_add") || !check_index_dtype(idx, "scatter_add")) return NULL;
    if (self->dtype == TD_BOOL) TD_FAIL_NULL(TD_ERR_DTYPE, "scatter_add: bool tensors cannot be added");
    if (src->dtype != self->dtype)
        TD_FAIL_NULL(TD_ERR_DTYPE, "scatter_add: src has dtype %s but self has %s", td_dtype_name(src->dtype),
                     td_dtype_name(self->dtype));
    if (!check_fits(idx, src, -1, "scatter_add", "idx", "src") ||
        !check_fits(idx, self, dim, "scatter_add", "idx", "self"))
        return NULL;
    td_op_params p = {.axis = {dim}};
    td_tensor *in[3] = {self, idx, src};
    return run_contig(TD_OP_SCATTER_ADD, 3, in, self->ndim, self->shape, self->dtype, &p);
}

/* One CAT dispatch of n <= CAT_MAX_INPUTS inputs, already checked. */
static td_tensor *cat_once(int n, td_tensor *const *xs, int dim, td_dtype dt) {
    td_tensor *in[CAT_MAX_INPUTS];
    int64_t shape[TD_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[dim] = 0;
    int k = 0;
    for (; k < n; k++) {
        if (!(in[k] = td_keep(td_cast(xs[k], dt)))) break;
        shape[dim] += xs[k]->shape[dim];
    }
    td_tensor *out = k == n ? td__alloc(xs[0]->ndim, shape, dt, xs[0]->storage->device) : NULL;
    td_op_params p = {.axis = {dim}};
    td_status st = out ? td__dispatch(TD_OP_CAT, n, in, NULL, 1, &out, &p) : td_last_status();
    while (k-- > 0) td_release(in[k]);
    return td__finish(st, out);
}

td_tensor *td_cat(int n, td_tensor *const *xs, int dim) {
    if (n <= 0 || !xs) TD_FAIL_NULL(TD_ERR_MISUSE, "cat: need at least one tensor (n = %d)", n);
    for (int k = 0; k < n; k++)
        if (!td__check_arg(xs[k], "cat", "xs[k]")) return NULL;
    const td_tensor *x0 = xs[0];
    if (x0->ndim == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "cat: xs[0] is 0-d and cannot be concatenated");
    if (!td__wrap_dim(&dim, x0->ndim, "cat")) return NULL;
    td_dtype dt = x0->dtype;
    for (int k = 1; k < n; k++) {
        const td_tensor *x = xs[k];
        bool fits = x->ndim == x0->ndim;
        for (int d = 0; fits && d < x0->ndim; d++) fits = d == dim || x->shape[d] == x0->shape[d];
        if (!fits) {
            char a[96], b[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "cat: xs[%d] %s does not match xs[0] %s outside dim %d", k,
                         td__shape_str(x->ndim, x->shape, a, sizeof a), td__shape_str(x0->ndim, x0->shape, b, sizeof b),
                         dim);
        }
        if (!td_device_equal(x->storage->device, x0->storage->device)) {
            char a[32], b[32];
            TD_FAIL_NULL(TD_ERR_DEVICE, "cat: xs[%d] is on %s but xs[0] is on %s", k,
                         td_device_str(x->storage->device, a, sizeof a),
                         td_device_str(x0->storage->device, b, sizeof b));
        }
        dt = td_dtype_promote(dt, x->dtype);
    }
    if (n <= CAT_MAX_INPUTS) return cat_once(n, xs, dim, dt);
    /* many inputs: join groups of CAT_MAX_INPUTS, then join the groups */
    int groups = (n + CAT_MAX_INPUTS - 1) / CAT_MAX_INPUTS;
    td_tensor **parts = calloc((size_t)groups, sizeof *parts);
    if (!parts) TD_FAIL_NULL(TD_ERR_OOM, "cat: no host memory for %d groups", groups);
    int g = 0;
    for (; g < groups; g++) {
        int first = g * CAT_MAX_INPUTS, count = n - first < CAT_MAX_INPUTS ? n - first : CAT_MAX_INPUTS;
        if (!(parts[g] = td_keep(cat_once(count, xs + first, dim, dt)))) break;
    }
    td_tensor *out = g == groups ? td_cat(groups, parts, dim) : NULL;
    while (g-- > 0) td_release(parts[g]);
    free(parts);
    return out;
}

td_tensor *td_one_hot(td_tensor *idx, int64_t num_classes) {
    TD_CHECK_ARG(idx, "one_hot");
    if (!check_index_dtype(idx, "one_hot")) return NULL;
    if (num_classes < -1)
        TD_FAIL_NULL(TD_ERR_MISUSE, "one_hot: num_classes must be -1 (infer) or >= 0, got %lld",
                     (long long)num_classes);
    if (idx->ndim >= TD_MAX_DIMS)
        TD_FAIL_NULL(TD_ERR_SHAPE, "one_hot: idx has %d dims; the result would have more than %d", idx->ndim,
                     TD_MAX_DIMS);
    int64_t n = td__numel(idx->ndim, idx->shape);
    if (num_classes == -1) { /* infer max + 1: read the indices to the host */
        if (n == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "one_hot: cannot infer num_classes from an empty tensor");
        int64_t *v = malloc((size_t)n * sizeof *v);
        if (!v) TD_FAIL_NULL(TD_ERR_OOM, "one_hot: no host memory to read %lld indices", (long long)n);
        if (td_copy_to_host(idx, v, (size_t)n * sizeof *v, TD_I64) != TD_OK) {
            free(v);
            return NULL;
        }
        int64_t mx = v[0];
        for (int64_t i = 1; i < n; i++) mx = v[i] > mx ? v[i] : mx;
        free(v);
        num_classes = mx < 0 ? 0 : mx + 1; /* a negative max then fails in the range check */
    }
    int64_t shape[TD_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    shape[idx->ndim] = num_classes;
    td_op_params p = {.one_hot = {num_classes}};
    td_tensor *in[1] = {idx};
    return run_contig(TD_OP_ONE_HOT, 1, in, idx->ndim + 1, shape, TD_I64, &p);
}
