/*
** gemm_epilogue_sweep: W5's GEMMs (GPT-2 small, 16x1024 tokens) on cuBLASLt directly, each with the epilogue
** Trident gives it (src/backend_cuda/cu_blaslt.c), to tell whether the epilogue or the algorithm choice costs
** (issue 22). For each shape, in bf16 (fp32 compute) and f32 (strict fp32, TF32 off), it prints:
**   a header: the same GEMM without the epilogue (heuristic #1, and the best of its first 8), and the separate
**             elementwise pass the epilogue replaces, estimated as the bytes it moves at the device's D2D copy
**             bandwidth (unfused ~ plain + pass);
**   one line per algorithm of the heuristic's first 8 for the GEMM with the epilogue: its config (algo id, tile,
**             stages, split-K, swizzle, cluster), ms per call and TFLOP/s (2 M N K / t).
** Timing: 2 warm-up calls, then reps calls between CUDA events (mean); operands of random values, no L2 flush
** (every operand but the biases is larger than an H100's L2, as in training).
** The shapes, row-major as Trident's ops see them (Lt computes the transposed product, column-major: its D is
** n x m, op(A) n x k, op(B) k x m):
**   fc1        h = x[16384,768] w[3072,768]^T + b, y = gelu(h): GELU_AUX_BIAS (y out, h kept as aux)   Lt TN
**   fc2.dgelu  dh = (dy[16384,768] w[768,3072]) gelu'(h[16384,3072]): DGELU                             Lt NN
**   attn.proj  y = x[16384,768] w[768,768]^T + b: BIAS                                                   Lt TN
**   qkv        y = x[16384,768] w[2304,768]^T + b: BIAS                                                  Lt TN
**   fc2.wgrad  dw[768,3072] = dy[16384,768]^T x[16384,3072], db = sum_rows dy: BGRADB                    Lt NT
** wgrad mode: W5's four weight gradients (qkv, attn.proj, fc1, fc2: dw[m, n] = dy[16384, m]^T x[16384, n]) in bf16
** with D in f32 (LINEAR_WGRAD's f32 dw for f32 leaves under autocast) and in bf16, and in f32, with BGRADB and
** without, under the 32 MiB workspace and a 256 MiB one: per variant the heuristic's #1 and the best of its first
** 32 (split-K configurations need workspace), and the column-sum pass that BGRADB replaces (read dy once).
** Usage: gemm_epilogue_sweep [bf16|f32|all|wgrad] [reps]   (defaults: all, 20)
** Build (CUDA builds only): ninja -C build gemm_epilogue_sweep; run: build/bench/gemm_epilogue_sweep
*/
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "gemm_epilogue_sweep: %s: %s\n", #x, cudaGetErrorString(e_));                              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define LT_CHECK(x)                                                                                                    \
    do {                                                                                                               \
        cublasStatus_t s_ = (x);                                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            fprintf(stderr, "gemm_epilogue_sweep: %s: cuBLAS status %d\n", #x, (int)s_);                               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { ALGOS = 8, WGRAD_ALGOS = 32, WARMUP = 2 };
#define WORKSPACE ((size_t)32 << 20) /* Trident's on Hopper (cu_device.c) */

/* One GEMM in Lt's column-major terms: D (n x m) = op(A) (n x k) op(B) (k x m), with epilogue epi. */
typedef struct gemm_case {
    const char *name;
    cublasLtEpilogue_t epi;
    const char *epi_name;
    int64_t n, m, k;
    int ta, tb;
    double pass_mn; /* the separate elementwise pass's traffic, in units of n*m elements (BGRADB: of k*m) */
} gemm_case;

static const gemm_case cases[] = {
    /* GELU pass: read h, write y */
    {"fc1", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS", 3072, 16384, 768, 1, 0, 2},
    /* GELU_BACKWARD in place: read g and h, write dh */
    {"fc2.dgelu", CUBLASLT_EPILOGUE_DGELU, "DGELU", 3072, 16384, 768, 0, 0, 3},
    /* ADD: read y, write y (the bias is small) */
    {"attn.proj", CUBLASLT_EPILOGUE_BIAS, "BIAS", 768, 16384, 768, 1, 0, 2},
    {"qkv", CUBLASLT_EPILOGUE_BIAS, "BIAS", 2304, 16384, 768, 1, 0, 2},
    /* SUM over dy's rows: read dy (k x m) once */
    {"fc2.wgrad", CUBLASLT_EPILOGUE_BGRADB, "BGRADB", 3072, 768, 16384, 0, 1, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct sweep {
    cublasLtHandle_t lt;
    cudaStream_t s;
    void *ws;
    size_t ws_size;               /* WORKSPACE, or the wgrad mode's larger one */
    void *a, *b, *d, *aux, *bias; /* each big enough for the largest case in f32 */
    cudaEvent_t e0, e1;
    int reps;
    double copy_gbs; /* D2D copy bandwidth, bytes read + written per second / 1e9 */
} sweep;

/* Lt's descriptor and layouts of c in dtype ty (epi: CUBLASLT_EPILOGUE_DEFAULT for the plain GEMM). */
static void describe_d(const sweep *sw, const gemm_case *c, cudaDataType_t ty, cudaDataType_t dty,
                       cublasLtEpilogue_t epi, cublasLtMatmulDesc_t *op, cublasLtMatrixLayout_t l[3]) {
    cublasOperation_t ta = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescCreate(op, CUBLAS_COMPUTE_32F, CUDA_R_32F)); /* f32: strict, no TF32 */
    LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_BGRADB)
        LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &sw->bias, sizeof sw->bias));
    if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU) {
        int64_t ld = c->n; /* aux is n x m like D */
        LT_CHECK(
            cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &sw->aux, sizeof sw->aux));
        LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    LT_CHECK(cublasLtMatrixLayoutCreate(&l[0], ty, c->ta ? c->k : c->n, c->ta ? c->n : c->k, c->ta ? c->k : c->n));
    LT_CHECK(cublasLtMatrixLayoutCreate(&l[1], ty, c->tb ? c->m : c->k, c->tb ? c->k : c->m, c->tb ? c->m : c->k));
    LT_CHECK(cublasLtMatrixLayoutCreate(&l[2], dty, c->n, c->m, c->n));
    if (epi == CUBLASLT_EPILOGUE_BGRADB && dty != ty) { /* the bias gradient in D's dtype */
        cudaDataType_t bt = dty;
        LT_CHECK(cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
}

static void describe(const sweep *sw, const gemm_case *c, cudaDataType_t ty, cublasLtEpilogue_t epi,
                     cublasLtMatmulDesc_t *op, cublasLtMatrixLayout_t l[3]) {
    describe_d(sw, c, ty, ty, epi, op, l);
}

static void undescribe(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t l[3]) {
    cublasLtMatmulDescDestroy(op);
    for (int i = 0; i < 3; i++) cublasLtMatrixLayoutDestroy(l[i]);
}

/* The heuristic's first ALGOS algorithms for (op, l) within the workspace; how many in *found. */
static void heuristic_n(const sweep *sw, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t l[3], int want,
                        cublasLtMatmulHeuristicResult_t *res, int *found) {
    cublasLtMatmulPreference_t pref;
    uint64_t ws = sw->ws_size;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    *found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(sw->lt, op, l[0], l[1], l[2], l[2], pref, want, res, found) !=
        CUBLAS_STATUS_SUCCESS)
        *found = 0;
    cublasLtMatmulPreferenceDestroy(pref);
}

static void heuristic(const sweep *sw, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t l[3],
                      cublasLtMatmulHeuristicResult_t res[ALGOS], int *found) {
    heuristic_n(sw, op, l, ALGOS, res, found);
}

/* ms per call of algo, or -1 when Lt refuses it at launch. */
static double time_algo(const sweep *sw, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t l[3],
                        const cublasLtMatmulAlgo_t *algo) {
    const float one = 1, zero = 0;
    for (int r = 0; r < WARMUP + sw->reps; r++) {
        if (r == WARMUP) CHECK(cudaEventRecord(sw->e0, sw->s));
        if (cublasLtMatmul(sw->lt, op, &one, sw->a, l[0], sw->b, l[1], &zero, sw->d, l[2], sw->d, l[2], algo, sw->ws,
                           sw->ws_size, sw->s) != CUBLAS_STATUS_SUCCESS) {
            CHECK(cudaStreamSynchronize(sw->s));
            return -1;
        }
    }
    CHECK(cudaEventRecord(sw->e1, sw->s));
    CHECK(cudaEventSynchronize(sw->e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, sw->e0, sw->e1));
    return ms / sw->reps;
}

/* An algorithm's configuration, for the line. */
static void algo_config(const cublasLtMatmulAlgo_t *algo, char *out, size_t n) {
    int32_t id = 0, splitk = 1;
    uint32_t tile = 0, stages = 0, swizzle = 0;
    uint16_t cluster = 0;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &w);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
    snprintf(out, n, "algo %2d tile %3u stages %3u splitk %2d swz %u clus %2u", (int)id, tile, stages, (int)splitk,
             swizzle, (unsigned)cluster);
}

