/*
** Contiguous conversion between float32 and the half types (bf16, f16), for
** loops that keep a block of values in float32 (src/math/run_cpu.c): the
** AVX-512F (bf16) and AVX2/F16C kernels of x86/convert_avx*.c when the CPU
** has them, else the scalar reference (cpu.h's cpu_*_to_* per element). Both round to nearest
** even and give the same bits: bf16 = the float's high half rounded on bit
** 16, a NaN made quiet (bit 6 set) with its payload's high bits kept; f16 by
** IEEE, a NaN as sign | 0x7E00.
** defines: cpu_half_to_f32, cpu_f32_to_half, cpu_has_f16c, cpu_has_avx512f
*/
#ifndef TRIDENT_CPU_CONVERT_H
#define TRIDENT_CPU_CONVERT_H

#include <stdbool.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "cpu.h"
#include "cpu_ew.h"

/* o[i] = x[i] for i < n, x bf16 / f16 bits (call only when cpu_has_avx2(), f16 also cpu_has_f16c()) */
void cpu_bf16_to_f32_avx2(int64_t n, float *o, const uint16_t *x);
void cpu_f16_to_f32_avx2(int64_t n, float *o, const uint16_t *x);
/* o[i] = x[i] rounded to bf16 / f16 for i < n; stream: non-temporal stores (the caller fences) */
void cpu_f32_to_bf16_avx2(int64_t n, uint16_t *o, const float *x, bool stream);
void cpu_f32_to_f16_avx2(int64_t n, uint16_t *o, const float *x, bool stream);
/* the bf16 pair with AVX-512F (x86/convert_avx512.c; call only when cpu_has_avx512f()) */
void cpu_bf16_to_f32_avx512(int64_t n, float *o, const uint16_t *x);
void cpu_f32_to_bf16_avx512(int64_t n, uint16_t *o, const float *x, bool stream);

static inline bool cpu_has_avx512f(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

/* F16C from cpuid leaf 1 (clang's __builtin_cpu_supports does not know "f16c"), read once: in a VM each cpuid
** traps to the hypervisor */
static inline bool cpu_has_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1;
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        unsigned a, b, c, d;
        h = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h;
#else
    return false;
#endif
}

/* o[0..n) = x[0..n) of dtype dt (TD_BF16 or TD_F16) as float32 */
static inline void cpu_half_to_f32(td_dtype dt, int64_t n, float *o, const uint16_t *x) {
    if (dt == TD_BF16 && cpu_has_avx512f())
        cpu_bf16_to_f32_avx512(n, o, x);
    else if (dt == TD_BF16 && cpu_has_avx2())
        cpu_bf16_to_f32_avx2(n, o, x);
    else if (dt == TD_F16 && cpu_has_avx2() && cpu_has_f16c())
        cpu_f16_to_f32_avx2(n, o, x);
    else if (dt == TD_BF16)
        for (int64_t i = 0; i < n; i++) o[i] = cpu_bf16_to_f32(x[i]);
    else
        for (int64_t i = 0; i < n; i++) o[i] = cpu_f16_to_f32(x[i]);
}

/* o[0..n) = x[0..n) rounded to dtype dt (TD_BF16 or TD_F16); stream: non-temporal stores where the kernel has
** them (the caller fences) */
static inline void cpu_f32_to_half(td_dtype dt, int64_t n, uint16_t *o, const float *x, bool stream) {
    if (dt == TD_BF16 && cpu_has_avx512f())
        cpu_f32_to_bf16_avx512(n, o, x, stream);
    else if (dt == TD_BF16 && cpu_has_avx2())
        cpu_f32_to_bf16_avx2(n, o, x, stream);
    else if (dt == TD_F16 && cpu_has_avx2() && cpu_has_f16c())
        cpu_f32_to_f16_avx2(n, o, x, stream);
    else if (dt == TD_BF16)
        for (int64_t i = 0; i < n; i++) o[i] = cpu_f32_to_bf16(x[i]);
    else
        for (int64_t i = 0; i < n; i++) o[i] = cpu_f32_to_f16(x[i]);
}

#endif
