/*
** trident train's checkpoints: td_train_state files (io.h) whose model
** metadata also holds where the run stands inside its epoch:
**   model.batch      batches done in epoch `epoch` (0 at an epoch's end)
**   model.loss_sum   the sum of that epoch's step losses so far (%.17g)
**   model.loss_n     their count
**   model.seed       the data seed (shuffle order, gpt windows)
**   model.device     the device, and model.threads the CPU thread count,
**                    which --deterministic requires to be unchanged
**   model.config     the gpt size, for the record
*/
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

static int cpu_threads(void) {
    td_device_info info;
    return td_device_get_info(TD_CPU, &info) == TD_OK ? info.compute_units : 1;
}

int train_checkpoint_save(train_run *r) {
    td_named_tensors *model = td_module_state_dict(r->w.model), *optim = td_optimizer_state_dict(r->w.opt);
    char v[6][64], dev[32];
    snprintf(v[0], sizeof v[0], "%" PRId64, r->batch_in_epoch);
    snprintf(v[1], sizeof v[1], "%.17g", r->loss_sum);
    snprintf(v[2], sizeof v[2], "%" PRId64, r->loss_n);
    snprintf(v[3], sizeof v[3], "%" PRIu64, r->seed);
    snprintf(v[4], sizeof v[4], "%d", cpu_threads());
    const workload_gpt_config *g = &r->w.gpt;
    snprintf(v[5], sizeof v[5],
             "vocab=%" PRId64 ",d_model=%" PRId64 ",heads=%" PRId64 ",layers=%" PRId64 ",context=%" PRId64, g->vocab,
             g->d_model, g->heads, g->layers, g->context);
    const char *meta[7][2] = {{"batch", v[0]},
                              {"loss_sum", v[1]},
                              {"loss_n", v[2]},
                              {"seed", v[3]},
                              {"threads", v[4]},
                              {"device", td_device_str(r->w.device, dev, sizeof dev)},
                              {"config", r->w.kind == WORKLOAD_GPT ? v[5] : "-"}};
    td_status st = model && optim ? TD_OK : td_last_status();
    for (int i = 0; i < 7 && st == TD_OK; i++) st = td_named_tensors_set_meta(model, meta[i][0], meta[i][1]);
    if (st == TD_OK) {
        td_train_state ck = {
            .model = model, .optim = optim, .step = r->step, .epoch = r->epoch, .rng = td_rng_get_state()};
        snprintf(ck.model_name, sizeof ck.model_name, "%s", r->w.name);
        st = td_train_state_save(r->checkpoint, &ck);
    }
    td_named_tensors_free(model);
    td_named_tensors_free(optim);
    return st == TD_OK ? 0 : train_fail("saving checkpoint: %s", td_last_error());
}

/* A decimal metadata entry of the checkpoint into *v; 1 (with a message) when absent or malformed. */
static int meta_i64(const td_named_tensors *m, const char *path, const char *key, int64_t *v) {
    const char *s = td_named_tensors_meta(m, key);
    char *end;
    errno = 0;
    long long x = s ? strtoll(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || x < 0)
        return train_fail("checkpoint '%s': metadata model.%s is %s (not written by trident train?)", path, key,
                          s ? "not a count" : "missing");
    *v = x;
    return 0;
}

int train_resume(train_run *r) {
    const char *path = r->checkpoint;
    td_named_tensors *expected = td_module_state_dict(r->w.model);
    td_train_state ck;
    td_status st = expected ? td_train_state_load(path, r->w.device, r->w.name, expected, &ck) : td_last_status();
    td_named_tensors_free(expected);
    if (st != TD_OK) return train_fail("cannot resume: %s", td_last_error());
    int64_t batch = 0, loss_n = 0, seed = 0, threads = 0;
    int rc = meta_i64(ck.model, path, "batch", &batch);
    if (!rc) rc = meta_i64(ck.model, path, "loss_n", &loss_n);
    if (!rc) rc = meta_i64(ck.model, path, "seed", &seed);
    if (!rc) rc = meta_i64(ck.model, path, "threads", &threads);
    const char *loss_sum = td_named_tensors_meta(ck.model, "loss_sum"),
               *dev = td_named_tensors_meta(ck.model, "device");
    char here[32];
    td_device_str(r->w.device, here, sizeof here);
    if (!rc && (!loss_sum || !dev)) rc = train_fail("checkpoint '%s' lacks model.loss_sum or model.device", path);
    if (!rc && r->deterministic && (strcmp(dev, here) || threads != cpu_threads()))
        rc = train_fail("--deterministic: checkpoint '%s' was written on %s with %" PRId64
                        " CPU threads, this run is on %s with %d (set --device and OMP_NUM_THREADS to match)",
                        path, dev, threads, here, cpu_threads());
    if (!rc && (st = td_module_load_state_dict(r->w.model, ck.model, true)) == TD_OK)
        st = td_optimizer_load_state_dict(r->w.opt, ck.optim);
    if (!rc && st != TD_OK) rc = train_fail("cannot resume from '%s': %s", path, td_last_error());
    if (!rc) {
        td_rng_set_state(ck.rng);
        r->step = ck.step, r->epoch = ck.epoch, r->batch_in_epoch = batch;
        r->loss_sum = strtod(loss_sum, NULL), r->loss_n = loss_n;
        r->seed = (uint64_t)seed;
        printf("resumed from %s: epoch %" PRId64 ", batch %" PRId64 ", step %" PRId64 "\n", path, r->epoch + 1, batch,
               r->step);
    }
    td_train_state_clear(&ck);
    return rc;
}
