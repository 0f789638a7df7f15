/*
** trident train: train W1 (mlp), W2 (cnn, the default) or W3 (gpt) of
** WORKLOADS.md, with a progress bar, per-epoch evaluation, metric logs and
** checkpoints that resume exactly.
**
** Resuming: a checkpoint holds the model, the optimizer state, the step, the
** epoch and the batch within it, the default generator's state and the data
** seed. The batches of an epoch depend only on (seed, epoch) (the DataLoader's
** shuffle) or on (seed, step) (gpt's random windows), so a resumed run sees
** exactly the batches the interrupted one would have, and on the CPU (same
** thread count) its losses match bit for bit.
*/
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* ---- command line -------------------------------------------------------- */

typedef struct train_opts {
    workload_kind kind;
    const char *device, *optimizer, *data, *text, *checkpoint, *log, *log_steps;
    int64_t epochs, batch, steps, checkpoint_every, max_steps, limit;
    int workers;
    double lr;
    uint64_t seed;
    bool resume, deterministic;
    workload_gpt_config gpt;
} train_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: trident train [options]\n\n"
            "Train a model of WORKLOADS.md (default: the W2 CNN on Fashion-MNIST, on the best device).\n\n"
            "  --model mlp|cnn|gpt      W1 MLP, W2 CNN (default) or W3 GPT-mini (byte-level, needs --text)\n"
            "  --device DEV             auto (default), cpu, cuda[:i], vulkan[:i]\n"
            "  --epochs N               epochs (default 5)\n"
            "  --batch N                batch size (default 128; gpt 64)\n"
            "  --lr X                   learning rate (default 1e-3; gpt 3e-4)\n"
            "  --optimizer NAME         adam, adamw, sgd, rmsprop (default adam; gpt adamw)\n"
            "  --seed N                 seed of initialization and data order (default 0)\n"
            "  --data DIR               Fashion-MNIST *-ubyte.gz files (default %s)\n"
            "  --text FILE              gpt: train on FILE's bytes; the last 10%% are held out\n"
            "  --checkpoint PATH        checkpoint file (default ./trident-<model>.safetensors)\n"
            "  --resume                 continue from --checkpoint where it stopped\n"
            "  --checkpoint-every N     also checkpoint every N steps (one is written at each epoch's end)\n"
            "  --steps N                gpt: steps per epoch (default 200); mlp/cnn: at most N steps per epoch\n"
            "  --max-steps N            stop after N steps in all, with a checkpoint\n"
            "  --limit N                mlp/cnn: train on the first N training images only\n"
            "  --workers N              data loader threads (default 0: load in the training thread)\n"
            "  --log FILE               per-epoch metrics, CSV or JSONL (by extension .jsonl)\n"
            "  --log-steps FILE         per-step losses, CSV or JSONL\n"
            "  --deterministic          refuse to resume on another device or CPU thread count\n"
            "  --layers N, --d-model N, --heads N, --context N   gpt size (default 6, 384, 6, 256)\n",
            TRAIN_DEFAULT_DATA);
}

int train_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("trident train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static bool parse_i64(const char *s, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo) return false;
    *out = v;
    return true;
}

