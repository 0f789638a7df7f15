/*
** AVX2 f32 max_pool2d with 2x2 windows, stride 2, no padding: one output row
** at a time, 8 windows per step (the tail masked). The scalar loop
** max_pool_2x2 in cpu_pool_impl.h is the reference, with the same scan order
** and NaN rule. Lanes compare and select instead of branching: on real
** activations the position of each window's max is unpredictable.
*/
#include "../cpu_pool.h"
#include "simd_avx2.h"

/* the even and odd elements of 16 consecutive floats, in order */
static inline void deinterleave(__m256 v0, __m256 v1, __m256 *even, __m256 *odd) {
    /* shuffle_ps works per 128-bit half, giving windows 0 1 4 5 | 2 3 6 7; the permute restores 0..7 */
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0xDD)), 0xD8));
}

/* lanes where v replaces the running max m: v > m, or v is NaN (so the last NaN wins) */
static inline __m256 takes_over(__m256 v, __m256 m) {
    return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

void cpu_max_pool_2x2_row_f32_avx2(const float *r0, const float *r1, int64_t Wo, int32_t i0, int32_t W, float *y,
                                   int64_t *idx) {
    const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), one = _mm256_set1_epi32(1);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t ow = 0; ow < Wo; ow += 8) {
        int64_t left = Wo - ow;
        __m256 v[4];
        if (left >= 8) {
            deinterleave(_mm256_loadu_ps(r0 + 2 * ow), _mm256_loadu_ps(r0 + 2 * ow + 8), &v[0], &v[1]);
            deinterleave(_mm256_loadu_ps(r1 + 2 * ow), _mm256_loadu_ps(r1 + 2 * ow + 8), &v[2], &v[3]);
        } else { /* 2*left inputs per row: the lanes past them read as -inf and are never stored */
            __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), n2 = _mm256_set1_epi32((int)(2 * left));
            __m256i m0 = _mm256_cmpgt_epi32(n2, iota),
                    m1 = _mm256_cmpgt_epi32(n2, _mm256_add_epi32(iota, _mm256_set1_epi32(8)));
            __m256 a0 = _mm256_blendv_ps(ninf, _mm256_maskload_ps(r0 + 2 * ow, m0), _mm256_castsi256_ps(m0));
            __m256 a1 = _mm256_blendv_ps(ninf, _mm256_maskload_ps(r0 + 2 * ow + 8, m1), _mm256_castsi256_ps(m1));
            __m256 b0 = _mm256_blendv_ps(ninf, _mm256_maskload_ps(r1 + 2 * ow, m0), _mm256_castsi256_ps(m0));
            __m256 b1 = _mm256_blendv_ps(ninf, _mm256_maskload_ps(r1 + 2 * ow + 8, m1), _mm256_castsi256_ps(m1));
            deinterleave(a0, a1, &v[0], &v[1]);
            deinterleave(b0, b1, &v[2], &v[3]);
        }
        /* scan a, b, c, d as the scalar loop does: pairs (a, b) and (c, d), then the later pair against the earlier */
        __m256 tb = takes_over(v[1], v[0]), td = takes_over(v[3], v[2]);
        __m256 m0 = _mm256_blendv_ps(v[0], v[1], tb), m1 = _mm256_blendv_ps(v[2], v[3], td);
        __m256 t1 = takes_over(m1, m0);
        __m256i base = _mm256_add_epi32(_mm256_set1_epi32(i0 + (int32_t)(2 * ow)), lane2);
        __m256i j0 = _mm256_add_epi32(base, _mm256_and_si256(_mm256_castps_si256(tb), one));
        __m256i j1 = _mm256_add_epi32(_mm256_add_epi32(base, _mm256_set1_epi32(W)),
                                      _mm256_and_si256(_mm256_castps_si256(td), one));
        __m256 best = _mm256_blendv_ps(m0, m1, t1);
        __m256i bi = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(j0), _mm256_castsi256_ps(j1), t1));
        __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(bi)),
                hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(bi, 1));
        if (left >= 8) {
            _mm256_storeu_ps(y + ow, best);
            _mm256_storeu_si256((__m256i *)(idx + ow), lo);
            _mm256_storeu_si256((__m256i *)(idx + ow + 4), hi);
        } else {
            float yb[8];
            int64_t ib[8];
            _mm256_storeu_ps(yb, best);
            _mm256_storeu_si256((__m256i *)ib, lo);
            _mm256_storeu_si256((__m256i *)(ib + 4), hi);
            for (int64_t k = 0; k < left; k++) y[ow + k] = yb[k], idx[ow + k] = ib[k];
        }
    }
}
