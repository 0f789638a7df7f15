/*
** trident train, data-parallel (docs/distributed.md): under a launcher
** (trident launch, torchrun, mpirun: WORLD_SIZE or OMPI_COMM_WORLD_SIZE > 1)
** or with --ddp, each process joins the group, binds device LOCAL_RANK of the
** --device type (an explicit index, vulkan:0, binds that one), wraps the model
** in DDP and trains on its shard of every global batch:
**   images  the DistributedSampler's indices of (seed, epoch) for this rank;
**           with --batch b per process, the ranks' k-th batches together are
**           the k-th batch of size world * b of a single process's epoch
**   text    rows [rank * b, (rank + 1) * b) of the step's world * b windows
** The loss reported is the mean over ranks (an all-reduce per step), so the
** losses equal a single process's at --batch world * b, up to rounding. Rank
** 0 prints, logs, evaluates and writes checkpoints; every rank resumes from
** them (the position counts global batches, so a run may resume on another
** number of processes at the same global batch). --zero 1 shards the
** optimizer (ZeRO-1): each step ends with the parameters' all-gather, and a
** checkpoint gathers the state into the unsharded layout (every rank takes
** part). --ddp-grad-dtype bf16 reduces float32 gradients in bf16.
*/
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

bool train_dist_wanted(bool ddp_flag) {
    const char *w = getenv("WORLD_SIZE"), *o = getenv("OMPI_COMM_WORLD_SIZE");
    return ddp_flag || (w && atoi(w) > 1) || (o && atoi(o) > 1);
}

int train_dist_init(train_run *r, const char *device, td_device *dev) {
    td_device want;
    if (td_device_parse(device, &want) != TD_OK)
        return train_fail("--device %s: %s", TD_QUOTE(device), td_last_error());
    /* "cuda" or "auto" bind LOCAL_RANK; "cuda:1" binds that device */
    bool fixed = strchr(device, ':') != NULL;
    td_dist_opts o = {.device_type = (td_device_type)want.type, .fixed_index = fixed, .index = want.index};
    if (td_dist_init(&o) != TD_OK) return train_fail("%s", td_last_error());
    r->rank = td_dist_rank(), r->world = td_dist_world_size();
    *dev = td_dist_device();
    if (r->rank > 0 && !freopen("/dev/null", "w", stdout)) /* rank 0 prints */
        return train_fail("cannot silence stdout on rank %d", r->rank);
    return 0;
}

int train_dist_options(train_run *r, const char *zero, const char *grad_dtype, td_dtype amp) {
    r->ddp_grad_dtype = TD_F32;
    if (zero && strcmp(zero, "0") && strcmp(zero, "1"))
        return train_fail("--zero %s: 0 (off) or 1 (ZeRO-1: shard the optimizer state)", TD_QUOTE(zero));
    r->zero = zero && !strcmp(zero, "1");
    if (grad_dtype && !strcmp(grad_dtype, "bf16"))
        r->ddp_grad_dtype = TD_BF16;
    else if (grad_dtype && strcmp(grad_dtype, "fp32"))
        return train_fail("--ddp-grad-dtype %s is not fp32 or bf16", TD_QUOTE(grad_dtype));
    if (r->zero && amp == TD_F16)
        return train_fail("--zero 1 with --amp fp16: each rank would check its own shard's gradients for inf "
                          "(use --amp bf16)");
    return 0;
}

/* DDP with the options; under ZeRO-1 the optimizer is sharded in place (it
** was loaded with the unsharded state when resuming). */
int train_dist_wrap(train_run *r) {
    td_ddp_opts o = {.broadcast_buffers = true, .grad_dtype = r->ddp_grad_dtype, .shard_optimizer = r->zero};
    if (td_ddp_new(r->w.model, &o, &r->ddp) != TD_OK || (r->zero && td_ddp_shard_optimizer(r->ddp, r->w.opt)))
        return train_fail("%s", td_last_error());
    return 0;
}

td_named_tensors *train_dist_optim_state(train_run *r) {
    td_named_tensors *sd = NULL;
    if (r->rank > 0 && !(r->ddp && r->zero)) return td_named_tensors_new(); /* rank 0 writes it */
    if (!r->ddp || !r->zero) return td_optimizer_state_dict(r->w.opt);
    return td_ddp_optimizer_state_dict(r->ddp, r->w.opt, &sd) == TD_OK ? sd : NULL;
}

