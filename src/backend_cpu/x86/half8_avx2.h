/*
** 8 lanes of bf16 / f16 <-> float32 in AVX2/F16C registers: the one copy of
** the vector conversions that convert_avx2.c loops over and that
** src/math/run_cpu.c calls inside its register chains (converted while read,
** rounded while written). Each function carries its target, so a file built
** without -mavx2 may call them from a function of the same target (HALF8_TARGET_).
** The bits equal cpu.h's scalar conversions (see convert_avx2.c's header).
** defines: HALF8_TARGET_, half8_bf16_load, half8_bf16_round, half8_bf16_pack,
** half8_f16_load, half8_f16_round, half8_f16_load_op, half8_bf16_pack16_quiet,
** half8_f16_pack16
*/
#ifndef TRIDENT_CPU_HALF8_AVX2_H
#define TRIDENT_CPU_HALF8_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define HALF8_TARGET_ __attribute__((target("avx2,f16c")))
#define HALF8_        HALF8_TARGET_ __attribute__((always_inline)) static inline

/* 8 bf16 at x as 8 floats: the bits shifted into the high half (exact) */
HALF8_ __m256 half8_bf16_load(const uint16_t *x) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* 8 floats rounded to bf16, in the low 16 bits of each 32-bit lane:
** (x + 0x7FFF + ((x >> 16) & 1)) >> 16; a NaN is (x >> 16) | 0x40 */
HALF8_ __m256i half8_bf16_round(__m256 v) {
    __m256i x = _mm256_castps_si256(v), hi = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

/* 8 floats rounded to bf16, packed in order into 128 bits */
HALF8_ __m128i half8_bf16_pack(__m256 v) {
    __m256i r = half8_bf16_round(v);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* 8 f16 at x as 8 floats (vcvtph2ps); a NaN keeps its payload unquieted: sign | 0x7F800000 | (mant << 13) */
HALF8_ __m256 half8_f16_load(const uint16_t *x) {
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

/* 8 floats rounded to f16 (vcvtps2ph, to nearest even); a NaN is sign | 0x7E00 */
HALF8_ __m128i half8_f16_round(__m256 v) {
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
    __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7E00));
    return _mm_blendv_epi8(h, q, nan);
}

/* 8 f16 at x as 8 floats for an arithmetic op to read: vcvtph2ps alone, a NaN quieted (sign | 0x7FC00000 |
** (mant << 13)); the op quiets half8_f16_load's NaN the same way, so its result has the same bits */
HALF8_ __m256 half8_f16_load_op(const uint16_t *x) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x)); }

/* 16 floats whose NaNs are quiet (results of + - * /) rounded to bf16, packed in order into 256 bits: as
** half8_bf16_round, (x + 0x7FFF + ((x >> 16) & 1)) >> 16, a NaN x >> 16 (its bit 6 already set) */
HALF8_ __m256i half8_bf16_pack16_quiet(__m256 v0, __m256 v1) {
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF);
    __m256i x0 = _mm256_castps_si256(v0), x1 = _mm256_castps_si256(v1);
    __m256i b0 = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(x0, 16), one), half);
    __m256i b1 = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(x1, 16), one), half);
    b0 = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q)), b0); /* NaN: no rounding */
    b1 = _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)), b1);
    __m256i r0 = _mm256_srli_epi32(_mm256_add_epi32(x0, b0), 16), r1 = _mm256_srli_epi32(_mm256_add_epi32(x1, b1), 16);
    /* packus interleaves 128-bit halves: [a0-3 b0-3 a4-7 b4-7]; the permute puts them in order */
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xD8);
}

/* 16 floats rounded to f16 (vcvtps2ph, to nearest even), packed in order into 256 bits; a NaN (vcvtps2ph's is
** quiet: sign | 0x7E00 | payload) is sign | 0x7E00, as half8_f16_round */
HALF8_ __m256i half8_f16_pack16(__m256 v0, __m256 v1) {
    __m256i h = _mm256_set_m128i(_mm256_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                 _mm256_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00));
    return _mm256_andnot_si256(_mm256_and_si256(nan, _mm256_set1_epi16(0x01FF)), h);
}

#endif
