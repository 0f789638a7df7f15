/*
** DistributedDataParallel (dist.h).
**
** Buckets: the parameters that require grad, in reverse registration order,
** cut into runs of one dtype of at most cap bytes; bucket b has a flat buffer
** [numel] on the device, parameter i its slice [offset_i, offset_i + numel_i).
**
** The module is flattened (td_module_flatten_parameters) at td_ddp_new when
** it is not already, so a bucket's buffer is the slice of the gradient arena
** its parameters' gradients already live in: no copies. A bucket whose
** parameters do not lie end to end in an arena on the process group's device
** (a frozen parameter between them, another device) has a buffer of its own.
**
** In a td_backward, parameter i's post-accumulate hook marks it ready. When
** its bucket is complete, and every bucket before it is launched (all ranks
** must issue collectives in the same order), the bucket is launched: each
** .grad not already its slice is copied into it, and the flat buffer's AVG
** all-reduce is started (td__dist_all_reduce_start: with nccl on a stream of
** its own, so it overlaps the rest of backward). The hook that completes the
** last bucket waits for the started all-reduces (the device's stream waits,
** not the host) and copies each slice that is not its .grad back into it.
**
** grad_dtype bf16: a float32 bucket is copied into a bf16 buffer of its own
** at launch, that buffer is all-reduced, and finish copies it back: half the
** bytes on the wire, two roundings (torch's bf16_compress_hook).
**
** shard_optimizer (ZeRO-1, zero.c): a launched bucket is reduced (AVG) to
** the owners of its parts of the arena instead of all-reduced, so backward
** ends with each rank's slice reduced (a reduce-scatter, bucket by bucket);
** td_ddp_gather_parameters all-gathers the parameters after the step.
**
** Hooks cannot be removed, so each carries (ddp id, parameter index) and
** finds its DDP in a table of live ones: after td_ddp_free they do nothing.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

#define MAX_DDPS 64

typedef struct bucket {
    int first, count; /* positions in order[] */
    int ready;
    bool launched;
    td_tensor *flat; /* [numel] on the device, +1: a slice of the gradient arena, or a buffer of its own */
    td_tensor *wire; /* grad_dtype bf16 of a float32 bucket: [numel] bf16 (+1), reduced in flat's place; else NULL */
} bucket;

struct td_ddp {
    int id;
    td_module *module;
    int n;              /* parameters that require grad */
    td_tensor **params; /* borrowed from the module, in registration order */
    char **names;       /* their names */
    int *order;         /* parameter indices in bucket order (reverse registration) */
    int *bucket_of;     /* per parameter */
    int64_t *offset;    /* per parameter: slice start in its bucket */
    bool *ready;        /* per parameter: its hook ran in this backward */
    bucket *buckets;
    int n_buckets, next_launch, n_ready;
    int no_sync;
    td_dtype grad_dtype; /* TD_BF16: float32 buckets are reduced in bf16 */
    td__zero *zero;      /* shard_optimizer: the ZeRO-1 state, else NULL */
    td_status error;     /* the first error a hook met, reported by td_ddp_check */
    char error_msg[300];
};

static td_ddp *live[MAX_DDPS];
static int next_id = 1;

static td_ddp *find_ddp(int id) {
    for (int k = 0; k < MAX_DDPS; k++)
        if (live[k] && live[k]->id == id) return live[k];
    return NULL;
}

/* the slice of parameter i in its bucket's flat buffer, shaped as the parameter */
static td_tensor *slice_of(td_ddp *d, int i) {
    td_tensor *p = d->params[i];
    bucket *b = &d->buckets[d->bucket_of[i]];
    return td_view(td_slice(b->flat, 0, d->offset[i], d->offset[i] + td_numel(p), 1), td_ndim(p), td_shape(p));
}

/* Whether parameter i's gradient g is its slice of the bucket (the arena's view). */
static bool in_slice(const td_ddp *d, int i, const td_tensor *g) {
    const td_tensor *flat = d->buckets[d->bucket_of[i]].flat;
    return g && g->storage == flat->storage && g->offset == flat->offset + d->offset[i] && td_is_contiguous(g);
}

static td_status launch(td_ddp *d, bucket *b) {
    for (int k = b->first; k < b->first + b->count; k++) {
        int i = d->order[k];
        td_tensor *g = td_grad_of(d->params[i]);
        td_status st = in_slice(d, i, g) ? TD_OK : td_copy_(slice_of(d, i), g);
        if (st) return td_error_prefix("DDP: parameter '%s'", d->names[i]), st;
    }
    b->launched = true;
    if (b->wire) {
        td_status st = td_copy_(b->wire, b->flat);
        if (st) return td_error_prefix("DDP: bf16 bucket"), st;
    }
    td_tensor *buf = b->wire ? b->wire : b->flat;
    return d->zero ? td__zero_launch(d->zero, buf, b->flat) : td__dist_all_reduce_start(buf, TD_DIST_AVG);
}

