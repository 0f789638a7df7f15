/*
** trident train's loop: epochs of steps with a progress display, evaluation
** and a checkpoint at each epoch's end, checkpoints every N steps, metric logs.
**
** --capture: the run's first step is eager (it makes the optimizer state) on a
** static batch, the tensors cap_x and cap_y on the device; the second step is
** recorded once (td_capture_begin/end) on those tensors, and it and every later
** step copy their batch into them (td_copy_) and replay the graph. The loss is
** a kept tensor the graph writes, read after each replay. Batches come from the
** data loader on the CPU, so no other thread touches the device during the
** capture; evaluation and checkpoints run eagerly between replays.
*/
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

#define DATA_SEED_MIX 0x9E3779B97F4A7C15ull /* the shuffle's stream, apart from the init stream */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- metric logs -------------------------------------------------------- */

static td_log_format log_format(const char *path) {
    size_t n = strlen(path);
    return n >= 6 && !strcmp(path + n - 6, ".jsonl") ? TD_LOG_JSONL : TD_LOG_CSV;
}

int train_logs_open(train_run *r, const char *log, const char *log_steps) {
    if (r->rank > 0) return 0; /* data-parallel: rank 0 logs */
    if (log && td_metric_log_open(log, log_format(log), &r->log) != TD_OK)
        return train_fail("--log: %s", td_last_error());
    if (log_steps && td_metric_log_open(log_steps, log_format(log_steps), &r->log_steps) != TD_OK)
        return train_fail("--log-steps: %s", td_last_error());
    return 0;
}

void train_logs_close(train_run *r) {
    td_metric_log_close(r->log);
    td_metric_log_close(r->log_steps);
    r->log = r->log_steps = NULL;
}

static int log_line(td_metric_log *log, int n, const char *const *keys, const double *values) {
    if (log && td_metric_log_write(log, n, keys, values) != TD_OK) return train_fail("log: %s", td_last_error());
    return 0;
}

/* ---- progress: a bar on a terminal, a line every ~10% otherwise ---------- */

typedef struct progress {
    bool tty;
    int64_t first, total; /* this epoch's first batch (when resumed) and batches */
    double t0, last_draw;
    int64_t next_line; /* batch at which the next plain line prints */
} progress;

static void progress_start(progress *p, int64_t first, int64_t total) {
    *p = (progress){.tty = isatty(2), .first = first, .total = total, .t0 = now_s()};
    p->next_line = first + (total + 9) / 10;
}

static void progress_update(progress *p, const train_run *r, int64_t done) {
    if (r->rank > 0) return; /* data-parallel: rank 0 shows progress */
    double t = now_s(), rate = (double)(done - p->first) / (t - p->t0 + 1e-9);
    double eta = (double)(p->total - done) / (rate > 0 ? rate : 1e-9), loss = r->loss_sum / (double)r->loss_n;
    if (p->tty) {
        if (t - p->last_draw < 0.1 && done < p->total) return;
        p->last_draw = t;
        char bar[25];
        int fill = (int)(24 * done / p->total);
        for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
        bar[24] = 0;
        fprintf(stderr,
                "\repoch %" PRId64 "/%" PRId64 " [%s] %" PRId64 "/%" PRId64 "  %.1f steps/s  loss %.4f  ETA %d:%02d ",
                r->epoch + 1, r->epochs, bar, done, p->total, rate, loss, (int)eta / 60, (int)eta % 60);
        if (done == p->total) fputs("\r\033[K", stderr);
    } else if (done >= p->next_line && done < p->total) {
        p->next_line += (p->total + 9) / 10;
        fprintf(stderr,
                "epoch %" PRId64 "/%" PRId64 "  step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f steps/s  ETA %.0f s\n",
                r->epoch + 1, r->epochs, done, p->total, loss, rate, eta);
    }
    fflush(stderr);
}

/* ---- the loop -------------------------------------------------------------- */

static int64_t steps_per_epoch(const train_run *r) {
    if (!r->dl) return r->steps;
    int64_t n = td_dataloader_num_batches(r->dl);
    return r->steps > 0 && r->steps < n ? r->steps : n;
}

