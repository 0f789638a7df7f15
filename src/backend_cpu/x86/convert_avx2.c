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
** up to 32-byte alignment first. The 8-lane steps are half8_avx2.h's.
*/
#include "../cpu_convert.h"
#include "half8_avx2.h"
#include "simd_avx2.h"

void cpu_bf16_to_f32_avx2(int64_t n, float *o, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(o + i, half8_bf16_load(x + i));
        _mm256_storeu_ps(o + i + 8, half8_bf16_load(x + i + 8));
    }
    for (; i < n; i++) o[i] = cpu_bf16_to_f32(x[i]);
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
        __m256i p =
            _mm256_packus_epi32(half8_bf16_round(_mm256_loadu_ps(x + i)), half8_bf16_round(_mm256_loadu_ps(x + i + 8)));
        p = _mm256_permute4x64_epi64(p, 0xD8);
        if (stream)
            _mm256_stream_si256((__m256i *)(o + i), p);
        else
            _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    for (; i < n; i++) o[i] = cpu_f32_to_bf16(x[i]);
}

void cpu_f16_to_f32_avx2(int64_t n, float *o, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(o + i, half8_f16_load(x + i));
        _mm256_storeu_ps(o + i + 8, half8_f16_load(x + i + 8));
    }
    for (; i < n; i++) o[i] = cpu_f16_to_f32(x[i]);
}

void cpu_f32_to_f16_avx2(int64_t n, uint16_t *o, const float *x, bool stream) {
    int64_t i = 0;
    if (stream)
        for (int64_t h = stream_head(o, n); i < h; i++) o[i] = cpu_f32_to_f16(x[i]);
    for (; i + 16 <= n; i += 16) {
        __m256i p =
            _mm256_set_m128i(half8_f16_round(_mm256_loadu_ps(x + i + 8)), half8_f16_round(_mm256_loadu_ps(x + i)));
        if (stream)
            _mm256_stream_si256((__m256i *)(o + i), p);
        else
            _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    for (; i < n; i++) o[i] = cpu_f32_to_f16(x[i]);
}