/* Every bucket reduced: the grads take the averaged slices. */
static td_status finish(td_ddp *d) {
    td_status st = td__dist_wait_started();
    if (st == TD_OK && d->zero) td__zero_finish(d->zero);
    for (int b = 0; st == TD_OK && b < d->n_buckets; b++)
        if (d->buckets[b].wire) st = td_copy_(d->buckets[b].flat, d->buckets[b].wire);
    for (int i = 0; !d->zero && st == TD_OK && i < d->n; i++)
        if (!in_slice(d, i, td_grad_of(d->params[i]))) st = td_copy_(td_grad_of(d->params[i]), slice_of(d, i));
    for (int b = 0; b < d->n_buckets; b++) d->buckets[b].ready = 0, d->buckets[b].launched = false;
    memset(d->ready, 0, sizeof *d->ready * (size_t)d->n);
    d->next_launch = d->n_ready = 0;
    return st;
}

static td_status on_grad(td_tensor *leaf, void *user) {
    (void)leaf;
    uintptr_t u = (uintptr_t)user;
    td_ddp *d = find_ddp((int)(u >> 24));
    int i = (int)(u & 0xFFFFFF);
    if (!d || d->no_sync || d->error) return TD_OK;
    td_status st = TD_OK;
    if (!d->ready[i]) {
        d->ready[i] = true;
        d->n_ready++;
        d->buckets[d->bucket_of[i]].ready++;
    }
    while (st == TD_OK && d->next_launch < d->n_buckets) {
        bucket *b = &d->buckets[d->next_launch];
        if (b->ready < b->count) break;
        st = launch(d, b);
        d->next_launch++;
    }
    if (st == TD_OK && d->n_ready == d->n) st = finish(d);
    if (st != TD_OK) {
        d->error = st;
        snprintf(d->error_msg, sizeof d->error_msg, "%s", td_last_error());
    }
    return st;
}

/* Every rank has the same parameters: compare a digest of names, shapes and
** dtypes (max and -min over ranks agree only when every rank's is the same),
** then, on a mismatch, gather each parameter's shape to name the first that
** differs. */
static td_status check_shapes(td_ddp *d) {
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    MIX(d->n);
    for (int i = 0; i < d->n; i++) {
        for (const char *c = d->names[i]; *c; c++) MIX(*c);
        MIX(td_tensor_dtype(d->params[i]));
        for (int k = 0; k < td_ndim(d->params[i]); k++) MIX(td_size(d->params[i], k));
    }
#undef MIX
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    td_tensor *t = td_from_data(v, 1, (int64_t[]){2}, TD_I64, td_dist_device());
    if (!t || td_dist_all_reduce(t, TD_DIST_MAX) != TD_OK) return td_last_status();
    int64_t r[2];
    if (td_copy_to_host(t, r, sizeof r, TD_I64) != TD_OK) return td_last_status();
    if (r[0] == -r[1]) return TD_OK;
    /* find the first difference: every rank's count, then each parameter's [ndim, dtype, sizes] */
    int world = td_dist_world_size();
    int64_t row[2 + TD_MAX_DIMS];
    for (int i = 0; i <= d->n; i++) {
        memset(row, 0, sizeof row);
        if (i < d->n) {
            row[0] = td_ndim(d->params[i]), row[1] = td_tensor_dtype(d->params[i]);
            for (int k = 0; k < row[0]; k++) row[2 + k] = td_size(d->params[i], k);
        } else {
            row[0] = -1, row[1] = d->n; /* the count, last: a rank with fewer stops comparing first */
        }
        td_tensor *mine = td_from_data(row, 1, (int64_t[]){2 + TD_MAX_DIMS}, TD_I64, td_dist_device());
        td_tensor *all = td_empty(1, (int64_t[]){(int64_t)world * (2 + TD_MAX_DIMS)}, TD_I64, td_dist_device());
        if (!mine || !all || td_dist_all_gather(all, mine) != TD_OK) return td_last_status();
        int64_t *got = malloc(sizeof *got * (size_t)world * (2 + TD_MAX_DIMS));
        if (!got) return TD_ERR(TD_ERR_OOM, "DDP: out of host memory");
        td_copy_to_host(all, got, sizeof *got * (size_t)world * (2 + TD_MAX_DIMS), TD_I64);
        for (int r2 = 0; r2 < world; r2++) {
            if (!memcmp(got + r2 * (2 + TD_MAX_DIMS), got, sizeof row)) continue;
            char a[96], b[96];
            const int64_t *x = got, *y = got + r2 * (2 + TD_MAX_DIMS);
            td_status st;
            if (i == d->n || x[0] < 0 || y[0] < 0)
                st = TD_ERR(TD_ERR_SHAPE,
                            "DDP: the ranks' models differ: rank 0 and rank %d have different "
                            "parameter counts or names (this rank has %d)",
                            r2, d->n);
            else
                st = TD_ERR(TD_ERR_SHAPE,
                            "DDP: parameter %d ('%s') is %s %s on rank 0 but %s %s on rank %d: every rank must "
                            "build the same model",
                            i, d->names[i], td_dtype_name((td_dtype)x[1]), td__shape_str((int)x[0], x + 2, a, sizeof a),
                            td_dtype_name((td_dtype)y[1]), td__shape_str((int)y[0], y + 2, b, sizeof b), r2);
            free(got);
            return st;
        }
        free(got);
        if (i == d->n) break;
    }
    return TD_ERR(TD_ERR_SHAPE, "DDP: the ranks' parameter names differ (the shapes agree); every rank must build "
                                "the same model");
}

