/*
** The GEMMs of the CPU kernels, C += op(A) op(B), and the self-test that picks
** OpenBLAS or the built-in loop for them (see cpu_gemm.c).
** defines: cpu_gemm_f32, cpu_gemm_f64, cpu_gemm_init, cpu_gemm_note.
*/
#ifndef TRIDENT_BACKEND_CPU_GEMM_H
#define TRIDENT_BACKEND_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* C[i, j] += sum_k op(A)[i, k] op(B)[k, j] for i < m, j < n, row-major with leading dims lda, ldb,
** ldc; op(X) = X^T when its flag is set. One thread per call. */
void cpu_gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float *C, int64_t ldc);
void cpu_gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *A, int64_t lda, const double *B,
                  int64_t ldb, double *C, int64_t ldc);

/* Self-test OpenBLAS's GEMMs on this machine and choose, per type, OpenBLAS or the built-in loop;
** once, at backend init. */
void cpu_gemm_init(void);
/* What cpu_gemm_init found, one line for trident devices ("gemm: OpenBLAS passed its self-test ..."). */
const char *cpu_gemm_note(void);

#endif /* TRIDENT_BACKEND_CPU_GEMM_H */
