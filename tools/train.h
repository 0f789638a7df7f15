/*
** The parts of `trident train` (tools/train*.c): the run's state, the data
** (images or text), checkpoints and the training loop. Every function that
** returns int returns an exit status: 0, or 1 after printing one line
** "trident train: ..." on stderr.
*/
#ifndef TRIDENT_TOOLS_TRAIN_H
#define TRIDENT_TOOLS_TRAIN_H

#include <stdio.h>

#include "workloads.h"

#define TRAIN_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define TRAIN_GPT2_VOCAB   50257 /* GPT-2's tokenizer: the default vocabulary with --tokens */
/* The largest count an option or a checkpoint's step, epoch or batch may
** hold, so that sums and products of positions (step * batch + row, epoch + 1)
** stay far from overflow. */
#define TRAIN_COUNT_MAX ((int64_t)1 << 48)

/* The learning-rate schedule (train_schedule.c). */
typedef enum train_lr_kind {
    TRAIN_LR_DEFAULT = -1,
    TRAIN_LR_CONSTANT,
    TRAIN_LR_COSINE,
    TRAIN_LR_LINEAR,
    TRAIN_LR_STEP
} train_lr_kind;
typedef struct train_schedule {
    train_lr_kind kind; /* TRAIN_LR_DEFAULT until train_schedule_resolve: the model's */
    double base;        /* the lr after warmup */
    double min_lr;      /* cosine, linear: the lr at the run's end (-1: the default) */
    int64_t warmup;     /* steps of linear warmup from base / (warmup + 1) (-1: the default) */
    int64_t total;      /* the run's steps (epochs x steps per epoch); 0 until resolved */
    int64_t step_size;  /* step: decay every step_size steps after warmup (0: steps per epoch) */
    double gamma;       /* step: the factor */
} train_schedule;

typedef struct train_run {
    workload w;
    /* settings */
    uint64_t seed; /* init (td_manual_seed) and data order; a resumed run takes the checkpoint's */
    int64_t epochs, batch;
    int64_t steps;            /* gpt: steps per epoch; mlp/cnn: cap per epoch (<= 0: every batch) */
    int64_t checkpoint_every; /* steps; 0: only at epoch ends */
    int64_t max_steps;        /* stop after this many steps in all; 0: no limit */
    int workers;
    bool deterministic;
    bool capture; /* --capture: record the step once, replay it for every later batch */
    const char *checkpoint;
    train_schedule sched;
    const char *profile;            /* --profile FILE: the Chrome trace of a few steps (train_loop.c); NULL: off */
    int64_t profile_from, profiled; /* steps of this run before recording starts; steps recorded */
    bool profiling;
    /* mlp, cnn: Fashion-MNIST, x F32 [N, 784], y I64 [N] (kept references) */
    td_tensor *x_train, *y_train, *x_test, *y_test;
    td_dataset *ds;
    td_dataloader *dl;
    /* gpt: the file's bytes, or (--tokens) llm.c token ids with text NULL;
    ** [0, n_train) trains, [n_train, n_text) is held out */
    unsigned char *text;
    uint16_t *tokens;
    int64_t n_text, n_train;
    /* position: steps done, epochs done, batches done in the current epoch, and
    ** the sum and count of this epoch's step losses */
    int64_t step, epoch, batch_in_epoch;
    double loss_sum;
    int64_t loss_n;
    /* logs (NULL when not asked for) */
    td_metric_log *log, *log_steps;
    /* --capture: the static batch the graph reads and the loss it writes (kept),
    ** and the graph; NULL until the steps that make them */
    td_tensor *cap_x, *cap_y, *cap_loss;
    td_captured_graph *graph;
    /* data-parallel (--ddp, or WORLD_SIZE > 1; train_dist.c): this rank of
    ** world, the DDP over the model, and the rank's shard of the images (a
    ** dataset over ds whose indices train_dist_epoch sets each epoch) */
    int rank, world;
    td_ddp *ddp;
    bool zero;               /* --zero 1: the optimizer is sharded (ZeRO-1) */
    td_dtype ddp_grad_dtype; /* --ddp-grad-dtype */
    td_dataset *shard;
    int64_t *shard_idx, shard_len;
} train_run;

