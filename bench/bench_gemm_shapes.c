/*
** td_matmul timed on one device for given shapes, to sweep the Vulkan GEMM's skinny tiles and split-K
** (scripts/vk-skinny-sweep; knobs in src/backend_vulkan/vk_ops_matmul.c's top comment).
**   bench_gemm_shapes [--device vulkan:0] [--iters 200] [--dtype f32|f16|bf16] [MxKxN[t][T] ...]
** Each shape is a [M, K] @ [K, N] in --dtype (default f32); a trailing t stores a as [K, M] and multiplies its
** transpose (a weight gradient's dy^T), a T stores b as [N, K] and multiplies its transpose (Linear's x @ W^T,
** W [N, K]); the TFLOP/s of f16 and bf16 run on the Vulkan cooperative-matrix kernels (scripts/vk-coop-sweep).
** Default shapes: W6's LSTM step products 32x512x2048 (h @ W_hh^T) and 32x2048x512
** (dgates @ W_hh), and W3's widest weight gradient 384x16384x1536t. Prints one line per shape: the mean ms
** of --iters calls enqueued back to back after 5 warm-up calls (td_synchronize before and after, the host's
** clock) and its TFLOP/s (2 M K N per call).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "trident/trident.h"

/* One call of a @ b (a transposed when at, b when bt) in its own scope: false on an error (said on stderr). */
static bool gemm(td_tensor *a, td_tensor *b, bool at, bool bt) {
    td_scope_begin();
    bool ok = td_matmul(at ? td_transpose(a, 0, 1) : a, bt ? td_transpose(b, 0, 1) : b) != NULL;
    td_scope_end();
    if (!ok) fprintf(stderr, "bench_gemm_shapes: %s\n", td_last_error());
    return ok;
}

/* A randn tensor of shape [r, c] in dt (drawn in f32, then cast), seed seed, or NULL on an error */
static td_tensor *operand(int64_t r, int64_t c, uint64_t seed, td_dtype dt, td_device dev) {
    td_tensor *x = td_randn(2, (int64_t[]){r, c}, seed, 0, TD_F32, dev);
    return x && dt != TD_F32 ? td_cast(x, dt) : x;
}

/* ms per call of a @ b over iters calls after 5 warm-up calls, or -1 on an error */
static double time_gemm(td_device dev, td_tensor *a, td_tensor *b, bool at, bool bt, int iters) {
    for (int i = 0; i < 5; i++)
        if (!gemm(a, b, at, bt)) return -1;
    if (td_synchronize(dev) != TD_OK) return -1;
    double t0 = bench_now_s();
    for (int i = 0; i < iters; i++)
        if (!gemm(a, b, at, bt)) return -1;
    if (td_synchronize(dev) != TD_OK) return -1;
    return (bench_now_s() - t0) * 1e3 / iters;
}

int main(int argc, char **argv) {
    const char *dev_name = "vulkan:0", *dflt[3] = {"32x512x2048", "32x2048x512", "384x16384x1536t"};
    const char **shapes = malloc(sizeof(char *) * (size_t)argc);
    int iters = 200, n_shapes = 0;
    td_dtype dt = TD_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev_name = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *n = argv[++i];
            if (strcmp(n, "f32") && strcmp(n, "f16") && strcmp(n, "bf16")) {
                fprintf(stderr, "bench_gemm_shapes: --dtype %s: want f32, f16 or bf16\n", n);
                free(shapes);
                return 2;
            }
            dt = !strcmp(n, "f16") ? TD_F16 : !strcmp(n, "bf16") ? TD_BF16 : TD_F32;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
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
        char suf[4] = "";
        int got = sscanf(shapes[s], "%lldx%lldx%lld%3s", &M, &K, &N, suf);
        bool at = suf[0] == 't', bt = suf[at] == 'T';
        if (got < 3 || M < 1 || K < 1 || N < 1 || suf[at + bt]) {
            fprintf(stderr, "bench_gemm_shapes: shape %s: want MxKxN, then t (a transposed) and/or T (b transposed)\n",
                    shapes[s]);
            free(shapes);
            return 2;
        }
        td_scope_begin();
        td_tensor *a = at ? operand(K, M, 1, dt, dev) : operand(M, K, 1, dt, dev);
        td_tensor *b = bt ? operand(N, K, 2, dt, dev) : operand(K, N, 2, dt, dev);
        double ms = a && b ? time_gemm(dev, a, b, at, bt, iters) : -1;
        td_scope_end();
        if (ms < 0) {
            if (!a || !b) fprintf(stderr, "bench_gemm_shapes: %s\n", td_last_error());
            rc = 1;
            continue;
        }
        printf("  gemm %lldx%lldx%lld%-2s %8.4f ms %6.2f TFLOP/s\n", M, K, N, suf, ms,
               2.0 * (double)M * (double)K * (double)N / (ms * 1e9));
    }
    free(shapes);
    return rc;
}
