/*
** AVX2/FMA f32 row kernels for softmax, log_softmax (and their backward),
** cross-entropy and layer_norm, and the f32 EXP op. The scalar loops in
** cpu_ops_softmax.c, cpu_ops_norm.c and cpu_ops_elementwise.c are the reference.
** Row tails (n % 8 elements) run through the same vector code with masked
** loads and stores, so every element gets the same exp() (exp_avx2.h).
** A row of C floats is read from memory once: after the max pass it sits in
** L1/L2 (16 KiB for C = 4096), so the later passes over it are cache hits;
** meanwhile the next row (x + n: rows are contiguous) is prefetched, so the
** memory traffic overlaps the arithmetic. Prefetches never fault.
** Outputs far larger than the cache are written with non-temporal stores
** (the caller fences them with cpu_rows_stream_fence()).
*/
#include "../cpu_rows.h"
#include "exp_avx2.h"
#include "simd_avx2.h"

/* x[i .. i+rem) with fill in the other lanes */
static inline __m256 load_tail(const float *x, __m256i mask, __m256 fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(x, mask), _mm256_castsi256_ps(mask));
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* max_j x[j] over n >= 1 elements (a NaN may or may not win; the callers' sums turn NaN anyway) */
float cpu_row_max_f32_avx2(const float *x, int64_t n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    if (i < n) m1 = _mm256_max_ps(m1, load_tail(x + i, td_f32_tail_mask(n - i), ninf));
    return hmax(_mm256_max_ps(m0, m1));
}

/* sum_j exp(x[j] - m); with STORE, out[j] = exp(x[j] - m) (STORE_EXP) or x[j] - m (STORE_DIFF) */
enum { STORE_NONE, STORE_EXP, STORE_DIFF };
static inline float row_sum_exp(const float *x, int64_t n, float m, float *out, int store) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)(x + n + i), _MM_HINT_T0); /* the next row: memory works while we compute */
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv);
        __m256 e0 = td_exp_f32_avx2(d0), e1 = td_exp_f32_avx2(d1);
        s0 = _mm256_add_ps(s0, e0), s1 = _mm256_add_ps(s1, e1);
        if (store == STORE_EXP) _mm256_storeu_ps(out + i, e0), _mm256_storeu_ps(out + i + 8, e1);
        if (store == STORE_DIFF) _mm256_storeu_ps(out + i, d0), _mm256_storeu_ps(out + i + 8, d1);
    }
    for (; i < n; i += 8) { /* the last 8, then a tail whose padding lanes are -inf: exp gives 0 */
        __m256i mask = td_f32_tail_mask(n - i);
        __m256 d0 = _mm256_sub_ps(load_tail(x + i, mask, _mm256_set1_ps(-INFINITY)), mv), e0 = td_exp_f32_avx2(d0);
        s0 = _mm256_add_ps(s0, e0);
        if (store == STORE_EXP) _mm256_maskstore_ps(out + i, mask, e0);
        if (store == STORE_DIFF) _mm256_maskstore_ps(out + i, mask, d0);
    }
    return hsum(_mm256_add_ps(s0, s1));
}

float cpu_row_sum_exp_f32_avx2(const float *x, int64_t n, float m, float *e) {
    return e ? row_sum_exp(x, n, m, e, STORE_EXP) : row_sum_exp(x, n, m, NULL, STORE_NONE);
}

/* Non-temporal stores of a row of n into y need y 32-byte aligned and n % 8 == 0. */
static inline bool can_stream(const float *y, int64_t n) { return (uintptr_t)y % 32 == 0 && n % 8 == 0; }

/* y[j] = x[j] * a + b over n elements (x may be y); stream: non-temporal stores (can_stream(y, n)) */
static void row_affine(const float *x, float *y, int64_t n, float a, float b, bool stream) {
    const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
    int64_t i = 0;
    if (stream)
        for (; i < n; i += 8) _mm256_stream_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), av, bv));
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), av, bv));
    if (i < n) {
        __m256i mask = td_f32_tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, _mm256_fmadd_ps(_mm256_maskload_ps(x + i, mask), av, bv));
    }
}

/* softmax: pass 1 max, pass 2 e = exp(x - m) into t with its sum, pass 3 y = e / s;
** log_softmax: pass 2 stores x - m into t, pass 3 y = (x - m) - log s.
** t is y itself, or with stream a scratch row that stays in L1/L2 while pass 3 writes y with
** non-temporal stores (no read of y's lines before writing them: 8 bytes of traffic per element).
** Otherwise writing y during the exp pass hides the fetch of its lines behind the arithmetic. */
void cpu_softmax_row_f32_avx2(const float *x, float *y, int64_t n, bool log_out, float *scratch) {
    bool stream = scratch && can_stream(y, n);
    float *t = stream ? scratch : y;
    float m = cpu_row_max_f32_avx2(x, n);
    if (log_out) {
        float ls = logf(row_sum_exp(x, n, m, t, STORE_DIFF));
        row_affine(t, y, n, 1.0f, -ls, stream);
    } else {
        float s = row_sum_exp(x, n, m, t, STORE_EXP);
        row_affine(t, y, n, 1.0f / s, 0.0f, stream);
    }
}

