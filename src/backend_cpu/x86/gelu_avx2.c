/*
** GELU (erf form) and its backward for contiguous f32 with AVX2/FMA; the scalar
** loops of cpu_ops_elementwise.c (erfcf, expf) are the reference.
**   y  = x/2 (1 + erf(z)),                   z = x / sqrt(2)
**   dx = dy (1/2 (1 + erf(z)) + x phi(x)),   phi(x) = e^(-x^2/2) / sqrt(2 pi)
** 1 + erf(z) is erfc(-z), from the Chebyshev fit of Numerical Recipes' erfcc:
**   erfc(|z|) = t e^(-z^2 + Q(t)),  t = 1 / (1 + |z|/2),  Q a degree-9 polynomial,
** with relative error < 1.2e-7 everywhere, so the far negative tail (where
** 1 + erf(z) cancels) keeps its relative accuracy; for z > 0 it is 2 - erfc(z).
** z^2 is split exactly (hi + lo, with an FMA) before it enters the exponent.
** NaN propagates; x = -inf gives NaN, as x * 0.
*/
#include "../cpu_rows.h"
#include "exp_avx2.h"
#include "simd_avx2.h"

/* 1 + erf(x / sqrt(2)) = erfc(-x / sqrt(2)) */
static inline __m256 one_plus_erf(__m256 x) {
    static const float q[10] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f};
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    __m256 az = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), az, one));
    __m256 p = _mm256_set1_ps(q[0]);
    for (int i = 1; i < 10; i++) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(q[i]));
    __m256 hi = _mm256_mul_ps(az, az), lo = _mm256_fmsub_ps(az, az, hi);                   /* z^2 = hi + lo exactly */
    __m256 c = _mm256_mul_ps(t, td_exp_f32_avx2(_mm256_sub_ps(_mm256_sub_ps(p, lo), hi))); /* erfc(|z|) */
    return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), c), c,
                            _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ));
}

static inline __m256 gelu8(__m256 x) { return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), one_plus_erf(x)); }

static inline __m256 gelu_bwd8(__m256 dy, __m256 x) {
    __m256 e = td_exp_f32_avx2(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(x, x)));
    __m256 cdf2 = one_plus_erf(x), phi = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.39894228040143268f), x), e);
    __m256 d = _mm256_fmadd_ps(_mm256_set1_ps(0.5f), cdf2, phi);
    return _mm256_mul_ps(dy, d);
}

void cpu_gelu_f32_avx2(int64_t n, float *y, const float *x) { TD_F32_MAP1(n, y, x, gelu8); }

void cpu_gelu_backward_f32_avx2(int64_t n, float *dx, const float *dy, const float *x) {
    TD_F32_MAP2(n, dx, dy, x, gelu_bwd8);
}
