/*
** Views: new tensor headers over the same storage with other shapes and
** strides (reshape, permute, slice, expand, ...), and broadcasting.
*/
#include <string.h>

#include "internal.h"
#include "trident/autograd.h"

bool td__wrap_dim(int *dim, int ndim, const char *op) {
    int n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1, as in PyTorch */
    int d = *dim < 0 ? *dim + n : *dim;
    if (d < 0 || d >= n) {
        TD_ERR(TD_ERR_INDEX, "%s: dim %d out of range for a tensor of %d dims", op, *dim, ndim);
        return false;
    }
    *dim = d;
    return true;
}

int64_t td_operand_numel(const td_operand *v) { return td__numel(v->ndim, v->shape); }

bool td__strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides) {
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 1) continue;
        if (shape[i] == 0) return true;
        if (strides[i] != expect) return false;
        expect *= shape[i];
    }
    return true;
}

bool td_operand_is_contiguous(const td_operand *v) { return td__strides_contiguous(v->ndim, v->shape, v->strides); }

td_status td_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[96], y[96];
            return TD_ERR(TD_ERR_SHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                          td__shape_str(na, a, x, sizeof x), td__shape_str(nb, b, y, sizeof y), i, (long long)sa,
                          (long long)sb);
        }
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return TD_OK;
}

td_operand td__view_broadcast(const td_tensor *t, int ndim, const int64_t *shape) {
    size_t guard = t->storage->guard; /* td__view_of's fields; shape and strides written here */
    td_operand v = {.buf = t->storage->buf,
                    .offset = t->offset + (guard ? (int64_t)(guard / td_dtype_size(t->dtype)) : 0),
                    .dtype = t->dtype,
                    .ndim = ndim};
    for (int i = ndim - 1, j = t->ndim - 1; i >= 0; i--, j--) {
        v.shape[i] = shape[i];
        v.strides[i] = (j >= 0 && t->shape[j] == shape[i]) ? t->strides[j] : 0;
    }
    return v;
}

/* Resolve a target shape with at most one -1 against numel. */
static bool infer_shape(const td_tensor *t, int ndim, const int64_t *shape, int64_t *out, const char *op) {
    if (ndim < 0 || ndim > TD_MAX_DIMS)
        return TD_ERR(TD_ERR_MISUSE, "%s: ndim %d outside [0, %d]", op, ndim, TD_MAX_DIMS), false;
    if (ndim && !shape) return TD_ERR(TD_ERR_MISUSE, "%s: shape is NULL", op), false;
    int infer = -1;
    bool zero = false, overflow = false;
    int64_t extent = 1, n = td__numel(t->ndim, t->shape); /* extent: the known sizes, zero dims as 1 */
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) return TD_ERR(TD_ERR_SHAPE, "%s: only one dim may be -1", op), false;
            infer = i;
        } else if (shape[i] < 0) {
            return TD_ERR(TD_ERR_SHAPE, "%s: invalid size %lld at dim %d", op, (long long)shape[i], i), false;
        } else {
            zero |= shape[i] == 0;
            overflow |= __builtin_mul_overflow(extent, shape[i] ? shape[i] : 1, &extent);
        }
        out[i] = shape[i];
    }
    /* the strides of a size-0 view span its other dims, so they must fit too */
    if (overflow) goto bad;
    int64_t known = zero ? 0 : extent;
    if (infer >= 0) {
        if (known == 0 || n % known) goto bad;
        out[infer] = n / known;
    } else if (known != n) {
        goto bad;
    }
    return true;
bad:;
    char a[96], b[96];
    TD_ERR(TD_ERR_SHAPE, "%s: shape %s is invalid for a tensor of shape %s (%lld elements)", op,
           td__shape_str(ndim, shape, a, sizeof a), td__shape_str(t->ndim, t->shape, b, sizeof b), (long long)n);
    return false;
}