/* ---- the rank's shard: a dataset over r->ds through r->shard_idx ---------- */

static int64_t shard_len(void *ctx) { return ((train_run *)ctx)->shard_len; }
static int shard_fields(void *ctx) { return td_dataset_num_fields(((train_run *)ctx)->ds); }
static td_status shard_get(void *ctx, int64_t i, td_tensor **fields) {
    train_run *r = ctx;
    td_status st = td_dataset_get_batch(r->ds, 1, &r->shard_idx[i], fields);
    for (int k = 0; st == TD_OK && k < td_dataset_num_fields(r->ds); k++) /* one sample: drop the batch dim */
        if (!(fields[k] = td_squeeze(fields[k], 0))) st = td_last_status();
    return st;
}
static td_status shard_get_batch(void *ctx, int64_t n, const int64_t *idx, td_tensor **fields) {
    train_run *r = ctx;
    int64_t *map = malloc(sizeof *map * (size_t)(n ? n : 1));
    if (!map) return td_error_set(TD_ERR_OOM, "shard: out of host memory");
    for (int64_t k = 0; k < n; k++) map[k] = r->shard_idx[idx[k]];
    td_status st = td_dataset_get_batch(r->ds, n, map, fields);
    free(map);
    return st;
}

int train_dist_epoch(train_run *r, const td_dataloader_opts *o) {
    td_dataloader_free(r->dl); /* stops its workers before the indices change */
    r->dl = NULL;
    int64_t n = td_dataset_len(r->ds);
    if (!r->shard) {
        r->shard_len = td_dist_sampler_len(n, r->world, false);
        r->shard_idx = malloc(sizeof *r->shard_idx * (size_t)(r->shard_len ? r->shard_len : 1));
        td_dataset_i iface = {
            .len = shard_len, .num_fields = shard_fields, .get = shard_get, .get_batch = shard_get_batch};
        if (!r->shard_idx || td_dataset_new(&iface, r, &r->shard) != TD_OK) return train_fail("%s", td_last_error());
    }
    if (td_dist_sampler_indices(n, r->world, r->rank, o->shuffle, o->seed, r->epoch, false, r->shard_idx) != TD_OK)
        return train_fail("%s", td_last_error());
    td_dataloader_opts so = *o;
    so.shuffle = false; /* the sampler shuffled */
    if (td_dataloader_new(r->shard, &so, &r->dl) != TD_OK) return train_fail("%s", td_last_error());
    if (td_dataloader_num_batches(r->dl) < 1)
        return train_fail("%" PRId64 " training images make no batch of %" PRId64 " per process on %d processes", n,
                          r->batch, r->world);
    return 0;
}

/* TRIDENT_FAULT_KILL_RANK=R:S: rank R kills itself (SIGKILL) at step S, for the tests of a lost rank. */
static void fault_kill(const train_run *r) {
    const char *f = getenv("TRIDENT_FAULT_KILL_RANK");
    int rank, step;
    if (f && sscanf(f, "%d:%d", &rank, &step) == 2 && rank == r->rank && step == r->step + 1) raise(SIGKILL);
}

td_status train_dist_step(train_run *r, td_tensor *x, td_tensor *y, double *loss) {
    fault_kill(r);
    td_scope_begin();
    td_tensor *l = workload_loss_step(&r->w, x, y); /* DDP's hooks average the gradients inside backward */
    td_status st = l ? td_ddp_check(r->ddp) : td_last_status();
    if (st == TD_OK && r->zero) st = td_ddp_gather_parameters(r->ddp); /* the sharded step's result everywhere */
    td_tensor *mean = st == TD_OK ? td_clone(l) : NULL;
    if (st == TD_OK) st = mean ? td_dist_all_reduce(mean, TD_DIST_AVG) : td_last_status();
    if (st == TD_OK) *loss = td_item(mean);
    td_scope_end();
    return st;
}

void train_dist_free(train_run *r, bool failed) {
    td_dataloader_free(r->dl);
    r->dl = NULL;
    td_dataset_free(r->shard);
    free(r->shard_idx);
    td_ddp_free(r->ddp);
    r->shard = NULL, r->shard_idx = NULL, r->ddp = NULL;
    if (!failed || r->world <= 1) td_dist_destroy();
}
