/*
** trident math: a math block's fused kernels, printed or timed.
**   trident math --emit c|cuda|glsl 'EXPR' --shape x=4096x1024 [--dtype x=bf16] ...
**       the plan's steps and each fused region's kernel: the CPU interpreter's
**       listing (c), CUDA C (NVRTC) or GLSL (glslang)
**   trident math --bench 'EXPR' --shape ... [--dtype ...] [--device cpu|cuda:0|vulkan:0|all]
**       the fused plan against the same math as separate ops (composed), per
**       device: time, GB/s of the block's minimal traffic (inputs read once,
**       outputs written once), % of the device's copy bandwidth (paired: each
**       sample against a copy timed right after it, the median ratio), x composed,
**       and one `add` of the first input for the dispatch cost; then (one-output
**       blocks) the fused backward (GB/s, % of copy) against the composed ops'
**       backward, and the launch cost of the cached block (td_math_run) on
**       one-element inputs against one `add` (issue 21's three speed rows:
**       bench/math_rows.sh runs them on the 8-op block over 2^26 floats).
** A name without --dtype is float32; --dtype all=T sets every name.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "math/plan.h"
#include "trident/trident.h"

#define MAX_NAMES 32

static void usage(FILE *f) {
    fprintf(f, "usage: trident math --emit c|cuda|glsl 'EXPR' --shape NAME=AxBx... [--dtype NAME=T] ...\n"
               "       trident math --bench 'EXPR' --shape NAME=AxB... [--dtype NAME=T] [--device D|all] [--iters N]\n"
               "  T: f32 f64 f16 bf16 (or float32 ...); a shape of `scalar` (or empty) is 0-d; --dtype all=T\n"
               "  D: cpu, cuda:0, vulkan:0 ...; all: every available device\n");
}

static bool parse_dtype(const char *s, td_dtype *out) {
    static const struct {
        const char *name;
        td_dtype dt;
    } t[] = {{"f32", TD_F32},     {"float32", TD_F32}, {"f64", TD_F64},       {"float64", TD_F64}, {"f16", TD_F16},
             {"float16", TD_F16}, {"bf16", TD_BF16},   {"bfloat16", TD_BF16}, {"i32", TD_I32},     {"int32", TD_I32},
             {"i64", TD_I64},     {"int64", TD_I64},   {"bool", TD_BOOL}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name)) return *out = t[i].dt, true;
    return false;
}

typedef struct args {
    const char *emit, *expr, *device;
    bool bench;
    int iters;
    int n;
    const char *names[MAX_NAMES];
    td_dtype dt[MAX_NAMES];
    int nd[MAX_NAMES];
    int64_t shape[MAX_NAMES][TD_MAX_DIMS];
    bool has_shape[MAX_NAMES];
} args;

static int name_slot(args *a, const char *name, size_t len) {
    for (int i = 0; i < a->n; i++)
        if (strlen(a->names[i]) == len && !strncmp(a->names[i], name, len)) return i;
    if (a->n == MAX_NAMES) return -1;
    char *copy = strndup(name, len);
    if (!copy) return -1;
    a->names[a->n] = copy, a->dt[a->n] = TD_F32, a->nd[a->n] = 0;
    return a->n++;
}

static bool parse_args(int argc, char **argv, args *a) {
    td_dtype all = (td_dtype)-1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--emit") && v)
            a->emit = v, i++;
        else if (!strcmp(o, "--bench"))
            a->bench = true;
        else if (!strcmp(o, "--device") && v)
            a->device = v, i++;
        else if (!strcmp(o, "--iters") && v)
            a->iters = atoi(v), i++;
        else if ((!strcmp(o, "--shape") || !strcmp(o, "--dtype")) && v) {
            const char *eq = strchr(v, '=');
            if (!eq) return fprintf(stderr, "trident math: %s wants NAME=VALUE, got %s\n", o, v), false;
            i++;
            if (!strcmp(o, "--dtype")) {
                td_dtype dt;
                if (!parse_dtype(eq + 1, &dt))
                    return fprintf(stderr, "trident math: unknown dtype %s\n", eq + 1), false;
                if (eq - v == 3 && !strncmp(v, "all", 3)) {
                    all = dt;
                    continue;
                }
                int s = name_slot(a, v, (size_t)(eq - v));
                if (s < 0) return fprintf(stderr, "trident math: too many names\n"), false;
                a->dt[s] = dt;
                continue;
            }
            int s = name_slot(a, v, (size_t)(eq - v));
            if (s < 0) return fprintf(stderr, "trident math: too many names\n"), false;
            a->has_shape[s] = true;
            const char *p = eq + 1;
            if (!*p || !strcmp(p, "scalar")) continue;
            while (*p) {
                char *end;
                long long d = strtoll(p, &end, 10);
                if (end == p || d < 0 || a->nd[s] == TD_MAX_DIMS || (*end && *end != 'x'))
                    return fprintf(stderr, "trident math: bad shape %s (want e.g. 4096x1024)\n", eq + 1), false;
                a->shape[s][a->nd[s]++] = d;
                p = *end ? end + 1 : end;
            }
        } else if (o[0] != '-' && !a->expr)
            a->expr = o;
        else
            return fprintf(stderr, "trident math: unknown option %s\n", o), usage(stderr), false;
    }
    if ((int)all >= 0)
        for (int i = 0; i < a->n; i++) a->dt[i] = all;
    if (!a->expr || (!a->emit && !a->bench)) return usage(stderr), false;
    for (int i = 0; i < a->n; i++)
        if (!a->has_shape[i]) return fprintf(stderr, "trident math: no --shape for %s\n", a->names[i]), false;
    return true;
}

static td_math_case *make_case(const args *a, td_device dev) {
    td_math_case *c;
    if (td__math_case_parse(a->expr, a->n, a->names, a->dt, a->nd, (const int64_t(*)[TD_MAX_DIMS])a->shape, dev, &c) !=
        TD_OK) {
        fprintf(stderr, "trident math: %s\n", td_last_error());
        return NULL;
    }
    return c;
}

/* What one timed call runs: the block fused or composed, a copy (cd <- cs), an add, or the backward of out. */
enum { T_FUSED, T_COMPOSED, T_COPY, T_ADD, T_GRAD };
typedef struct timed {
    int mode;
    td_math_case *c;
    td_tensor *const *in; /* the block's inputs (T_GRAD: the n_in it differentiates against) */
    int n_in;
    td_tensor *cd, *cs;  /* T_COPY */
    td_tensor *out, *gy; /* T_GRAD: the output (its graph kept) and the upstream gradient */
} timed;

