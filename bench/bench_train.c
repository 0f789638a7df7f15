/*
** The training workloads W1-W3 of WORKLOADS.md as bench rows: the time of one
** whole training step (forward, cross-entropy, zero_grad, backward, optimizer
** step) of the models `trident train` builds (src/workloads/workloads.h), as the
** median over steps after warm-up steps. GPU steps are timed by device events
** around the whole step (see bench_time.c).
**
**   W1-mlp       x [128, 784], Adam lr 1e-3             samples/s; epoch = 468 steps
**   W2-cnn       x [128, 784] as [128,1,28,28], Adam    samples/s; epoch = 468 steps
**   W3-gpt-mini  tokens [64, 256], AdamW lr 3e-4 wd 0.01, WORKLOADS.md's model
**                (10.9 M params); batch 8 on the CPU, as the twin's CPU run
**   W6-lstm      tokens [32, 256], the 2-layer LSTM LM of hidden 512 (4.5 M
**                params), Adam lr 1e-3, random bytes as W3
**   W2-captured  W2's step captured once (td_capture_begin/end) and replayed:
**                before each replay the host batch is copied (td_copy_) into
**                the static device tensors the graph reads; the loss stays
**                on the device. Only on devices whose backend captures.
**                Adam is made with capturable = true (its step count on the
**                device, advanced by every replay).
**   W3-captured  the same for W3's step (AdamW capturable; under --amp, the
**                autocast step only), its tokens copied in before each replay.
** --quick (CI, where lavapipe takes seconds per step): W1/W2 batch 16 (an epoch
** is then 3750 steps), W3 d_model 32, 2 heads, 1 layer, context 32, batch 4, and
** one warm-up step.
**
** Data: W1/W2 train on Fashion-MNIST (--data DIR, else
** /usr/share/datasets/fashion-mnist when it exists), IMAGE_SETS batches drawn
** at random and rotated across steps; without the data set, uniform [0,1)
** pixels and random labels (a step costs the same). W3 trains on random bytes,
** one batch, as the twin does. The row's note says which.
*/
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

#define TRAIN_IMAGES   60000 /* Fashion-MNIST's training set; epochs drop the last partial batch */
#define IMAGE_SETS     8
#define DEFAULT_DATA   "/usr/share/datasets/fashion-mnist"
#define TRAIN_WARMUP   3    /* untimed steps before the timed ones (--quick: 1) */
#define TRAIN_BUDGET_S 10.0 /* per row, once 3 steps are timed (--quick: the session's budget) */

