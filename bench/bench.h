/*
** bench: the library behind `trident bench`.
**
** A session holds the devices under test (with the roofline measured on each),
** the result rows, and the PyTorch twin's numbers. Workloads are entries of
** bench_workloads[] (bench_workloads.c): each one runs on one device and adds
** rows through bench_time(): the W4 ops (bench_workloads.c) and the training
** steps of W1-W3 (bench_train.c, with the models of src/workloads/workloads.h).
**
** Terms used throughout:
**   rate   work / median time, in the row's unit (GFLOP/s, GB/s, samples/s or
**          tokens/s); higher is better
**   roof   the device's measured limit for that row: copy bandwidth for memory-bound
**          rows, the best GEMM rate of the dtype for matmul; none for training rows
**   vs_fastest  rate / the best rate of any backend on the same row (<= 1)
**   vs_torch    rate / PyTorch's rate on the same row and device class (> 1: faster)
**   peak   the device's highest allocated bytes during the workload (the
**          allocator's statistics, reset before it), shared by its rows
**   host waits  device-to-host waits (td_host_sync_count) per timed call; a
**          training step that keeps its loss on the device makes none
*/
#ifndef TRIDENT_BENCH_H
#define TRIDENT_BENCH_H

#include <stdbool.h>
#include <stdio.h>

#include "trident/trident.h"
#include "workloads.h" /* src/workloads: the W1-W3 models */

#define BENCH_MAX_DEVICES 8
#define BENCH_MAX_SAMPLES 64
#define BENCH_MAX_ROWS    256
#define BENCH_MAX_TORCH   128

typedef enum {
    BENCH_UNIT_GFLOPS = 0,
    BENCH_UNIT_GBPS = 1,
    BENCH_UNIT_SAMPLES = 2,
    BENCH_UNIT_TOKENS = 3,
    BENCH_UNIT_OPS = 4, /* the dispatch row: ops/s */
} bench_unit;
const char *bench_unit_name(bench_unit u); /* "GFLOP/s", "GB/s", "samples/s", "tokens/s", "ops/s" */
/* What one unit counts: 1e9 for GFLOP/s and GB/s, 1 for the others. */
double bench_unit_scale(bench_unit u);

/* One device under test and its roofline. */
typedef struct bench_device {
    td_device dev;
    char label[16]; /* "cpu", "cuda:0", "vulkan:0" */
    td_device_info info;
    const char *timer;                  /* how its samples were timed (see bench_time) */
    const char *torch_device;           /* twin's device for ratios: "cpu" or "cuda" */
    char torch_status[96];              /* "ok", "n/a (torch not found)", ...; "" without --torch */
    double copy_gbps;                   /* device-to-device copy, read + write bytes */
    int64_t copy_elems;                 /* f32 elements of that copy */
    double gemm_gflops[TD_DTYPE_COUNT]; /* best matmul rate seen per dtype; 0: not measured */
} bench_device;

/* One measured row: a workload (and variant) on one device. */
typedef struct bench_row {
    char workload[32]; /* "W4-matmul" */
    char variant[24];  /* "float32", "bfloat16", ... or "" */
    char size[80];     /* "4096x4096x4096", "16777216" */
    int device;        /* index into bench_session.devices */
    bench_unit unit;
    double work; /* flops or bytes per call */
    int buffers; /* input sets rotated across repeats (1: none) */
    int n_samples;
    double samples_ms[BENCH_MAX_SAMPLES];
    double median_ms, rate;
    double roof, roof_pct; /* 0 when no roof applies */
    double vs_fastest;
    double torch_rate;          /* 0: no PyTorch number for this row */
    double torch_compiled_rate; /* W3: the twin's torch.compile run; 0: none */
    int64_t torch_peak_bytes;   /* the twin's peak allocated bytes for this row; 0: none */
    char error[160];            /* non-empty: the row failed, with why */
    /* training rows (W1-W3): one sample is one whole step; work is samples or tokens per step */
    char note[160];      /* the data and the config, e.g. "random tokens; batch 8 on CPU" */
    int64_t params;      /* the model's parameter count; 0: not a training row */
    int steps_per_epoch; /* W1/W2: 468, for the extrapolated epoch time; 0: none */
    /* memory and host waits */
    bool has_peak;      /* false: the backend keeps no allocator statistics */
    int64_t peak_bytes; /* peak allocated during the row's workload (an autocast row: during it) */
    int64_t base_bytes; /* allocated when that window opened (live data of the session) */
    double host_waits;  /* host waits per timed call (training rows: per step) */
    double eager_ms;    /* W2/W3-captured: the eager row's step (bench_captured_eager) on the same device and
                        ** variant; 0: none */
} bench_row;

