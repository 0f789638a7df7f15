/*
** AVX2/F16C conversion between float32 and bf16 / f16 (contiguous, n
** elements; cpu_convert.h). The bits equal cpu.h's scalar conversions:
**   bf16 -> f32: the 16 bits shifted into a float's high half (exact).
**   f32 -> bf16: (x + 0x7FFF + ((x >> 16) & 1)) >> 16, round to nearest even
**                on bit 16; a NaN (|x| > 0x7F800000) is (x >> 16) | 0x40.
**   f16 -> f32:  vcvtph2ps (exact); a NaN keeps its payload unquieted:
**                sign | 0x7F800000 | (mant << 13), as the scalar.
**   f32 -> f16:  vcvtps2ph, round to nearest even; a NaN is sign | 0x7E00.
** 16 elements per step, a scalar tail; streamed outputs write a scalar head
** up to 32-byte alignment first.
*/
#include "../cpu_convert.h"
#include "simd_avx2.h"

/* 8 bf16 at x as 8 floats */
static inline __m256 bf16x8_load(const uint16_t *x) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

void cpu_bf16_to_f32_avx2(int64_t n, float *o, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(o + i, bf16x8_load(x + i));
        _mm256_storeu_ps(o + i + 8, bf16x8_load(x + i + 8));
    }
    for (; i < n; i++) o[i] = cpu_bf16_to_f32(x[i]);
}

/* 8 floats rounded to bf16, in the low 16 bits of each 32-bit lane */
static inline __m256i bf16x8_round(__m256 v) {
    __m256i x = _mm256_castps_si256(v), hi = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

/* the head of a streamed output: elements until o + i is 32-byte aligned (all of n at most) */
static int64_t stream_head(const uint16_t *o, int64_t n) {
    int64_t h = (int64_t)((32 - ((uintptr_t)o & 31)) & 31) / 2;
    return ((uintptr_t)o & 1) || h > n ? n : h;
}

void cpu_f32_to_bf16_avx2(int64_t n, uint16_t *o, const float *x, bool stream) {
    int64_t i = 0;
    if (stream)
        for (int64_t h = stream_head(o, n); i < h; i++) o[i] = cpu_f32_to_bf16(x[i]);
    for (; i + 16 <= n; i += 16) {
        /* packus interleaves 128-bit halves: [a0-3 b0-3 a4-7 b4-7]; the permute puts them in order */
        __m256i p = _mm256_packus_epi32(bf16x8_round(_mm256_loadu_ps(x + i)), bf16x8_round(_mm256_loadu_ps(x + i + 8)));
        p = _mm256_permute4x64_epi64(p, 0xD8);
        if (stream)
            _mm256_stream_si256((__m256i *)(o + i), p);
        else
            _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    for (; i < n; i++) o[i] = cpu_f32_to_bf16(x[i]);
}

/* 8 f16 at x as 8 floats; NaN lanes rebuilt without quieting */
static inline __m256 f16x8_load(const uint16_t *x) {
    __m128i h = _mm_loadu_si128((const __m128i *)x);
    __m256 v = _mm256_cvtph_ps(h);
    __m256i w = _mm256_cvtepu16_epi32(h);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFF)), _mm256_set1_epi32(0x7C00));
    __m256i raw =
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                        _mm256_or_si256(_mm256_set1_epi32(0x7F800000),
                                        _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3FF)), 13)));
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(raw), _mm256_castsi256_ps(nan));
}

void cpu_f16_to_f32_avx2(int64_t n, float *o, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(o + i, f16x8_load(x + i));
        _mm256_storeu_ps(o + i + 8, f16x8_load(x + i + 8));
    }
    for (; i < n; i++) o[i] = cpu_f16_to_f32(x[i]);
}

/* 8 floats rounded to f16; NaN lanes as sign | 0x7E00 */
static inline __m128i f16x8_round(__m256 v) {
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
    __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7E00));
    return _mm_blendv_epi8(h, q, nan);
}

void cpu_f32_to_f16_avx2(int64_t n, uint16_t *o, const float *x, bool stream) {
    int64_t i = 0;
    if (stream)
        for (int64_t h = stream_head(o, n); i < h; i++) o[i] = cpu_f32_to_f16(x[i]);
    for (; i + 16 <= n; i += 16) {
        __m256i p = _mm256_set_m128i(f16x8_round(_mm256_loadu_ps(x + i + 8)), f16x8_round(_mm256_loadu_ps(x + i)));
        if (stream)
            _mm256_stream_si256((__m256i *)(o + i), p);
        else
            _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    for (; i < n; i++) o[i] = cpu_f32_to_f16(x[i]);
}
