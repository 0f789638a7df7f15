/*
** Fused attention forward and forward+backward, timed on one device, beside the
** same attention composed from ops (matmul, softmax, matmul) as the baseline.
**   bench_attention [--device cuda:0] [--dtype bf16|f16|f32] [--batch 8] [--heads 12] [--seq 1024]
**                   [--head-dim 64] [--causal 0|1] [--iters 20] [--composed 0|1] [--check 0|1]
** Prints one JSON line per measurement: median ms over --iters calls after 3 warm-up calls, each call in its
** own scope and followed by td_synchronize (the clock is the host's). bench/attention_vs_torch.sh runs it
** beside bench/torch_attention.py (torch.nn.functional.scaled_dot_product_attention) and prints the ratios.
** On CUDA, TRIDENT_CUDA_ATTN=own|cudnn picks our kernels or cuDNN's fused attention; the row's impl then reads
** "trident-own" or "trident-cudnn"; in f32, TRIDENT_CUDA_ATTN_F32_CFG=0..7|wmma picks the kernels' tile configuration
** (cu_attention_tf32.cuh), named by a "-f32cfg<N>" suffix, and TRIDENT_CUDA_ATTN_F32_BWD=0..10 the backward's
** variant, "-f32bwd<N>" (scripts/attn-f32-sweep runs each). bwd_ms is fwd_bwd_ms - fwd_ms. --check 1 adds
** "max_err": the largest |fused - composed| over out, dq, dk and dv, each over that tensor's largest |composed|.
** On Vulkan, TRIDENT_VK_ATTN=coopmat|scalar picks the tensor-core (f16 and bf16, forward and backward) or scalar
** shaders, named likewise ("trident-coopmat", "trident-scalar"); bench/attention_vk.sh runs both beside composed.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trident/trident.h"

typedef struct cfg {
    td_device dev;
    td_dtype dt;
    int64_t b, h, t, d;
    bool causal, composed, check;
    int iters;
} cfg;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* out = softmax(q k^T / sqrt(d) + causal) v, from ops */
static td_tensor *composed(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *mask) {
    td_tensor *s = td_matmul(td_mul_scalar(q, 1.0 / sqrt((double)td_size(q, 3))), td_transpose(k, -1, -2));
    if (mask) s = td_add(s, mask);
    return td_matmul(td_softmax(s, -1), v);
}

/* the attention of x (fused, or composed with mask) and the gradients g[3] of x for dy, in the caller's scope */
static td_tensor *attend(const cfg *c, bool fused, td_tensor *const *x, td_tensor *dy, td_tensor *mask, td_tensor **g) {
    td_tensor *y = fused ? td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, c->causal, NAN)
                         : composed(x[0], x[1], x[2], mask);
    if (!y || td_grad(1, &y, &dy, 3, x, g, false, false, false) != TD_OK) return NULL;
    return y;
}

/* the largest of max |a - b| / max |b| over out, dq, dk, dv (f32), fused as a and composed as b; NAN on errors */
static double check(const cfg *c, td_tensor *const *x, td_tensor *dy, td_tensor *mask) {
    td_scope_begin();
    td_tensor *a[4], *b[4];
    double err = NAN;
    if ((a[0] = attend(c, true, x, dy, NULL, a + 1)) && (b[0] = attend(c, false, x, dy, mask, b + 1))) {
        err = 0;
        for (int i = 0; i < 4; i++) {
            td_tensor *fa = td_cast(a[i], TD_F32), *fb = td_cast(b[i], TD_F32);
            double d = td_item(td_amax(td_abs(td_sub(fa, fb)), 0, NULL, false)),
                   m = td_item(td_amax(td_abs(fb), 0, NULL, false));
            err = fmax(err, m > 0 ? d / m : d);
        }
    }
    td_scope_end();
    return err;
}

/* One call: forward (backward: also the gradients of q, k, v). */
static td_status step(const cfg *c, td_tensor *const *x, td_tensor *dy, td_tensor *mask, bool backward) {
    td_scope_begin();
    td_tensor *y = c->composed ? composed(x[0], x[1], x[2], mask)
                               : td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, c->causal, NAN);
    td_status st = y ? TD_OK : td_last_status();
    td_tensor *g[3] = {NULL, NULL, NULL};
    if (st == TD_OK && backward) st = td_grad(1, &y, &dy, 3, x, g, false, false, false);
    if (st == TD_OK) st = td_synchronize(c->dev);
    td_scope_end();
    return st;
}

static double run(const cfg *c, td_tensor *const *x, td_tensor *dy, td_tensor *mask, bool backward) {
    double *ms = malloc((size_t)c->iters * sizeof *ms);
    for (int i = -3; i < c->iters; i++) {
        double t0 = now_ms();
        if (step(c, x, dy, mask, backward) != TD_OK) {
            fprintf(stderr, "bench_attention: %s\n", td_last_error());
            exit(1);
        }
        if (i >= 0) ms[i] = now_ms() - t0;
    }
    qsort(ms, (size_t)c->iters, sizeof *ms, cmp);
    double med = ms[c->iters / 2];
    free(ms);
    return med;
}

