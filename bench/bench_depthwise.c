/*
** Depthwise conv2d (groups = C_in = C_out) on the CPU: forward and forward+backward (dx, dw, db),
** float32, on the MobileNet-like shapes below; bench/torch_depthwise.py times the same in PyTorch.
**   bench_depthwise [--iters 20] [--shape i]   (i: one row of shapes[], all by default)
** Prints one JSON line per shape: median and min ms over --iters calls after 2 warm-up calls, each
** call in its own scope. Threads: OMP_NUM_THREADS (run both with the same count).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "trident/trident.h"

/* N, C, H, W, k, stride */
static const int shapes[][6] = {{8, 32, 112, 112, 3, 1}, {8, 64, 112, 112, 3, 2}, {8, 128, 56, 56, 3, 1},
                                {8, 256, 28, 28, 3, 1},  {8, 512, 14, 14, 3, 1},  {8, 96, 56, 56, 5, 1}};

static double run(const int *s, bool backward) {
    td_scope_begin();
    int64_t N = s[0], C = s[1], H = s[2], W = s[3], k = s[4];
    td_tensor *x = td_randn(4, (int64_t[]){N, C, H, W}, 1, 0, TD_F32, TD_CPU);
    td_tensor *w = td_randn(4, (int64_t[]){C, 1, k, k}, 2, 0, TD_F32, TD_CPU), *b = td_zeros(1, &C, TD_F32, TD_CPU);
    if (backward) td_set_requires_grad(x, true), td_set_requires_grad(w, true), td_set_requires_grad(b, true);
    int st[2] = {s[5], s[5]}, pd[2] = {(int)k / 2, (int)k / 2}, dl[2] = {1, 1};
    double t0 = bench_now_s();
    td_tensor *y = td_conv2d(x, w, b, st, pd, dl, (int)C);
    if (backward)
        td_backward(td_sum(y, 0, NULL, false), NULL, false);
    else
        td_item(td_select(td_flatten(y, 0, -1), 0, 0));
    double ms = (bench_now_s() - t0) * 1e3;
    if (!y) fprintf(stderr, "bench_depthwise: %s\n", td_last_error());
    td_scope_end();
    return ms;
}

int main(int argc, char **argv) {
    int iters = 20, only = -1;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shape"))
            only = atoi(argv[i + 1]);
    if (iters < 1) iters = 1;
    double *t = malloc((size_t)iters * sizeof *t);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int bw = 0; bw < 2 && (only < 0 || (size_t)only == i); bw++) {
            const int *s = shapes[i];
            for (int r = 0; r < 2; r++) run(s, bw);
            for (int r = 0; r < iters; r++) t[r] = run(s, bw);
            double med = bench_median_inplace(t, iters);
            printf("{\"impl\":\"trident\",\"shape\":[%d,%d,%d,%d],\"k\":%d,\"stride\":%d,\"pass\":\"%s\",\"median_ms\":"
                   "%.3f,"
                   "\"min_ms\":%.3f}\n",
                   s[0], s[1], s[2], s[3], s[4], s[5], bw ? "fwd+bwd" : "fwd", med, t[0]);
            fflush(stdout);
        }
    free(t);
    return 0;
}
