/*
** The pooling kernels for one element type, included by cpu_pool.c once per
** type with POOL_T (float or double) and POOL_FN(name) defined. Each runs over
** the N*C planes in parallel; shapes are described in cpu_pool.c.
*/

static void POOL_FN(max_pool)(const pool_geom *q, const POOL_T *x, POOL_T *y, int64_t *idx) {
    int nt = cpu_threads_for(q->planes, q->Ho * q->Wo * q->kh * q->kw);
#pragma omp parallel for num_threads(nt)
    for (int64_t pl = 0; pl < q->planes; pl++) {
        const POOL_T *xp = x + pl * q->H * q->W;
        for (int64_t oh = 0; oh < q->Ho; oh++)
            for (int64_t ow = 0; ow < q->Wo; ow++) {
                pool_window win = pool_window_at(q, oh, ow);
                POOL_T best = -INFINITY;
                int64_t bi = win.h0 * q->W + win.w0;
                for (int64_t h = win.h0; h < win.h1; h++)
                    for (int64_t w = win.w0; w < win.w1; w++) {
                        POOL_T v = xp[h * q->W + w];
                        if (v > best || v != v) best = v, bi = h * q->W + w; /* NaN wins, as in PyTorch */
                    }
                int64_t o = (pl * q->Ho + oh) * q->Wo + ow;
                y[o] = best, idx[o] = bi;
            }
    }
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
    int nt = cpu_threads_for(q->planes, q->Ho * q->Wo * q->kh * q->kw);
#pragma omp parallel for num_threads(nt)
    for (int64_t pl = 0; pl < q->planes; pl++) {
        const POOL_T *xp = x + pl * q->H * q->W;
        for (int64_t oh = 0; oh < q->Ho; oh++)
            for (int64_t ow = 0; ow < q->Wo; ow++) {
                pool_window win = pool_window_at(q, oh, ow);
                POOL_T s = 0;
                for (int64_t h = win.h0; h < win.h1; h++)
                    for (int64_t w = win.w0; w < win.w1; w++) s += xp[h * q->W + w];
                y[(pl * q->Ho + oh) * q->Wo + ow] = s / (POOL_T)win.divisor;
            }
    }
}

/* dx[h, w] = sum over the windows that contain (h, w) of dy / divisor */
static void POOL_FN(avg_pool_backward)(const pool_geom *q, const POOL_T *dy, POOL_T *dx) {
    int nt = cpu_threads_for(q->planes, q->Ho * q->Wo * q->kh * q->kw);
#pragma omp parallel for num_threads(nt)
    for (int64_t pl = 0; pl < q->planes; pl++) {
        POOL_T *dp = dx + pl * q->H * q->W;
        memset(dp, 0, (size_t)(q->H * q->W) * sizeof(POOL_T));
        for (int64_t oh = 0; oh < q->Ho; oh++)
            for (int64_t ow = 0; ow < q->Wo; ow++) {
                pool_window win = pool_window_at(q, oh, ow);
                POOL_T g = dy[(pl * q->Ho + oh) * q->Wo + ow] / (POOL_T)win.divisor;
                for (int64_t h = win.h0; h < win.h1; h++)
                    for (int64_t w = win.w0; w < win.w1; w++) dp[h * q->W + w] += g;
            }
    }
}
