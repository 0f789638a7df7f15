/*
** The conv2d kernels for one element type, included by cpu_conv.c once per
** type with CONV_T (float or double), CONV_GEMM (cblas_sgemm or cblas_dgemm)
** and CONV_FN(name) (the name with a type suffix) defined.
** Shapes and the im2col layout are described in cpu_conv.c.
*/

/* col[k][i*P + p] for k = (c*kh + ki)*kw + kj, image i of the chunk, output pixel p = oh*Wo + ow:
** x[n0+i, g*Cg + c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw], or 0 in the padding. */
static void CONV_FN(im2col)(const conv_geom *q, const CONV_T *x, int64_t n0, int64_t nb, int64_t g, CONV_T *col) {
    int64_t cols = nb * q->P;
    int nt = cpu_threads_for(nb * q->Cg, q->kh * q->kw * q->P);
#pragma omp parallel for num_threads(nt)
    for (int64_t ic = 0; ic < nb * q->Cg; ic++) {
        int64_t i = ic / q->Cg, c = ic % q->Cg;
        const CONV_T *plane = x + ((n0 + i) * q->C + g * q->Cg + c) * q->H * q->W;
        for (int64_t ki = 0; ki < q->kh; ki++)
            for (int64_t kj = 0; kj < q->kw; kj++) {
                CONV_T *dst = col + ((c * q->kh + ki) * q->kw + kj) * cols + i * q->P;
                int64_t off = kj * q->dw - q->pw, lo, hi; /* input column = ow*sw + off */
                conv_valid_range(off, q->sw, q->W, q->Wo, &lo, &hi);
                for (int64_t oh = 0; oh < q->Ho; oh++) {
                    int64_t h = oh * q->sh - q->ph + ki * q->dh;
                    CONV_T *d = dst + oh * q->Wo;
                    if (h < 0 || h >= q->H) {
                        memset(d, 0, (size_t)q->Wo * sizeof(CONV_T));
                        continue;
                    }
                    const CONV_T *row = plane + h * q->W;
                    for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;
                    if (q->sw == 1) memcpy(d + lo, row + lo + off, (size_t)(hi - lo) * sizeof(CONV_T));
                    else
                        for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow * q->sw + off];
                    for (int64_t ow = hi; ow < q->Wo; ow++) d[ow] = 0;
                }
            }
    }
}

/* The adjoint of im2col: dx[n0+i, g*Cg + c, h, w] += dcol[k][i*P + p] over every (k, p) that read (h, w). */
static void CONV_FN(col2im)(const conv_geom *q, const CONV_T *dcol, int64_t n0, int64_t nb, int64_t g, CONV_T *dx) {
    int64_t cols = nb * q->P;
    int nt = cpu_threads_for(nb * q->Cg, q->kh * q->kw * q->P);
#pragma omp parallel for num_threads(nt)
    for (int64_t ic = 0; ic < nb * q->Cg; ic++) { /* each (image, channel) owns its dx plane: no races */
        int64_t i = ic / q->Cg, c = ic % q->Cg;
        CONV_T *plane = dx + ((n0 + i) * q->C + g * q->Cg + c) * q->H * q->W;
        for (int64_t ki = 0; ki < q->kh; ki++)
            for (int64_t kj = 0; kj < q->kw; kj++) {
                const CONV_T *src = dcol + ((c * q->kh + ki) * q->kw + kj) * cols + i * q->P;
                int64_t off = kj * q->dw - q->pw, lo, hi;
                conv_valid_range(off, q->sw, q->W, q->Wo, &lo, &hi);
                for (int64_t oh = 0; oh < q->Ho; oh++) {
                    int64_t h = oh * q->sh - q->ph + ki * q->dh;
                    if (h < 0 || h >= q->H) continue;
                    CONV_T *row = plane + h * q->W;
                    const CONV_T *s = src + oh * q->Wo;
                    for (int64_t ow = lo; ow < hi; ow++) row[ow * q->sw + off] += s[ow];
                }
            }
    }
}

/* dY[o][i*P + p] = dy[n0+i, g*Og + o, p]  (dy is (N, O, P)) */
static void CONV_FN(gather_dy)(const conv_geom *q, const CONV_T *dy, int64_t n0, int64_t nb, int64_t g, CONV_T *dY) {
    int nt = cpu_threads_for(nb * q->Og, q->P);
#pragma omp parallel for num_threads(nt)
    for (int64_t io = 0; io < nb * q->Og; io++) {
        int64_t i = io / q->Og, o = io % q->Og;
        memcpy(dY + o * nb * q->P + i * q->P, dy + ((n0 + i) * q->O + g * q->Og + o) * q->P, (size_t)q->P * sizeof(CONV_T));
    }
}