/* splitmix64: the host-side stream for labels, tokens and batch picks. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* I64 [n] of values in [0, hi) on dev, scope-owned. */
static td_tensor *random_ids(int ndim, const int64_t *shape, int64_t hi, uint64_t seed, td_device dev) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    int64_t *v = malloc(sizeof *v * (size_t)n);
    if (!v) {
        td_error_set(TD_ERR_OOM, "bench: out of host memory for %lld ids", (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) v[i] = (int64_t)(next_u64(&seed) % (uint64_t)hi);
    td_tensor *t = td_from_data(v, ndim, shape, TD_I64, dev);
    free(v);
    return t;
}

const char *bench_data_dir(const bench_session *s) {
    struct stat sb;
    if (s->opt.data) return s->opt.data;
    return stat(DEFAULT_DATA, &sb) == 0 && S_ISDIR(sb.st_mode) ? DEFAULT_DATA : NULL;
}

/* Whether a selected workload trains on images (W1, W2, W2-captured). */
static bool images_wanted(const bench_session *s) {
    for (int i = 0; i < bench_n_workloads; i++) {
        const char *n = bench_workloads[i].name;
        if (n[0] == 'W' && (n[1] == '1' || n[1] == '2') && bench_workload_selected(s, &bench_workloads[i])) return true;
    }
    return false;
}

/* Load the training images once per session (CPU tensors, kept). */
td_status bench_load_data(bench_session *s) {
    const char *dir = bench_data_dir(s);
    if (s->images || !dir || !images_wanted(s)) return TD_OK;
    td_status st = td_mnist_load(dir, true, true, &s->images, &s->labels);
    if (st != TD_OK && s->opt.data) return st; /* asked for by name: its failure is the row's */
    if (st != TD_OK) td_clear_error();         /* the default path is only a preference */
    td_keep(s->images);                        /* the session's, past this workload's scope */
    td_keep(s->labels);
    return TD_OK;
}

/* What one timed step needs: the workload and its rotated batches. */
typedef struct train_arg {
    workload w;
    int k;
    td_tensor *x[IMAGE_SETS], *y[IMAGE_SETS];
} train_arg;

static td_status fn_step(void *p, int r) {
    train_arg *a = p;
    return workload_train_step(&a->w, a->x[r], a->y[r], NULL); /* no loss: no wait for the device */
}

static int64_t count_params(td_module *m) {
    int n = td_module_parameters(m, NULL, 0);
    td_tensor **p = calloc((size_t)n + 1, sizeof *p);
    int64_t total = 0;
    if (!p) return 0;
    td_module_parameters(m, p, n);
    for (int i = 0; i < n; i++) total += td_numel(p[i]);
    free(p);
    return total;
}

/* IMAGE_SETS batches [128, 784] and [128] on dev: picked at random from the
** data set when it is loaded, else random pixels and labels. */
static td_status image_batches(bench_session *s, train_arg *a, td_device dev, char *note, size_t note_size) {
    int64_t b = bench_image_batch(s), xs[2] = {b, 784}, ys[1] = {b};
    a->k = IMAGE_SETS;
    for (int i = 0; i < a->k; i++) {
        if (s->images) {
            td_tensor *idx = random_ids(1, ys, td_size(s->images, 0), 100 + (uint64_t)i, TD_CPU);
            a->x[i] = td_to(td_index_select(s->images, 0, idx), dev);
            a->y[i] = td_to(td_index_select(s->labels, 0, idx), dev);
        } else {
            a->x[i] = td_rand(2, xs, 200 + (uint64_t)i, 0, TD_F32, dev);
            a->y[i] = random_ids(1, ys, 10, 300 + (uint64_t)i, dev);
        }
        if (!a->x[i] || !a->y[i]) return td_last_status();
    }
    if (s->images)
        snprintf(note, note_size, "Fashion-MNIST (%s), %d batches rotated", bench_data_dir(s), IMAGE_SETS);
    else
        snprintf(note, note_size, "random pixels and labels (no Fashion-MNIST found; --data DIR)");
    if (s->opt.quick) {
        size_t used = strlen(note);
        snprintf(note + used, note_size - used, "; --quick batch %lld", (long long)b);
    }
    return TD_OK;
}

/* Time steps (fn on arg, a step per call) of an initialized workload a and add
** its row; the note, params and epoch length go on the row. */
static td_status time_steps_ext(bench_session *s, int device, const char *name, const char *variant, const char *size,
                                bench_unit unit, double per_step, train_arg *a, bench_fn fn, void *arg,
                                const char *note, int steps_per_epoch) {
    bench_sampling how = {.warmup = s->opt.quick ? 1 : TRAIN_WARMUP,
                          .max_samples = s->opt.max_reps,
                          .budget_s = s->opt.quick ? s->opt.budget_s : TRAIN_BUDGET_S};
    bench_row *r = bench_time_ext(s, device, name, variant, size, unit, per_step, a->k, fn, arg, &how);
    if (!r) return TD_ERR_DEVICE; /* the failed row holds the message */
    snprintf(r->note, sizeof r->note, "%s", note);
    r->params = count_params(a->w.model);
    r->steps_per_epoch = steps_per_epoch;
    return bench_profile_steps(s, device, name, fn, arg);
}

/* time_steps_ext of the float32 variant */
static td_status time_steps(bench_session *s, int device, const char *name, const char *size, bench_unit unit,
                            double per_step, train_arg *a, bench_fn fn, void *arg, const char *note,
                            int steps_per_epoch) {
    return time_steps_ext(s, device, name, "float32", size, unit, per_step, a, fn, arg, note, steps_per_epoch);
}

int64_t bench_image_batch(const bench_session *s) { return s->opt.quick ? 16 : 128; }

/* W1 or W2; size is the batch's shape after its leading batch size ("x784"). */
static td_status run_images(bench_session *s, int device, workload_kind kind, const char *name, const char *shape) {
    td_device dev = s->devices[device].dev;
    train_arg a = {.k = 1};
    int64_t b = bench_image_batch(s);
    char note[128] = "", size[80];
    snprintf(size, sizeof size, "%lld%s", (long long)b, shape);
    td_scope_begin();
    td_manual_seed(0);
    td_status st = bench_load_data(s);
    if (st == TD_OK) st = image_batches(s, &a, dev, note, sizeof note);
    if (st == TD_OK) st = workload_init(&a.w, kind, NULL, dev, NULL, 0, false); /* Adam, lr 1e-3 */
    if (st == TD_OK)
        st = time_steps(s, device, name, size, BENCH_UNIT_SAMPLES, (double)b, &a, fn_step, &a, note,
                        (int)(TRAIN_IMAGES / b));
    else
        bench_fail(s, device, name, "float32", NULL);
    workload_free(&a.w);
    td_scope_end();
    return st;
}

td_status bench_run_mlp(bench_session *s, int device) { return run_images(s, device, WORKLOAD_MLP, "W1-mlp", "x784"); }

td_status bench_run_cnn(bench_session *s, int device) {
    return run_images(s, device, WORKLOAD_CNN, "W2-cnn", "x1x28x28");
}

workload_gpt_config bench_gpt_config(const bench_session *s) {
    workload_gpt_config c = workload_gpt_config_default();
    if (s->opt.quick) c.d_model = 32, c.heads = 2, c.layers = 1, c.context = 32;
    return c;
}

int64_t bench_gpt_batch(const bench_session *s, int device) {
    return s->opt.quick ? 4 : s->devices[device].dev.type == TD_DEVICE_CPU ? 8 : 64;
}

workload_gpt_config bench_gpt2_config(const bench_session *s) {
    workload_gpt_config c;
    workload_gpt_preset("gpt2-small", &c);
    return s->opt.quick ? bench_gpt_config(s) : c;
}

int64_t bench_gpt2_batch(const bench_session *s) { return s->opt.quick ? 4 : 16; }

/* A gpt training step of size cfg and batch b on random tokens as row `name`
** (float32), then, with --amp, the same model's step under autocast (row
** "<dtype>-amp"). */
static td_status run_gpt(bench_session *s, int device, const char *name, workload_gpt_config cfg, int64_t b,
                         const char *about) {
    td_device dev = s->devices[device].dev;
    int64_t shape[2] = {b, cfg.context};
    train_arg a = {.k = 1};
    td_scope_begin();
    td_manual_seed(0);
    a.x[0] = random_ids(2, shape, cfg.vocab, 1, dev);
    a.y[0] = random_ids(2, shape, cfg.vocab, 2, dev);
    td_status st = a.x[0] && a.y[0] ? TD_OK : td_last_status();
    if (st == TD_OK) st = workload_init(&a.w, WORKLOAD_GPT, &cfg, dev, NULL, 0, false); /* AdamW, lr 3e-4, wd 0.01 */
    char size[80], note[128];
    snprintf(size, sizeof size, "%lldx%lld", (long long)b, (long long)cfg.context);
    snprintf(note, sizeof note, "%sd_model %lld, %lld heads, %lld layer%s; random tokens%s",
             s->opt.quick ? "--quick config: " : "", (long long)cfg.d_model, (long long)cfg.heads,
             (long long)cfg.layers, cfg.layers == 1 ? "" : "s", about);
    if (st == TD_OK)
        st = time_steps(s, device, name, size, BENCH_UNIT_TOKENS, (double)(b * cfg.context), &a, fn_step, &a, note, 0);
    else
        bench_fail(s, device, name, "float32", NULL);
    if (st == TD_OK && s->opt.amp != TD_F32) {
        char variant[32];
        snprintf(variant, sizeof variant, "%s-amp", td_dtype_name(s->opt.amp));
        bench_peak_split(s, device); /* the autocast row's own peak (the model and its state carried over) */
        st = workload_amp_set(&a.w, s->opt.amp);
        if (st == TD_OK)
            st = time_steps_ext(s, device, name, variant, size, BENCH_UNIT_TOKENS, (double)(b * cfg.context), &a,
                                fn_step, &a, note, 0);
        else
            bench_fail(s, device, name, variant, NULL);
    }
    workload_free(&a.w);
    td_scope_end();
    return st;
}

td_status bench_run_gpt(bench_session *s, int device) {
    bool cpu = s->devices[device].dev.type == TD_DEVICE_CPU;
    return run_gpt(s, device, "W3-gpt-mini", bench_gpt_config(s), bench_gpt_batch(s, device),
                   !s->opt.quick && cpu ? "; batch 8 on CPU (as the twin), 64 on GPUs" : "");
}

td_status bench_run_gpt2(bench_session *s, int device) {
    if (!s->opt.quick && s->devices[device].dev.type == TD_DEVICE_CPU) return TD_OK; /* no row: hours per step */
    return run_gpt(s, device, "W5-gpt2-small", bench_gpt2_config(s), bench_gpt2_batch(s), "");
}

workload_gpt_config bench_lstm_config(const bench_session *s) {
    workload_gpt_config c = workload_lstm_config_default();
    if (s->opt.quick) c.d_model = 32, c.context = 32;
    return c;
}

int64_t bench_lstm_batch(const bench_session *s) { return s->opt.quick ? 4 : 32; }

td_status bench_run_lstm(bench_session *s, int device) {
    td_device dev = s->devices[device].dev;
    workload_gpt_config cfg = bench_lstm_config(s);
    int64_t b = bench_lstm_batch(s), shape[2] = {b, cfg.context};
    train_arg a = {.k = 1};
    td_scope_begin();
    td_manual_seed(0);
    a.x[0] = random_ids(2, shape, cfg.vocab, 1, dev);
    a.y[0] = random_ids(2, shape, cfg.vocab, 2, dev);
    td_status st = a.x[0] && a.y[0] ? TD_OK : td_last_status();
    if (st == TD_OK) st = workload_init(&a.w, WORKLOAD_LSTM, &cfg, dev, NULL, 0, false); /* Adam, lr 1e-3 */
    char size[80];
    snprintf(size, sizeof size, "%lldx%lld", (long long)b, (long long)cfg.context);
    char note[128];
    snprintf(note, sizeof note, "%s2 layers, hidden %lld; random tokens", s->opt.quick ? "--quick config: " : "",
             (long long)cfg.d_model);
    if (st == TD_OK)
        st = time_steps(s, device, "W6-lstm", size, BENCH_UNIT_TOKENS, (double)(b * cfg.context), &a, fn_step, &a, note,
                        0);
    else
        bench_fail(s, device, "W6-lstm", "float32", NULL);
    workload_free(&a.w);
    td_scope_end();
    return st;
}

/* ---- W2-captured, W3-captured ---------------------------------------------- */

/* The captured step and what it reads: host batches a.x/a.y (on the CPU),
** copied into the static device tensors x, y before each replay. */
typedef struct captured_arg {
    train_arg a;
    td_tensor *x, *y, *loss; /* kept: the graph's input buffers and its loss */
    td_captured_graph *g;
} captured_arg;

static td_status fn_replay(void *p, int r) {
    captured_arg *c = p;
    td_status st = td_copy_(c->x, c->a.x[r]);
    if (st == TD_OK) st = td_copy_(c->y, c->a.y[r]);
    return st == TD_OK ? td_graph_replay(c->g) : st;
}

/* One eager step on batch 0 (Adam's state is made here), then the step on the
** static tensors recorded once. *none: the backend does not capture. */
static td_status capture_step(captured_arg *c, td_device dev, bool *none) {
    td_status st = td_copy_(c->x, c->a.x[0]);
    if (st == TD_OK) st = td_copy_(c->y, c->a.y[0]);
    if (st == TD_OK) st = workload_train_step(&c->a.w, c->x, c->y, NULL);
    if (st == TD_OK) *none = (st = td_capture_begin(dev)) == TD_ERR_UNSUPPORTED;
    if (st != TD_OK) return st;
    td_scope_begin();
    c->loss = td_keep(workload_loss_step(&c->a.w, c->x, c->y));
    td_scope_end();
    td_status end = td_capture_end(dev, &c->g); /* always end the capture, even after a failed step */
    return !c->loss ? td_last_status() : end;
}

/* The W2 or W3 step captured (variant "float32", or W3's "<dtype>-amp" under --amp) and timed as row name; no
** row where the backend does not capture. */
/* Row name: model's step (W2's CNN; W3's or W5's transformer: cfg and batch b) captured once and replayed. */
static td_status run_captured(bench_session *s, int device, workload_kind kind, const char *name, const char *model,
                              workload_gpt_config cfg, int64_t b) {
    td_device dev = s->devices[device].dev;
    const bool text = kind == WORKLOAD_GPT;
    captured_arg c = {.a = {.k = 1}};
    const int64_t xs[2] = {b, text ? cfg.context : 784};
    char note[192] = "", size[80], data[128] = "", variant[32] = "float32";
    if (text) {
        snprintf(size, sizeof size, "%lldx%lld", (long long)b, (long long)cfg.context);
        snprintf(data, sizeof data, "random tokens");
        if (s->opt.amp != TD_F32) snprintf(variant, sizeof variant, "%s-amp", td_dtype_name(s->opt.amp));
    } else {
        snprintf(size, sizeof size, "%lldx1x28x28", (long long)b);
    }
    td_scope_begin();
    td_manual_seed(0);
    td_status st = text ? TD_OK : bench_load_data(s);
    if (st == TD_OK && text) {
        c.a.x[0] = random_ids(2, xs, cfg.vocab, 1, TD_CPU);
        c.a.y[0] = random_ids(2, xs, cfg.vocab, 2, TD_CPU);
        st = c.a.x[0] && c.a.y[0] ? TD_OK : td_last_status();
    } else if (st == TD_OK) {
        st = image_batches(s, &c.a, TD_CPU, data, sizeof data);
    }
    if (st == TD_OK) st = workload_init(&c.a.w, kind, text ? &cfg : NULL, dev, NULL, 0, true); /* capturable */
    if (st == TD_OK && text && s->opt.amp != TD_F32) st = workload_amp_set(&c.a.w, s->opt.amp);
    c.x = td_keep(td_empty(2, xs, text ? TD_I64 : TD_F32, dev));
    c.y = td_keep(text ? td_empty(2, xs, TD_I64, dev) : td_empty(1, &b, TD_I64, dev));
    if (st == TD_OK && (!c.x || !c.y)) st = td_last_status();
    bool none = false;
    if (st == TD_OK) st = capture_step(&c, dev, &none);
    if (none) {
        /* no capture on this backend: no row (the caller says why) */
    } else if (st != TD_OK) {
        bench_fail(s, device, name, variant, NULL);
    } else {
        snprintf(note, sizeof note, "captured %s step replayed, host batch copied in first; %s", model, data);
        st = time_steps_ext(s, device, name, variant, size, text ? BENCH_UNIT_TOKENS : BENCH_UNIT_SAMPLES,
                            (double)(text ? b * cfg.context : b), &c.a, fn_replay, &c, note,
                            text ? 0 : (int)(TRAIN_IMAGES / b));
    }
    td_graph_free(c.g);
    td_release(c.loss);
    td_release(c.x);
    td_release(c.y);
    workload_free(&c.a.w);
    td_scope_end();
    return none ? TD_OK : st;
}

td_status bench_run_captured(bench_session *s, int device) {
    return run_captured(s, device, WORKLOAD_CNN, "W2-captured", "W2", bench_gpt_config(s), bench_image_batch(s));
}

td_status bench_run_gpt_captured(bench_session *s, int device) {
    return run_captured(s, device, WORKLOAD_GPT, "W3-captured", "W3", bench_gpt_config(s), bench_gpt_batch(s, device));
}

td_status bench_run_gpt2_captured(bench_session *s, int device) {
    if (!s->opt.quick && s->devices[device].dev.type == TD_DEVICE_CPU) return TD_OK; /* no row: as W5's */
    return run_captured(s, device, WORKLOAD_GPT, "W5-captured", "W5", bench_gpt2_config(s), bench_gpt2_batch(s));
}
