/*
** ZeRO-1 (dist.h, td_ddp_opts.shard_optimizer): optimizer state sharded over
** the ranks.
**
** The module's parameters of one dtype tile its flat arena [n] (param_arena.c)
** and their gradients the gradient arena. With N ranks and S = floor(n / N),
** rank r owns the contiguous slice [r S, (r + 1) S) of the arena, and rank
** N - 1 also the tail [N S, n) (fewer than N elements). A step:
**
**   gradients   a reduce-scatter of the gradient arena, issued bucket by
**               bucket while backward runs (ddp.c): each DDP bucket, a slice
**               of the arena, is reduced (AVG) to the owner of each of its
**               parts, in place, as soon as its gradients are final; so rank
**               r's slice of its gradient arena ends backward as the mean
**               gradient, and it is the sharded optimizer's gradient (a view:
**               no copy)
**   step        the sharded optimizer, over one parameter: the view of the
**               parameter arena at [lo, hi), updates it in place; its state
**               (Adam's m and v) is [hi - lo], 1/N of the unsharded state
**   parameters  all_gather of param arena [0, N S) in place (rank r's block
**               is its own slice), the tail broadcast from rank N - 1
**
** So every rank ends a step with the parameters of an unsharded run, having
** kept 1/N of its state. The state dict gathers the shards back into the
** unsharded layout ("state.<i>.<slot>" shaped as parameter i, in the
** unsharded optimizer's parameter order), so a checkpoint resumes on any
** number of ranks, sharded or not.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "optim/optim_internal.h"

struct td__zero {
    td_tensor *pa, *ga;       /* the module's arenas (borrowed: the module owns them) */
    int64_t n, block, lo, hi; /* arena elements; S; this rank's slice */
    int rank, world;
    td_tensor *shard;      /* view of pa at [lo, hi), a leaf that requires grad (+1) */
    td_tensor *shard_grad; /* view of ga at [lo, hi) (+1) */
    /* the unsharded optimizer's parameters (td_ddp_shard_optimizer): offset in the arena and shape */
    int n_params;
    int64_t *at;
    int *ndim;
    int64_t (*shape)[TD_MAX_DIMS];
};

/* A flat [len] view of arena t from element from. */
static td_tensor *span(td_tensor *t, int64_t from, int64_t len) {
    return td__make_view(t, 1, &len, (int64_t[]){1}, t->offset + from);
}

td_status td__zero_new(td_module *m, td_tensor *const *params, int n, td__zero **out) {
    *out = NULL;
    if (n == 0)
        return TD_ERR(TD_ERR_MISUSE, "ddp_new: shard_optimizer: the module has no parameter that requires grad");
    td_dtype dt = td_tensor_dtype(params[0]);
    td_tensor *pa = NULL, *ga = NULL;
    td_module_parameter_arena(m, dt, &pa, &ga);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (td_tensor_dtype(params[i]) != dt)
            return TD_ERR(TD_ERR_DTYPE,
                          "ddp_new: shard_optimizer needs parameters of one dtype; parameter %d is %s, parameter 0 %s",
                          i, td_dtype_name(td_tensor_dtype(params[i])), td_dtype_name(dt));
        if (!pa || params[i]->storage != pa->storage || !td_is_contiguous(params[i]))
            return TD_ERR(TD_ERR_MISUSE, "ddp_new: shard_optimizer: parameter %d is not in the module's arena", i);
        sum += td_numel(params[i]);
    }
    int world = td_dist_world_size();
    if (sum != td_numel(pa))
        return TD_ERR(TD_ERR_MISUSE,
                      "ddp_new: shard_optimizer: the arena holds %lld elements but the parameters that require grad "
                      "%lld (frozen parameters cannot be sharded)",
                      (long long)td_numel(pa), (long long)sum);
    if (sum < world)
        return TD_ERR(TD_ERR_MISUSE, "ddp_new: shard_optimizer: %lld parameter elements for %d ranks", (long long)sum,
                      world);
    td__zero *z = calloc(1, sizeof *z);
    if (!z) return TD_ERR(TD_ERR_OOM, "ddp_new: out of host memory");
    z->pa = pa, z->ga = ga, z->n = sum, z->world = world, z->rank = td_dist_rank();
    z->block = sum / world;
    z->lo = z->rank * z->block;
    z->hi = z->rank == world - 1 ? sum : z->lo + z->block;
    z->shard = td_keep(span(pa, z->lo, z->hi - z->lo));
    z->shard_grad = td_keep(span(ga, z->lo, z->hi - z->lo));
    td_status st = z->shard && z->shard_grad ? td_set_requires_grad(z->shard, true) : td_last_status();
    if (st != TD_OK) return td__zero_free(z), st;
    *out = z;
    return TD_OK;
}

void td__zero_free(td__zero *z) {
    if (!z) return;
    td_release(z->shard), td_release(z->shard_grad);
    free(z->at), free(z->ndim), free(z->shape);
    free(z);
}

