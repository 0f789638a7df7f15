/*
** td_matmul timed on one device for given shapes, to sweep the Vulkan GEMM's skinny tiles and split-K
** (scripts/vk-skinny-sweep; knobs in src/backend_vulkan/vk_ops_matmul.c's top comment).
**   bench_gemm_shapes [--device vulkan:0] [--iters 200] [MxKxN[t] ...]
** Each shape is a [M, K] @ [K, N] in f32; a trailing t stores a as [K, M] and multiplies its transpose (a weight
** gradient's dy^T). Default shapes: W6's LSTM step products 32x512x2048 (h @ W_hh^T) and 32x2048x512
** (dgates @ W_hh), and W3's widest weight gradient 384x16384x1536t. Prints one line per shape: the mean ms
** of --iters calls enqueued back to back after 5 warm-up calls (td_synchronize before and after, the host's
** clock) and its TFLOP/s (2 M K N per call).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "trident/trident.h"

/* One call of a @ b (a transposed when at) in its own scope: false on an error (said on stderr). */
static bool gemm(td_tensor *a, td_tensor *b, bool at) {
    td_scope_begin();
    bool ok = td_matmul(at ? td_transpose(a, 0, 1) : a, b) != NULL;
    td_scope_end();
    if (!ok) fprintf(stderr, "bench_gemm_shapes: %s\n", td_last_error());
    return ok;
}

/* ms per call of a @ b over iters calls after 5 warm-up calls, or -1 on an error */
static double time_gemm(td_device dev, td_tensor *a, td_tensor *b, bool at, int iters) {
    for (int i = 0; i < 5; i++)
        if (!gemm(a, b, at)) return -1;
    if (td_synchronize(dev) != TD_OK) return -1;
    double t0 = bench_now_s();
    for (int i = 0; i < iters; i++)
        if (!gemm(a, b, at)) return -1;
    if (td_synchronize(dev) != TD_OK) return -1;
    return (bench_now_s() - t0) * 1e3 / iters;
}

int main(int argc, char **argv) {
    const char *dev_name = "vulkan:0", *dflt[3] = {"32x512x2048", "32x2048x512", "384x16384x1536t"};
    const char **shapes = malloc(sizeof(char *) * (size_t)argc);
    int iters = 200, n_shapes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev_name = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else
            shapes[n_shapes++] = argv[i];
    }
    if (n_shapes == 0) memcpy(shapes, dflt, sizeof dflt), n_shapes = 3;
    if (iters < 1) iters = 1;
    td_device dev;
    if (td_device_parse(dev_name, &dev) != TD_OK || !td_device_available(dev)) {
        fprintf(stderr, "bench_gemm_shapes: device %s not available\n", dev_name);
        return 77;
    }
    int rc = 0;
    for (int s = 0; s < n_shapes; s++) {
        long long M, K, N;
        char t = 0;
        if (sscanf(shapes[s], "%lldx%lldx%lld%c", &M, &K, &N, &t) < 3 || M < 1 || K < 1 || N < 1 || (t && t != 't')) {
            fprintf(stderr, "bench_gemm_shapes: shape %s: want MxKxN or MxKxNt\n", shapes[s]);
            free(shapes);
            return 2;
        }
        td_scope_begin();
        bool at = t == 't';
        td_tensor *a = td_randn(2, at ? (int64_t[]){K, M} : (int64_t[]){M, K}, 1, 0, TD_F32, dev);
        td_tensor *b = td_randn(2, (int64_t[]){K, N}, 2, 0, TD_F32, dev);
        double ms = a && b ? time_gemm(dev, a, b, at, iters) : -1;
        td_scope_end();
        if (ms < 0) {
            if (!a || !b) fprintf(stderr, "bench_gemm_shapes: %s\n", td_last_error());
            rc = 1;
            continue;
        }
        printf("  gemm %lldx%lldx%lld%s %8.4f ms %6.2f TFLOP/s\n", M, K, N, at ? "t" : " ", ms,
               2.0 * (double)M * (double)K * (double)N / (ms * 1e9));
    }
    free(shapes);
    return rc;
}
