/*
** trident bench: the workloads of WORKLOADS.md on every backend, against the
** roofline measured on each device and against PyTorch. The work is done by the
** bench/ library (bench/bench.h); this file parses the command line.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp_auto.h"
#include "bench.h"

#ifndef BENCH_TWIN_DEFAULT
#define BENCH_TWIN_DEFAULT "bench/torch_workloads.py"
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: trident bench [options]\n"
            "       trident bench --compare OLD.json NEW.json [--threshold PCT]\n\n"
            "options:\n"
            "  --backends LIST   devices or types to run, e.g. cpu,cuda,vulkan:1; a type is each of its devices,\n"
            "                    software ones (lavapipe) only if it has no other (default: every type)\n"
            "  --only LIST       workloads to run, e.g. matmul,add (default: all; the roofline always runs)\n"
            "  --quick           CI sizes: matmul 256, vectors 2^20, Adam 2^20 params, W1/W2 batch 16, a tiny GPT\n"
            "                    (d_model 32, 1 layer, context 32, batch 4)\n"
            "  --data DIR        Fashion-MNIST for W1/W2 (default %s if present, else random images)\n"
            "  --reps N          samples per row at most (default 20, 10 with --quick)\n"
            "  --torch           also run the PyTorch twin and report the ratio to it\n"
            "  --amp bf16|fp16   W3 and W5 also run under autocast (rows <dtype>-amp; fp16 with a GradScaler),\n"
            "                    the twin with torch.autocast; auto: the first GPU's fast one (bf16 on CUDA\n"
            "                    sm_80+ and Vulkan with cooperative matrices, fp16 on CUDA sm_70, else none)\n"
            "  --python EXE      interpreter for the twin (default python3)\n"
            "  --twin PATH       the twin script (default %s)\n"
            "  --json FILE       write every raw sample, devices, drivers, date and commit\n"
            "  --svg FILE        write a bar chart per workload\n"
            "  --save DIR        write DIR/<device>-<date>.json and .svg\n"
            "  --profile         after each training workload's timing, profile 3 steps: the summary, a Chrome\n"
            "                    trace trident-profile-<workload>-<device>.json, and trident-profile.svg\n"
            "                    (where the step goes, by op) in the current directory\n"
            "  --threshold PCT   with --compare: slowdown that counts as a regression (default 5)\n"
            "  --ddp             data-parallel scaling instead (tools/bench_ddp.c): --nproc N[,N...] processes\n"
            "                    (default 1,2) on --device D (default cuda; --backend nccl|mpi|tcp), --only W3,W5,\n"
            "                    --amp fp32|bf16, --zero 0,1 (DDP, ZeRO-1), --ddp-grad-dtype fp32,bf16, --steps S,\n"
            "                    --warmup W, --torch: PyTorch DDP too (bench/torch_ddp.py)\n\n"
            "workloads (--only takes the name, the part after W<n>-, its first word, or W<n>):\n",
            "/usr/share/datasets/fashion-mnist", BENCH_TWIN_DEFAULT);
    for (int i = 0; i < bench_n_workloads; i++)
        fprintf(f, "  %-14s %s\n", bench_workloads[i].name, bench_workloads[i].about);
}

/* DIR/<device>-<date>.ext: the first GPU's name (else the CPU's), lower case, runs
** of other characters as one '-'; the date as YYYY-MM-DD. */
static void save_path(const bench_session *s, const char *dir, const char *ext, char *out, size_t n) {
    const bench_device *d = &s->devices[0];
    for (int i = 0; i < s->n_devices; i++)
        if (s->devices[i].dev.type != TD_DEVICE_CPU) {
            d = &s->devices[i];
            break;
        }
    char slug[64];
    size_t k = 0;
    for (const char *c = d->info.name; *c && k < sizeof slug - 1; c++) {
        bool alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        if (alnum)
            slug[k++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        else if (k && slug[k - 1] != '-')
            slug[k++] = '-';
    }
    while (k && slug[k - 1] == '-') k--;
    slug[k] = 0;
    snprintf(out, n, "%s/%s-%.10s.%s", dir, k ? slug : d->label, s->date, ext);
}

/* The value after option argv[*i], or NULL (with a message) when it is missing. */
/* --amp auto: the autocast dtype of the session's first device other than the CPU (the CPU's, fp32,
** when it has only that), said in one line; TD_F32 runs no amp rows. */
static td_dtype bench_amp_auto(const bench_session *s) {
    int k = 0;
    while (k + 1 < s->n_devices && s->devices[k].dev.type == TD_DEVICE_CPU) k++;
    char why[256];
    td_dtype dt = amp_auto_pick(s->devices[k].dev, why, sizeof why);
    printf("--amp auto (from %s): %s\n", s->devices[k].label, why);
    return dt;
}

static const char *value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "trident bench: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* v as a finite number in [lo, hi] (an integer when integral) into *x, or
** false with a message naming the option. */
static bool number(const char *opt, const char *v, double lo, double hi, bool integral, double *x) {
    char *end;
    errno = 0;
    *x = strtod(v, &end);
    if (end != v && !*end && !errno && *x >= lo && *x <= hi && (!integral || *x == floor(*x))) return true;
    fprintf(stderr, "trident bench: %s expects %s in [%g, %g], got %s\n", opt, integral ? "an integer" : "a number", lo,
            hi, TD_QUOTE(v));
    return false;
}

int cmd_bench_ddp(int argc, char **argv);

int cmd_bench(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* data-parallel scaling: tools/bench_ddp.c */
        if (!strcmp(argv[i], "--ddp") || !strcmp(argv[i], "--ddp-worker")) return cmd_bench_ddp(argc, argv);
    bench_options opt = {.max_reps = 0, .python = "python3", .twin = BENCH_TWIN_DEFAULT, .amp = TD_F32};
    const char *backends = NULL, *json = NULL, *svg = NULL, *cmp_old = NULL, *cmp_new = NULL, *save = NULL;
    double threshold = 5;
    const char *first_step = NULL;
    bool amp_auto = false;
    static const char *valued[] = {"--backends", "--only", "--reps",      "--python", "--twin",       "--json",
                                   "--svg",      "--save", "--threshold", "--data",   "--first-step", "--amp"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        bool takes_value = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) takes_value |= !strcmp(a, valued[k]);
        if (takes_value && !(v = value(argc, argv, &i))) return 2;
        if (!strcmp(a, "--quick"))
            opt.quick = true;
        else if (!strcmp(a, "--torch"))
            opt.torch = true;
        else if (!strcmp(a, "--profile"))
            opt.profile = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout), 0;
        else if (!strcmp(a, "--compare")) {
            if (i + 2 >= argc) {
                fprintf(stderr, "trident bench: --compare needs two files, OLD.json NEW.json; got %d\n", argc - 1 - i);
                return 2;
            }
            cmp_old = argv[++i], cmp_new = argv[++i];
        } else if (!strcmp(a, "--backends"))
            backends = v;
        else if (!strcmp(a, "--only"))
            opt.only = v;
        else if (!strcmp(a, "--reps")) {
            double reps;
            if (!number(a, v, 1, 1e6, true, &reps)) return 2;
            opt.max_reps = (int)reps;
        } else if (!strcmp(a, "--python"))
            opt.python = v;
        else if (!strcmp(a, "--twin"))
            opt.twin = v;
        else if (!strcmp(a, "--data"))
            opt.data = v;
        else if (!strcmp(a, "--amp")) {
            if (strcmp(v, "bf16") && strcmp(v, "fp16") && strcmp(v, "auto")) {
                fprintf(stderr, "trident bench: --amp: %s is not bf16, fp16 or auto\n", TD_QUOTE(v));
                return 2;
            }
            amp_auto = !strcmp(v, "auto");
            opt.amp = !strcmp(v, "bf16") ? TD_BF16 : TD_F16;
        } else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--svg"))
            svg = v;
        else if (!strcmp(a, "--save"))
            save = v;
        else if (!strcmp(a, "--first-step")) /* W2-cold-start's child process (bench_coldstart.c) */
            first_step = v;
        else if (!strcmp(a, "--threshold")) {
            if (!number(a, v, 0, 1e6, false, &threshold)) return 2;
        } else {
            fprintf(stderr, "trident bench: unknown option %s (see trident bench --help)\n", TD_QUOTE(a));
            return 2;
        }
    }
    char err[1024];
    if (opt.only && !bench_check_only(opt.only, err, sizeof err)) {
        fprintf(stderr, "trident bench: %s\n", err);
        return 2;
    }
    if (cmp_old) return bench_compare(cmp_old, cmp_new, threshold, stdout);
    if (first_step) return bench_first_step(first_step, opt.quick);
    if (opt.max_reps <= 0) opt.max_reps = opt.quick ? 10 : 20;
    opt.budget_s = opt.quick ? 0.5 : 3.0;

    bench_session *s = calloc(1, sizeof *s);
    if (!s) return fprintf(stderr, "trident bench: out of memory\n"), 1;
    s->opt = opt;
    if (!bench_select_devices(s, backends, err, sizeof err)) {
        fprintf(stderr, "trident bench: %s\n", err);
        free(s);
        return 2;
    }
    if (amp_auto) s->opt.amp = bench_amp_auto(s);
    bench_stamp(s);
    bench_run_all(s);
    if (opt.torch) bench_torch_run(s);
    bench_finalize(s);
    bench_print_table(s, stdout);
    int rc = 0;
    if (json && bench_write_json(s, json)) rc = 1;
    if (svg && bench_write_svg(s, svg)) rc = 1;
    if (opt.profile && s->n_profiles) {
        if (bench_write_profile_svg(s, "trident-profile.svg"))
            rc = 1;
        else
            fprintf(stderr, "[bench] wrote trident-profile.svg\n");
    }
    if (save) {
        char path[1024];
        save_path(s, save, "json", path, sizeof path);
        if (bench_write_json(s, path))
            rc = 1;
        else
            fprintf(stderr, "[bench] wrote %s\n", path);
        save_path(s, save, "svg", path, sizeof path);
        if (bench_write_svg(s, path))
            rc = 1;
        else
            fprintf(stderr, "[bench] wrote %s\n", path);
    }
    bench_session_free(s);
    free(s);
    return rc;
}
