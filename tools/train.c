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
**
** --capture records the training step once and replays it (train_loop.c);
** it needs a backend that captures (CUDA, Vulkan) and is refused on the CPU.
*/
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amp_auto.h"
#include "train.h"

/* ---- command line -------------------------------------------------------- */

typedef struct train_opts {
    workload_kind kind;
    const char *device, *optimizer, *data, *text, *checkpoint, *save_dir, *log, *log_steps, *profile;
    const char *tokens, *init, *export_hf; /* --tokens FILE (llm.c ids), --init FILE (weights), --export-hf FILE */
    bool heads_given;                      /* --heads was given (else an HF GPT-2's heads are d_model / 64) */
    int64_t epochs, batch, steps, checkpoint_every, max_steps, limit;
    int workers;
    double lr;
    train_schedule sched;           /* the lr schedule's flags (train_schedule_resolve fills the defaults) */
    double grad_clip, weight_decay; /* 0: no clipping; < 0: the optimizer's default decay */
    uint64_t seed;
    bool resume, deterministic, capture, ddp;
    workload_gpt_config gpt;
    td_dtype amp;      /* TD_F32: off */
    bool amp_auto;     /* --amp auto: amp from the device (amp_auto_pick) once it is known */
    td_dtype params;   /* the parameters' dtype (TD_F32; half ones have float32 master copies) */
    bool preset_batch; /* --preset gpt2-small: batch 16 unless --batch */
    /* --zero, --ddp-grad-dtype (train_dist_options) */
    const char *zero, *ddp_grad_dtype;
} train_opts;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: trident train [options]\n\n"
        "Train a model of WORKLOADS.md (default: the W2 CNN on Fashion-MNIST, on the best device).\n\n"
        "  --model mlp|cnn|gpt|lstm W1 MLP, W2 CNN (default), W3 GPT-mini or W6 LSTM LM (byte-level, need --text)\n"
        "  --device DEV             auto (default), cpu, cuda[:i], vulkan[:i]\n"
        "  --epochs N               epochs (default 5)\n"
        "  --batch N                batch size (default 128; gpt 64; lstm 32)\n"
        "  --lr X                   learning rate (default 1e-3; gpt 3e-4)\n"
        "  --optimizer NAME         adam, adamw, sgd, rmsprop (default adam; gpt adamw)\n"
        "  --lr-schedule NAME       constant, cosine, linear or step, after the warmup (default constant; gpt\n"
        "                           cosine, as GPT-2 recipes; constant with --capture, which replays one lr).\n"
        "                           cosine and linear decay to --min-lr at the run's last step (--epochs x\n"
        "                           steps per epoch; --max-steps only stops); torch's SequentialLR of\n"
        "                           LinearLR(1/(N+1), 1, N) then CosineAnnealingLR / LinearLR / StepLR\n"
        "  --warmup-steps N         linear warmup from lr/(N+1) to lr over N steps (default 0; gpt with a\n"
        "                           decaying schedule: 5%% of the run's steps)\n"
        "  --min-lr X               the lr cosine and linear end at (default 0; gpt: lr/10)\n"
        "  --lr-step-size N         step: multiply the lr by --lr-gamma every N steps (default: an epoch)\n"
        "  --lr-gamma X             step: the factor (default 0.1)\n"
        "  --grad-clip X            clip the gradients' total 2-norm to X before each update (default: off)\n"
        "  --weight-decay X         the optimizer's weight decay (default 0; adamw 0.01)\n"
        "                           (a resumed run takes the checkpoint's schedule)\n"
        "  --seed N                 seed of initialization and data order (default 0)\n"
        "  --data DIR               Fashion-MNIST *-ubyte.gz files (default %s)\n"
        "  --text FILE              gpt, lstm: train on FILE's bytes; the last 10%% are held out\n"
        "  --tokens FILE            gpt: train on an llm.c token file (.bin: uint16 GPT-2 token ids after a\n"
        "                           256 x int32 header); vocab 50257 unless --vocab; the last 10%% are held out\n"
        "  --init FILE              start from the weights in FILE (.safetensors, or torch.save's .pt, .pth,\n"
        "                           pytorch_model.bin) by torch's key names; for gpt also Hugging Face's\n"
        "                           GPT-2 layout, whose shapes then set the size (heads: --heads, else\n"
        "                           d_model / 64)\n"
        "  --export-hf FILE         gpt from --init's HF GPT-2: at the end, write the model in HF's layout\n"
        "                           (safetensors, transformer.h.N.attn.c_attn.weight, ...)\n"
        "  --checkpoint PATH        keep a checkpoint in PATH, written at each epoch's end (default: none is\n"
        "                           written; the final line says where one went)\n"
        "  --save-dir DIR           keep it as DIR/trident-<model>.safetensors (DIR made if missing)\n"
        "  --resume                 continue from --checkpoint (or --save-dir's file) where it stopped\n"
        "  --checkpoint-every N     also checkpoint every N steps (needs --checkpoint or --save-dir)\n"
        "  --steps N                gpt, lstm: steps per epoch (default 200); mlp/cnn: at most N steps per epoch\n"
        "  --max-steps N            stop after N steps in all (with a checkpoint where one is kept)\n"
        "  --limit N                mlp/cnn: train on the first N training images only\n"
        "  --workers N              data loader threads (default 0: load in the training thread)\n"
        "  --log FILE               per-epoch metrics, CSV or JSONL (by extension .jsonl)\n"
        "  --log-steps FILE         per-step losses, CSV or JSONL\n"
        "  --deterministic          refuse to resume on another device or CPU thread count\n"
        "  --capture                record the training step once (CUDA graph, Vulkan command buffer) and\n"
        "                           replay it for every later batch; not on the CPU\n"
        "  --ddp                    data-parallel over the launcher's processes (implied when WORLD_SIZE > 1:\n"
        "                           trident launch, torchrun, mpirun); --batch is per process\n"
        "  --zero 0|1               1: ZeRO-1, each process keeps 1/N of the optimizer state (default 0)\n"
        "  --ddp-grad-dtype fp32|bf16  the dtype DDP all-reduces float32 gradients in (default fp32)\n"
        "  --profile FILE           record steps 3-7 (after 2 warm-up steps) with the profiler: a Chrome trace\n"
        "                           in FILE (chrome://tracing, Perfetto) and a summary on stderr\n"
        "  --amp bf16|fp16|auto     mixed precision: forward and loss under autocast; fp16 scales the loss\n"
        "                           (GradScaler); not with --capture for fp16. auto: bf16 where the device\n"
        "                           has a fast bf16 path (CUDA sm_80+, Vulkan cooperative matrices), else fp16\n"
        "                           where fast (CUDA sm_70), else fp32; says which and why\n"
        "  --param-dtype bf16       keep the parameters (and so the gradients) in bf16, as llm.c does; the\n"
        "                           optimizer updates float32 master copies; implies --amp bf16\n"
        "  --preset NAME            gpt size: gpt-mini (W3, default) or gpt2-small (W5: 768 wide, 12 layers,\n"
        "                           12 heads, context 1024; batch 16 unless --batch); later size options change it\n"
        "  --layers N, --d-model N, --heads N, --context N   gpt size (default 6, 384, 6, 256)\n"
        "                           (lstm: W6's hidden 512, 2 layers; --context is its sequence length)\n"
        "  --vocab N                gpt vocabulary (default 256 bytes; 50257 with --tokens)\n",
        TRAIN_DEFAULT_DATA);
}