td_status td__zero_launch(td__zero *z, td_tensor *buf, td_tensor *grads) {
    if (grads->storage != z->ga->storage)
        return TD_ERR(TD_ERR_STATE, "DDP: shard_optimizer: a bucket is not a slice of the gradient arena");
    int64_t at = grads->offset - z->ga->offset, n = td_numel(buf);
    td_status st = TD_OK;
    td_scope_begin();
    for (int r = 0; st == TD_OK && r < z->world; r++) { /* the owners of [at, at + n), in rank order */
        int64_t lo = r * z->block, hi = r == z->world - 1 ? z->n : lo + z->block;
        int64_t a = lo > at ? lo : at, b = hi < at + n ? hi : at + n;
        if (a < b) st = td__dist_reduce_start(span(buf, a - at, b - a), TD_DIST_AVG, r);
    }
    td_scope_end();
    return st;
}

void td__zero_finish(td__zero *z) {
    if (z->shard->grad == z->shard_grad) return;
    td_release(z->shard->grad); /* the sharded optimizer's gradient: this rank's reduced slice */
    z->shard->grad = td_retain(z->shard_grad);
}

td_status td__zero_gather(td__zero *z, td_tensor *const *params, int n) {
    int64_t S = z->block, all = S * z->world, tail = z->n - all;
    td_status st;
    td_scope_begin();
    td_no_grad_begin();
    st = td_dist_all_gather(span(z->pa, 0, all), span(z->pa, z->lo, S));
    if (st == TD_OK && tail > 0) st = td_dist_broadcast(span(z->pa, all, tail), z->world - 1);
    td_no_grad_end();
    td_scope_end();
    /* the local gradients were reduced: the next backward writes the arena afresh */
    for (int i = 0; st == TD_OK && i < n; i++) td_zero_grad(params[i]);
    return st;
}

/* ---- the sharded optimizer and its state ------------------------------------ */

/* Split "state.<i>.<field>" into i and field; false for other keys. */
static bool state_key(const char *key, int *i, const char **field) {
    if (strncmp(key, "state.", 6)) return false;
    char *end;
    long v = strtol(key + 6, &end, 10);
    if (end == key + 6 || *end != '.') return false;
    *i = (int)v, *field = end + 1;
    return true;
}

/* The shard's state from an unsharded state dict full (parameter i at z->at[i]):
** each per-element field laid out as the arena, cut to [lo, hi). */
static td_status shard_state(td__zero *z, const td_named_tensors *full, td_named_tensors *out) {
    td_status st = TD_OK;
    char key[96];
    int64_t len = z->hi - z->lo;
    for (int64_t k = 0; st == TD_OK && k < td_named_tensors_len(full); k++) {
        const char *name = td_named_tensors_name(full, k), *field;
        td_tensor *t = td_named_tensors_at(full, k);
        int i;
        if (!state_key(name, &i, &field)) { /* param_groups.0.lr */
            st = td_named_tensors_add(out, name, t);
            continue;
        }
        if (i != 0) continue; /* every parameter's fields are gathered with parameter 0's */
        snprintf(key, sizeof key, "state.0.%s", field);
        if (!strcmp(field, "step")) {
            st = td_named_tensors_add(out, key, t);
            continue;
        }
        td_tensor *flat = td_zeros(1, &z->n, td_tensor_dtype(t), td_tensor_device(z->pa));
        for (int p = 0; st == TD_OK && p < z->n_params; p++) {
            snprintf(key, sizeof key, "state.%d.%s", p, field);
            td_tensor *src = td_named_tensors_get(full, key);
            if (!src) {
                st = TD_ERR(TD_ERR_MISUSE, "ddp_shard_optimizer: the state has %s but not %s", name, key);
                break;
            }
            td_tensor *dst = flat ? td_view(span(flat, z->at[p], td_numel(src)), td_ndim(src), td_shape(src)) : NULL;
            st = dst ? td_copy_(dst, src) : td_last_status();
        }
        snprintf(key, sizeof key, "state.0.%s", field);
        if (st == TD_OK) st = td_named_tensors_add(out, key, td_contiguous(td_clone(span(flat, z->lo, len))));
    }
    return st;
}