static td_status broadcast_state(td_ddp *d, bool buffers) {
    td_named_tensors *sd = buffers ? td_module_state_dict(d->module) : td_module_named_parameters(d->module);
    if (!sd) return td_last_status();
    td_status st = TD_OK;
    for (int64_t k = 0; st == TD_OK && k < td_named_tensors_len(sd); k++) {
        td_tensor *t = td_named_tensors_at(sd, k);
        td_no_grad_begin();
        st = td_dist_broadcast(t, 0);
        td_no_grad_end();
        if (st) td_error_prefix("DDP: broadcast of '%s'", td_named_tensors_name(sd, k));
    }
    td_named_tensors_free(sd);
    return st;
}

/* Bucket b's buffer: its parameters' slice of the gradient arena when they
** lie end to end in one on the group's device (their offsets re-based on the
** slice), else zeros of its own. */
static td_status bucket_buffer(td_ddp *d, bucket *b, int64_t numel) {
    td_dtype dt = td_tensor_dtype(d->params[d->order[b->first]]);
    td_tensor *pa = NULL, *ga = NULL;
    td_module_parameter_arena(d->module, dt, &pa, &ga);
    td_device dev = td_dist_device(), at = ga ? td_tensor_device(ga) : dev;
    bool fits = ga && at.type == dev.type && at.index == dev.index;
    int64_t lo = INT64_MAX, hi = 0;
    for (int k = b->first; fits && k < b->first + b->count; k++) {
        td_tensor *p = d->params[d->order[k]];
        fits = p->storage == pa->storage && td_is_contiguous(p);
        if (p->offset - pa->offset < lo) lo = p->offset - pa->offset;
        if (p->offset - pa->offset + td_numel(p) > hi) hi = p->offset - pa->offset + td_numel(p);
    }
    if (!fits || hi - lo != numel) {
        b->flat = td_keep(td_zeros(1, &numel, dt, dev));
        return b->flat ? TD_OK : td_last_status();
    }
    for (int k = b->first; k < b->first + b->count; k++) {
        int i = d->order[k];
        d->offset[i] = d->params[i]->offset - pa->offset - lo;
    }
    b->flat = td_keep(td__make_view(ga, 1, &numel, (int64_t[]){1}, ga->offset + lo));
    return b->flat ? TD_OK : td_last_status();
}

static td_status build_buckets(td_ddp *d, double cap_mb) {
    int64_t cap = (int64_t)(cap_mb * 1024 * 1024);
    d->buckets = calloc((size_t)(d->n ? d->n : 1), sizeof *d->buckets);
    if (!d->buckets) return TD_ERR(TD_ERR_OOM, "DDP: out of host memory");
    int64_t bytes = 0, numel = 0;
    for (int k = 0; k < d->n; k++) {
        int i = d->order[k] = d->n - 1 - k;
        td_tensor *p = d->params[i];
        int64_t pb = td_numel(p) * (int64_t)td_dtype_size(td_tensor_dtype(p));
        bucket *b = d->n_buckets ? &d->buckets[d->n_buckets - 1] : NULL;
        bool fits = b && bytes + pb <= cap && td_tensor_dtype(d->params[d->order[b->first]]) == td_tensor_dtype(p);
        if (!fits) {
            td_status st = b ? bucket_buffer(d, b, numel) : TD_OK; /* close the previous bucket */
            if (st != TD_OK) return st;
            b = &d->buckets[d->n_buckets++];
            *b = (bucket){.first = k};
            bytes = numel = 0;
        }
        d->bucket_of[i] = (int)(b - d->buckets);
        d->offset[i] = numel;
        b->count++;
        bytes += pb, numel += td_numel(p);
    }
    return d->n_buckets ? bucket_buffer(d, &d->buckets[d->n_buckets - 1], numel) : TD_OK;
}

