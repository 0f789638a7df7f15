/*
** custom_ops: the example custom ops of this folder, from the command line.
**   custom_ops check [--device D]   each op against its composed reference, and gradcheck
**   custom_ops train [--device D]   the W1 MLP with GELU, fused against composed, 20 steps
** D is cpu, vulkan:0, cuda:0 ... (default: every present device).
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "custom_ops.h"

static custom_ops ops;

/* max |a - b| of two tensors read as f64 (at most 1 << 20 elements) */
static double max_diff(td_tensor *a, td_tensor *b) {
    static double x[1 << 20], y[1 << 20];
    int64_t n = td_numel(a);
    if (!a || !b || n > (1 << 20) || td_copy_to_host(a, x, sizeof(double) * (size_t)n, TD_F64) != TD_OK ||
        td_copy_to_host(b, y, sizeof(double) * (size_t)n, TD_F64) != TD_OK)
        return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
    return m;
}

static int check(td_device dev) {
    char d[32];
    td_device_str(dev, d, sizeof d);
    td_scope_begin();
    td_tensor *x = td_randn(2, (int64_t[]){64, 300}, 1, 0, TD_F32, dev),
              *b = td_randn(1, (int64_t[]){300}, 2, 0, TD_F32, dev);
    double e1 = max_diff(bias_gelu(&ops, x, b), bias_gelu_ref(x, b));
    double e2 = max_diff(rmsnorm(&ops, x, b, 1e-5f), rmsnorm_ref(x, b, 1e-5f));
    td_tensor *val, *idx;
    double e3 = top1(&ops, x, &val, &idx) == TD_OK
                    ? max_diff(val, td_amax(x, 1, (int[]){1}, false)) + max_diff(idx, td_argmax(x, 1, false))
                    : INFINITY;
    td_tensor *x64 = td_cast(td_randn(2, (int64_t[]){3, 7}, 3, 0, TD_F32, dev), TD_F64);
    td_tensor *b64 = td_cast(td_randn(1, (int64_t[]){7}, 4, 0, TD_F32, dev), TD_F64);
    td_set_requires_grad(x64, true), td_set_requires_grad(b64, true);
    td_gradcheck_options loose = {1e-2, 2e-3, 2e-2}; /* kernels that compute in f32 */
    td_status g1 =
        td_gradcheck(bias_gelu_fn, &ops, 2, (td_tensor *[]){x64, b64}, dev.type == TD_DEVICE_VULKAN ? &loose : NULL);
    td_status g2 =
        td_gradcheck(rmsnorm_fn, &ops, 2, (td_tensor *[]){x64, b64}, dev.type == TD_DEVICE_CPU ? NULL : &loose);
    printf("%-10s bias_gelu max diff %.2g, gradcheck %s | rmsnorm max diff %.2g, gradcheck %s | top1 diff %g\n", d, e1,
           g1 == TD_OK ? "ok" : td_last_error(), e2, g2 == TD_OK ? "ok" : td_last_error(), e3);
    td_scope_end();
    return e1 < 1e-5 && e2 < 1e-5 && e3 == 0 && g1 == TD_OK && g2 == TD_OK ? 0 : 1;
}

static int train(td_device dev) {
    double fused[20], composed[20], worst = 0;
    char d[32];
    td_device_str(dev, d, sizeof d);
    if (mlp_train(&ops, dev, 20, 7, fused) != TD_OK || mlp_train(NULL, dev, 20, 7, composed) != TD_OK) {
        fprintf(stderr, "%s: %s\n", d, td_last_error());
        return 1;
    }
    printf("%s: W1 MLP with GELU, 20 Adam steps\nstep  fused bias_gelu  composed (linear + gelu)\n", d);
    for (int s = 0; s < 20; s++) {
        printf("%4d  %.7f      %.7f\n", s + 1, fused[s], composed[s]);
        worst = fmax(worst, fabs(fused[s] - composed[s]));
    }
    printf("max |fused - composed| = %.3g (%s 1e-5)\n", worst, worst <= 1e-5 ? "within" : "NOT within");
    return worst <= 1e-5 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "check") && strcmp(argv[1], "train"))) {
        fprintf(stderr, "usage: custom_ops check|train [--device D]\n");
        return 2;
    }
    td_device devs[3] = {TD_CPU, TD_VULKAN(0), TD_CUDA(0)};
    int n = 3;
    if (argc == 4 && !strcmp(argv[2], "--device")) {
        if (td_device_parse(argv[3], &devs[0]) != TD_OK) return fprintf(stderr, "%s\n", td_last_error()), 2;
        n = 1;
    }
    if (custom_ops_register(&ops, CUSTOM_OPS_DIR) != TD_OK) return fprintf(stderr, "%s\n", td_last_error()), 1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (!td_device_available(devs[i])) {
            char d[32];
            printf("%s: not present, skipped\n", td_device_str(devs[i], d, sizeof d));
            continue;
        }
        rc |= !strcmp(argv[1], "check") ? check(devs[i]) : train(devs[i]);
    }
    custom_ops_free(&ops);
    return rc;
}
