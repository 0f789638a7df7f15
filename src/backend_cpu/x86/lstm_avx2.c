/*
** The LSTM cell's gate math (cpu_lstm.h) on 8 f32 lanes with AVX2/FMA.
**   sigmoid(x) = 1 / (1 + exp(-x))                       (exp_avx2.h, 1 ulp)
**   tanh(x)    = x + x^3 P(x^2)            for |x| <= 0.625 (Cephes' tanhf polynomial)
**              = sign(x) (1 - 2 / (exp(2|x|) + 1))   above (exp(2|x|) = inf gives +-1)
** Both within a few ulp of tanhf/expf, as torch's vectorized CPU kernels.
*/
#include "../cpu_lstm.h"
#include "exp_avx2.h"

static inline __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, td_exp_f32_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

static inline __m256 tanh8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    /* large: 1 - 2 / (e^(2|x|) + 1), sign restored */
    __m256 big = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(td_exp_f32_avx2(_mm256_add_ps(ax, ax)), one)));
    big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    /* small: x + x s P(s), s = x^2 */
    __m256 s = _mm256_mul_ps(x, x), p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-3.33332819422e-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, s), x, x);
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LE_OQ));
}

int64_t cpu_lstm_cell_f32_avx2(int64_t n, int64_t H, float *a, const float *cp, float *c, float *y) {
    int64_t u = 0;
    for (; u + 8 <= n; u += 8) {
        __m256 i = sigmoid8(_mm256_loadu_ps(a + u)), f = sigmoid8(_mm256_loadu_ps(a + H + u));
        __m256 g = tanh8(_mm256_loadu_ps(a + 2 * H + u)), o = sigmoid8(_mm256_loadu_ps(a + 3 * H + u));
        __m256 cc = _mm256_fmadd_ps(f, _mm256_loadu_ps(cp + u), _mm256_mul_ps(i, g));
        _mm256_storeu_ps(a + u, i);
        _mm256_storeu_ps(a + H + u, f);
        _mm256_storeu_ps(a + 2 * H + u, g);
        _mm256_storeu_ps(a + 3 * H + u, o);
        _mm256_storeu_ps(c + u, cc);
        _mm256_storeu_ps(y + u, _mm256_mul_ps(o, tanh8(cc)));
    }
    return u;
}

int64_t cpu_lstm_cell_backward_f32_avx2(int64_t n, int64_t H, const float *a, const float *c, const float *cp,
                                        const float *dy, const float *dh, const float *dcs, float *dc, float *dg) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t u = 0;
    for (; u + 8 <= n; u += 8) {
        __m256 i = _mm256_loadu_ps(a + u), f = _mm256_loadu_ps(a + H + u);
        __m256 g = _mm256_loadu_ps(a + 2 * H + u), o = _mm256_loadu_ps(a + 3 * H + u);
        __m256 tc = tanh8(_mm256_loadu_ps(c + u)),
               dhv = _mm256_add_ps(_mm256_loadu_ps(dy + u), _mm256_loadu_ps(dh + u));
        __m256 dcv = _mm256_add_ps(_mm256_loadu_ps(dcs + u), _mm256_loadu_ps(dc + u));
        __m256 dct = _mm256_fmadd_ps(_mm256_mul_ps(dhv, o), _mm256_fnmadd_ps(tc, tc, one), dcv);
        _mm256_storeu_ps(dg + u, _mm256_mul_ps(_mm256_mul_ps(dct, g), _mm256_mul_ps(i, _mm256_sub_ps(one, i))));
        _mm256_storeu_ps(dg + H + u, _mm256_mul_ps(_mm256_mul_ps(dct, _mm256_loadu_ps(cp + u)),
                                                   _mm256_mul_ps(f, _mm256_sub_ps(one, f))));
        _mm256_storeu_ps(dg + 2 * H + u, _mm256_mul_ps(_mm256_mul_ps(dct, i), _mm256_fnmadd_ps(g, g, one)));
        _mm256_storeu_ps(dg + 3 * H + u,
                         _mm256_mul_ps(_mm256_mul_ps(dhv, tc), _mm256_mul_ps(o, _mm256_sub_ps(one, o))));
        _mm256_storeu_ps(dc + u, _mm256_mul_ps(dct, f));
    }
    return u;
}