/* Parse argv into *o; on a bad flag or value prints one line and returns false. */
static bool parse_args(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.kind = WORKLOAD_CNN, .device = "auto", .data = TRAIN_DEFAULT_DATA, .epochs = 5, .steps = -1,
                      .gpt = workload_gpt_config_default()};
    int64_t batch = -1;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], *val = NULL, *eq = strchr(arg, '=');
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(flag, "--resume") || !strcmp(flag, "--deterministic")) {
            if (eq) return train_fail("%s takes no value", flag), false;
            *(!strcmp(flag, "--resume") ? &o->resume : &o->deterministic) = true;
            continue;
        }
        static const char *const with_value[] = {
            "--model",  "--device",           "--epochs",    "--batch",     "--lr",        "--optimizer",
            "--seed",   "--data",             "--text",      "--checkpoint", "--steps",    "--max-steps",
            "--limit",  "--checkpoint-every", "--workers",   "--log",       "--log-steps", "--layers",
            "--d-model", "--heads",           "--context"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= !strcmp(flag, with_value[k]);
        if (!known) return train_fail("unknown option '%s' (see trident train --help)", arg), false;
        val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) return train_fail("%s needs a value", flag), false;
        int64_t n = 0;
        bool ok = true;
        if (!strcmp(flag, "--model")) {
            ok = workload_kind_parse(val, &o->kind) == TD_OK;
            if (!ok) return train_fail("--model: '%s' is not mlp, cnn or gpt", val), false;
        } else if (!strcmp(flag, "--device")) o->device = val;
        else if (!strcmp(flag, "--optimizer")) {
            ok = !strcmp(val, "adam") || !strcmp(val, "adamw") || !strcmp(val, "sgd") || !strcmp(val, "rmsprop");
            if (!ok) return train_fail("--optimizer: '%s' is not adam, adamw, sgd or rmsprop", val), false;
            o->optimizer = val;
        } else if (!strcmp(flag, "--data")) o->data = val;
        else if (!strcmp(flag, "--text")) o->text = val;
        else if (!strcmp(flag, "--checkpoint")) o->checkpoint = val;
        else if (!strcmp(flag, "--log")) o->log = val;
        else if (!strcmp(flag, "--log-steps")) o->log_steps = val;
        else if (!strcmp(flag, "--lr")) {
            char *end;
            o->lr = strtod(val, &end);
            if (end == val || *end || !(o->lr > 0) || !isfinite(o->lr))
                return train_fail("--lr expects a positive number, got '%s'", val), false;
        } else if (!strcmp(flag, "--seed")) {
            ok = parse_i64(val, 0, &n);
            o->seed = (uint64_t)n;
        } else if (!strcmp(flag, "--epochs")) ok = parse_i64(val, 1, &o->epochs);
        else if (!strcmp(flag, "--batch")) ok = parse_i64(val, 1, &batch);
        else if (!strcmp(flag, "--steps")) ok = parse_i64(val, 1, &o->steps);
        else if (!strcmp(flag, "--max-steps")) ok = parse_i64(val, 1, &o->max_steps);
        else if (!strcmp(flag, "--limit")) ok = parse_i64(val, 1, &o->limit);
        else if (!strcmp(flag, "--checkpoint-every")) ok = parse_i64(val, 1, &o->checkpoint_every);
        else if (!strcmp(flag, "--workers")) {
            ok = parse_i64(val, 0, &n) && n <= 64;
            o->workers = (int)n;
        }
        else if (!strcmp(flag, "--layers")) ok = parse_i64(val, 1, &o->gpt.layers);
        else if (!strcmp(flag, "--d-model")) ok = parse_i64(val, 1, &o->gpt.d_model);
        else if (!strcmp(flag, "--heads")) ok = parse_i64(val, 1, &o->gpt.heads);
        else if (!strcmp(flag, "--context")) ok = parse_i64(val, 1, &o->gpt.context);
        if (!ok)
            return train_fail("%s expects %s, got '%s'", flag,
                        !strcmp(flag, "--seed") ? "a non-negative integer"
                        : !strcmp(flag, "--workers") ? "an integer in [0, 64]"
                                                     : "a positive integer",
                        val),
                   false;
    }
    o->batch = batch > 0 ? batch : o->kind == WORKLOAD_GPT ? 64 : 128;
    if (o->steps < 0 && o->kind == WORKLOAD_GPT) o->steps = 200;
    if (o->kind == WORKLOAD_GPT && !o->text) return train_fail("--model gpt needs --text FILE (any text file)"), false;
    if (o->kind != WORKLOAD_GPT && o->text) return train_fail("--text is for --model gpt"), false;
    if (o->gpt.d_model % o->gpt.heads)
        return train_fail("--d-model %" PRId64 " is not a multiple of --heads %" PRId64, o->gpt.d_model, o->gpt.heads),
               false;
    return true;
}

/* ---- the run --------------------------------------------------------------- */

int cmd_train(int argc, char **argv) {
    train_opts o;
    if (!parse_args(argc, argv, &o)) return 1;
    td_device dev;
    if (td_device_parse(o.device, &dev) != TD_OK) return train_fail("--device %s: %s", o.device, td_last_error());
    char ckpt_default[64];
    if (!o.checkpoint) {
        snprintf(ckpt_default, sizeof ckpt_default, "trident-%s.safetensors",
                 o.kind == WORKLOAD_MLP ? "mlp" : o.kind == WORKLOAD_CNN ? "cnn" : "gpt");
        o.checkpoint = ckpt_default;
    }
    train_run r = {.seed = o.seed,
                   .epochs = o.epochs,
                   .batch = o.batch,
                   .steps = o.steps,
                   .checkpoint_every = o.checkpoint_every,
                   .max_steps = o.max_steps,
                   .workers = o.workers,
                   .deterministic = o.deterministic,
                   .checkpoint = o.checkpoint};
    /* the data first: a missing dataset should not wait for a model */
    int rc = o.kind == WORKLOAD_GPT ? train_text_load(&r, o.text, o.gpt.context)
                                    : train_images_load(&r, o.data, o.limit);
    if (rc) return rc;
    td_manual_seed(o.seed);
    if (workload_init(&r.w, o.kind, &o.gpt, dev, o.optimizer, o.lr) != TD_OK) {
        train_data_free(&r);
        return train_fail("%s", td_last_error());
    }
    if (o.resume) rc = train_resume(&r);
    if (!rc) rc = train_logs_open(&r, o.log, o.log_steps);
    if (!rc) rc = train_loop(&r);
    train_logs_close(&r);
    workload_free(&r.w);
    train_data_free(&r);
    return rc;
}
