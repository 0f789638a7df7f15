/*
** The GEMMs of the CPU kernels (cpu_ops_matmul.c, cpu_ops_conv.c), f32 and f64:
**   C[i, j] += sum_k op(A)[i, k] op(B)[k, j]     row-major, op(X) = X or X^T
** through OpenBLAS (one thread per call: cpu_backend.c), or through the
** built-in loop below when OpenBLAS failed its self-test for that type.
**
** The self-test (cpu_gemm_init, at backend init): OpenBLAS picks its kernels
** by CPU when it loads (Haswell, SkylakeX, Cooperlake, Zen...), and some of
** them were wrong at some shapes in some releases (OpenBLAS issues #2914 and
** #3152: SkylakeX sgemm paths that returned garbage). So the products the
** kernels make are checked on this machine before any is trusted: the four
** transposes; blocks of a wider C (ldc > n, as cpu_ops_matmul.c's column blocks)
** and of wider A and B; beta 1 onto a nonzero C; shapes of the LeNet, MLP and
** conv layers that take OpenBLAS's small-matrix paths (tiny M or N, K from 1
** to 576) and one that takes its packed path; all of it from as many threads
** at once as OpenMP will run (plain pthreads, so that no OpenMP pool exists
** before a fork). Each element must be within the forward-error bound
**   |c - ref| <= 4 (K + 2) u (sum_k |a_ik b_kj| + |c0_ij|),   u = 2^-24 (f32), 2^-53 (f64)
** of a reference in double (long double for f64). A failure routes every GEMM
** of that type to the built-in loop and `trident devices` says which product
** failed. TRIDENT_CPU_GEMM=builtin routes both types there without a test.
*/
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_gemm.h"

/* Which GEMM each type uses, and what the self-test found (for cpu_device_info). */
static bool gemm_builtin[2]; /* [0] f32, [1] f64 */
static char gemm_note[320];

static CBLAS_TRANSPOSE gemm_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

/* cpu_gemm_<sfx> for element type T: OpenBLAS's BLAS_GEMM, or the built-in loop when
** gemm_builtin[idx] is set.
** The built-in loop, row i of C: with B untransposed, C[i, :] += op(A)[i, k] B[k, :] for k ascending
** (rows of B are contiguous, so the inner loop vectorizes); with B transposed,
** C[i, j] += dot(op(A)[i, :], B[j, :]). */
#define GEMM_(T, sfx, idx, BLAS_GEMM)                                                                                  \
    void cpu_gemm_##sfx(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *A, int64_t lda, const T *B,        \
                        int64_t ldb, T *C, int64_t ldc) {                                                              \
        if (!gemm_builtin[idx]) {                                                                                      \
            BLAS_GEMM(CblasRowMajor, gemm_trans(ta), gemm_trans(tb), (int)m, (int)n, (int)k, 1, A, (int)lda, B,        \
                      (int)ldb, 1, C, (int)ldc);                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t i = 0; i < m; i++) {                                                                              \
            T *c = C + i * ldc;                                                                                        \
            if (!tb)                                                                                                   \
                for (int64_t p = 0; p < k; p++) {                                                                      \
                    T a = ta ? A[p * lda + i] : A[i * lda + p];                                                        \
                    const T *b = B + p * ldb;                                                                          \
                    for (int64_t j = 0; j < n; j++) c[j] += a * b[j];                                                  \
                }                                                                                                      \
            else                                                                                                       \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    T s = 0;                                                                                           \
                    const T *b = B + j * ldb;                                                                          \
                    for (int64_t p = 0; p < k; p++) s += (ta ? A[p * lda + i] : A[i * lda + p]) * b[p];                \
                    c[j] += s;                                                                                         \
                }                                                                                                      \
        }                                                                                                              \
    }
GEMM_(float, f32, 0, cblas_sgemm)
GEMM_(double, f64, 1, cblas_dgemm)

/* ---- the self-test ---- */

/* (m, n, k) of the products tested, each with every transpose and both types:
** tiny ones, the LeNet layers' blocks (conv weight grads 6x25xP and 16x150xP, conv input grads,
** FC blocks of 120/84 columns), and one above OpenBLAS's small-matrix limit (M*N*K > 10^6). */
static const int gemm_shapes[][3] = {{1, 1, 1},     {3, 5, 7},     {17, 9, 33},   {6, 25, 96},
                                     {16, 150, 64}, {150, 64, 16}, {6, 144, 25},  {64, 24, 120},
                                     {32, 120, 64}, {64, 10, 84},  {64, 56, 120}, {128, 96, 100}};
#define GEMM_SHAPES ((int)(sizeof gemm_shapes / sizeof gemm_shapes[0]))
#define GEMM_CASES  (GEMM_SHAPES * 4 * 2) /* shapes x transposes x types */

typedef struct gemm_case_result {
    double worst; /* largest |c - ref| / bound */
    char what[224];
} gemm_case_result;

