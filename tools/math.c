/*
** trident math: a math block's fused kernels, printed or timed.
**   trident math --emit c|cuda|glsl 'EXPR' --shape x=4096x1024 [--dtype x=bf16] ...
**       the plan's steps and each fused region's kernel: the CPU interpreter's
**       listing (c), CUDA C (NVRTC) or GLSL (glslang)
**   trident math --bench 'EXPR' --shape ... [--dtype ...] [--device cpu|cuda:0|vulkan:0|all]
**       the fused plan against the same math as separate ops (composed), per
**       device: time, GB/s of the block's minimal traffic (inputs read once,
**       outputs written once), % of the device's copy bandwidth, x composed,
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

/* seconds per call of fused / composed / copy / add (mode 0..3), median of 5 samples of iters calls */
static double time_it(td_math_case *c, int mode, td_tensor *const *in, td_tensor *copy_dst, td_tensor *copy_src,
                      td_device dev, int iters) {
    double s[5];
    for (int r = -1; r < 5; r++) {
        td_synchronize(dev);
        double t0 = bench_now_s();
        for (int i = 0; i < (r < 0 ? 2 : iters); i++) {
            td_scope_begin();
            td_tensor *out[TD_MATH_MAX_OUTPUTS];
            td_status st = TD_OK;
            if (mode <= 1)
                st = td__math_case_run(c, mode == 0, in, out);
            else if (mode == 2)
                st = td_copy_(copy_dst, copy_src);
            else if (!td_add(in[0], in[0]))
                st = td_last_status();
            if (st) {
                td_scope_end();
                fprintf(stderr, "trident math: %s\n", td_last_error());
                return -1;
            }
            if (mode <= 1)
                for (int k = 0; k < td__math_case_outputs(c); k++) td_release(out[k]);
            td_scope_end();
        }
        td_synchronize(dev);
        if (r >= 0) s[r] = (bench_now_s() - t0) / iters;
    }
    return bench_median_inplace(s, 5);
}

/* seconds per call of the backward of outs (from td_grad, the graph kept), median of 5 samples of iters calls */
static double time_grad(td_tensor *out, td_tensor *gy, int n_in, td_tensor *const *in, td_device dev, int iters) {
    double s[5];
    for (int r = -1; r < 5; r++) {
        td_synchronize(dev);
        double t0 = bench_now_s();
        for (int i = 0; i < (r < 0 ? 2 : iters); i++) {
            td_scope_begin();
            td_tensor *g[TD_MATH_MAX_INPUTS];
            td_status st = td_grad(1, &out, &gy, n_in, in, g, true, false, true);
            td_scope_end();
            if (st) return fprintf(stderr, "trident math: backward: %s\n", td_last_error()), -1;
        }
        td_synchronize(dev);
        if (r >= 0) s[r] = (bench_now_s() - t0) / iters;
    }
    return bench_median_inplace(s, 5);
}

/* The backward row: the block's fused backward (td_math_run recorded, then td_grad) against the composed ops'
** backward, over the bytes it must move (the inputs, the upstream gradient, the gradients); one-output blocks. */
static int bench_backward(const args *a, td_device dev, const char *dn, td_math_case *c, td_tensor **in, int n_in,
                          double copy_gbs) {
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
        double tf = gy ? time_grad(out, gy, n_in, in, dev, iters) : -1;
        double tc = gy && td_requires_grad(outc) ? time_grad(outc, gy, n_in, in, dev, iters) : -1;
        if (tf > 0) {
            printf("%-10s %11s %10.1f us %10.1f us %9.1f %8.1f%% %8.2fx\n", dn, "backward", tf * 1e6, tc * 1e6,
                   bytes / tf / 1e9, copy_gbs > 0 ? 100 * bytes / tf / 1e9 / copy_gbs : 0, tc > 0 ? tc / tf : 0);
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
    double bytes = 0, max_in = 0, copy_gbs = 0; /* copy_gbs: the copy roof (bytes read and written) */
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
        td_tensor *cs = td_rand(1, &ne, 7, 0, TD_F32, dev), *cd = td_empty(1, &ne, TD_F32, dev);
        int iters = a->iters > 0 ? a->iters : bytes > 1e8 ? 10 : bytes > 1e6 ? 100 : 1000;
        double tf = time_it(c, 0, in, NULL, NULL, dev, iters), tc = time_it(c, 1, in, NULL, NULL, dev, iters);
        double tcopy = cs && cd ? time_it(c, 2, in, cd, cs, dev, iters) : -1;
        double tadd = time_it(c, 3, in, NULL, NULL, dev, iters);
        if (tf < 0 || tc < 0) {
            rc = 1;
            goto done;
        }
        double gbs = bytes / tf / 1e9;
        copy_gbs = tcopy > 0 ? 2.0 * (double)ne * 4 / tcopy / 1e9 : 0;
        printf("%-10s %3d kernels %10.1f us %10.1f us %9.1f %8.1f%% %8.2fx %10.1f us %8.1f\n", dn,
               td__math_case_kernels(c), tf * 1e6, tc * 1e6, gbs, copy_gbs > 0 ? 100 * gbs / copy_gbs : 0, tc / tf,
               tadd * 1e6, copy_gbs);
    }
    rc = bench_backward(a, dev, dn, c, in, n_in, copy_gbs);
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
