/*
** GELU (erf form) and its backward for contiguous f32 with AVX2/FMA; the scalar
** loops of cpu_unary.c (erff, expf) are the reference.
**   y  = x/2 (1 + erf(z)),                   z = x / sqrt(2)
**   dx = dy (1/2 (1 + erf(z)) + x phi(x)),   phi(x) = e^(-x^2/2) / sqrt(2 pi)
** 1 + erf(z) comes from Abramowitz & Stegun 7.1.26: erfc(|z|) = t P(t) e^(-z^2)
** with t = 1 / (1 + p |z|), |error| <= 1.5e-7; for z < 0 it is erfc(|z|) itself
** (no cancellation, so the far negative tail keeps its relative accuracy), for
** z >= 0 it is 2 - erfc(z). e^(-z^2) = e^(-x^2/2) is shared by both terms of
** the backward (exp_avx2.h). NaN propagates; x = -inf gives NaN, as x * 0.
*/
#include "../cpu_rows.h"
#include "exp_avx2.h"

/* lanes [0, rem) of a tail vector */
static inline __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 1 + erf(x / sqrt(2)); *e gets e^(-x^2/2) */
static inline __m256 one_plus_erf(__m256 x, __m256 *e) {
    const __m256 r2 = _mm256_set1_ps(0.70710678118654752f), one = _mm256_set1_ps(1.0f);
    __m256 z = _mm256_mul_ps(x, r2), az = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), az, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    *e = td_exp_f32_avx2(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(x, x)));
    __m256 c = _mm256_mul_ps(_mm256_mul_ps(p, t), *e); /* erfc(|z|) */
    return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), c), c,
                            _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ));
}

static inline __m256 gelu8(__m256 x) {
    __m256 e;
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), one_plus_erf(x, &e));
}

static inline __m256 gelu_bwd8(__m256 dy, __m256 x) {
    __m256 e, cdf2 = one_plus_erf(x, &e); /* sets e before it is read below */
    __m256 phi = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.39894228040143268f), x), e);
    __m256 d = _mm256_fmadd_ps(_mm256_set1_ps(0.5f), cdf2, phi);
    return _mm256_mul_ps(dy, d);
}

void cpu_gelu_f32_avx2(int64_t n, float *y, const float *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, gelu8(_mm256_maskload_ps(x + i, mask)));
    }
}

void cpu_gelu_backward_f32_avx2(int64_t n, float *dx, const float *dy, const float *x) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dx + i, gelu_bwd8(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(dx + i, mask, gelu_bwd8(_mm256_maskload_ps(dy + i, mask), _mm256_maskload_ps(x + i, mask)));
    }
}