/* A measurement line from the PyTorch twin, mapped onto a row key (W3's
** torch.compile line gets variant "<dtype>-compiled"). */
typedef struct bench_torch_row {
    char workload[32], variant[24], device[8];
    double rate;        /* in the row's unit */
    int64_t peak_bytes; /* torch.cuda.max_memory_allocated over the run; 0: not given (cpu) */
} bench_torch_row;

typedef struct bench_options {
    bool quick;
    int max_reps;     /* samples per row at most (after warm-up) */
    double budget_s;  /* stop sampling a row after this much time, once 3 samples exist */
    const char *only; /* comma list of workload names or their short forms ("add"), or NULL */
    bool torch;
    const char *python; /* interpreter for the twin */
    const char *twin;   /* path of torch_workloads.py */
    const char *data;   /* Fashion-MNIST directory for W1/W2, or NULL: the default one if present */
    bool profile;       /* --profile: profile each training workload's step (bench_profile.c) */
    td_dtype amp;       /* --amp bf16|fp16: W3/W5 also run with autocast (variant "<dtype>-amp"); TD_F32: not */
} bench_options;

/* Where one profiled step of a workload on a device goes (bench_profile.c). */
#define BENCH_MAX_PROFILES 32
#define BENCH_PROFILE_OPS  8
typedef struct bench_profile {
    char workload[32], device[16];
    double step_ms; /* the profiled step */
    int n_ops;      /* entries of op/ms: the heaviest ops, then "other ops" */
    char op[BENCH_PROFILE_OPS + 1][24];
    double ms[BENCH_PROFILE_OPS + 1]; /* per step */
    double outside_ms;                /* step time outside every op (host work, gaps) */
} bench_profile;

typedef struct bench_session {
    bench_options opt;
    char date[32];   /* UTC, ISO 8601 */
    char commit[48]; /* git commit of the source tree, or "" */
    int n_devices;
    bench_device devices[BENCH_MAX_DEVICES];
    int n_rows;
    bench_row rows[BENCH_MAX_ROWS];
    /* PyTorch: status is "ok" or the reason it has no numbers ("n/a (torch not found)") */
    char torch_status[128];
    char torch_version[32];
    int n_torch;
    bench_torch_row torch[BENCH_MAX_TORCH];
    char *torch_raw;            /* every JSON line the twin printed, newline-separated (malloc'd) */
    td_tensor *images, *labels; /* Fashion-MNIST training set for W1/W2 (kept), or NULL */
    int n_profiles;
    bench_profile profiles[BENCH_MAX_PROFILES];
    /* the device's peak-memory window: its rows from peak_from get the peak since it opened */
    bool peak_on;
    int peak_from;
    int64_t peak_base;
} bench_session;

/* METHOD. Close device d's peak window onto the rows added since it opened, and
** open the next: a workload with several rows (fp32, then autocast) calls it
** between them, so that each row has its own peak, as the twin's per run. */
void bench_peak_split(bench_session *s, int d);

/* ---- workloads (bench_workloads.c) ---- */