td_status td__zero_shard_optimizer(td__zero *z, td_optimizer *opt) {
    const char *api = "ddp_shard_optimizer";
    if (opt->n_groups != 1)
        return TD_ERR(TD_ERR_MISUSE, "%s: the optimizer has %d param groups; ZeRO-1 shards one", api, opt->n_groups);
    if (z->n_params) return TD_ERR(TD_ERR_STATE, "%s: this DDP has sharded an optimizer already", api);
    int64_t sum = 0;
    for (int i = 0; i < opt->n; i++) {
        td_tensor *p = opt->p[i].param;
        if (p->storage != z->pa->storage || !td_is_contiguous(p))
            return TD_ERR(TD_ERR_MISUSE, "%s: optimizer parameter %d is not one of the DDP module's parameters", api,
                          i);
        sum += td_numel(p);
    }
    if (sum != z->n)
        return TD_ERR(TD_ERR_MISUSE,
                      "%s: the optimizer's parameters hold %lld elements, the module's that require grad %lld", api,
                      (long long)sum, (long long)z->n);
    z->at = calloc((size_t)opt->n, sizeof *z->at);
    z->ndim = calloc((size_t)opt->n, sizeof *z->ndim);
    z->shape = calloc((size_t)opt->n, sizeof *z->shape);
    if (!z->at || !z->ndim || !z->shape) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", api);
    for (int i = 0; i < opt->n; i++) {
        td_tensor *p = opt->p[i].param;
        z->at[i] = p->offset - z->pa->offset;
        z->ndim[i] = td_ndim(p);
        memcpy(z->shape[i], td_shape(p), sizeof(int64_t) * (size_t)td_ndim(p));
    }
    z->n_params = opt->n;
    /* the same algorithm and options over the shard, its state cut from opt's */
    td_optimizer *shard = td__optimizer_new(opt->algo, 1, &z->shard, &opt->groups[0]);
    td_named_tensors *full = shard ? td_optimizer_state_dict(opt) : NULL, *part = td_named_tensors_new();
    td_status st = full && part ? TD_OK : td_last_status();
    td_scope_begin();
    if (st == TD_OK) st = shard_state(z, full, part);
    if (st == TD_OK) st = td_optimizer_load_state_dict(shard, part);
    td_scope_end();
    td_named_tensors_free(full), td_named_tensors_free(part);
    if (st == TD_OK) { /* opt becomes the sharded one, so every pointer to it (schedulers) stays valid */
        struct td_optimizer tmp = *opt;
        *opt = *shard, *shard = tmp;
    } else {
        z->n_params = 0;
    }
    td_optimizer_free(shard);
    return st;
}

td_status td__zero_state_dict(td__zero *z, td_optimizer *opt, td_named_tensors **out) {
    const char *api = "ddp_optimizer_state_dict";
    *out = NULL;
    if (!z->n_params || opt->n != 1 || opt->p[0].param != z->shard)
        return TD_ERR(TD_ERR_MISUSE, "%s: the optimizer is not the one td_ddp_shard_optimizer sharded", api);
    td_named_tensors *part = td_optimizer_state_dict(opt), *full = td_named_tensors_new();
    td_status st = part && full ? TD_OK : td_last_status();
    int64_t S = z->block, all = S * z->world, tail = z->n - all;
    int64_t nf = part ? td_named_tensors_len(part) : 0;
    td_tensor **flats = calloc((size_t)nf + 1, sizeof *flats);
    if (st == TD_OK && !flats) st = TD_ERR(TD_ERR_OOM, "%s: out of host memory", api);
    char key[96];
    td_scope_begin();
    /* every per-element field gathered to [n] on every rank (the same order on every rank: same dict) */
    for (int64_t k = 0; st == TD_OK && k < nf; k++) {
        const char *field;
        int i;
        td_tensor *t = td_named_tensors_at(part, k);
        if (!state_key(td_named_tensors_name(part, k), &i, &field) || !strcmp(field, "step")) continue;
        td_tensor *flat = td_empty(1, &z->n, td_tensor_dtype(t), td_tensor_device(t));
        st = flat ? td_dist_all_gather(span(flat, 0, all), span(td_contiguous(t), 0, S)) : td_last_status();
        if (st == TD_OK && tail > 0) {
            td_tensor *end = span(flat, all, tail);
            if (z->rank == z->world - 1) st = td_copy_(end, span(td_contiguous(t), S, tail));
            if (st == TD_OK) st = td_dist_broadcast(end, z->world - 1);
        }
        flats[k] = flat;
    }
    /* the unsharded order: per parameter its fields, then the groups */
    for (int p = 0; st == TD_OK && p < z->n_params; p++)
        for (int64_t k = 0; st == TD_OK && k < nf; k++) {
            const char *field;
            int i;
            if (!state_key(td_named_tensors_name(part, k), &i, &field)) continue;
            snprintf(key, sizeof key, "state.%d.%s", p, field);
            int64_t numel = 1;
            for (int d = 0; d < z->ndim[p]; d++) numel *= z->shape[p][d];
            td_tensor *t = !flats[k] ? td_named_tensors_at(part, k) /* step */
                                     : td_contiguous(td_view(span(flats[k], z->at[p], numel), z->ndim[p], z->shape[p]));
            st = t ? td_named_tensors_add(full, key, t) : td_last_status();
        }
    for (int64_t k = 0; st == TD_OK && k < nf; k++) {
        const char *field;
        int i;
        const char *name = td_named_tensors_name(part, k);
        if (!state_key(name, &i, &field)) st = td_named_tensors_add(full, name, td_named_tensors_at(part, k));
    }
    td_scope_end();
    free(flats);
    td_named_tensors_free(part);
    if (st != TD_OK) {
        td_named_tensors_free(full);
        return st;
    }
    *out = full;
    return TD_OK;
}

int64_t td__zero_shard_len(const td__zero *z) { return z->hi - z->lo; }
