/* A fault for tests/test_cpu_threads.c's gemm_fault case, preloaded by CTest: cblas_sgemm as
** OpenBLAS computes it, except that products with n == 24 come out with C[0][0] off by 1 (as a
** wrong BLAS kernel would at one shape). Built only as this shared library. */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>

typedef void (*sgemm_fn)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float, const float *,
                         blasint, const float *, blasint, float, float *, blasint);

__attribute__((visibility("default"))) void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                                                        blasint m, blasint n, blasint k, float alpha, const float *a,
                                                        blasint lda, const float *b, blasint ldb, float beta, float *c,
                                                        blasint ldc) {
    sgemm_fn real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (n == 24 && m > 0) c[0] += 1;
}