int train_fail(const char *fmt, ...) {
    char msg[1024], line[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The whole line in one write: stderr is unbuffered, and the ranks of a
     * distributed run share it, so piecewise writes would interleave. */
    int n = snprintf(line, sizeof line, "trident train: ");
    if (td_dist_rank() > 0) n += snprintf(line + n, sizeof line - (size_t)n, "rank %d: ", td_dist_rank());
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) /* one line, printable ASCII */
        if (*c >= 0x20 && *c < 0x7f)
            line[n++] = (char)*c;
        else
            n += snprintf(line + n, sizeof line - (size_t)n, "\\x%02x", *c);
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
    return 1;
}

/* How an option's value is parsed into its field. */
typedef enum opt_kind {
    OPT_FLAG,    /* no value: sets a bool */
    OPT_STR,     /* const char * */
    OPT_COUNT,   /* int64_t in [1, TRAIN_COUNT_MAX] */
    OPT_SEED,    /* uint64_t from a non-negative integer */
    OPT_WORKERS, /* int in [0, 64] */
    OPT_LR,      /* double > 0 */
    OPT_REAL,    /* double >= 0 */
    OPT_COUNT0,  /* int64_t in [0, TRAIN_COUNT_MAX] */
    OPT_SCHED,   /* "constant", "cosine", "linear", "step" -> train_lr_kind */
    OPT_MODEL,   /* workload_kind */
    OPT_OPTIM,   /* "adam", "adamw", "sgd", "rmsprop" */
    OPT_AMP,     /* "bf16", "fp16" -> td_dtype; "auto" (--amp only) -> TD_DTYPE_COUNT */
    OPT_PRESET,  /* a gpt size: train_opts (its gpt and preset_batch) */
} opt_kind;