static double gemm_value(uint64_t *s) { /* uniform in [-1, 1), splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1;
}

/* Case c: shape c/8, transposes c%4, type (c/4)%2; odd shapes get leading dims 3 wider than the
** matrices (a block of a wider matrix). Returns the worst error over the bound. */
static double gemm_case(int c, char *what, size_t what_size) {
    const int *sh = gemm_shapes[c / 8];
    bool ta = c & 1, tb = c & 2, f64 = c & 4;
    int64_t m = sh[0], n = sh[1], k = sh[2], pad = (c / 8) % 2 ? 3 : 0;
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    double *v = malloc((size_t)(na + nb + nc) * sizeof(double));
    void *buf = malloc((size_t)(na + nb + nc) * es);
    if (!v || !buf) {
        free(v), free(buf);
        snprintf(what, what_size, "out of memory");
        return INFINITY;
    }
    uint64_t seed = (uint64_t)c * 7919 + 1;
    for (int64_t i = 0; i < na + nb + nc; i++) {
        double x = gemm_value(&seed);
        v[i] = f64 ? x : (double)(float)x;
        if (f64)
            ((double *)buf)[i] = x;
        else
            ((float *)buf)[i] = (float)x;
    }
    if (f64) {
        double *A = buf, *B = A + na, *C = B + nb;
        cpu_gemm_f64(ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
    } else {
        float *A = buf, *B = A + na, *C = B + nb;
        cpu_gemm_f32(ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
    }
    const double *A = v, *B = v + na, *C0 = v + na + nb;
    double u = f64 ? DBL_EPSILON / 2 : FLT_EPSILON / 2, worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double got = f64 ? ((double *)buf)[na + nb + i * ldc + j] : ((float *)buf)[na + nb + i * ldc + j];
            long double ref = C0[i * ldc + j], mag = fabs(C0[i * ldc + j]);
            if (j < n) /* the padding past n must stay as it was */
                for (int64_t p = 0; p < k; p++) {
                    long double ab =
                        (long double)(ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
                    ref += ab, mag += fabsl(ab);
                }
            double bound = j < n ? 4 * (double)(k + 2) * u * (double)mag : 0, err = fabs(got - (double)ref);
            double r = err <= bound ? 0 : bound > 0 ? err / bound : INFINITY;
            if (!(r <= worst)) {
                worst = r;
                snprintf(what, what_size, "%s %c%c %lldx%lldx%lld (ld +%lld): C[%lld,%lld] = %.9g, want %.9g",
                         f64 ? "dgemm" : "sgemm", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n,
                         (long long)k, (long long)pad, (long long)i, (long long)j, got, (double)ref);
            }
        }
    free(v), free(buf);
    return worst;
}

typedef struct gemm_worker {
    int first, step;
    gemm_case_result *res;
} gemm_worker;

static void *gemm_work(void *arg) {
    const gemm_worker *w = arg;
    for (int c = w->first; c < GEMM_CASES; c += w->step)
        w->res[c].worst = gemm_case(c, w->res[c].what, sizeof w->res[c].what);
    return NULL;
}

/* Run every case on `threads` threads at once (case c on thread c % threads, fewer threads when
** some cannot start). */
static void gemm_run_cases(int threads, gemm_case_result *res) {
    pthread_t tid[64];
    gemm_worker w[64];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        w[t] = (gemm_worker){t, threads, res};
        if (pthread_create(&tid[t], NULL, gemm_work, &w[t]) != 0) break;
        started = t;
    }
    w[0] = (gemm_worker){0, started + 1, res};
    gemm_work(&w[0]);
    for (int t = 1; t <= started; t++) pthread_join(tid[t], NULL);
}

void cpu_gemm_init(void) {
    const char *force = getenv("TRIDENT_CPU_GEMM");
    if (force && !strcmp(force, "builtin")) {
        gemm_builtin[0] = gemm_builtin[1] = true;
        snprintf(gemm_note, sizeof gemm_note, "gemm: built-in loop (TRIDENT_CPU_GEMM=builtin)");
        return;
    }
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    gemm_case_result res[GEMM_CASES] = {{0}};
    gemm_run_cases(threads, res);
    int bad[2] = {0, 0}, worst[2] = {-1, -1}; /* per type: failures, the worst one */
    for (int c = 0; c < GEMM_CASES; c++)
        if (!(res[c].worst <= 1)) {
            int t = (c >> 2) & 1;
            if (worst[t] < 0 || res[c].worst > res[worst[t]].worst) worst[t] = c;
            bad[t]++;
        }
    for (int t = 0; t < 2; t++) gemm_builtin[t] = bad[t] > 0;
    if (!bad[0] && !bad[1])
        snprintf(gemm_note, sizeof gemm_note, "gemm: OpenBLAS passed its self-test (%d products on %d threads)",
                 GEMM_CASES, threads);
    else {
        int c = worst[bad[0] ? 0 : 1];
        snprintf(gemm_note, sizeof gemm_note,
                 "gemm: OpenBLAS FAILED its self-test (%d of %d products; %s): %s GEMMs use the built-in loop",
                 bad[0] + bad[1], GEMM_CASES, res[c].what,
                 bad[0] && bad[1] ? "f32 and f64"
                 : bad[0]         ? "f32"
                                  : "f64");
    }
}

const char *cpu_gemm_note(void) { return gemm_note; }