static void run_case(const sweep *sw, const gemm_case *c, cudaDataType_t ty, const char *tyname, size_t es) {
    double flop = 2.0 * (double)c->n * (double)c->m * (double)c->k;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l[3];
    cublasLtMatmulHeuristicResult_t res[ALGOS];
    int found;
    /* the plain GEMM: heuristic #1 and the best of its first ALGOS */
    describe(sw, c, ty, CUBLASLT_EPILOGUE_DEFAULT, &op, l);
    heuristic(sw, op, l, res, &found);
    double plain1 = -1, plain_best = -1;
    int plain_at = 0;
    for (int i = 0; i < found; i++) {
        double t = time_algo(sw, op, l, &res[i].algo);
        if (i == 0) plain1 = t;
        if (t > 0 && (plain_best < 0 || t < plain_best)) plain_best = t, plain_at = i + 1;
    }
    undescribe(op, l);
    double pass_elems = c->pass_mn * (double)(c->epi == CUBLASLT_EPILOGUE_BGRADB ? c->k : c->n) * (double)c->m;
    double pass_ms = pass_elems * (double)es / (sw->copy_gbs * 1e9) * 1e3;
    printf("%-4s %-9s %-13s %c%c n%-5lld m%-5lld k%-5lld | plain #1 %6.3f best %6.3f (#%d) | pass ~%5.3f "
           "unfused ~%6.3f ms\n",
           tyname, c->name, c->epi_name, c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', (long long)c->n, (long long)c->m,
           (long long)c->k, plain1, plain_best, plain_at, pass_ms, plain1 + pass_ms);
    /* with the epilogue */
    describe(sw, c, ty, c->epi, &op, l);
    heuristic(sw, op, l, res, &found);
    if (found == 0) printf("     no algorithm with the epilogue\n");
    for (int i = 0; i < found; i++) {
        char cfg[96];
        algo_config(&res[i].algo, cfg, sizeof cfg);
        double t = res[i].workspaceSize <= sw->ws_size ? time_algo(sw, op, l, &res[i].algo) : -1;
        if (t < 0)
            printf("  #%d %s  refused at launch\n", i + 1, cfg);
        else
            printf("  #%d %s ws %2zuM %7.3f ms %6.1f TF/s\n", i + 1, cfg, res[i].workspaceSize >> 20, t,
                   flop / (t * 1e-3) / 1e12);
    }
    undescribe(op, l);
}