typedef struct opt_spec {
    const char *name;
    opt_kind kind;
    void *field;
} opt_spec;

/* Parse val for spec into its field; on a bad value prints one line and returns false. */
static bool parse_value(const opt_spec *spec, const char *val) {
    char *end = NULL;
    errno = 0;
    long long n =
        spec->kind == OPT_COUNT || spec->kind == OPT_COUNT0 || spec->kind == OPT_SEED || spec->kind == OPT_WORKERS
            ? strtoll(val, &end, 10)
            : 0;
    bool number = end && end != val && !*end && !errno;
    switch (spec->kind) {
    case OPT_FLAG: return false; /* not reached: flags take no value */
    case OPT_STR: *(const char **)spec->field = val; return true;
    case OPT_COUNT:
        if (number && n >= 1 && n <= TRAIN_COUNT_MAX) return *(int64_t *)spec->field = n, true;
        if (number && n > TRAIN_COUNT_MAX)
            return train_fail("%s %s is too large (at most 2^48)", spec->name, TD_QUOTE(val)), false;
        return train_fail("%s expects a positive integer, got %s", spec->name, TD_QUOTE(val)), false;
    case OPT_COUNT0:
        if (number && n >= 0 && n <= TRAIN_COUNT_MAX) return *(int64_t *)spec->field = n, true;
        return train_fail("%s expects an integer in [0, 2^48], got %s", spec->name, TD_QUOTE(val)), false;
    case OPT_REAL: {
        double x = strtod(val, &end);
        if (end != val && !*end && x >= 0 && isfinite(x)) return *(double *)spec->field = x, true;
        return train_fail("%s expects a number >= 0, got %s", spec->name, TD_QUOTE(val)), false;
    }
    case OPT_SCHED:
        if (train_schedule_kind_parse(val, spec->field)) return true;
        return train_fail("%s: %s is not constant, cosine, linear or step", spec->name, TD_QUOTE(val)), false;
    case OPT_SEED:
        if (number && n >= 0) return *(uint64_t *)spec->field = (uint64_t)n, true;
        return train_fail("%s expects a non-negative integer, got %s", spec->name, TD_QUOTE(val)), false;
    case OPT_WORKERS:
        if (number && n >= 0 && n <= 64) return *(int *)spec->field = (int)n, true;
        return train_fail("%s expects an integer in [0, 64], got %s", spec->name, TD_QUOTE(val)), false;
    case OPT_LR: {
        double x = strtod(val, &end);
        if (end != val && !*end && x > 0 && isfinite(x)) return *(double *)spec->field = x, true;
        return train_fail("%s expects a positive number, got %s", spec->name, TD_QUOTE(val)), false;
    }
    case OPT_MODEL:
        if (workload_kind_parse(val, spec->field) == TD_OK) return true;
        return train_fail("%s: %s is not mlp, cnn, gpt or lstm", spec->name, TD_QUOTE(val)), false;
    case OPT_OPTIM:
        if (!strcmp(val, "adam") || !strcmp(val, "adamw") || !strcmp(val, "sgd") || !strcmp(val, "rmsprop"))
            return *(const char **)spec->field = val, true;
        return train_fail("%s: %s is not adam, adamw, sgd or rmsprop", spec->name, TD_QUOTE(val)), false;
    case OPT_AMP:
        if (!strcmp(val, "bf16")) return *(td_dtype *)spec->field = TD_BF16, true;
        if (!strcmp(val, "fp16")) return *(td_dtype *)spec->field = TD_F16, true;
        if (!strcmp(val, "auto") && !strcmp(spec->name, "--amp"))
            return *(td_dtype *)spec->field = TD_DTYPE_COUNT, true;
        return train_fail("%s: %s is not bf16%s fp16%s", spec->name, TD_QUOTE(val),
                          strcmp(spec->name, "--amp") ? " or" : ",", strcmp(spec->name, "--amp") ? "" : " or auto"),
               false;
    case OPT_PRESET: {
        train_opts *o = spec->field;
        if (workload_gpt_preset(val, &o->gpt) != TD_OK)
            return train_fail("%s: %s is not gpt-mini or gpt2-small", spec->name, TD_QUOTE(val)), false;
        o->preset_batch = !strcmp(val, "gpt2-small");
        return true;
    }
    }
    return false;
}

