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
**   model.lr_schedule the learning-rate schedule (train_schedule.c), which a
**                    resumed run takes (older checkpoints lack it: the flags')
*/
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

static int cpu_threads(void) {
    td_device_info info;
    return td_device_get_info(TD_CPU, &info) == TD_OK ? info.compute_units : 1;
}

int train_checkpoint_save(train_run *r) {
    td_named_tensors *optim = train_dist_optim_state(r);     /* ZeRO-1: a collective */
    if (r->rank > 0) return td_named_tensors_free(optim), 0; /* data-parallel: rank 0 writes, every rank resumes */
    td_named_tensors *model = td_module_state_dict(r->w.model);
    char v[6][64], dev[32], sched[256];
    snprintf(v[0], sizeof v[0], "%" PRId64, r->batch_in_epoch);
    snprintf(v[1], sizeof v[1], "%.17g", r->loss_sum);
    snprintf(v[2], sizeof v[2], "%" PRId64, r->loss_n);
    snprintf(v[3], sizeof v[3], "%" PRIu64, r->seed);
    snprintf(v[4], sizeof v[4], "%d", cpu_threads());
    const workload_gpt_config *g = &r->w.gpt;
    snprintf(v[5], sizeof v[5],
             "vocab=%" PRId64 ",d_model=%" PRId64 ",heads=%" PRId64 ",layers=%" PRId64 ",context=%" PRId64, g->vocab,
             g->d_model, g->heads, g->layers, g->context);
    const char *meta[8][2] = {{"batch", v[0]},
                              {"loss_sum", v[1]},
                              {"loss_n", v[2]},
                              {"seed", v[3]},
                              {"threads", v[4]},
                              {"device", td_device_str(r->w.device, dev, sizeof dev)},
                              {"config", r->w.kind == WORKLOAD_GPT ? v[5] : "-"},
                              {"lr_schedule", train_schedule_str(&r->sched, true, sched, sizeof sched)}};
    td_status st = model && optim ? TD_OK : td_last_status();
    for (int i = 0; i < 8 && st == TD_OK; i++) st = td_named_tensors_set_meta(model, meta[i][0], meta[i][1]);
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

int train_checkpoint_check(const char *path) {
    char *probe = malloc(strlen(path) + 16);
    if (!probe) return train_fail("out of host memory");
    sprintf(probe, "%s.tmp.XXXXXX", path); /* the name td_safetensors_save writes first */
    int fd = mkstemp(probe);
    int rc = fd < 0 ? train_fail("--checkpoint %s cannot be written: %s", TD_QUOTE(path), strerror(errno)) : 0;
    if (fd >= 0) close(fd), unlink(probe);
    free(probe);
    return rc;
}

/* Metadata model.<key> of the checkpoint (path quoted) as a decimal integer
** in [0, max] into *count, or as a finite number >= 0 into *real when count is
** NULL. 1 (with a message) when it is absent or not so. */
static int meta_number(const td_named_tensors *m, const char *path, const char *key, int64_t max, int64_t *count,
                       double *real) {
    const char *s = td_named_tensors_meta(m, key);
    if (!s) return train_fail("checkpoint %s lacks metadata model.%s (not written by trident train?)", path, key);
    char *end;
    errno = 0;
    long long n = count ? strtoll(s, &end, 10) : 0;
    double x = count ? 0 : strtod(s, &end);
    if (s[0] < '0' || s[0] > '9' || errno || *end || (count ? n > max : !isfinite(x))) {
        char range[64] = "a finite number >= 0";
        if (count) snprintf(range, sizeof range, "an integer in [0, %" PRId64 "]", max);
        return train_fail("checkpoint %s: metadata model.%s = %s is not %s", path, key, TD_QUOTE(s), range);
    }
    if (count) *count = n;
    if (real) *real = x;
    return 0;
}

/* The position must keep the loop's arithmetic in range: epoch + 1, step + 1,
** and gpt's window counter step * batch + row. */
static int check_position(const td_train_state *ck, const char *path, int64_t batch) {
    int64_t counter;
    if (ck->step < 0 || ck->step > TRAIN_COUNT_MAX || ck->epoch < 0 || ck->epoch > TRAIN_COUNT_MAX)
        return train_fail("checkpoint %s: step %" PRId64 " or epoch %" PRId64 " is out of range [0, 2^48]", path,
                          ck->step, ck->epoch);
    if (__builtin_mul_overflow(ck->step + 1, batch, &counter))
        return train_fail("checkpoint %s: step %" PRId64 " with --batch %" PRId64 " overflows the data position", path,
                          ck->step, batch);
    return 0;
}

int train_resume(train_run *r) {
    const char *path = r->checkpoint;
    td_named_tensors *expected = td_module_state_dict(r->w.model);
    td_train_state ck;
    td_status st = expected ? td_train_state_load(path, r->w.device, r->w.name, expected, &ck) : td_last_status();
    td_named_tensors_free(expected);
    if (st == TD_ERR_DTYPE) /* the model's tensors in another dtype */
        return train_fail("cannot resume: %s (resume with the --param-dtype the run was started with)",
                          td_last_error());
    if (st != TD_OK) return train_fail("cannot resume: %s", td_last_error());
    /* every number is checked here, before any is used */
    const int64_t count = (int64_t)1 << 53;
    int64_t batch = 0, loss_n = 0, seed = 0, threads = 0;
    double loss_sum = 0;
    const char *qpath = TD_QUOTE(path), *dev = td_named_tensors_meta(ck.model, "device"),
               *sched = td_named_tensors_meta(ck.model, "lr_schedule");
    int rc = check_position(&ck, qpath, r->batch);
    if (!rc) rc = meta_number(ck.model, qpath, "batch", count, &batch, NULL);
    if (!rc) rc = meta_number(ck.model, qpath, "loss_n", count, &loss_n, NULL);
    if (!rc) rc = meta_number(ck.model, qpath, "seed", INT64_MAX, &seed, NULL);
    if (!rc) rc = meta_number(ck.model, qpath, "threads", 1 << 20, &threads, NULL);
    if (!rc) rc = meta_number(ck.model, qpath, "loss_sum", 0, NULL, &loss_sum);
    train_schedule resumed = r->sched;
    if (!rc && sched) rc = train_schedule_parse(sched, qpath, &resumed);
    char here[32];
    td_device_str(r->w.device, here, sizeof here);
    if (!rc && !dev) rc = train_fail("checkpoint %s lacks metadata model.device", qpath);
    if (!rc && r->deterministic && (strcmp(dev, here) || threads != cpu_threads()))
        rc = train_fail("--deterministic: checkpoint %s was written on %s with %" PRId64
                        " CPU threads, this run is on %s with %d (set --device and OMP_NUM_THREADS to match)",
                        qpath, TD_QUOTE(dev), threads, here, cpu_threads());
    if (!rc && (st = td_module_load_state_dict(r->w.model, ck.model, true)) == TD_OK)
        st = td_optimizer_load_state_dict(r->w.opt, ck.optim);
    if (!rc && st != TD_OK) rc = train_fail("cannot resume from %s: %s", qpath, td_last_error());
    if (!rc) {
        td_rng_set_state(ck.rng);
        r->step = ck.step, r->epoch = ck.epoch, r->batch_in_epoch = batch;
        r->loss_sum = loss_sum, r->loss_n = loss_n;
        r->seed = (uint64_t)seed;
        r->sched = resumed;
        printf("resumed from %s: epoch %" PRId64 ", batch %" PRId64 ", step %" PRId64 "\n", path, r->epoch + 1,
               r->batch_in_epoch, r->step);
    }
    td_train_state_clear(&ck);
    return rc;
}
