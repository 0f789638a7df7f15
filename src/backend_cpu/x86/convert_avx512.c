/*
** AVX-512F conversion between float32 and bf16 (contiguous, n elements;
** cpu_convert.h picks these over convert_avx2.c's when the CPU has AVX-512F).
** The same bits as cpu.h's scalar conversions, 16 lanes a vector:
**   bf16 -> f32: the 16 bits shifted into a float's high half (exact).
**   f32 -> bf16: (x + 0x7FFF + ((x >> 16) & 1)) >> 16, round to nearest even
**                on bit 16; a NaN (|x| > 0x7F800000) is (x >> 16) | 0x40;
**                vpmovdw narrows the 16 lanes.
** Not vcvtneps2bf16 (AVX512_BF16): it flushes subnormal inputs to zero.
** Built with the other x86 kernels (-mavx2); the functions add AVX-512F.
*/
#include "../cpu_convert.h"

#include <immintrin.h>

#define AVX512_ __attribute__((target("avx512f")))

AVX512_ void cpu_bf16_to_f32_avx512(int64_t n, float *o, const uint16_t *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
        _mm512_storeu_si512((void *)(o + i), _mm512_slli_epi32(w, 16));
    }
    for (; i < n; i++) o[i] = cpu_bf16_to_f32(x[i]);
}

AVX512_ void cpu_f32_to_bf16_avx512(int64_t n, uint16_t *o, const float *x, bool stream) {
    int64_t i = 0;
    if (stream) { /* a scalar head up to 32-byte alignment of o + i */
        int64_t h = (int64_t)((32 - ((uintptr_t)o & 31)) & 31) / 2;
        h = ((uintptr_t)o & 1) || h > n ? n : h;
        for (; i < h; i++) o[i] = cpu_f32_to_bf16(x[i]);
    }
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), quiet = _mm512_set1_epi32(0x40);
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(x + i)), hi = _mm512_srli_epi32(v, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(v, half), _mm512_and_si512(hi, one)), 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(v, abs), inf);
        __m256i p = _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(r, nan, hi, quiet));
        if (stream)
            _mm256_stream_si256((__m256i *)(o + i), p);
        else
            _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    for (; i < n; i++) o[i] = cpu_f32_to_bf16(x[i]);
}
