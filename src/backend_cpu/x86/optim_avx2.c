/*
** Adam on f32 with AVX2: 8 elements per step, then the scalar tail. The math
** is cpu_adam_elem_float (cpu_optim.h) lane by lane, unfused (CMakeLists.txt
** compiles this file with -ffp-contract=off), so every element gets the bits
** of the scalar path. Called only when the CPU has AVX2 (checked by the caller).
*/
#include <immintrin.h>

#include "../cpu_optim.h"

void cpu_adam_f32_avx2(int64_t n, float *p, const float *g, float *m, float *v, float *vmax,
                       const cpu_adam_k_float *k) {
    const __m256 b1 = _mm256_set1_ps(k->b1), one_b1 = _mm256_set1_ps(k->one_b1);
    const __m256 b2 = _mm256_set1_ps(k->b2), one_b2 = _mm256_set1_ps(k->one_b2);
    const __m256 wd = _mm256_set1_ps(k->wd), decay = _mm256_set1_ps(k->decay);
    const __m256 neg_step = _mm256_set1_ps(k->neg_step), bc2_sqrt = _mm256_set1_ps(k->bc2_sqrt);
    const __m256 eps = _mm256_set1_ps(k->eps), sign = _mm256_set1_ps(k->maximize ? -0.0f : 0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 pv = _mm256_loadu_ps(p + i), gv = _mm256_xor_ps(_mm256_loadu_ps(g + i), sign);
        if (k->l2) gv = _mm256_add_ps(gv, _mm256_mul_ps(wd, pv));
        if (k->decoupled) pv = _mm256_mul_ps(pv, decay);
        __m256 mv = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(one_b1, gv));
        __m256 vv =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(one_b2, gv), gv));
        _mm256_storeu_ps(m + i, mv);
        _mm256_storeu_ps(v + i, vv);
        if (k->amsgrad) { /* vmax = (vmax is NaN || vmax > v) ? vmax : v */
            __m256 x = _mm256_loadu_ps(vmax + i);
            __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_cmp_ps(x, vv, _CMP_GT_OQ));
            vv = _mm256_blendv_ps(vv, x, keep);
            _mm256_storeu_ps(vmax + i, vv);
        }
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2_sqrt), eps);
        _mm256_storeu_ps(p + i, _mm256_add_ps(pv, _mm256_mul_ps(neg_step, _mm256_div_ps(mv, denom))));
    }
    for (; i < n; i++) p[i] = cpu_adam_elem_float(p[i], g[i], &m[i], &v[i], vmax ? &vmax[i] : NULL, k);
}