/* softmax / log_softmax backward of one row (see cpu_ops_softmax.c): pass 1 s = sum dy y
** (sum dy for log_softmax) in two 8-lane float accumulators, pass 2 dx = y (dy - s) (dy - e^y s)
** while the row is in L1/L2; the next row is prefetched during pass 1. */
static inline __m256 softmax_bw_vec(__m256 g, __m256 v, __m256 s, bool log_out) {
    return log_out ? _mm256_fnmadd_ps(td_exp_f32_avx2(v), s, g) : _mm256_mul_ps(v, _mm256_sub_ps(g, s));
}

void cpu_softmax_backward_row_f32_avx2(const float *dy, const float *y, float *dx, int64_t n, bool log_out,
                                       bool stream) {
    stream = stream && can_stream(dx, n);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch((const char *)(dy + n + i), _MM_HINT_T0);
        _mm_prefetch((const char *)(y + n + i), _MM_HINT_T0);
        __m256 g0 = _mm256_loadu_ps(dy + i), g1 = _mm256_loadu_ps(dy + i + 8);
        if (log_out) {
            s0 = _mm256_add_ps(s0, g0), s1 = _mm256_add_ps(s1, g1);
        } else {
            s0 = _mm256_fmadd_ps(g0, _mm256_loadu_ps(y + i), s0);
            s1 = _mm256_fmadd_ps(g1, _mm256_loadu_ps(y + i + 8), s1);
        }
    }
    for (; i < n; i += 8) { /* the last 15 at most: masked lanes load 0 */
        __m256i mask = td_f32_tail_mask(n - i);
        __m256 g = _mm256_maskload_ps(dy + i, mask);
        s0 = log_out ? _mm256_add_ps(s0, g) : _mm256_fmadd_ps(g, _mm256_maskload_ps(y + i, mask), s0);
    }
    const __m256 sv = _mm256_set1_ps(hsum(_mm256_add_ps(s0, s1)));
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 d = softmax_bw_vec(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(y + i), sv, log_out);
        if (stream)
            _mm256_stream_ps(dx + i, d);
        else
            _mm256_storeu_ps(dx + i, d);
    }
    if (i < n) {
        __m256i mask = td_f32_tail_mask(n - i);
        _mm256_maskstore_ps(
            dx + i, mask,
            softmax_bw_vec(_mm256_maskload_ps(dy + i, mask), _mm256_maskload_ps(y + i, mask), sv, log_out));
    }
}

/* layer_norm of one row (see cpu_ops_norm.c): pass 1 the sum in double (4 lanes per half-vector);
** pass 2 d = x - mean with mean split into a float head and tail (mh + ml), which is as exact as
** the double difference, and sum d^2 in float per 8 lanes, added into double every 64 elements;
** pass 3 y = d * rstd * w + b. */
void cpu_layernorm_row_f32_avx2(const float *x, const float *w, const float *b, float *y, int64_t n, double eps,
                                float *mean, float *rstd, bool stream) {
    stream = stream && can_stream(y, n);
    TD_F64X4 a0 = TD_F64X4_ZERO(), a1 = TD_F64X4_ZERO();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = TD_F64X4_ADD(a0, TD_F64X4_LO(v)), a1 = TD_F64X4_ADD(a1, TD_F64X4_HI(v));
    }
    double m = td_f64x4_hsum(TD_F64X4_ADD(a0, a1));
    for (; i < n; i++) m += x[i];
    m /= (double)n;
    float mh = (float)m, ml = (float)(m - (double)mh);
    const __m256 mhv = _mm256_set1_ps(mh), mlv = _mm256_set1_ps(ml);
    double v = 0;
    for (i = 0; i < n;) { /* blocks of up to 64 elements */
        int64_t end = i + 64 < n ? i + 64 : n;
        __m256 s = _mm256_setzero_ps();
        for (; i + 8 <= end; i += 8) {
            if (i % 16 == 0) _mm_prefetch((const char *)(x + n + i), _MM_HINT_T0); /* the next row */
            __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mhv), mlv);
            s = _mm256_fmadd_ps(d, d, s);
        }
        double sb = hsum(s);
        for (; i < end; i++) {
            float d = (x[i] - mh) - ml;
            sb += (double)d * d;
        }
        v += sb;
    }
    double rs = 1 / sqrt(v / (double)n + eps);
    const __m256 rsv = _mm256_set1_ps((float)rs), one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (i = 0; i < n; i += 8) {
        __m256i mask = td_f32_tail_mask(n - i);
        bool full = i + 8 <= n;
        __m256 xv = full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, mask);
        __m256 wv = !w ? one : full ? _mm256_loadu_ps(w + i) : _mm256_maskload_ps(w + i, mask);
        __m256 bv = !b ? zero : full ? _mm256_loadu_ps(b + i) : _mm256_maskload_ps(b + i, mask);
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(xv, mhv), mlv), rsv);
        __m256 out = _mm256_fmadd_ps(d, wv, bv);
        if (stream)
            _mm256_stream_ps(y + i, out);
        else if (full)
            _mm256_storeu_ps(y + i, out);
        else
            _mm256_maskstore_ps(y + i, mask, out);
    }
    *mean = mh, *rstd = (float)rs;
}

void cpu_exp_f32_avx2(int64_t n, float *y, const float *x) { TD_F32_MAP1(n, y, x, td_exp_f32_avx2); }

void cpu_rows_stream_fence(void) { _mm_sfence(); }