/* Parse argv into *o; on a bad flag or value prints one line and returns false. */
static bool parse_args(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.kind = WORKLOAD_CNN,
                      .device = "auto",
                      .data = TRAIN_DEFAULT_DATA,
                      .epochs = 5,
                      .steps = -1,
                      .gpt = workload_gpt_config_default(),
                      .amp = TD_F32,
                      .params = TD_F32,
                      .sched = {.kind = TRAIN_LR_DEFAULT, .min_lr = -1, .warmup = -1, .gamma = 0.1},
                      .weight_decay = -1};
    int64_t batch = -1, vocab = -1;
    const opt_spec specs[] = {
        {"--model", OPT_MODEL, &o->kind},
        {"--device", OPT_STR, &o->device},
        {"--epochs", OPT_COUNT, &o->epochs},
        {"--batch", OPT_COUNT, &batch},
        {"--lr", OPT_LR, &o->lr},
        {"--optimizer", OPT_OPTIM, &o->optimizer},
        {"--lr-schedule", OPT_SCHED, &o->sched.kind},
        {"--warmup-steps", OPT_COUNT0, &o->sched.warmup},
        {"--min-lr", OPT_REAL, &o->sched.min_lr},
        {"--lr-step-size", OPT_COUNT, &o->sched.step_size},
        {"--lr-gamma", OPT_LR, &o->sched.gamma},
        {"--grad-clip", OPT_LR, &o->grad_clip},
        {"--weight-decay", OPT_REAL, &o->weight_decay},
        {"--seed", OPT_SEED, &o->seed},
        {"--data", OPT_STR, &o->data},
        {"--text", OPT_STR, &o->text},
        {"--tokens", OPT_STR, &o->tokens},
        {"--init", OPT_STR, &o->init},
        {"--export-hf", OPT_STR, &o->export_hf},
        {"--vocab", OPT_COUNT, &vocab},
        {"--checkpoint", OPT_STR, &o->checkpoint},
        {"--save-dir", OPT_STR, &o->save_dir},
        {"--resume", OPT_FLAG, &o->resume},
        {"--checkpoint-every", OPT_COUNT, &o->checkpoint_every},
        {"--steps", OPT_COUNT, &o->steps},
        {"--max-steps", OPT_COUNT, &o->max_steps},
        {"--limit", OPT_COUNT, &o->limit},
        {"--workers", OPT_WORKERS, &o->workers},
        {"--log", OPT_STR, &o->log},
        {"--log-steps", OPT_STR, &o->log_steps},
        {"--deterministic", OPT_FLAG, &o->deterministic},
        {"--capture", OPT_FLAG, &o->capture},
        {"--ddp", OPT_FLAG, &o->ddp},
        {"--zero", OPT_STR, &o->zero},
        {"--ddp-grad-dtype", OPT_STR, &o->ddp_grad_dtype},
        {"--profile", OPT_STR, &o->profile},
        {"--layers", OPT_COUNT, &o->gpt.layers},
        {"--d-model", OPT_COUNT, &o->gpt.d_model},
        {"--heads", OPT_COUNT, &o->gpt.heads},
        {"--context", OPT_COUNT, &o->gpt.context},
        {"--amp", OPT_AMP, &o->amp},
        {"--param-dtype", OPT_AMP, &o->params},
        {"--preset", OPT_PRESET, o},
    };
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            exit(0);
        }
        const opt_spec *spec = NULL;
        for (size_t k = 0; k < sizeof specs / sizeof *specs && !spec; k++)
            if (strlen(specs[k].name) == len && !strncmp(arg, specs[k].name, len)) spec = &specs[k];
        if (!spec) return train_fail("unknown option %s (see trident train --help)", TD_QUOTE(arg)), false;
        if (spec->kind == OPT_FLAG) {
            if (eq) return train_fail("%s takes no value", spec->name), false;
            *(bool *)spec->field = true;
            continue;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) return train_fail("%s needs a value", spec->name), false;
        if (!parse_value(spec, val)) return false;
        o->heads_given = o->heads_given || spec->field == &o->gpt.heads;
    }
    o->batch = batch > 0                  ? batch
               : o->kind == WORKLOAD_GPT  ? (o->preset_batch ? 16 : 64)
               : o->kind == WORKLOAD_LSTM ? 32
                                          : 128;
    bool text = workload_is_text(o->kind);
    if (o->kind == WORKLOAD_LSTM) { /* W6's size; --context stays its sequence length */
        workload_gpt_config w6 = workload_lstm_config_default();
        o->gpt.d_model = w6.d_model, o->gpt.layers = w6.layers, o->gpt.heads = w6.heads;
    }
    if (o->steps < 0 && text) o->steps = 200;
    if (o->kind == WORKLOAD_GPT && !o->text && !o->tokens)
        return train_fail("--model gpt needs --text FILE (any text file) or --tokens FILE (llm.c tokens)"), false;
    if (o->kind == WORKLOAD_LSTM && !o->text)
        return train_fail("--model lstm needs --text FILE (any text file)"), false;
    if (!text && o->text) return train_fail("--text is for --model gpt and lstm"), false;
    if (o->kind != WORKLOAD_GPT && o->tokens) return train_fail("--tokens is for --model gpt"), false;
    if (o->text && o->tokens) return train_fail("--text and --tokens exclude each other"), false;
    if (o->export_hf && o->kind != WORKLOAD_GPT) return train_fail("--export-hf is for --model gpt"), false;
    if (vocab > 0)
        o->gpt.vocab = vocab;
    else if (o->tokens)
        o->gpt.vocab = TRAIN_GPT2_VOCAB;
    int64_t ids_bytes; /* a gpt batch's token ids and targets: 2 * batch * context int64s */
    if (text && __builtin_mul_overflow(2 * (int64_t)sizeof(int64_t) * o->batch, o->gpt.context, &ids_bytes))
        return train_fail("--batch %" PRId64 " with --context %" PRId64
                          ": the size of a batch (2 x batch x context 8-byte ids) overflows 64 bits",
                          o->batch, o->gpt.context),
               false;
    if (o->params == TD_F16)
        return train_fail("--param-dtype fp16: fp16 gradients underflow when the GradScaler unscales them (torch "
                          "refuses them too); use --param-dtype bf16, or --amp fp16 with float32 parameters"),
               false;
    if (o->params == TD_BF16 && o->amp == TD_F16)
        return train_fail("--param-dtype bf16 with --amp fp16: bf16 parameters need --amp bf16"), false;
    o->amp_auto = o->amp == TD_DTYPE_COUNT;
    if (o->amp_auto) o->amp = TD_F32; /* until the device is known (cmd_train) */
    if (o->params == TD_BF16) o->amp = TD_BF16, o->amp_auto = false;
    if (o->capture && o->amp == TD_F16)
        return train_fail("--capture with --amp fp16: the GradScaler reads its inf flag on the host every step"), false;
    if (o->capture && (o->sched.kind == TRAIN_LR_DEFAULT || o->sched.kind == TRAIN_LR_CONSTANT) && o->sched.warmup <= 0)
        o->sched.kind = TRAIN_LR_CONSTANT, o->sched.warmup = 0; /* the replayed step keeps the lr it recorded */
    else if (o->capture)
        return train_fail("--capture replays the step with the lr it recorded: it needs --lr-schedule constant and "
                          "no --warmup-steps"),
               false;
    if (o->checkpoint && o->save_dir)
        return train_fail("--checkpoint and --save-dir both name where the checkpoint goes: give one"), false;
    if (!o->checkpoint && !o->save_dir && (o->resume || o->checkpoint_every))
        return train_fail("%s needs a checkpoint: --checkpoint FILE or --save-dir DIR",
                          o->resume ? "--resume" : "--checkpoint-every"),
               false;
    if (o->gpt.d_model % o->gpt.heads)
        return train_fail("--d-model %" PRId64 " is not a multiple of --heads %" PRId64, o->gpt.d_model, o->gpt.heads),
               false;
    return true;
}