/* "[128,784]" */
static const char *shape_str(const td_tensor *t, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < td_ndim(t) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, i ? "," : "", td_size(t, i));
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

static bool same_shape(const td_tensor *a, const td_tensor *b) {
    if (td_ndim(a) != td_ndim(b) || td_tensor_dtype(a) != td_tensor_dtype(b)) return false;
    for (int i = 0; i < td_ndim(a); i++)
        if (td_size(a, i) != td_size(b, i)) return false;
    return true;
}

/* --capture: copy the batch (x, y) into the static tensors, making them at the
** first step; checks that the batch has the shape the graph was recorded for. */
static td_status capture_load(train_run *r, td_tensor *x, td_tensor *y) {
    if (!r->cap_x) {
        r->cap_x = td_keep(td_empty(td_ndim(x), td_shape(x), td_tensor_dtype(x), r->w.device));
        r->cap_y = td_keep(td_empty(td_ndim(y), td_shape(y), td_tensor_dtype(y), r->w.device));
        if (!r->cap_x || !r->cap_y) return td_last_status();
    }
    char have[64], want[64];
    if (!same_shape(x, r->cap_x))
        return td_error_set(TD_ERR_SHAPE, "--capture: this batch has shape %s, the captured step reads %s",
                            shape_str(x, have, sizeof have), shape_str(r->cap_x, want, sizeof want));
    if (!same_shape(y, r->cap_y))
        return td_error_set(TD_ERR_SHAPE, "--capture: these targets have shape %s, the captured step reads %s",
                            shape_str(y, have, sizeof have), shape_str(r->cap_y, want, sizeof want));
    td_status st = td_copy_(r->cap_x, x);
    return st == TD_OK ? td_copy_(r->cap_y, y) : st;
}

/* --capture: record the step on the static batch once. */
static td_status capture_record(train_run *r) {
    td_status st = td_capture_begin(r->w.device);
    if (st != TD_OK) return st;
    td_scope_begin();
    r->cap_loss = td_keep(workload_loss_step(&r->w, r->cap_x, r->cap_y));
    td_scope_end();
    st = r->cap_loss ? TD_OK : td_last_status();
    td_status end = td_capture_end(r->w.device, &r->graph); /* ends the capture even after a failed step */
    return st != TD_OK ? st : end;
}

/* --capture: the step on batch (x, y): eager the first time, recorded the
** second, replayed from then on. */
static td_status step_captured(train_run *r, td_tensor *x, td_tensor *y, double *loss) {
    bool first = !r->cap_x;
    td_status st = capture_load(r, x, y);
    if (st == TD_OK && first) return workload_train_step(&r->w, r->cap_x, r->cap_y, loss);
    if (st == TD_OK && !r->graph) st = capture_record(r);
    if (st == TD_OK) st = td_graph_replay(r->graph);
    if (st == TD_OK) *loss = td_item(r->cap_loss);
    return st;
}

void train_capture_free(train_run *r) {
    td_graph_free(r->graph);
    td_release(r->cap_loss);
    td_release(r->cap_x);
    td_release(r->cap_y);
    r->graph = NULL;
    r->cap_loss = r->cap_x = r->cap_y = NULL;
}

/* One step on the next batch at the schedule's lr (*lr); *loss gets its loss. */
static td_status step_once(train_run *r, double *loss, double *lr) {
    *lr = train_schedule_lr(&r->sched, r->step);
    td_optimizer_set_lr(r->w.opt, *lr);
    td_scope_begin();
    td_tensor *f[TD_DATA_MAX_FIELDS] = {0};
    td_status st = r->dl ? td_dataloader_next(r->dl, f) : train_text_batch(r, r->step, &f[0], &f[1]);
    if (st == TD_OK && !f[0]) st = td_error_set(TD_ERR_STATE, "the data loader ran out of batches");
    if (st == TD_OK)
        st = r->capture ? step_captured(r, f[0], f[1], loss)
             : r->ddp   ? train_dist_step(r, f[0], f[1], loss)
                        : workload_train_step(&r->w, f[0], f[1], loss);
    td_scope_end();
    return st;
}

