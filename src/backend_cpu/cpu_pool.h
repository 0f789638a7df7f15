/*
** The AVX2 fast path of max_pool2d (src/backend_cpu/x86/pool_avx2.c); call
** only when cpu_has_avx2() (cpu_ew.h).
** defines: cpu_max_pool_2x2_row_f32_avx2.
*/
#ifndef TRIDENT_BACKEND_CPU_POOL_H
#define TRIDENT_BACKEND_CPU_POOL_H

#include "cpu_ew.h"

/* One output row of a 2x2, stride-2, unpadded max pool: for ow < Wo,
** y[ow] = max of r0[2ow], r0[2ow+1], r1[2ow], r1[2ow+1] (the first max, or the last NaN) and
** idx[ow] = its index in the plane, where r0[0] has index i0 and r1 = r0 + W. */
void cpu_max_pool_2x2_row_f32_avx2(const float *r0, const float *r1, int64_t Wo, int32_t i0, int32_t W, float *y,
                                   int64_t *idx);

#endif /* TRIDENT_BACKEND_CPU_POOL_H */