/* ---- the run --------------------------------------------------------------- */

/* --init: the state dict of o->init (td_weights_load) into *sd; for gpt, an
** HF GPT-2 layout is mapped to the model's names and sets o->gpt's size. */
static int train_init_load(train_opts *o, td_named_tensors **sd) {
    td_named_tensors *w = NULL, *mapped = NULL;
    if (td_weights_load(o->init, TD_CPU, &w) != TD_OK) return train_fail("--init: %s", td_last_error());
    if (o->kind == WORKLOAD_GPT && workload_gpt2_hf_detect(w)) {
        workload_gpt_config cfg;
        td_status st = workload_gpt2_from_hf(w, o->heads_given ? o->gpt.heads : 0, &cfg, &mapped);
        td_named_tensors_free(w);
        if (st != TD_OK) return train_fail("--init %s: %s", TD_QUOTE(o->init), td_last_error());
        o->gpt = cfg;
        w = mapped;
    }
    *sd = w;
    return 0;
}

/* --export-hf: the model in HF's GPT-2 layout, as safetensors. */
static int train_export_hf(train_run *r, const char *path) {
    td_named_tensors *sd = td_module_state_dict(r->w.model), *hf = NULL;
    td_status st = sd ? workload_gpt2_to_hf(sd, r->w.gpt.layers, &hf) : td_last_status();
    if (st == TD_OK) st = td_safetensors_save(path, hf);
    td_named_tensors_free(sd);
    td_named_tensors_free(hf);
    if (st != TD_OK) return train_fail("--export-hf: %s", td_last_error());
    printf("exported (Hugging Face GPT-2 layout): %s\n", path);
    return 0;
}