/* Strides for viewing t as shape without a copy, or false when impossible.
** Old dims are taken in chunks whose elements are evenly spaced (each dim's
** stride is the next one's stride times its size); each chunk must be exactly
** covered by consecutive new dims, which then get strides within the chunk. */
static bool view_strides(const td_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
    int64_t n = td__numel(t->ndim, t->shape);
    if (n <= 1) {
        td__contiguous_strides(ndim, shape, strides);
        return true;
    }
    int nd = ndim - 1;
    int64_t chunk_stride = t->strides[t->ndim - 1], old_count = 1, new_count = 1;
    for (int od = t->ndim - 1; od >= 0; od--) {
        old_count *= t->shape[od];
        bool chunk_ends = od == 0 || (t->shape[od - 1] != 1 && t->strides[od - 1] != old_count * chunk_stride);
        if (!chunk_ends) continue;
        while (nd >= 0 && (new_count < old_count || shape[nd] == 1)) {
            strides[nd] = new_count * chunk_stride;
            new_count *= shape[nd];
            nd--;
        }
        if (new_count != old_count) return false;
        if (od > 0) {
            chunk_stride = t->strides[od - 1];
            old_count = new_count = 1;
        }
    }
    return nd == -1;
}

td_tensor *td_view(td_tensor *t, int ndim, const int64_t *shape) {
    TD_CHECK_ARG(t, "view");
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    if (!infer_shape(t, ndim, shape, s, "view")) return NULL;
    if (!view_strides(t, ndim, s, st)) {
        char a[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "view: strides of the input %s do not allow this view; use td_reshape",
                     td__shape_str(t->ndim, t->shape, a, sizeof a));
    }
    td_tensor *v = td__make_view(t, ndim, s, st, t->offset);
    if (v && td__view_hook) td__view_hook(t, v, &(td__view_info){.kind = TD__VIEW_RESHAPE});
    return v;
}

td_tensor *td_reshape(td_tensor *t, int ndim, const int64_t *shape) {
    TD_CHECK_ARG(t, "reshape");
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    if (!infer_shape(t, ndim, shape, s, "reshape")) return NULL;
    if (view_strides(t, ndim, s, st)) return td_view(t, ndim, s);
    td_tensor *c = td_keep(td_contiguous(t));
    td_tensor *v = c ? td_view(c, ndim, s) : NULL;
    td_release(c);
    return v;
}

td_tensor *td_flatten(td_tensor *t, int start_dim, int end_dim) {
    TD_CHECK_ARG(t, "flatten");
    if (t->ndim == 0) {
        int64_t one = 1;
        return td_reshape(t, 1, &one);
    }
    if (!td__wrap_dim(&start_dim, t->ndim, "flatten") || !td__wrap_dim(&end_dim, t->ndim, "flatten")) return NULL;
    if (start_dim > end_dim)
        TD_FAIL_NULL(TD_ERR_INDEX, "flatten: start_dim %d is after end_dim %d", start_dim, end_dim);
    int64_t s[TD_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < start_dim; i++) s[n++] = t->shape[i];
    int64_t m = 1;
    for (int i = start_dim; i <= end_dim; i++) m *= t->shape[i];
    s[n++] = m;
    for (int i = end_dim + 1; i < t->ndim; i++) s[n++] = t->shape[i];
    return td_reshape(t, n, s);
}

td_tensor *td_permute(td_tensor *t, const int *perm) {
    TD_CHECK_ARG(t, "permute");
    if (t->ndim && !perm) TD_FAIL_NULL(TD_ERR_MISUSE, "permute: perm is NULL");
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    bool seen[TD_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        int d = perm[i];
        if (!td__wrap_dim(&d, t->ndim, "permute")) return NULL;
        if (seen[d]) TD_FAIL_NULL(TD_ERR_INDEX, "permute: dim %d appears twice", d);
        seen[d] = true;
        s[i] = t->shape[d];
        st[i] = t->strides[d];
    }
    td_tensor *v = td__make_view(t, t->ndim, s, st, t->offset);
    if (v && td__view_hook) {
        td__view_info info = {.kind = TD__VIEW_PERMUTE};
        for (int i = 0; i < t->ndim; i++) info.perm[i] = perm[i] < 0 ? perm[i] + t->ndim : perm[i];
        td__view_hook(t, v, &info);
    }
    return v;
}