/* seconds per call of calls calls of t, or -1 (said on stderr) */
static double sample(const timed *t, td_device dev, int calls) {
    td_synchronize(dev);
    double t0 = bench_now_s();
    for (int i = 0; i < calls; i++) {
        td_scope_begin();
        td_tensor *out[TD_MATH_MAX_OUTPUTS], *g[TD_MATH_MAX_INPUTS];
        td_status st = TD_OK;
        if (t->mode <= T_COMPOSED)
            st = td__math_case_run(t->c, t->mode == T_FUSED, t->in, out);
        else if (t->mode == T_COPY)
            st = td_copy_(t->cd, t->cs);
        else if (t->mode == T_ADD)
            st = td_add(t->in[0], t->in[0]) ? TD_OK : td_last_status();
        else
            st = td_grad(1, (td_tensor *[]){t->out}, (td_tensor *[]){t->gy}, t->n_in, t->in, g, true, false, true);
        if (st == TD_OK && t->mode <= T_COMPOSED)
            for (int k = 0; k < td__math_case_outputs(t->c); k++) td_release(out[k]);
        td_scope_end();
        if (st)
            return fprintf(stderr, "trident math: %s%s\n", t->mode == T_GRAD ? "backward: " : "", td_last_error()), -1;
    }
    td_synchronize(dev);
    return (bench_now_s() - t0) / calls;
}

/* seconds per call of t: the median of 5 samples of iters calls after 2 warm-up calls */
static double time_it(const timed *t, td_device dev, int iters) {
    double s[5];
    if (sample(t, dev, 2) < 0) return -1;
    for (int r = 0; r < 5; r++)
        if ((s[r] = sample(t, dev, iters)) < 0) return -1;
    return bench_median_inplace(s, 5);
}

/* t's bandwidth (bytes a call) as % of the copy's (copy_bytes read and written a call), paired: 5 rounds of a
** sample of t, then one of the copy right after it, and the median of the rounds' ratios, so that a host whose
** bandwidth drifts within one command (the GPU host's Xeon: 66 to 167 GB/s) compares each sample with the copy
** beside it; *copy_gbs the copy's median GB/s. -1 when a call fails. */
static double pct_of_copy(const timed *t, const timed *copy, td_device dev, int iters, double bytes, double copy_bytes,
                          double *copy_gbs) {
    double pct[5], gbs[5];
    if (sample(t, dev, 2) < 0 || sample(copy, dev, 2) < 0) return -1;
    for (int r = 0; r < 5; r++) {
        double a = sample(t, dev, iters), b = sample(copy, dev, iters);
        if (a <= 0 || b <= 0) return -1;
        gbs[r] = copy_bytes / b / 1e9;
        pct[r] = 100 * (bytes / a / 1e9) / gbs[r];
    }
    *copy_gbs = bench_median_inplace(gbs, 5);
    return bench_median_inplace(pct, 5);
}