/* Print "trident train: <fmt>" as one line on stderr (on ranks other than 0,
** "trident train: rank N: <fmt>"); returns 1. */
int train_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* train_data.c: load Fashion-MNIST from dir (the first limit training images
** when limit > 0), or the text file at path for a gpt of the given context. */
int train_images_load(train_run *r, const char *dir, int64_t limit);
int train_text_load(train_run *r, const char *path, int64_t context);
/* The llm.c token file at path (td_llmc_tokens_load) for a gpt of the given
** context and vocabulary: every id must be < vocab; the last 10% are held out. */
int train_tokens_load(train_run *r, const char *path, int64_t context, int64_t vocab);
/* Batch of gpt step `step`: row b is the window of context + 1 bytes at a
** Philox(seed, step * batch + b) position in the training bytes; x the first
** context bytes, y the last. I64 [batch, context] on dev, scope-owned. */
td_status train_text_batch(const train_run *r, int64_t step, td_tensor **x, td_tensor **y);
/* The held-out metrics: mean cross-entropy and accuracy on the test images
** (batches of 1000), or on windows of the held-out text (at most 4 batches). */
int train_evaluate(train_run *r, double *loss, double *acc);
void train_data_free(train_run *r);

/* train_checkpoint.c: check at the start that path's directory takes a new
** file (the save's own temporary name), so an unwritable --checkpoint fails
** before the first epoch; write the run's state to r->checkpoint; restore it. */
int train_checkpoint_check(const char *path);
int train_checkpoint_save(train_run *r);
int train_resume(train_run *r);

/* train_schedule.c: parse a schedule's name (constant, cosine, linear, step);
** the lr of step k (0-based); the schedule as the checkpoint's metadata (exact:
** %.17g; else %g, for people) and back (1 with a message naming path when it is not one); fill in the
** defaults for a run of epochs x per_epoch steps (gpt: cosine, 5% warmup, min lr / 10;
** mlp, cnn: constant) unless resumed, checking them (1 with a message). */
bool train_schedule_kind_parse(const char *s, train_lr_kind *kind);
double train_schedule_lr(const train_schedule *s, int64_t k);
const char *train_schedule_str(const train_schedule *s, bool exact, char *buf, size_t n);
int train_schedule_parse(const char *str, const char *path, train_schedule *s);
int train_schedule_resolve(train_schedule *s, int64_t per_epoch, int64_t epochs, bool gpt);

/* train_loop.c: open the metric logs; run the epochs; close the logs; free
** the captured step (before the workload: it holds the step's buffers). */
int train_logs_open(train_run *r, const char *log, const char *log_steps);
int train_loop(train_run *r);
void train_logs_close(train_run *r);
void train_capture_free(train_run *r);

/* train_dist.c: join the launcher's group and bind the device (*dev); wrap
** the model in DDP; make this epoch's shard of the images (a DataLoader over
** it, in r->dl); one step whose loss is the mean over ranks; free them and
** leave the group, or, when the run failed, not (the process then exits
** without the goodbye, and the other ranks' watchdogs see it as failed). */
bool train_dist_wanted(bool ddp_flag);
/* --zero and --ddp-grad-dtype (NULL: defaults) into r, checked against --amp */
int train_dist_options(train_run *r, const char *zero, const char *grad_dtype, td_dtype amp);
/* The optimizer's state dict in the unsharded layout (under ZeRO-1 gathered:
** every rank must call it); +1, or NULL with the error set. */
td_named_tensors *train_dist_optim_state(train_run *r);
int train_dist_init(train_run *r, const char *device, td_device *dev);
int train_dist_wrap(train_run *r);
int train_dist_epoch(train_run *r, const td_dataloader_opts *o);
td_status train_dist_step(train_run *r, td_tensor *x, td_tensor *y, double *loss);
void train_dist_free(train_run *r, bool failed);

#endif /* TRIDENT_TOOLS_TRAIN_H */
