/*
** LAYER_NORM_BACKWARD (td__layer_norm_backward, with dw and db) timed on one device against the device's copy
** bandwidth (td_clone of a tensor of the same bytes: one read and one write of each byte).
**   bench_layernorm_bwd [--device cuda:0] [--dtype f32|bf16|f16] [--rows 16384] [--n 768] [--iters 50] [--sweep]
** Prints one JSON line per case, layer_norm (dy, x read, dx written) and add_layer_norm (ds read too): the
** mean ms of --iters calls enqueued back to back after 3 warm-up calls (td_synchronize before and after, the
** clock the host's), the bytes each call must move, its GB/s and that as a percentage of the copy's GB/s
** ("pct_copy_roof"). On CUDA, TRIDENT_CUDA_LN_BWD=0 runs the two-pass path (rows kernel, then the column
** partials reading dy and x again) for comparison, 1 the fused kernel, 2..9 the warp kernel's variants.
** --sweep (CUDA): for each TRIDENT_CUDA_LN_BWD = 0..9 (set here before each case's calls: the backend reads it
** at each call), the cases of W5 (GPT-2 small) under bf16 autocast and in f32, at --rows x --n:
**   ln_f:  dy bf16, x f32 (w, mean, rstd f32), dx f32 and its bf16 twin dxn (the MLP node's dy)   (12 bytes an
**          element)
**   ln1:   ln_f's with ds f32 (the residual stream's gradient taken); ln2 (add_layer_norm's backward, dxn its
**          bf16 residual's gradient) moves the same                                                  (16)
**   ln1_nodxn: ln1 without dxn                                                                        (14)
**   f32:   dy, x, ds, dx f32 (W5 fp32's ln1)                                                         (16)
**   bf16:  dy, x, ds, dx bf16                                                                         (8)
** each line with the copy's GB/s timed right before it (the roof drifts), "variant" and "case".
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "core/norm_backward.h"
#include "trident/trident.h"

typedef struct cfg {
    td_device dev;
    td_dtype dt;
    int64_t rows, n;
    int iters;
} cfg;

/* ms a call of f(a) over c->iters calls enqueued back to back, each in its own scope */
static double time_calls(const cfg *c, bool (*f)(void *), void *a) {
    for (int i = 0; i < 3; i++) {
        td_scope_begin();
        bool ok = f(a);
        td_scope_end();
        if (!ok) return -1;
    }
    if (td_synchronize(c->dev) != TD_OK) return -1;
    double t0 = bench_now_s();
    for (int i = 0; i < c->iters; i++) {
        td_scope_begin();
        f(a);
        td_scope_end();
    }
    if (td_synchronize(c->dev) != TD_OK) return -1;
    return (bench_now_s() - t0) * 1e3 / c->iters;
}

typedef struct args {
    td_tensor *dy, *x, *w, *mean, *rstd, *ds, *big;
} args;

static bool ln_bwd(void *p) {
    args *a = p;
    td_tensor *dx, *dw, *db;
    td_status st =
        td__layer_norm_backward(a->dy, a->x, a->w, a->mean, a->rstd, a->ds, a->x->shape[1], true, true, &dx, &dw, &db);
    if (st != TD_OK) fprintf(stderr, "bench_layernorm_bwd: %s\n", td_last_error());
    return st == TD_OK;
}

static bool copy(void *p) { return td_clone(((args *)p)->big) != NULL; }

typedef struct sweep_args {
    td_tensor *dy, *x, *w, *mean, *rstd, *ds;
    td_dtype nt; /* dxn's dtype: x's for none */
} sweep_args;

static bool ln_bwd_to(void *p) {
    sweep_args *a = p;
    td_tensor *dx, *dw, *db, *dxn;
    td_status st = td__layer_norm_backward_to(a->dy, a->x, a->w, a->mean, a->rstd, a->ds, a->x->shape[1], true, true,
                                              a->nt, &dx, &dw, &db, &dxn);
    if (st != TD_OK) fprintf(stderr, "bench_layernorm_bwd: %s\n", td_last_error());
    return st == TD_OK;
}