td_tensor *td_transpose(td_tensor *t, int dim0, int dim1) {
    TD_CHECK_ARG(t, "transpose");
    if (!td__wrap_dim(&dim0, t->ndim, "transpose") || !td__wrap_dim(&dim1, t->ndim, "transpose")) return NULL;
    int perm[TD_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    if (t->ndim) {
        perm[dim0] = dim1;
        perm[dim1] = dim0;
    }
    return td_permute(t, perm);
}

td_tensor *td_slice(td_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    TD_CHECK_ARG(t, "slice");
    if (t->ndim == 0) TD_FAIL_NULL(TD_ERR_INDEX, "slice: cannot slice a 0-d tensor");
    if (!td__wrap_dim(&dim, t->ndim, "slice")) return NULL;
    if (step <= 0) TD_FAIL_NULL(TD_ERR_MISUSE, "slice: step must be positive, got %lld", (long long)step);
    int64_t n = t->shape[dim];
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    memcpy(s, t->shape, sizeof s);
    memcpy(st, t->strides, sizeof st);
    s[dim] = (end - start + step - 1) / step;
    st[dim] = t->strides[dim] * step;
    td_tensor *v = td__make_view(t, t->ndim, s, st, t->offset + start * t->strides[dim]);
    if (v && td__view_hook)
        td__view_hook(t, v,
                      &(td__view_info){.kind = TD__VIEW_SLICE, .dim = dim, .start = start, .end = end, .step = step});
    return v;
}

td_status td_split(td_tensor *t, int n, const int64_t *sizes, int dim, td_tensor **out) {
    if (out)
        for (int i = 0; i < n; i++) out[i] = NULL;
    if (!td__check_arg(t, "split", "t")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    if (n < 1 || !sizes || !out)
        return TD_ERR(TD_ERR_MISUSE, "split: needs n >= 1 parts (got %d), and sizes and out not NULL", n);
    if (t->ndim == 0) return TD_ERR(TD_ERR_INDEX, "split: cannot split a 0-d tensor");
    if (!td__wrap_dim(&dim, t->ndim, "split")) return td_last_status();
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) return TD_ERR(TD_ERR_SHAPE, "split: sizes[%d] = %lld is negative", i, (long long)sizes[i]);
        if (__builtin_add_overflow(total, sizes[i], &total))
            return TD_ERR(TD_ERR_SHAPE, "split: the sizes overflow 64 bits (dim %d has size %lld)", dim,
                          (long long)t->shape[dim]);
    }
    if (total != t->shape[dim])
        return TD_ERR(TD_ERR_SHAPE, "split: the sizes sum to %lld, but dim %d has size %lld", (long long)total, dim,
                      (long long)t->shape[dim]);
    int64_t s[TD_MAX_DIMS], start = 0;
    memcpy(s, t->shape, sizeof s);
    for (int i = 0; i < n; i++) {
        s[dim] = sizes[i];
        if (!(out[i] = td__make_view(t, t->ndim, s, t->strides, t->offset + start * t->strides[dim]))) {
            for (int k = 0; k < i; k++) out[k] = NULL; /* the made views go with the scope */
            return td_last_status();
        }
        start += sizes[i];
    }
    if (td__split_hook) td__split_hook(t, n, out, dim);
    if (t->requires_grad && td_grad_enabled() && !out[0]->grad_fn) { /* the node could not be recorded */
        for (int i = 0; i < n; i++) out[i] = NULL;
        return td_last_status() ? td_last_status() : TD_ERR(TD_ERR_OOM, "split: recording the autograd graph");
    }
    return TD_OK;
}