int cmd_train(int argc, char **argv) {
    train_opts o;
    if (!parse_args(argc, argv, &o)) return 1;
    /* Vulkan: make the pipelines this model used last time up front, in parallel (vk_prewarm.c) */
    static const char *const prewarm[] = {
        [WORKLOAD_MLP] = "mlp", [WORKLOAD_CNN] = "cnn", [WORKLOAD_GPT] = "gpt", [WORKLOAD_LSTM] = "lstm"};
    setenv("TRIDENT_VULKAN_PREWARM", prewarm[o.kind], 0);
    if (o.capture && o.profile)
        return train_fail("--profile times eager steps; it cannot be combined with --capture (a replayed graph "
                          "runs no ops through the dispatcher)");
    td_device dev;
    train_run r = {.world = 1};
    if (train_dist_options(&r, o.zero, o.ddp_grad_dtype, o.amp)) return 1;
    if (train_dist_wanted(o.ddp)) {
        if (o.capture) return train_fail("--capture does not combine with data-parallel training (--ddp)");
        if (train_dist_init(&r, o.device, &dev)) return 1;
    } else if (td_device_parse(o.device, &dev) != TD_OK) {
        return train_fail("--device %s: %s", TD_QUOTE(o.device), td_last_error());
    }
    if (o.amp_auto) {
        char why[256];
        o.amp = amp_auto_pick(dev, why, sizeof why);
        if (o.amp == TD_F16 && (o.capture || r.zero)) /* the GradScaler combines with neither */
            o.amp = TD_F32, snprintf(why, sizeof why, "fp32: fp16 would need a GradScaler, which %s refuses",
                                     o.capture ? "--capture" : "--zero 1");
        printf("--amp auto: %s\n", why);
    }
    if (o.capture && dev.type == TD_DEVICE_CPU)
        return train_fail("--capture: the cpu backend does not capture (it needs a CUDA or Vulkan device: "
                          "--device cuda or vulkan)");
    char ckpt_in_dir[4200]; /* --save-dir DIR: DIR/trident-<model>.safetensors; neither option: no checkpoint */
    if (o.save_dir) {       /* made with its parents, as os.makedirs(exist_ok=True) */
        snprintf(ckpt_in_dir, sizeof ckpt_in_dir, "%s", o.save_dir);
        for (char *p = ckpt_in_dir + 1;; p++) {
            char c = *p;
            if (c && c != '/') continue;
            *p = 0;
            bool made = mkdir(ckpt_in_dir, 0777) == 0 || errno == EEXIST;
            *p = c;
            if (!made)
                return train_dist_free(&r, true),
                       train_fail("--save-dir %s cannot be made: %s", TD_QUOTE(o.save_dir), strerror(errno));
            if (!c) break;
        }
        snprintf(ckpt_in_dir, sizeof ckpt_in_dir, "%s/trident-%s.safetensors", o.save_dir, prewarm[o.kind]);
        o.checkpoint = ckpt_in_dir;
    }
    if (o.checkpoint && train_checkpoint_check(o.checkpoint)) return train_dist_free(&r, true), 1;
    r.seed = o.seed, r.epochs = o.epochs, r.batch = o.batch, r.steps = o.steps;
    r.checkpoint_every = o.checkpoint_every, r.max_steps = o.max_steps, r.workers = o.workers;
    r.deterministic = o.deterministic, r.capture = o.capture, r.profile = o.profile, r.checkpoint = o.checkpoint;
    td_named_tensors *init = NULL; /* --init's state dict, in the model's names */
    if (o.init && train_init_load(&o, &init)) return train_dist_free(&r, true), 1;
    if (o.export_hf && !o.gpt.gpt2) {
        td_named_tensors_free(init);
        train_dist_free(&r, true);
        return train_fail("--export-hf needs a GPT-2 model: --init with Hugging Face's GPT-2 weights");
    }
    /* the data first: a missing dataset should not wait for a model */
    int rc = !workload_is_text(o.kind) ? train_images_load(&r, o.data, o.limit)
             : o.tokens                ? train_tokens_load(&r, o.tokens, o.gpt.context, o.gpt.vocab)
                                       : train_text_load(&r, o.text, o.gpt.context);
    if (rc) {
        td_named_tensors_free(init);
        train_data_free(&r); /* what loaded before the failure */
        train_dist_free(&r, true);
        return rc;
    }
    td_manual_seed(o.seed);
    if (workload_init_ext(&r.w, o.kind, &o.gpt, dev, o.optimizer, o.lr, o.weight_decay, o.capture) != TD_OK ||
        workload_amp_set(&r.w, o.amp) != TD_OK || workload_params_set(&r.w, o.params) != TD_OK ||
        td_module_flatten_parameters(r.w.model, dev) != TD_OK || /* one arena: one optimizer op, in-place DDP */
        (init && td_module_load_state_dict(r.w.model, init, true) != TD_OK)) {
        td_named_tensors_free(init);
        workload_free(&r.w);
        train_data_free(&r);
        rc = train_fail("%s", td_last_error());
        train_dist_free(&r, true);
        return rc;
    }
    td_named_tensors_free(init);
    r.w.grad_clip = o.grad_clip;
    r.sched = o.sched;
    r.sched.base = td_optimizer_get_lr(r.w.opt, 0);
    if (o.resume) rc = train_resume(&r);
    if (!rc && r.world > 1) rc = train_dist_wrap(&r); /* after resuming: every rank starts from rank 0's state */
    if (!rc) rc = train_logs_open(&r, o.log, o.log_steps);
    if (!rc) rc = train_loop(&r);
    if (!rc && o.export_hf && r.rank == 0) rc = train_export_hf(&r, o.export_hf);
    train_logs_close(&r);
    train_capture_free(&r);
    train_dist_free(&r, rc != 0); /* the DDP, before the model it wraps */
    workload_free(&r.w);
    train_data_free(&r);
    return rc;
}
