/*
** The pooling kernels for one element type, included by cpu_ops_pool.c once per
** type with POOL_T (float or double) and POOL_FN(name) defined. Each runs over
** the N*C planes in parallel; shapes are described in cpu_ops_pool.c.
*/

/* 2x2 windows, stride 2, no padding (W2's pools): window (oh, ow) is rows 2oh, 2oh+1 and columns
** 2ow, 2ow+1, always inside x, scanned in the same order as the general loop below. */
static void POOL_FN(max_pool_2x2)(const pool_geom *q, const POOL_T *x, POOL_T *y, int64_t *idx) {
    int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
    bool vec = POOL_HAS_VEC && H * W < INT32_MAX; /* the vector rows keep indices in int32 lanes */
    int nt = cpu_threads_for(q->planes, Ho * Wo * 4);
#pragma omp parallel for num_threads(nt)
    for (int64_t pl = 0; pl < q->planes; pl++) {
        const POOL_T *xp = x + pl * H * W;
        POOL_T *yp = y + pl * Ho * Wo;
        int64_t *ip = idx + pl * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            const POOL_T *r0 = xp + 2 * oh * W, *r1 = r0 + W;
            if (vec) {
                POOL_VEC_ROW_2X2(r0, r1, Wo, (int32_t)(2 * oh * W), (int32_t)W, yp + oh * Wo, ip + oh * Wo);
                continue;
            }
            for (int64_t ow = 0; ow < Wo; ow++) {
                /* selects, not branches: on real data the max's position is unpredictable */
                POOL_T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
                int64_t i0 = 2 * oh * W + 2 * ow;
                int tb = b > a || b != b, td = d > c || d != d; /* NaN wins, as in PyTorch */
                POOL_T m0 = tb ? b : a, m1 = td ? d : c;
                int64_t j0 = i0 + tb, j1 = i0 + W + td;
                int t1 = m1 > m0 || m1 != m1; /* the last NaN wins */
                yp[oh * Wo + ow] = t1 ? m1 : m0, ip[oh * Wo + ow] = t1 ? j1 : j0;
            }
        }
    }
}

static void POOL_FN(max_pool)(const pool_geom *q, const POOL_T *x, POOL_T *y, int64_t *idx) {
    if (q->kh == 2 && q->kw == 2 && q->sh == 2 && q->sw == 2 && q->ph == 0 && q->pw == 0) {
        POOL_FN(max_pool_2x2)(q, x, y, idx);
        return;
    }
    POOL_FOR_WINDOWS_(q, const POOL_T *xp = x + pl * q->H * q->W, {
        POOL_T best = -INFINITY;
        int64_t bi = win.h0 * q->W + win.w0;
        for (int64_t h = win.h0; h < win.h1; h++)
            for (int64_t w = win.w0; w < win.w1; w++) {
                POOL_T v = xp[h * q->W + w];
                if (v > best || v != v) best = v, bi = h * q->W + w; /* NaN wins, as in PyTorch */
            }
        y[o] = best, idx[o] = bi;
    });
}

/* dx[plane][idx] += dy: scatter-add into each plane */
static void POOL_FN(max_pool_backward)(const pool_geom *q, const POOL_T *dy, const int64_t *idx, POOL_T *dx) {
    int nt = cpu_threads_for(q->planes, q->Ho * q->Wo + q->H * q->W);
#pragma omp parallel for num_threads(nt)
    for (int64_t pl = 0; pl < q->planes; pl++) {
        POOL_T *dp = dx + pl * q->H * q->W;
        memset(dp, 0, (size_t)(q->H * q->W) * sizeof(POOL_T));
        for (int64_t o = pl * q->Ho * q->Wo; o < (pl + 1) * q->Ho * q->Wo; o++) dp[idx[o]] += dy[o];
    }
}

static void POOL_FN(avg_pool)(const pool_geom *q, const POOL_T *x, POOL_T *y) {
    POOL_FOR_WINDOWS_(q, const POOL_T *xp = x + pl * q->H * q->W, {
        POOL_T s = 0;
        for (int64_t h = win.h0; h < win.h1; h++)
            for (int64_t w = win.w0; w < win.w1; w++) s += xp[h * q->W + w];
        y[o] = s / (POOL_T)win.divisor;
    });
}

/* dx[h, w] = sum over the windows that contain (h, w) of dy / divisor */
static void POOL_FN(avg_pool_backward)(const pool_geom *q, const POOL_T *dy, POOL_T *dx) {
    POOL_FOR_WINDOWS_(q, POOL_T *dp = memset(dx + pl * q->H * q->W, 0, (size_t)(q->H * q->W) * sizeof(POOL_T)), {
        POOL_T g = dy[o] / (POOL_T)win.divisor;
        for (int64_t h = win.h0; h < win.h1; h++)
            for (int64_t w = win.w0; w < win.w1; w++) dp[h * q->W + w] += g;
    });
}