/* --sweep: every variant on W5's cases (the header); the copy of a [rows, 4 n] f32 tensor before each case */
static int sweep(cfg *c, const char *dev) {
    static const struct {
        const char *name;
        td_dtype dy, x, ds, nt; /* ds TD_BOOL: none */
    } cases[] = {{"ln_f", TD_BF16, TD_F32, TD_BOOL, TD_BF16},
                 {"ln1", TD_BF16, TD_F32, TD_F32, TD_BF16},
                 {"ln1_nodxn", TD_BF16, TD_F32, TD_F32, TD_F32},
                 {"f32", TD_F32, TD_F32, TD_F32, TD_F32},
                 {"bf16", TD_BF16, TD_BF16, TD_BF16, TD_BF16}};
    int64_t shape[2] = {c->rows, c->n}, bshape[2] = {c->rows, 4 * c->n};
    args big = {.big = td_randn(2, bshape, 6, 0, TD_F32, c->dev)};
    if (!big.big) return 1;
    for (int v = 0; v <= 9; v++) {
        char vs[2] = {(char)('0' + v), 0};
        setenv("TRIDENT_CUDA_LN_BWD", vs, 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            td_scope_begin();
            td_dtype xt = cases[i].x;
            sweep_args a = {
                .dy = td_randn(2, shape, 1, 0, cases[i].dy, c->dev),
                .x = td_randn(2, shape, 2, 0, xt, c->dev),
                .w = td_randn(1, &c->n, 3, 0, xt, c->dev),
                .mean = td_randn(1, &c->rows, 4, 0, xt, c->dev),
                .rstd = td_add_scalar(td_abs(td_randn(1, &c->rows, 5, 0, xt, c->dev)), 0.5),
                .ds = cases[i].ds == TD_BOOL ? NULL : td_randn(2, shape, 7, 0, cases[i].ds, c->dev),
                .nt = cases[i].nt,
            };
            if (!a.dy || !a.x || !a.w || !a.mean || !a.rstd || (cases[i].ds != TD_BOOL && !a.ds)) {
                fprintf(stderr, "bench_layernorm_bwd: %s\n", td_last_error());
                return 1;
            }
            double el = (double)c->rows * (double)c->n;
            double bytes = el * (double)(td_dtype_size(cases[i].dy) + 2 * td_dtype_size(xt) +
                                         (a.ds ? td_dtype_size(cases[i].ds) : 0) +
                                         (cases[i].nt != xt ? td_dtype_size(cases[i].nt) : 0));
            double copy_ms = time_calls(c, copy, &big), copy_gbps = 2 * 4 * 4 * el / (copy_ms * 1e6);
            double ms = time_calls(c, ln_bwd_to, &a), gbps = bytes / (ms * 1e6);
            td_scope_end();
            if (ms < 0 || copy_ms < 0) return 1;
            printf("{\"op\":\"layer_norm_backward\",\"variant\":%d,\"case\":\"%s\",\"device\":\"%s\","
                   "\"shape\":[%lld,%lld],\"ms\":%.4f,\"bytes\":%.0f,\"gbps\":%.1f,\"copy_gbps\":%.1f,"
                   "\"pct_copy_roof\":%.1f}\n",
                   v, cases[i].name, dev, (long long)c->rows, (long long)c->n, ms, bytes, gbps, copy_gbps,
                   100 * gbps / copy_gbps);
            fflush(stdout);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    cfg c = {.dt = TD_F32, .rows = 16384, .n = 768, .iters = 50};
    const char *dev = "cuda:0";
    bool do_sweep = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--sweep")) do_sweep = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sweep"))
            i--;
        else if (!strcmp(argv[i], "--device"))
            dev = argv[i + 1];
        else if (!strcmp(argv[i], "--dtype"))
            c.dt = !strcmp(argv[i + 1], "bf16") ? TD_BF16 : !strcmp(argv[i + 1], "f16") ? TD_F16 : TD_F32;
        else if (!strcmp(argv[i], "--rows"))
            c.rows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            c.n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            c.iters = atoi(argv[i + 1]);
    }
    if (c.iters < 1 || c.rows < 1 || c.n < 1) c.iters = 1, c.rows = c.rows < 1 ? 1 : c.rows, c.n = c.n < 1 ? 1 : c.n;
    if (td_device_parse(dev, &c.dev) != TD_OK || !td_device_available(c.dev)) {
        fprintf(stderr, "bench_layernorm_bwd: device %s not available\n", dev);
        return 77;
    }
    td_scope_begin();
    if (do_sweep) {
        int rc = sweep(&c, dev);
        td_scope_end();
        return rc;
    }
    int64_t shape[2] = {c.rows, c.n}, bshape[2] = {c.rows, 4 * c.n};
    args a = {
        .dy = td_randn(2, shape, 1, 0, c.dt, c.dev),
        .x = td_randn(2, shape, 2, 0, c.dt, c.dev),
        .w = td_randn(1, &c.n, 3, 0, c.dt, c.dev),
        .mean = td_randn(1, &c.rows, 4, 0, c.dt, c.dev),
        .rstd = td_add_scalar(td_abs(td_randn(1, &c.rows, 5, 0, c.dt, c.dev)), 0.5),
        .big = td_randn(2, bshape, 6, 0, c.dt, c.dev),
    };
    if (!a.dy || !a.x || !a.w || !a.mean || !a.rstd || !a.big) {
        fprintf(stderr, "bench_layernorm_bwd: %s\n", td_last_error());
        return 1;
    }
    double row_bytes = (double)c.rows * (double)c.n * (double)td_dtype_size(c.dt);
    double copy_ms = time_calls(&c, copy, &a), copy_gbps = 2 * 4 * row_bytes / (copy_ms * 1e6);
    const char *variant = getenv("TRIDENT_CUDA_LN_BWD");
    const char *impl = strncmp(dev, "cuda", 4) ? "op" : variant ? variant : "default";
    for (int add = 0; add < 2; add++) {
        a.ds = add ? td_randn(2, shape, 7, 0, c.dt, c.dev) : NULL;
        double ms = time_calls(&c, ln_bwd, &a), bytes = (3 + add) * row_bytes, gbps = bytes / (ms * 1e6);
        if (ms < 0) return 1;
        printf("{\"op\":\"%s_backward\",\"impl\":\"%s\",\"device\":\"%s\",\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
               "\"ms\":%.4f,\"bytes\":%.0f,\"gbps\":%.1f,\"copy_gbps\":%.1f,\"pct_copy_roof\":%.1f}\n",
               add ? "add_layer_norm" : "layer_norm", impl, dev, td_dtype_name(c.dt), (long long)c.rows, (long long)c.n,
               ms, bytes, gbps, copy_gbps, 100 * gbps / copy_gbps);
    }
    td_scope_end();
    return 0;
}