td_tensor *td_select(td_tensor *t, int dim, int64_t index) {
    TD_CHECK_ARG(t, "select");
    if (t->ndim == 0) TD_FAIL_NULL(TD_ERR_INDEX, "select: cannot index a 0-d tensor");
    if (!td__wrap_dim(&dim, t->ndim, "select")) return NULL;
    int64_t n = t->shape[dim];
    if (index < -n || index >= n)
        TD_FAIL_NULL(TD_ERR_INDEX, "select: index %lld out of range for dim %d of size %lld", (long long)index, dim,
                     (long long)n);
    if (index < 0) index += n;
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != dim) {
            s[k] = t->shape[i];
            st[k++] = t->strides[i];
        }
    td_tensor *v = td__make_view(t, k, s, st, t->offset + index * t->strides[dim]);
    if (v && td__view_hook) td__view_hook(t, v, &(td__view_info){.kind = TD__VIEW_SELECT, .dim = dim, .start = index});
    return v;
}

td_tensor *td_squeeze(td_tensor *t, int dim) {
    TD_CHECK_ARG(t, "squeeze");
    if (t->ndim == 0) return td_view(t, 0, NULL);
    if (!td__wrap_dim(&dim, t->ndim, "squeeze")) return NULL;
    if (t->shape[dim] != 1)
        TD_FAIL_NULL(TD_ERR_SHAPE, "squeeze: dim %d has size %lld, not 1", dim, (long long)t->shape[dim]);
    int64_t s[TD_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != dim) s[k++] = t->shape[i];
    return td_view(t, k, s);
}

td_tensor *td_unsqueeze(td_tensor *t, int dim) {
    TD_CHECK_ARG(t, "unsqueeze");
    if (t->ndim == TD_MAX_DIMS) TD_FAIL_NULL(TD_ERR_SHAPE, "unsqueeze: tensor already has %d dims", TD_MAX_DIMS);
    int n = t->ndim + 1;
    int d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) TD_FAIL_NULL(TD_ERR_INDEX, "unsqueeze: dim %d out of range for %d dims", dim, t->ndim);
    int64_t s[TD_MAX_DIMS];
    for (int i = 0, k = 0; i < n; i++) s[i] = i == d ? 1 : t->shape[k++];
    return td_view(t, n, s);
}

td_tensor *td_expand(td_tensor *t, int ndim, const int64_t *shape) {
    TD_CHECK_ARG(t, "expand");
    if (ndim < t->ndim || ndim > TD_MAX_DIMS)
        TD_FAIL_NULL(TD_ERR_SHAPE, "expand: cannot expand %d dims to %d", t->ndim, ndim);
    if (ndim && !shape) TD_FAIL_NULL(TD_ERR_MISUSE, "expand: shape is NULL");
    int64_t s[TD_MAX_DIMS], st[TD_MAX_DIMS];
    for (int i = ndim - 1, j = t->ndim - 1; i >= 0; i--, j--) {
        int64_t want = shape[i], have = j >= 0 ? t->shape[j] : 1;
        if (want == -1) {
            if (j < 0) TD_FAIL_NULL(TD_ERR_SHAPE, "expand: -1 is not allowed for the new leading dim %d", i);
            want = have;
        }
        if (want < 0) TD_FAIL_NULL(TD_ERR_SHAPE, "expand: invalid size %lld", (long long)want);
        if (have != want && have != 1) {
            char a[96], b[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "expand: cannot expand %s to %s (dim %d: %lld vs %lld)",
                         td__shape_str(t->ndim, t->shape, a, sizeof a), td__shape_str(ndim, shape, b, sizeof b), i,
                         (long long)have, (long long)want);
        }
        s[i] = want;
        st[i] = (j >= 0 && have == want) ? t->strides[j] : 0;
    }
    td_tensor *v = td__make_view(t, ndim, s, st, t->offset);
    if (v && td__view_hook) td__view_hook(t, v, &(td__view_info){.kind = TD__VIEW_EXPAND});
    return v;
}
