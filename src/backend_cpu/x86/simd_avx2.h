/*
** The AVX2/FMA macro layer: one vector type and its operations, so that the
** kernels in this folder read the same for every ISA.
** defines: TD_F32_EPR, TD_F32_VEC, TD_F32_VEC_*, td_f32_tail_mask, TD_F32_MAP*,
** TD_F64X4_*.
*/
#ifndef TRIDENT_CPU_SIMD_AVX2_H
#define TRIDENT_CPU_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define TD_F32_EPR              8 /* f32 elements per register */
#define TD_F32_VEC              __m256
#define TD_F32_VEC_ZERO()       _mm256_setzero_ps()
#define TD_F32_VEC_SET1(x)      _mm256_set1_ps(x)
#define TD_F32_VEC_LOAD(p)      _mm256_loadu_ps(p)
#define TD_F32_VEC_STORE(p, v)  _mm256_storeu_ps((p), (v))
#define TD_F32_VEC_STREAM(p, v) _mm256_stream_ps((p), (v)) /* non-temporal; p 32-byte aligned */
#define TD_F32_STREAM_FENCE()   _mm_sfence()
#define TD_F32_VEC_ALIGN        32
#define TD_F32_VEC_ADD(a, b)    _mm256_add_ps((a), (b))
#define TD_F32_VEC_SUB(a, b)    _mm256_sub_ps((a), (b))
#define TD_F32_VEC_MUL(a, b)    _mm256_mul_ps((a), (b))
#define TD_F32_VEC_DIV(a, b)    _mm256_div_ps((a), (b))
/* x where !(x <= 0) (so NaN stays NaN), else +0 */
#define TD_F32_VEC_RELU(x) _mm256_and_ps((x), _mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_NLE_UQ))

/* lanes [0, rem) of a tail vector */
static inline __m256i td_f32_tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* y[i] = F(x[i]) and y[i] = F(a[i], b[i]) for i < n, F a function of vectors: whole
** vectors, then the n % 8 tail through F with masked loads and stores */
#define TD_F32_MAP1(n, y, x, F)                                                                                        \
    do {                                                                                                               \
        int64_t n_ = (n), i_ = 0;                                                                                      \
        for (; i_ + TD_F32_EPR <= n_; i_ += TD_F32_EPR) TD_F32_VEC_STORE((y) + i_, F(TD_F32_VEC_LOAD((x) + i_)));      \
        if (i_ < n_) {                                                                                                 \
            __m256i m_ = td_f32_tail_mask(n_ - i_);                                                                    \
            _mm256_maskstore_ps((y) + i_, m_, F(_mm256_maskload_ps((x) + i_, m_)));                                    \
        }                                                                                                              \
    } while (0)
#define TD_F32_MAP2(n, y, a, b, F)                                                                                     \
    do {                                                                                                               \
        int64_t n_ = (n), i_ = 0;                                                                                      \
        for (; i_ + TD_F32_EPR <= n_; i_ += TD_F32_EPR)                                                                \
            TD_F32_VEC_STORE((y) + i_, F(TD_F32_VEC_LOAD((a) + i_), TD_F32_VEC_LOAD((b) + i_)));                       \
        if (i_ < n_) {                                                                                                 \
            __m256i m_ = td_f32_tail_mask(n_ - i_);                                                                    \
            _mm256_maskstore_ps((y) + i_, m_, F(_mm256_maskload_ps((a) + i_, m_), _mm256_maskload_ps((b) + i_, m_)));  \
        }                                                                                                              \
    } while (0)

/* four f64 lanes, for accumulating f32 data in double */
#define TD_F64X4           __m256d
#define TD_F64X4_ZERO()    _mm256_setzero_pd()
#define TD_F64X4_ADD(a, b) _mm256_add_pd((a), (b))
#define TD_F64X4_LO(v)     _mm256_cvtps_pd(_mm256_castps256_ps128(v))     /* lanes 0..3 of an f32 vector */
#define TD_F64X4_HI(v)     _mm256_cvtps_pd(_mm256_extractf128_ps((v), 1)) /* lanes 4..7 */
static inline double td_f64x4_hsum(TD_F64X4 v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#endif /* TRIDENT_CPU_SIMD_AVX2_H */