/* W5's weight gradients in Lt's terms (as fc2.wgrad above): D (n x m) = dy^T-side op(A) (n x k) op(B) (k x m) */
static const gemm_case wgrad_cases[] = {
    {"qkv.wgrad", CUBLASLT_EPILOGUE_BGRADB, "BGRADB", 768, 2304, 16384, 0, 1, 1},
    {"proj.wgrad", CUBLASLT_EPILOGUE_BGRADB, "BGRADB", 768, 768, 16384, 0, 1, 1},
    {"fc1.wgrad", CUBLASLT_EPILOGUE_BGRADB, "BGRADB", 768, 3072, 16384, 0, 1, 1},
    {"fc2.wgrad", CUBLASLT_EPILOGUE_BGRADB, "BGRADB", 3072, 768, 16384, 0, 1, 1},
};

/* One wgrad variant: heuristic #1 and the best of the first WGRAD_ALGOS, with the best one's config. */
static void run_wgrad_variant(sweep *sw, const gemm_case *c, cudaDataType_t ty, cudaDataType_t dty,
                              cublasLtEpilogue_t epi, size_t ws_size) {
    double flop = 2.0 * (double)c->n * (double)c->m * (double)c->k;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l[3];
    cublasLtMatmulHeuristicResult_t res[WGRAD_ALGOS];
    int found;
    sw->ws_size = ws_size;
    describe_d(sw, c, ty, dty, epi, &op, l);
    heuristic_n(sw, op, l, WGRAD_ALGOS, res, &found);
    double first = -1, best = -1;
    int at = 0;
    for (int i = 0; i < found; i++) {
        double t = res[i].workspaceSize <= ws_size ? time_algo(sw, op, l, &res[i].algo) : -1;
        if (i == 0) first = t;
        if (t > 0 && (best < 0 || t < best)) best = t, at = i;
    }
    char cfg[96] = "-";
    if (found) algo_config(&res[at].algo, cfg, sizeof cfg);
    printf("  D %-4s %-7s ws %3zuM: %2d algos, #1 %6.4f ms (%5.1f TF/s), best #%-2d %6.4f ms (%5.1f TF/s) %s\n",
           dty == CUDA_R_32F ? "f32" : "bf16", epi == CUBLASLT_EPILOGUE_BGRADB ? "BGRADB" : "none", ws_size >> 20,
           found, first, flop / (first * 1e-3) / 1e12, at + 1, best, flop / (best * 1e-3) / 1e12, cfg);
    undescribe(op, l);
    sw->ws_size = WORKSPACE;
}

