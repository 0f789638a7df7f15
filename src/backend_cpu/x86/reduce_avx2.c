/*
** AVX2 f32 sum: x[0..n) contiguous, each element widened to double and added
** into four 4-lane double accumulators (16 elements per step), so the result
** is as accurate as a double loop and memory bound. Scalar tail at the end.
*/
#include "../cpu_ew.h"
#include "simd_avx2.h"

double cpu_sum_f32_avx2(int64_t n, const float *x) {
    TD_F64X4 s0 = TD_F64X4_ZERO(), s1 = TD_F64X4_ZERO(), s2 = TD_F64X4_ZERO(), s3 = TD_F64X4_ZERO();
    int64_t i = 0;
    for (; i + 2 * TD_F32_EPR <= n; i += 2 * TD_F32_EPR) {
        TD_F32_VEC v0 = TD_F32_VEC_LOAD(x + i), v1 = TD_F32_VEC_LOAD(x + i + TD_F32_EPR);
        s0 = TD_F64X4_ADD(s0, TD_F64X4_LO(v0));
        s1 = TD_F64X4_ADD(s1, TD_F64X4_HI(v0));
        s2 = TD_F64X4_ADD(s2, TD_F64X4_LO(v1));
        s3 = TD_F64X4_ADD(s3, TD_F64X4_HI(v1));
    }
    double s = td_f64x4_hsum(TD_F64X4_ADD(TD_F64X4_ADD(s0, s1), TD_F64X4_ADD(s2, s3)));
    for (; i < n; i++) s += x[i];
    return s;
}
