/*
** Datasets: the user vtable wrapper, batch collation (stacking samples along a
** new dim 0), and the in-memory TensorDataset whose batches are gathered rows.
*/
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/data.h"

struct td_dataset {
    td_dataset_i iface;
    void *ctx;
};

td_status td_dataset_new(const td_dataset_i *iface, void *ctx, td_dataset **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "dataset_new: out is NULL");
    *out = NULL;
    if (!iface || !iface->len || !iface->num_fields || !iface->get)
        return TD_ERR(TD_ERR_MISUSE, "dataset_new: the interface needs len, num_fields and get");
    td_dataset *ds = malloc(sizeof *ds);
    if (!ds) return TD_ERR(TD_ERR_OOM, "dataset_new: out of host memory");
    ds->iface = *iface;
    ds->ctx = ctx;
    *out = ds;
    return TD_OK;
}

void td_dataset_free(td_dataset *ds) {
    if (!ds) return;
    if (ds->iface.free_ctx) ds->iface.free_ctx(ds->ctx);
    free(ds);
}

int64_t td_dataset_len(td_dataset *ds) { return ds ? ds->iface.len(ds->ctx) : -1; }
int td_dataset_num_fields(td_dataset *ds) { return ds ? ds->iface.num_fields(ds->ctx) : -1; }

/* One field's layout, fixed by the first sample. */
typedef struct field_acc {
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    td_dtype dtype;
    size_t bytes; /* per sample */
    unsigned char *buf;
} field_acc;

static td_status check_field(td_tensor *f, int64_t sample, int k, field_acc *a) {
    if (!f)
        return td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "dataset: get returned a NULL field %d", k);
    char s1[128], s2[128];
    if (td_ndim(f) != a->ndim || memcmp(td_shape(f), a->shape, sizeof(int64_t) * (size_t)a->ndim) ||
        td_tensor_dtype(f) != a->dtype)
        return TD_ERR(TD_ERR_SHAPE, "dataset: sample %lld field %d is %s %s, earlier samples were %s %s",
                      (long long)sample, k, td__shape_str(td_ndim(f), td_shape(f), s1, sizeof s1),
                      td_dtype_name(td_tensor_dtype(f)), td__shape_str(a->ndim, a->shape, s2, sizeof s2),
                      td_dtype_name(a->dtype));
    return TD_OK;
}

/* fields[k] = stack(get(idx[s])[k] for s in 0..n): [n, ...sample shape]. */
static td_status stack_samples(td_dataset *ds, int nf, int64_t n, const int64_t *idx, td_tensor **fields) {
    field_acc acc[TD_DATA_MAX_FIELDS] = {0};
    td_status st = TD_OK;
    for (int64_t s = 0; s < n && st == TD_OK; s++) {
        td_tensor *f[TD_DATA_MAX_FIELDS] = {0};
        td_scope_begin(); /* the sample's tensors go when it is copied */
        st = ds->iface.get(ds->ctx, idx[s], f);
        for (int k = 0; k < nf && st == TD_OK; k++) {
            field_acc *a = &acc[k];
            if (s == 0 && f[k]) {
                a->ndim = td_ndim(f[k]);
                memcpy(a->shape, td_shape(f[k]), sizeof(int64_t) * (size_t)a->ndim);
                a->dtype = td_tensor_dtype(f[k]);
                a->bytes = (size_t)td_numel(f[k]) * td_dtype_size(a->dtype);
                if (a->ndim >= TD_MAX_DIMS)
                    st = TD_ERR(TD_ERR_SHAPE, "dataset: field %d has %d dims; stacking needs fewer than %d", k, a->ndim,
                                TD_MAX_DIMS);
                else if (!(a->buf = malloc(a->bytes * (size_t)n + 1)))
                    st = TD_ERR(TD_ERR_OOM, "dataset: out of host memory for a batch");
            }
            if (st == TD_OK) st = check_field(f[k], idx[s], k, a);
            if (st == TD_OK) st = td_copy_to_host(f[k], a->buf + a->bytes * (size_t)s, a->bytes, a->dtype);
        }
        td_scope_end();
    }
    for (int k = 0; k < nf && st == TD_OK; k++) {
        int64_t shape[TD_MAX_DIMS] = {n};
        memcpy(shape + 1, acc[k].shape, sizeof(int64_t) * (size_t)acc[k].ndim);
        fields[k] = td_from_data(acc[k].buf, acc[k].ndim + 1, shape, acc[k].dtype, TD_CPU);
        if (!fields[k]) st = td_last_status();
    }
    for (int k = 0; k < nf; k++) free(acc[k].buf);
    return st;
}