/* A workload runs on one device and adds its rows with bench_time(). It
** returns TD_OK, or an error for rows it could not add (recorded by the caller). */
typedef struct bench_workload {
    const char *name;  /* "W4-add": the row key, and the twin's "workload" field */
    const char *about; /* one line for --help */
    td_status (*run)(bench_session *s, int device);
    /* The twin's line for this workload: rate = value of torch_key * torch_scale;
    ** with torch_per_epoch, rate = steps * batch / value (value: seconds per epoch
    ** of steps batches; steps and batch from the line, else 468 and torch_scale). */
    const char *torch_key;
    double torch_scale;
    bool torch_per_epoch;
    const char *twin_part; /* the twin's --only name for it: "ops", "w1", "w2", "w3" */
} bench_workload;

extern const bench_workload bench_workloads[];
extern const int bench_n_workloads;

/* dispatch: 10k adds of [1] f32 tensors, then one synchronize (bench_workloads.c). */
td_status bench_run_dispatch(bench_session *s, int device);

/* Measure copy bandwidth and the GEMM rate of each dtype at sizes below the
** matmul row's (the row itself also counts toward the best). */
td_status bench_roofline(bench_session *s, int device);

/* The problem sizes, scaled by --quick and by device kind. */
int64_t bench_matmul_n(const bench_session *s);
int64_t bench_vector_elems(const bench_session *s, int device);

/* ---- training workloads (bench_train.c) ---- */

td_status bench_run_mlp(bench_session *s, int device);  /* W1 */
td_status bench_run_cnn(bench_session *s, int device);  /* W2 */
td_status bench_run_gpt(bench_session *s, int device);  /* W3 */
td_status bench_run_gpt2(bench_session *s, int device); /* W5: GPUs only (and --quick) */
td_status bench_run_lstm(bench_session *s, int device); /* W6: the LSTM language model */
/* W6's size (hidden 512, 2 layers, sequence 256; --quick: hidden 32, sequence 32) and batch (32; --quick: 4),
** also the twin's. */
workload_gpt_config bench_lstm_config(const bench_session *s);
int64_t bench_lstm_batch(const bench_session *s);
/* W7's input [batch, 64, side, side] (bench_workloads.c) */
int64_t bench_unet_batch(const bench_session *s);
int64_t bench_unet_side(const bench_session *s);
/* W2-captured: one W2 step captured once (td_capture_begin/end) and replayed,
** the batch copied from the host into static tensors before each replay. Adds
** no row on a device whose backend does not capture. */
td_status bench_run_captured(bench_session *s, int device);
/* W3-captured: the same for W3's step (under --amp, the autocast step). */
td_status bench_run_gpt_captured(bench_session *s, int device);
td_status bench_run_gpt2_captured(bench_session *s, int device);
/* The eager row a captured row is compared with ("W2-captured" -> "W2-cnn", "W3-captured" -> "W3-gpt-mini"), or
** NULL for a row that is not a captured step. */
const char *bench_captured_eager(const char *workload);
/* Load the Fashion-MNIST training set into s->images (once; without it, W1/W2
** use random images). Fails only for a --data directory that does not load. */
td_status bench_load_data(bench_session *s);
/* W1/W2's batch: 128 (--quick: 16). W3's size: WORKLOADS.md's (--quick: d_model
** 32, 2 heads, 1 layer, context 32), and its batch on device (64; 8 on the CPU;
** 4 with --quick). */
int64_t bench_image_batch(const bench_session *s);
workload_gpt_config bench_gpt_config(const bench_session *s);
int64_t bench_gpt_batch(const bench_session *s, int device);
/* W5's size: gpt2-small (--quick: W3's --quick size) and batch (16; --quick 4). */
workload_gpt_config bench_gpt2_config(const bench_session *s);
int64_t bench_gpt2_batch(const bench_session *s);
/* The Fashion-MNIST directory W1/W2 use (--data, else the default if present), or NULL. */
const char *bench_data_dir(const bench_session *s);

/* W2-cold-start (bench_coldstart.c): process start to the first W2 step, with an empty and a warm
** cache, each sample a child `trident bench --first-step`; Vulkan devices only. */
td_status bench_run_cold_start(bench_session *s, int device);
/* That child: one W2 step on device, then _exit(0); 1 with a message on failure. */
int bench_first_step(const char *device, bool quick);