/* --profile: the run's steps profile_from + 1 .. + TRAIN_PROFILE_STEPS are
** recorded; the trace and summary come after the last (or when the run ends). */
enum { TRAIN_PROFILE_WARMUP = 2, TRAIN_PROFILE_STEPS = 5 };

static int profile_finish(train_run *r, bool tty) {
    if (!r->profiling) return 0;
    const char *path = r->profile;
    r->profiling = false, r->profile = NULL; /* once */
    if (td_profile_end(path) != TD_OK) return train_fail("--profile: %s", td_last_error());
    if (tty) fputs("\r\033[K", stderr);
    td_profile_print(stderr, 15);
    fprintf(stderr, "profile: %" PRId64 " step%s traced in %s\n", r->profiled, r->profiled == 1 ? "" : "s", path);
    return 0;
}

/* before a step: start recording at the right one; after: mark the step, and
** end after the last recorded one. */
static int profile_around(train_run *r, int64_t run_steps, bool before, bool tty) {
    if (!r->profile) return 0;
    if (before) {
        if (!r->profiling && run_steps == r->profile_from) {
            if (td_profile_begin() != TD_OK) return train_fail("--profile: %s", td_last_error());
            r->profiling = true;
        }
        return 0;
    }
    if (!r->profiling) return 0;
    td_profile_step();
    return ++r->profiled == TRAIN_PROFILE_STEPS ? profile_finish(r, tty) : 0;
}

/* The end of an epoch: evaluate, report, log and checkpoint. */
static int finish_epoch(train_run *r, double seconds, int64_t steps_run) {
    double test_loss = NAN, acc = NAN, train_loss = r->loss_n ? r->loss_sum / (double)r->loss_n : NAN;
    int rc = r->rank > 0 ? 0 : train_evaluate(r, &test_loss, &acc); /* data-parallel: rank 0 evaluates */
    if (rc) return rc;
    const char *what = r->text || r->tokens ? "held-out" : "test";
    printf("epoch %" PRId64 "/%" PRId64 "  train loss %.4f  %s loss %.4f  %s acc %.4f  time %.1f s (%.1f steps/s)\n",
           r->epoch + 1, r->epochs, train_loss, what, test_loss, what, acc, seconds,
           (double)steps_run / (seconds > 0 ? seconds : 1e-9));
    fflush(stdout);
    static const char *const keys[6] = {"epoch", "step", "train_loss", "test_loss", "test_acc", "epoch_s"};
    double values[6] = {(double)(r->epoch + 1), (double)r->step, train_loss, test_loss, acc, seconds};
    if ((rc = log_line(r->log, 6, keys, values))) return rc;
    r->epoch++;
    r->batch_in_epoch = 0;
    r->loss_sum = 0, r->loss_n = 0;
    return train_checkpoint_save(r);
}

static td_dataloader_opts loader_opts(const train_run *r) {
    return (td_dataloader_opts){.batch_size = r->batch,
                                .shuffle = true,
                                .seed = r->seed ^ DATA_SEED_MIX,
                                .drop_last = true,
                                .num_workers = r->workers,
                                .device = r->capture ? TD_CPU : r->w.device}; /* --capture copies them in itself */
}

static int make_loader(train_run *r) {
    td_dataloader_opts o = loader_opts(r);
    if (r->world > 1) return train_dist_epoch(r, &o); /* the rank's shard of epoch r->epoch */
    if (td_dataloader_new(r->ds, &o, &r->dl) != TD_OK) return train_fail("%s", td_last_error());
    if (td_dataloader_num_batches(r->dl) < 1)
        return train_fail("%" PRId64 " training images make no batch of %" PRId64, td_dataset_len(r->ds), r->batch);
    return 0;
}