int main(int argc, char **argv) {
    cfg c = {.dev = TD_CPU, .dt = TD_F32, .b = 8, .h = 12, .t = 1024, .d = 64, .causal = true, .iters = 20};
    const char *dev = "cpu", *dt = "f32";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--device"))
            dev = v;
        else if (!strcmp(k, "--dtype"))
            dt = v;
        else if (!strcmp(k, "--batch"))
            c.b = atoll(v);
        else if (!strcmp(k, "--heads"))
            c.h = atoll(v);
        else if (!strcmp(k, "--seq"))
            c.t = atoll(v);
        else if (!strcmp(k, "--head-dim"))
            c.d = atoll(v);
        else if (!strcmp(k, "--causal"))
            c.causal = atoi(v);
        else if (!strcmp(k, "--iters"))
            c.iters = atoi(v) > 0 ? atoi(v) : 1;
        else if (!strcmp(k, "--composed"))
            c.composed = atoi(v);
        else if (!strcmp(k, "--check"))
            c.check = atoi(v);
        else {
            fprintf(stderr, "bench_attention: unknown option '%s'\n", k);
            return 2;
        }
    }
    if (td_device_parse(dev, &c.dev) != TD_OK || !td_device_available(c.dev)) {
        fprintf(stderr, "bench_attention: device '%s' is not available: %s\n", dev, td_last_error());
        return 1;
    }
    c.dt = !strcmp(dt, "bf16") ? TD_BF16 : !strcmp(dt, "f16") ? TD_F16 : TD_F32;
    int64_t shape[4] = {c.b, c.h, c.t, c.d};
    td_tensor *x[3], *mask = NULL;
    for (int i = 0; i < 3; i++) {
        x[i] = td_keep(td_detach(td_cast(td_randn(4, shape, 1234, (uint64_t)i << 40, TD_F32, c.dev), c.dt)));
        if (!x[i] || td_set_requires_grad(x[i], true) != TD_OK) {
            fprintf(stderr, "bench_attention: inputs: %s\n", td_last_error());
            return 1;
        }
    }
    td_tensor *dy = td_keep(td_cast(td_randn(4, shape, 99, 0, TD_F32, c.dev), c.dt));
    if ((c.composed || c.check) && c.causal) { /* the additive causal mask, as W3 built it before the fused op */
        int64_t tt[2] = {c.t, c.t};
        td_tensor *above = td_gt(td_triu(td_full(2, tt, 1, TD_F32, c.dev), 1), td_scalar(0, TD_F32, c.dev));
        mask = td_keep(td_cast(td_masked_fill(td_zeros(2, tt, TD_F32, c.dev), above, -INFINITY), c.dt));
    }
    double fwd = run(&c, x, dy, mask, false), both = run(&c, x, dy, mask, true);
    double err = c.check ? check(&c, x, dy, mask) : NAN;
    /* flops of the two matmuls (4 b h t^2 d), halved when causal; backward 2.5x the forward */
    double fl = 4.0 * (double)(c.b * c.h * c.t) * (double)(c.t * c.d) * (c.causal ? 0.5 : 1);
    const char *pick = getenv(c.dev.type == TD_DEVICE_VULKAN ? "TRIDENT_VK_ATTN" : "TRIDENT_CUDA_ATTN"),
               *f32cfg = getenv("TRIDENT_CUDA_ATTN_F32_CFG"), *f32bwd = getenv("TRIDENT_CUDA_ATTN_F32_BWD");
    char impl[96], errs[48] = "";
    int w = snprintf(impl, sizeof impl, "trident%s%s%s", c.composed ? "-composed" : "", pick && !c.composed ? "-" : "",
                     pick && !c.composed ? pick : "");
    /* Vulkan bf16: the switch of the native or scaled kernels, where set (vk_ops_attention.c's attn_native) */
    const char *bfp = getenv("TRIDENT_VK_ATTN_BF16");
    if (!bfp || !*bfp) bfp = getenv("TRIDENT_VK_BF16");
    if (bfp && *bfp && c.dev.type == TD_DEVICE_VULKAN && c.dt == TD_BF16 && !c.composed)
        w += snprintf(impl + w, sizeof impl - (size_t)w, "-bf16%s", bfp);
    if (f32cfg && c.dt == TD_F32 && !c.composed) w += snprintf(impl + w, sizeof impl - (size_t)w, "-f32cfg%s", f32cfg);
    if (f32bwd && c.dt == TD_F32 && !c.composed) snprintf(impl + w, sizeof impl - (size_t)w, "-f32bwd%s", f32bwd);
    if (c.check) snprintf(errs, sizeof errs, ", \"max_err\": %.3g", isnan(err) ? -1.0 : err);
    printf("{\"impl\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld], "
           "\"causal\": %s, \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_tflops\": %.2f, "
           "\"fwd_bwd_tflops\": %.2f%s}\n",
           impl, dev, dt, (long long)c.b, (long long)c.h, (long long)c.t, (long long)c.d, c.causal ? "true" : "false",
           fwd, both, both - fwd, fl / fwd * 1e-9, 3.5 * fl / both * 1e-9, errs);
    return 0;
}
