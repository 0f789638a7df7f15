/*
** exp(x) for 8 f32 lanes with AVX2/FMA, for the softmax, log_softmax and
** cross-entropy rows and the f32 EXP op.
** defines: td_exp_f32_avx2.
**
** Range reduction: x = n ln2 + r with n = round(x log2(e)), |r| <= ln2/2;
** r = x - n*LN2_HI - n*LN2_LO with two FMAs (LN2_HI holds ln2's top 16 bits,
** so n*LN2_HI is exact for |n| <= 256). exp(r) = 1 + r + r^2 P(r), P of degree
** 5 (Cephes' expf coefficients). 2^n is applied as two power-of-two factors
** 2^(n>>1) * 2^(n - (n>>1)), both normal numbers for n in [-150, 128], so
** results that fall into the subnormal range round once, as they should.
** Special values: x is clamped to [-104, 88.75] first: below -103.97 the
** result rounds to +0 (so exp(-inf) = 0), above ln(FLT_MAX) = 88.7228 it
** overflows to +inf (exp(+inf) = +inf); NaN is passed through.
** Max error, measured over every float in [-104, 88.75] against exp() in
** double (tests/test_nn_ops.c, exp_ulp): 1 ulp for normal results
** (max |err| = 0.9 ulp); subnormal results are within 1 ulp of their grid.
*/
#ifndef TRIDENT_CPU_EXP_AVX2_H
#define TRIDENT_CPU_EXP_AVX2_H

#include <immintrin.h>

static inline __m256 td_exp_f32_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-104.0f), hi = _mm256_set1_ps(88.75f);
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693145751953125f), ln2_lo = _mm256_set1_ps(1.428606765330187e-06f);
    /* max(lo, x): the second operand (x) is returned when it is NaN; min likewise */
    __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, xc);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n as two normal factors; NaN lanes give garbage here and are replaced below */
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#endif /* TRIDENT_CPU_EXP_AVX2_H */