int train_loop(train_run *r) {
    int rc = r->ds ? make_loader(r) : 0;
    if (rc) return rc;
    int64_t per_epoch = steps_per_epoch(r);
    if ((rc = train_schedule_resolve(&r->sched, per_epoch, r->epochs, r->w.kind == WORKLOAD_GPT))) return rc;
    char dev[32], sched[256];
    int64_t n_params = 0;
    td_named_tensors *params = td_module_named_parameters(r->w.model);
    for (int64_t i = 0; i < td_named_tensors_len(params); i++) n_params += td_numel(td_named_tensors_at(params, i));
    td_named_tensors_free(params);
    printf("training %s on %s: %" PRId64 " parameter%s, %s lr %g, batch %" PRId64 ", %" PRId64
           " step%s per epoch, %" PRId64 " epoch%s\n",
           r->w.name, td_device_str(r->w.device, dev, sizeof dev), n_params, n_params == 1 ? "" : "s",
           td_optimizer_name(r->w.opt), td_optimizer_get_lr(r->w.opt, 0), r->batch, per_epoch,
           per_epoch == 1 ? "" : "s", r->epochs, r->epochs == 1 ? "" : "s");
    printf("lr schedule: %s\n", train_schedule_str(&r->sched, false, sched, sizeof sched));
    if (r->world > 1)
        printf("data-parallel: %d processes (%s), batch %" PRId64 " per process, global batch %" PRId64 "\n", r->world,
               td_dist_get_backend() == TD_DIST_NCCL  ? "nccl"
               : td_dist_get_backend() == TD_DIST_TCP ? "tcp"
                                                      : "mpi",
               r->batch, r->batch * r->world);
    fflush(stdout);
    int64_t run_steps = 0,
            left = r->max_steps ? r->max_steps - r->step : (r->epochs - r->epoch) * per_epoch - r->batch_in_epoch;
    r->profile_from = left > TRAIN_PROFILE_WARMUP ? TRAIN_PROFILE_WARMUP : 0;
    while (r->epoch < r->epochs) {
        td_dataloader_opts lo = loader_opts(r);
        if (r->dl && r->world > 1 && (rc = train_dist_epoch(r, &lo))) return rc;
        if (r->dl && td_dataloader_start_epoch(r->dl, r->epoch, r->batch_in_epoch) != TD_OK)
            return train_fail("%s", td_last_error());
        progress pr;
        progress_start(&pr, r->batch_in_epoch, per_epoch);
        int64_t first = r->batch_in_epoch;
        while (r->batch_in_epoch < per_epoch) {
            double loss, lr;
            if ((rc = profile_around(r, run_steps, true, pr.tty))) return rc;
            if (step_once(r, &loss, &lr) != TD_OK)
                return train_fail("step %" PRId64 ": %s", r->step + 1, td_last_error());
            if ((rc = profile_around(r, ++run_steps, false, pr.tty))) return rc;
            r->step++, r->batch_in_epoch++;
            r->loss_sum += loss, r->loss_n++;
            static const char *const keys[4] = {"epoch", "step", "loss", "lr"};
            double values[4] = {(double)(r->epoch + 1), (double)r->step, loss, lr};
            if ((rc = log_line(r->log_steps, 4, keys, values))) return rc;
            progress_update(&pr, r, r->batch_in_epoch);
            bool stop = r->max_steps && r->step >= r->max_steps;
            if (stop || (r->checkpoint_every && r->step % r->checkpoint_every == 0)) {
                if ((rc = train_checkpoint_save(r))) return rc;
            }
            if (stop) {
                if ((rc = profile_finish(r, pr.tty))) return rc;
                if (pr.tty) fputs("\r\033[K", stderr);
                printf("stopped after step %" PRId64 " (--max-steps); checkpoint %s (continue with --resume)\n",
                       r->step, r->checkpoint);
                return 0;
            }
        }
        if ((rc = finish_epoch(r, now_s() - pr.t0, r->batch_in_epoch - first))) return rc;
    }
    if ((rc = profile_finish(r, false))) return rc;
    printf("checkpoint: %s\n", r->checkpoint);
    return 0;
}