/* Forward: y[n, g*Og + o, p] = sum_k w[g*Og + o][k] * col[k][i*P + p] + b[g*Og + o] */
static td_status CONV_FN(conv_forward)(const conv_geom *q, const CONV_T *x, const CONV_T *w, const CONV_T *b, CONV_T *y) {
    int64_t nb = conv_chunk(q);
    size_t ncol = (size_t)(q->K * nb * q->P), nY = (size_t)(q->Og * nb * q->P);
    CONV_T *col = cpu_nn_workspace((ncol + nY) * sizeof(CONV_T)), *Y = col ? col + ncol : NULL;
    if (!col) return td_last_status();
    for (int64_t n0 = 0; n0 < q->N; n0 += nb) {
        int64_t m = q->N - n0 < nb ? q->N - n0 : nb, cols = m * q->P;
        for (int64_t g = 0; g < q->G; g++) {
            CONV_FN(im2col)(q, x, n0, m, g, col);
            CONV_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)q->Og, (int)cols, (int)q->K, 1,
                      w + g * q->Og * q->K, (int)q->K, col, (int)cols, 0, Y, (int)cols);
            int nt = cpu_threads_for(m * q->Og, q->P);
#pragma omp parallel for num_threads(nt)
            for (int64_t io = 0; io < m * q->Og; io++) { /* scatter the chunk's Y into y, adding the bias */
                int64_t i = io / q->Og, o = io % q->Og;
                CONV_T *dst = y + ((n0 + i) * q->O + g * q->Og + o) * q->P, bias = b ? b[g * q->Og + o] : 0;
                const CONV_T *src = Y + o * cols + i * q->P;
                for (int64_t p = 0; p < q->P; p++) dst[p] = src[p] + bias;
            }
        }
    }
    return TD_OK;
}

/* Backward to the input: dcol = w_g^T @ dY, then dx += col2im(dcol). dx starts at 0. */
static td_status CONV_FN(conv_backward_input)(const conv_geom *q, const CONV_T *dy, const CONV_T *w, CONV_T *dx) {
    int64_t nb = conv_chunk(q);
    size_t ndcol = (size_t)(q->K * nb * q->P), ndY = (size_t)(q->Og * nb * q->P);
    CONV_T *dcol = cpu_nn_workspace((ndcol + ndY) * sizeof(CONV_T)), *dY = dcol ? dcol + ndcol : NULL;
    if (!dcol) return td_last_status();
    memset(dx, 0, (size_t)(q->N * q->C * q->H * q->W) * sizeof(CONV_T));
    for (int64_t n0 = 0; n0 < q->N; n0 += nb) {
        int64_t m = q->N - n0 < nb ? q->N - n0 : nb, cols = m * q->P;
        for (int64_t g = 0; g < q->G; g++) {
            CONV_FN(gather_dy)(q, dy, n0, m, g, dY);
            CONV_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q->K, (int)cols, (int)q->Og, 1,
                      w + g * q->Og * q->K, (int)q->K, dY, (int)cols, 0, dcol, (int)cols);
            CONV_FN(col2im)(q, dcol, n0, m, g, dx);
        }
    }
    return TD_OK;
}

/* Backward to the weight: dw_g = sum over chunks of dY @ col^T (beta 1 accumulates). dw starts at 0. */
static td_status CONV_FN(conv_backward_weight)(const conv_geom *q, const CONV_T *dy, const CONV_T *x, CONV_T *dw) {
    int64_t nb = conv_chunk(q);
    size_t ncol = (size_t)(q->K * nb * q->P), ndY = (size_t)(q->Og * nb * q->P);
    CONV_T *col = cpu_nn_workspace((ncol + ndY) * sizeof(CONV_T)), *dY = col ? col + ncol : NULL;
    if (!col) return td_last_status();
    memset(dw, 0, (size_t)(q->O * q->K) * sizeof(CONV_T));
    for (int64_t n0 = 0; n0 < q->N; n0 += nb) {
        int64_t m = q->N - n0 < nb ? q->N - n0 : nb, cols = m * q->P;
        for (int64_t g = 0; g < q->G; g++) {
            CONV_FN(im2col)(q, x, n0, m, g, col);
            CONV_FN(gather_dy)(q, dy, n0, m, g, dY);
            CONV_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)q->Og, (int)q->K, (int)cols, 1, dY, (int)cols,
                      col, (int)cols, 1, dw + g * q->Og * q->K, (int)q->K);
        }
    }
    return TD_OK;
}
