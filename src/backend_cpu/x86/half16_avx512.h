/*
** 16 lanes of bf16 / f16 <-> float32 in AVX-512 registers: the conversions
** that src/math/run_cpu.c's AVX-512 register chains call (converted while
** read, rounded while written), the 16-lane form of half8_avx2.h's *_op /
** *_quiet / *_pack16 functions, with the same bits as cpu.h's scalar
** conversions for the values a chain computes (results of + - * /: numbers
** or quiet NaNs). Each function carries its target (HALF16_TARGET_: AVX-512
** F, BW, DQ and BF16), so run_cpu.c, built for the baseline, calls them from
** a function of that target, and only when the CPU has them (cpuid).
**   bf16 <- f32: vcvtne2ps2bf16, round to nearest even on bit 16, a NaN
**                (x >> 16) | 0x40. It reads subnormal inputs as zero, so
**                those lanes (vfpclassps, rare) take the integer rounding
**                (x + 0x7FFF + ((x >> 16) & 1)) >> 16 instead.
**   f16  <- f32: vcvtps2ph (to nearest even); its NaN, sign | 0x7E00 |
**                payload, made sign | 0x7E00.
**   f32  <- bf16: the bits shifted into the high half (exact);
**   f32  <- f16:  vcvtph2ps (a NaN comes out quiet, as an op would make it).
** HALF16_AVX512_ is 0 where the compiler lacks the AVX512_BF16 intrinsics.
** defines: HALF16_AVX512_, HALF16_TARGET_, half16_bf16_load, half16_f16_load_op,
** half16_bf16_pack32_quiet, half16_f16_pack32
*/
#ifndef TRIDENT_CPU_HALF16_AVX512_H
#define TRIDENT_CPU_HALF16_AVX512_H

#if (defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10)
#define HALF16_AVX512_ 1
#else
#define HALF16_AVX512_ 0
#endif

#if HALF16_AVX512_
#include <immintrin.h>
#include <stdint.h>

#define HALF16_TARGET_ __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16,avx2,fma,f16c")))
#define HALF16_        HALF16_TARGET_ __attribute__((always_inline)) static inline

/* 16 bf16 at x as 16 floats */
HALF16_ __m512 half16_bf16_load(const uint16_t *x) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)x));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* 16 f16 at x as 16 floats for an arithmetic op to read (a NaN quiet, as the op makes it: half8_f16_load_op) */
HALF16_ __m512 half16_f16_load_op(const uint16_t *x) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x)); }

/* 16 floats rounded to bf16 by the integer rule, in 256 bits (the subnormal lanes of half16_bf16_pack32_quiet) */
HALF16_ __m256i half16_bf16_round_int(__m512 v) {
    __m512i x = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), lsb);
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

/* 32 floats whose NaNs are quiet rounded to bf16, packed in order (v0's lanes first) into 512 bits */
HALF16_ __m512i half16_bf16_pack32_quiet(__m512 v0, __m512 v1) {
    __m512i p = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
    __mmask16 d0 = _mm512_fpclass_ps_mask(v0, 0x20), d1 = _mm512_fpclass_ps_mask(v1, 0x20); /* subnormal */
    if (__builtin_expect((d0 | d1) != 0, 0)) {
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(half16_bf16_round_int(v0)), half16_bf16_round_int(v1), 1);
        p = _mm512_mask_mov_epi16(p, (__mmask32)d0 | ((__mmask32)d1 << 16), q);
    }
    return p;
}

/* 32 floats rounded to f16 (to nearest even), packed in order into 512 bits; a NaN is sign | 0x7E00 */
HALF16_ __m512i half16_f16_pack32(__m512 v0, __m512 v1) {
    __m512i h =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                           _mm512_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 1);
    __mmask32 nan = _mm512_cmpgt_epi16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7C00));
    return _mm512_mask_mov_epi16(h, nan, _mm512_and_si512(h, _mm512_set1_epi16((short)0xFE00)));
}
#endif

#endif