/* The backward row: the block's fused backward (td_math_run recorded, then td_grad) against the composed ops'
** backward, over the bytes it must move (the inputs, the upstream gradient, the gradients); one-output blocks. */
static int bench_backward(const args *a, td_device dev, const char *dn, td_math_case *c, td_tensor **in, int n_in,
                          const timed *copy, double copy_bytes) {
    td_math_block *blk;
    if (td__math_case_outputs(c) != 1 || td_math_compile(a->expr, NULL, &blk) != TD_OK) return 0;
    td_math_binding bind[TD_MATH_MAX_INPUTS];
    double bytes = 0;
    for (int k = 0; k < n_in; k++) {
        td_set_requires_grad(in[k], true);
        bind[k] = (td_math_binding){.name = td__math_case_input_name(c, k), .tensor = in[k]};
        bytes += 2.0 * (double)td_numel(in[k]) * (double)td_dtype_size(td_tensor_dtype(in[k]));
    }
    td_tensor *out = NULL, *outc = NULL;
    int rc = 1;
    if (td_math_run(blk, bind, n_in, &out) == TD_OK && td__math_case_run(c, false, in, &outc) == TD_OK) {
        td_tensor *gy = td_ones(td_ndim(out), td_shape(out), td_tensor_dtype(out), dev);
        bytes += (double)td_numel(out) * (double)td_dtype_size(td_tensor_dtype(out));
        int iters = a->iters > 0 ? a->iters : bytes > 1e8 ? 10 : bytes > 1e6 ? 100 : 1000;
        timed f = {.mode = T_GRAD, .in = in, .n_in = n_in, .out = out, .gy = gy}, fc = f;
        fc.out = outc;
        double tf = gy ? time_it(&f, dev, iters) : -1,
               tc = gy && td_requires_grad(outc) ? time_it(&fc, dev, iters) : -1;
        double copy_gbs = 0, pct = tf > 0 && copy ? pct_of_copy(&f, copy, dev, iters, bytes, copy_bytes, &copy_gbs) : 0;
        if (tf > 0 && pct >= 0) {
            printf("%-10s %11s %10.1f us %10.1f us %9.1f %8.1f%% %8.2fx %13s %8.1f\n", dn, "backward", tf * 1e6,
                   tc * 1e6, bytes / tf / 1e9, pct, tc > 0 ? tc / tf : 0, "", copy_gbs);
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "trident math: backward: %s\n", td_last_error());
    for (int k = 0; k < n_in; k++) td_set_requires_grad(in[k], false);
    td_math_free(blk);
    return rc;
}

/* The launch row: the cached block (td_math_run, compiled once) on one-element inputs against one `add` of
** one-element tensors, per call (host dispatch and device launch, synchronized once per sample). */
static int bench_launch(const args *a, td_device dev, const char *dn) {
    td_math_block *blk;
    if (td_math_compile(a->expr, NULL, &blk) != TD_OK) return fprintf(stderr, "trident math: %s\n", td_last_error()), 1;
    td_math_binding bind[MAX_NAMES];
    int64_t ones[TD_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int k = 0; k < a->n; k++)
        bind[k] = (td_math_binding){.name = a->names[k], .tensor = td_ones(a->nd[k], ones, a->dt[k], dev)};
    td_tensor *x = bind[0].tensor, *out[TD_MATH_MAX_OUTPUTS];
    double t[2];
    for (int mode = 0; mode < 2; mode++) {
        double s[5];
        for (int r = -1; r < 5; r++) {
            td_synchronize(dev);
            double t0 = bench_now_s();
            for (int i = 0; i < (r < 0 ? 10 : 2000); i++) {
                td_scope_begin();
                td_status st = mode ? (td_add(x, x) ? TD_OK : td_last_status()) : td_math_run(blk, bind, a->n, out);
                td_scope_end();
                if (st) return td_math_free(blk), fprintf(stderr, "trident math: %s\n", td_last_error()), 1;
            }
            td_synchronize(dev);
            if (r >= 0) s[r] = (bench_now_s() - t0) / 2000;
        }
        t[mode] = bench_median_inplace(s, 5);
    }
    printf("%-10s %11s %10.2f us %10s    one add %8.2f us: %.2fx of an add's launch\n", dn, "launch", t[0] * 1e6, "",
           t[1] * 1e6, t[0] / t[1]);
    td_math_free(blk);
    return 0;
}

static int bench_device(const args *a, td_device dev) {
    char dn[32];
    td_device_str(dev, dn, sizeof dn);
    td_math_case *c = make_case(a, dev);
    if (!c) return 1;
    int n_in = td__math_case_inputs(c);
    td_tensor *in[TD_MATH_MAX_INPUTS];
    double bytes = 0, max_in = 0, copy_bytes = 0; /* copy_bytes: a copy's bytes read and written */
    timed copy = {.mode = T_COPY};
    int rc = 0;
    td_scope_begin();
    for (int k = 0; k < n_in; k++) {
        const char *name = td__math_case_input_name(c, k);
        int s = 0;
        while (s < a->n && strcmp(a->names[s], name)) s++;
        in[k] = td_rand(a->nd[s], a->shape[s], 1234 + (uint64_t)k, 0, a->dt[s], dev);
        if (!in[k]) {
            fprintf(stderr, "trident math: %s\n", td_last_error());
            rc = 1;
            goto done;
        }
        double b = (double)td_numel(in[k]) * (double)td_dtype_size(a->dt[s]);
        bytes += b, max_in = b > max_in ? b : max_in;
    }
    {
        td_tensor *out[TD_MATH_MAX_OUTPUTS];
        if (td__math_case_run(c, true, in, out)) {
            fprintf(stderr, "trident math: %s\n", td_last_error());
            rc = 1;
            goto done;
        }
        for (int k = 0; k < td__math_case_outputs(c); k++)
            bytes += (double)td_numel(out[k]) * (double)td_dtype_size(td_tensor_dtype(out[k]));
        int64_t ne = (int64_t)(max_in / 4 > 1 ? max_in / 4 : 1); /* copy of the largest input's bytes, as f32 */
        copy.cs = td_rand(1, &ne, 7, 0, TD_F32, dev), copy.cd = td_empty(1, &ne, TD_F32, dev);
        copy_bytes = 2.0 * (double)ne * 4;
        int iters = a->iters > 0 ? a->iters : bytes > 1e8 ? 10 : bytes > 1e6 ? 100 : 1000;
        timed f = {.mode = T_FUSED, .c = c, .in = in}, fc = f, add = f;
        fc.mode = T_COMPOSED, add.mode = T_ADD;
        double tf = time_it(&f, dev, iters), tc = time_it(&fc, dev, iters), tadd = time_it(&add, dev, iters);
        double copy_gbs = 0, pct = 0;
        if (tf > 0 && copy.cs && copy.cd) pct = pct_of_copy(&f, &copy, dev, iters, bytes, copy_bytes, &copy_gbs);
        if (tf < 0 || tc < 0 || pct < 0) {
            rc = 1;
            goto done;
        }
        printf("%-10s %3d kernels %10.1f us %10.1f us %9.1f %8.1f%% %8.2fx %10.1f us %8.1f\n", dn,
               td__math_case_kernels(c), tf * 1e6, tc * 1e6, bytes / tf / 1e9, pct, tc / tf, tadd * 1e6, copy_gbs);
    }
    rc = bench_backward(a, dev, dn, c, in, n_in, copy.cs && copy.cd ? &copy : NULL, copy_bytes);
    if (!rc) rc = bench_launch(a, dev, dn);
done:
    td_scope_end();
    td__math_case_free(c);
    return rc;
}

int cmd_math(int argc, char **argv) {
    args a = {.iters = 0};
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return usage(stdout), 0;
    if (!parse_args(argc, argv, &a)) return 2;
    int rc = 0;
    if (a.emit) {
        if (strcmp(a.emit, "c") && strcmp(a.emit, "cuda") && strcmp(a.emit, "glsl"))
            return fprintf(stderr, "trident math: --emit takes c, cuda or glsl\n"), 2;
        td_math_case *c = make_case(&a, TD_CPU); /* the kernels' text needs no device */
        if (!c) return 1;
        td__math_case_print(c, a.emit, stdout);
        td__math_case_free(c);
    }
    if (a.bench) {
        printf("%-10s %11s %13s %13s %9s %9s %9s %13s %8s\n", "device", "", "fused", "composed", "GB/s", "of copy",
               "x comp.", "one add", "copy GB/s");
        const char *d = a.device ? a.device : "cpu";
        if (!strcmp(d, "all")) {
            const td_device devs[] = {TD_CPU, TD_CUDA(0), TD_VULKAN(0)};
            for (int i = 0; i < 3; i++)
                if (td_device_available(devs[i])) rc |= bench_device(&a, devs[i]);
        } else {
            td_device dev;
            if (td_device_parse(d, &dev) != TD_OK) return fprintf(stderr, "trident math: %s\n", td_last_error()), 1;
            rc = bench_device(&a, dev);
        }
    }
    for (int i = 0; i < a.n; i++) free((char *)a.names[i]);
    return rc;
}