td_status td_ddp_new(td_module *module, const td_ddp_opts *opts, td_ddp **out) {
    if (out) *out = NULL;
    if (!module || !out) return TD_ERR(TD_ERR_MISUSE, "ddp_new: module or out is NULL");
    if (!td_dist_is_initialized()) return TD_ERR(TD_ERR_STATE, "ddp_new: no process group (call td_dist_init first)");
    td_ddp_opts o = opts ? *opts : (td_ddp_opts){.broadcast_buffers = true};
    double cap_mb = o.bucket_cap_mb > 0 ? o.bucket_cap_mb : 25;
    int slot = 0;
    while (slot < MAX_DDPS && live[slot]) slot++;
    if (slot == MAX_DDPS) return TD_ERR(TD_ERR_STATE, "ddp_new: %d DDPs exist already", MAX_DDPS);
    td_tensor *first = NULL, *arena = NULL;
    if (td_module_parameters(module, &first, 1) > 0)
        td_module_parameter_arena(module, td_tensor_dtype(first), &arena, NULL);
    if (first && !arena && td_module_flatten_parameters(module, td_tensor_device(first)) != TD_OK)
        return td_error_prefix("ddp_new");
    td_ddp *d = calloc(1, sizeof *d);
    td_named_tensors *named = td_module_named_parameters(module);
    int64_t n_all = named ? td_named_tensors_len(named) : 0;
    if (d && named) {
        d->params = calloc((size_t)n_all + 1, sizeof *d->params);
        d->names = calloc((size_t)n_all + 1, sizeof *d->names);
    }
    if (!d || !named || !d->params || !d->names) {
        td_named_tensors_free(named);
        if (d) free(d->params), free(d->names), free(d);
        return TD_ERR(TD_ERR_OOM, "ddp_new: out of host memory");
    }
    d->module = module;
    d->id = next_id++;
    for (int64_t k = 0; k < n_all; k++) {
        td_tensor *p = td_named_tensors_at(named, k);
        if (!td_requires_grad(p)) continue;
        d->params[d->n] = p;
        d->names[d->n++] = strdup(td_named_tensors_name(named, k));
    }
    td_named_tensors_free(named);
    d->order = calloc((size_t)d->n + 1, sizeof *d->order);
    d->bucket_of = calloc((size_t)d->n + 1, sizeof *d->bucket_of);
    d->offset = calloc((size_t)d->n + 1, sizeof *d->offset);
    d->ready = calloc((size_t)d->n + 1, sizeof *d->ready);
    td_status st =
        d->order && d->bucket_of && d->offset && d->ready ? TD_OK : TD_ERR(TD_ERR_OOM, "ddp_new: out of host memory");
    for (int i = 0; st == TD_OK && i < d->n; i++)
        if (!d->names[i]) st = TD_ERR(TD_ERR_OOM, "ddp_new: out of host memory");
    td_scope_begin();
    if (st == TD_OK) st = check_shapes(d);
    if (st == TD_OK) st = broadcast_state(d, o.broadcast_buffers);
    if (st == TD_OK) st = build_buckets(d, cap_mb);
    td_scope_end();
    d->grad_dtype = o.grad_dtype;
    if (st == TD_OK && o.grad_dtype != TD_F32 && o.grad_dtype != TD_BF16)
        st = TD_ERR(TD_ERR_MISUSE, "ddp_new: grad_dtype %s is not float32 or bfloat16", td_dtype_name(o.grad_dtype));
    if (st == TD_OK && o.shard_optimizer) st = td__zero_new(module, d->params, d->n, &d->zero);
    for (int b = 0; st == TD_OK && d->zero && b < d->n_buckets; b++) { /* ZeRO reduces arena slices in place */
        td_tensor *ga = NULL;
        td_module_parameter_arena(module, td_tensor_dtype(d->buckets[b].flat), NULL, &ga);
        if (!ga || d->buckets[b].flat->storage != ga->storage)
            st = TD_ERR(TD_ERR_MISUSE, "ddp_new: shard_optimizer: bucket %d is not a slice of the gradient arena", b);
    }
    for (int b = 0; st == TD_OK && o.grad_dtype == TD_BF16 && b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        if (td_tensor_dtype(bk->flat) != TD_F32) continue;
        int64_t numel = td_numel(bk->flat);
        bk->wire = td_keep(td_empty(1, &numel, TD_BF16, td_tensor_device(bk->flat)));
        if (!bk->wire) st = td_last_status();
    }
    for (int i = 0; st == TD_OK && i < d->n; i++)
        st = td_register_post_accumulate_hook(d->params[i], on_grad, (void *)(((uintptr_t)d->id << 24) | (uintptr_t)i));
    if (st != TD_OK) {
        td_ddp_free(d);
        return st;
    }
    live[slot] = d;
    *out = d;
    return TD_OK;
}