td_status td_dataset_get_batch(td_dataset *ds, int64_t n, const int64_t *idx, td_tensor **fields) {
    if (!ds || !fields || (n > 0 && !idx) || n < 1)
        return TD_ERR(TD_ERR_MISUSE, "dataset_get_batch: need a dataset, n >= 1 indices and a fields array");
    int nf = ds->iface.num_fields(ds->ctx);
    if (nf < 1 || nf > TD_DATA_MAX_FIELDS)
        return TD_ERR(TD_ERR_MISUSE, "dataset_get_batch: num_fields %d outside [1, %d]", nf, TD_DATA_MAX_FIELDS);
    for (int k = 0; k < nf; k++) fields[k] = NULL;
    int64_t len = ds->iface.len(ds->ctx);
    for (int64_t s = 0; s < n; s++)
        if (idx[s] < 0 || idx[s] >= len)
            return TD_ERR(TD_ERR_INDEX, "dataset_get_batch: index %lld out of range for %lld samples",
                          (long long)idx[s], (long long)len);
    td_scope_begin();
    td_status st =
        ds->iface.get_batch ? ds->iface.get_batch(ds->ctx, n, idx, fields) : stack_samples(ds, nf, n, idx, fields);
    for (int k = 0; k < nf && st == TD_OK; k++)
        if (!fields[k] || td_ndim(fields[k]) < 1 || td_size(fields[k], 0) != n)
            st = TD_ERR(TD_ERR_SHAPE, "dataset: get_batch field %d is not a batch of %lld", k, (long long)n);
    for (int k = 0; k < nf; k++) td_keep(fields[k]);
    td_scope_end();
    for (int k = 0; k < nf; k++) {
        if (st != TD_OK)
            td_release(fields[k]), fields[k] = NULL;
        else
            td__scope_add(fields[k]);
    }
    return st;
}

/* ---- TensorDataset ---- */

typedef struct tensor_ds {
    int n;
    int64_t len;
    td_tensor *t[TD_DATA_MAX_FIELDS]; /* contiguous CPU tensors, owned */
    size_t row_bytes[TD_DATA_MAX_FIELDS];
} tensor_ds;

static int64_t tds_len(void *ctx) { return ((tensor_ds *)ctx)->len; }
static int tds_num_fields(void *ctx) { return ((tensor_ds *)ctx)->n; }

static td_status tds_get(void *ctx, int64_t i, td_tensor **fields) {
    tensor_ds *d = ctx;
    for (int k = 0; k < d->n; k++) {
        const unsigned char *base = td__host_data(d->t[k]);
        fields[k] = td_from_data(base + d->row_bytes[k] * (size_t)i, td_ndim(d->t[k]) - 1, td_shape(d->t[k]) + 1,
                                 td_tensor_dtype(d->t[k]), TD_CPU);
        if (!fields[k]) return td_last_status();
    }
    return TD_OK;
}

/* field k = rows idx[0..n) of tensor k: [n, ...]. */
static td_status tds_get_batch(void *ctx, int64_t n, const int64_t *idx, td_tensor **fields) {
    tensor_ds *d = ctx;
    for (int k = 0; k < d->n; k++) {
        int64_t shape[TD_MAX_DIMS];
        memcpy(shape, td_shape(d->t[k]), sizeof(int64_t) * (size_t)td_ndim(d->t[k]));
        shape[0] = n;
        fields[k] = td_empty(td_ndim(d->t[k]), shape, td_tensor_dtype(d->t[k]), TD_CPU);
        if (!fields[k]) return td_last_status();
        const unsigned char *src = td__host_data(d->t[k]);
        unsigned char *dst = td__host_data(fields[k]);
        size_t rb = d->row_bytes[k];
        for (int64_t s = 0; s < n; s++) memcpy(dst + rb * (size_t)s, src + rb * (size_t)idx[s], rb);
    }
    return TD_OK;
}

static void tds_free(void *ctx) {
    tensor_ds *d = ctx;
    for (int k = 0; k < d->n; k++) td_release(d->t[k]);
    free(d);
}

td_status td_tensor_dataset_new(int n, td_tensor *const *tensors, td_dataset **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "tensor_dataset_new: out is NULL");
    *out = NULL;
    if (n < 1 || n > TD_DATA_MAX_FIELDS || !tensors)
        return TD_ERR(TD_ERR_MISUSE, "tensor_dataset_new: need 1 to %d tensors, got %d", TD_DATA_MAX_FIELDS, n);
    for (int k = 0; k < n; k++) {
        TD_CHECK_ARG_ST(tensors[k], "tensor_dataset_new");
        if (td_ndim(tensors[k]) < 1) return TD_ERR(TD_ERR_SHAPE, "tensor_dataset_new: tensor %d is 0-d", k);
        if (td_size(tensors[k], 0) != td_size(tensors[0], 0))
            return TD_ERR(TD_ERR_SHAPE, "tensor_dataset_new: tensor %d has %lld samples, tensor 0 has %lld", k,
                          (long long)td_size(tensors[k], 0), (long long)td_size(tensors[0], 0));
    }
    tensor_ds *d = calloc(1, sizeof *d);
    if (!d) return TD_ERR(TD_ERR_OOM, "tensor_dataset_new: out of host memory");
    d->len = td_size(tensors[0], 0);
    td_status st = TD_OK;
    td_scope_begin();
    for (int k = 0; k < n && st == TD_OK; k++) {
        d->t[k] = td_keep(td_contiguous(td_to(tensors[k], TD_CPU)));
        if (!d->t[k])
            st = td_last_status();
        else
            d->row_bytes[k] =
                d->len ? (size_t)(td_numel(d->t[k]) / d->len) * td_dtype_size(td_tensor_dtype(d->t[k])) : 0;
        d->n = k + 1;
    }
    td_scope_end();
    static const td_dataset_i iface = {
        .len = tds_len, .num_fields = tds_num_fields, .get = tds_get, .get_batch = tds_get_batch, .free_ctx = tds_free};
    if (st == TD_OK) st = td_dataset_new(&iface, d, out);
    if (st != TD_OK) tds_free(d);
    return st;
}