/* es 2: bf16 A and B, D in f32 and bf16; es 4: f32 (strict) throughout */
static void run_wgrad(sweep *sw, size_t es) {
    static const size_t big = (size_t)256 << 20;
    cudaDataType_t ty = es == 2 ? CUDA_R_16BF : CUDA_R_32F;
    for (int i = 0; i < (int)(sizeof wgrad_cases / sizeof wgrad_cases[0]); i++) {
        const gemm_case *c = &wgrad_cases[i];
        double pass_ms = (double)c->k * (double)c->m * (double)es / (sw->copy_gbs * 1e9) * 1e3; /* read dy once */
        printf("%-4s %-10s dw[%lld,%lld] k %lld | column-sum pass ~%5.3f ms\n", es == 2 ? "bf16" : "f32", c->name,
               (long long)c->m, (long long)c->n, (long long)c->k, pass_ms);
        for (int d = 0; d < (es == 2 ? 2 : 1); d++)
            for (int e = 0; e < 2; e++)
                for (int w = 0; w < 2; w++)
                    run_wgrad_variant(sw, c, ty, d ? CUDA_R_16BF : CUDA_R_32F,
                                      e ? CUBLASLT_EPILOGUE_DEFAULT : CUBLASLT_EPILOGUE_BGRADB, w ? big : WORKSPACE);
    }
}