void td_ddp_free(td_ddp *d) {
    if (!d) return;
    for (int k = 0; k < MAX_DDPS; k++)
        if (live[k] == d) live[k] = NULL;
    for (int b = 0; d->buckets && b < d->n_buckets; b++) td_release(d->buckets[b].flat), td_release(d->buckets[b].wire);
    td__zero_free(d->zero);
    for (int i = 0; d->names && i < d->n; i++) free(d->names[i]);
    free(d->buckets), free(d->params), free(d->names), free(d->order), free(d->bucket_of), free(d->offset);
    free(d->ready);
    free(d);
}

void td_ddp_no_sync_begin(td_ddp *d) {
    if (d) d->no_sync++;
}

void td_ddp_no_sync_end(td_ddp *d) {
    if (d && d->no_sync > 0) d->no_sync--;
}

td_status td_ddp_check(td_ddp *d) {
    if (!d) return TD_ERR(TD_ERR_MISUSE, "ddp_check: d is NULL");
    if (d->error) {
        td_status st = d->error;
        d->error = TD_OK;
        return td_error_set(st, "%s", d->error_msg);
    }
    if (!d->n_ready) return TD_OK;
    char names[200] = "";
    int shown = 0, missing = d->n - d->n_ready;
    for (int i = 0; i < d->n; i++)
        if (!d->ready[i] && shown++ < 4)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", shown > 1 ? ", " : "", d->names[i]);
    /* start over: the ranks are out of step now, which the next collective will show */
    for (int b = 0; b < d->n_buckets; b++) d->buckets[b].ready = 0, d->buckets[b].launched = false;
    for (int i = 0; i < d->n; i++) d->ready[i] = false;
    d->next_launch = d->n_ready = 0;
    return TD_ERR(TD_ERR_STATE,
                  "DDP: %d parameters got no gradient in the last backward (%s%s); every parameter that requires "
                  "grad must take part in the loss",
                  missing, names, shown > 4 ? ", ..." : "");
}

int td_ddp_num_buckets(const td_ddp *d) { return d ? d->n_buckets : -1; }

int td_ddp_bucket_size(const td_ddp *d, int b) { return d && b >= 0 && b < d->n_buckets ? d->buckets[b].count : -1; }

/* ---- ZeRO-1 (zero.c) ---------------------------------------------------------- */

static td_status zero_of(const td_ddp *d, const char *api) {
    if (!d) return TD_ERR(TD_ERR_MISUSE, "%s: d is NULL", api);
    if (!d->zero) return TD_ERR(TD_ERR_MISUSE, "%s: the DDP was made without shard_optimizer", api);
    return TD_OK;
}

td_status td_ddp_shard_optimizer(td_ddp *d, td_optimizer *opt) {
    td_status st = zero_of(d, "ddp_shard_optimizer");
    if (st) return st;
    if (!opt) return TD_ERR(TD_ERR_MISUSE, "ddp_shard_optimizer: opt is NULL");
    return td__zero_shard_optimizer(d->zero, opt);
}

td_status td_ddp_gather_parameters(td_ddp *d) {
    td_status st = zero_of(d, "ddp_gather_parameters");
    return st ? st : td__zero_gather(d->zero, d->params, d->n);
}

td_status td_ddp_optimizer_state_dict(td_ddp *d, td_optimizer *opt, td_named_tensors **out) {
    if (out) *out = NULL;
    td_status st = zero_of(d, "ddp_optimizer_state_dict");
    if (st) return st;
    if (!opt || !out) return TD_ERR(TD_ERR_MISUSE, "ddp_optimizer_state_dict: opt or out is NULL");
    return td__zero_state_dict(d->zero, opt, out);
}

int64_t td_ddp_shard_numel(const td_ddp *d) { return d && d->zero ? td__zero_shard_len(d->zero) : -1; }