/* ---- timing (bench_time.c) ---- */

/* One call of the measured operation; rep selects the rotated input set. */
typedef td_status (*bench_fn)(void *arg, int rep);

/* How a row is sampled: warmup untimed calls, then timed calls until
** max_samples, or until budget_s seconds once 3 samples exist. */
typedef struct bench_sampling {
    int warmup, max_samples;
    double budget_s;
    bool host_clock; /* time by synchronize + host clock even where the device has events */
} bench_sampling;

/* Warm up, then sample fn until opt.max_reps samples or opt.budget_s (at least
** 3 samples), and add the row. GPU samples come from device events
** (td_event_*) between fn's enqueue and completion; without events, from
** td_synchronize + host clock (d->timer says which). The row's host_waits
** counts the waits inside fn only. Returns the new row, or NULL with row error
** set. */
bench_row *bench_time(bench_session *s, int device, const char *workload, const char *variant, const char *size,
                      bench_unit unit, double work, int buffers, bench_fn fn, void *arg);
/* bench_time with its own sampling (how). */
bench_row *bench_time_ext(bench_session *s, int device, const char *workload, const char *variant, const char *size,
                          bench_unit unit, double work, int buffers, bench_fn fn, void *arg, const bench_sampling *how);
/* Input sets to rotate so that repeats do not run from cache: enough sets of
** bytes_per_set to pass 128 MiB, between 1 and 8. */
int bench_rotation(double bytes_per_set);
/* Add a failed row (error message from td_last_error or why). */
void bench_fail(bench_session *s, int device, const char *workload, const char *variant, const char *why);

/* ---- session (bench_session.c) ---- */

/* Parse "cpu,cuda,vulkan" (NULL: every available device) into s->devices.
** Writes why into err on failure. */
bool bench_select_devices(bench_session *s, const char *list, char *err, size_t err_size);
bool bench_workload_selected(const bench_session *s, const bench_workload *w);
/* Whether every name of the --only list selects a workload; else false with the
** unknown name and the valid ones in err. */
bool bench_check_only(const char *only, char *err, size_t err_size);
/* Roofline and every selected workload on every device, with progress on stderr. */
void bench_run_all(bench_session *s);
/* Medians are set by bench_time; this fills roofs, vs_fastest and torch_rate. */
void bench_finalize(bench_session *s);
void bench_session_free(bench_session *s);
double bench_median(const double *v, int n);

/* ---- PyTorch twin (bench_torch.c) ---- */

/* Run the twin for each torch device the session needs and parse its lines.
** Never fails: without python/torch, torch_status says why. */
void bench_torch_run(bench_session *s);

/* ---- output (bench_report.c, bench_svg.c) ---- */

/* Fill date and commit. */
void bench_stamp(bench_session *s);
void bench_print_table(const bench_session *s, FILE *f);
int bench_write_json(const bench_session *s, const char *path); /* 0 or -1 with a message on stderr */
int bench_write_svg(const bench_session *s, const char *path);

/* ---- --profile (bench_profile.c) ---- */

/* With --profile: PROFILE_STEPS calls of fn(arg, 0) under the profiler, the
** trace trident-profile-<workload>-<device>.json, the summary on stdout, and
** the step's split kept for the SVG. TD_OK without --profile. */
td_status bench_profile_steps(bench_session *s, int device, const char *workload, bench_fn fn, void *arg);
/* trident-profile.svg: a bar per device per profiled workload; 0, or 1 after a message. */
int bench_write_profile_svg(const bench_session *s, const char *path);
/* s as SVG/XML text: & < > " escaped (bench_svg.c). */
void bench_xml_text(FILE *f, const char *s);

/* ---- regression compare (bench_compare.c) ---- */

/* Print the per-row change of median time from old to new; rows slower by more
** than threshold_pct are flagged. Returns 0 (none), 1 (regressions), 2 (bad input). */
int bench_compare(const char *old_path, const char *new_path, double threshold_pct, FILE *f);

#endif /* TRIDENT_BENCH_H */