/* A 64-bit LCG's high bits, values in [-1, 1) */
static float next_value(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

/* Every big buffer filled with random values of dtype es (2: bf16, rounded to nearest even; 4: f32). */
static void fill(const sweep *sw, size_t elems, size_t es) {
    unsigned char *host = malloc(elems * es);
    if (!host) {
        fprintf(stderr, "gemm_epilogue_sweep: out of host memory\n");
        exit(1);
    }
    uint64_t state = 42;
    void *bufs[4] = {sw->a, sw->b, sw->d, sw->aux};
    for (int j = 0; j < 4; j++) {
        for (size_t i = 0; i < elems; i++) {
            float v = next_value(&state);
            if (es == 4)
                memcpy(host + 4 * i, &v, 4);
            else {
                uint32_t u;
                memcpy(&u, &v, 4);
                uint16_t h = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
                memcpy(host + 2 * i, &h, 2);
            }
        }
        CHECK(cudaMemcpy(bufs[j], host, elems * es, cudaMemcpyHostToDevice));
    }
    CHECK(cudaMemcpy(sw->bias, host, 4096 * es, cudaMemcpyHostToDevice));
    free(host);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "all";
    sweep sw = {.reps = argc > 2 ? atoi(argv[2]) : 20, .ws_size = WORKSPACE};
    bool wgrad = !strcmp(which, "wgrad");
    if (strcmp(which, "all") && strcmp(which, "bf16") && strcmp(which, "f32") && !wgrad) {
        fprintf(stderr, "usage: gemm_epilogue_sweep [bf16|f32|all|wgrad] [reps]\n");
        return 2;
    }
    if (sw.reps < 1) sw.reps = 1;
    size_t elems = (size_t)3072 * 16384; /* the largest operand */
    CHECK(cudaStreamCreate(&sw.s));
    LT_CHECK(cublasLtCreate(&sw.lt));
    CHECK(cudaMalloc(&sw.ws, (size_t)256 << 20)); /* the wgrad mode's larger workspace */
    CHECK(cudaMalloc(&sw.a, elems * 4));
    CHECK(cudaMalloc(&sw.b, elems * 4));
    CHECK(cudaMalloc(&sw.d, elems * 4));
    CHECK(cudaMalloc(&sw.aux, elems * 4));
    CHECK(cudaMalloc(&sw.bias, 4096 * 4));
    CHECK(cudaEventCreate(&sw.e0));
    CHECK(cudaEventCreate(&sw.e1));
    /* the copy bandwidth: a D2D copy of the largest f32 operand reads and writes it */
    CHECK(cudaMemcpyAsync(sw.d, sw.a, elems * 4, cudaMemcpyDeviceToDevice, sw.s));
    CHECK(cudaEventRecord(sw.e0, sw.s));
    for (int r = 0; r < 5; r++) CHECK(cudaMemcpyAsync(sw.d, sw.a, elems * 4, cudaMemcpyDeviceToDevice, sw.s));
    CHECK(cudaEventRecord(sw.e1, sw.s));
    CHECK(cudaEventSynchronize(sw.e1));
    float copy_ms;
    CHECK(cudaEventElapsedTime(&copy_ms, sw.e0, sw.e1));
    sw.copy_gbs = 2.0 * (double)elems * 4 * 5 / (copy_ms * 1e-3) / 1e9;
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("gemm_epilogue_sweep: %s, cuBLASLt %zu, D2D copy %.0f GB/s, %d reps, times in ms per call\n", prop.name,
           cublasLtGetVersion(), sw.copy_gbs, sw.reps);
    if (wgrad) {
        fill(&sw, elems, 2);
        run_wgrad(&sw, 2);
        fill(&sw, elems, 4);
        run_wgrad(&sw, 4);
    }
    for (int t = 0; t < 2 && !wgrad; t++) {
        if (strcmp(which, "all") && strcmp(which, t == 0 ? "bf16" : "f32")) continue;
        fill(&sw, elems, t == 0 ? 2 : 4);
        for (int i = 0; i < NCASES; i++)
            run_case(&sw, &cases[i], t == 0 ? CUDA_R_16BF : CUDA_R_32F, t == 0 ? "bf16" : "f32", t == 0 ? 2 : 4);
    }
    cudaEventDestroy(sw.e0);
    cudaEventDestroy(sw.e1);
    void *bufs[6] = {sw.ws, sw.a, sw.b, sw.d, sw.aux, sw.bias};
    for (int i = 0; i < 6; i++) cudaFree(bufs[i]);
    cublasLtDestroy(sw.lt);
    cudaStreamDestroy(sw.s);
    return 0;
}
