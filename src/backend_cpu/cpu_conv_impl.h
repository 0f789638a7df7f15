/*
** The conv2d kernels for one element type, included by cpu_ops_conv.c once per
** type with CONV_T (float or double), CONV_GEMM (cpu_gemm_f32 or cpu_gemm_f64)
** and CONV_FN(name) (the name with a type suffix) defined.
** Shapes, windows and the thread slots are described in cpu_ops_conv.c.
*/

/* col[k*ld + oh*wo + ow] for k = (c*kh + ki)*kw + kj:
** src[c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw] (src is (ch, hi, wi)), or 0 outside src. */
static void CONV_FN(im2col)(const conv_win *v, const CONV_T *src, CONV_T *col, int64_t ld) {
    for (int64_t c = 0; c < v->ch; c++) {
        const CONV_T *plane = src + c * v->hi * v->wi;
        for (int64_t ki = 0; ki < v->kh; ki++)
            for (int64_t kj = 0; kj < v->kw; kj++) {
                CONV_T *dst = col + ((c * v->kh + ki) * v->kw + kj) * ld;
                int64_t hoff = ki * v->dh - v->ph, woff = kj * v->dw - v->pw, hlo, hhi, lo, hi;
                conv_valid_range(hoff, v->sh, v->hi, v->ho, &hlo, &hhi); /* input row = oh*sh + hoff */
                conv_valid_range(woff, v->sw, v->wi, v->wo, &lo, &hi);   /* input column = ow*sw + woff */
                memset(dst, 0, (size_t)(hlo * v->wo) * sizeof(CONV_T));
                if (v->sh == 1 && v->sw == 1 && v->wo == v->wi && hlo < hhi && lo < hi) {
                    /* rows as wide as the input's: the valid rows are one shifted run of the plane,
                    ** d[j] = plane[j + hoff*wi + woff]; then the columns outside [lo, hi) are zeroed */
                    int64_t shift = hoff * v->wi + woff, j0 = hlo * v->wo + lo, j1 = (hhi - 1) * v->wo + hi;
                    memcpy(dst + j0, plane + j0 + shift, (size_t)(j1 - j0) * sizeof(CONV_T));
                    for (int64_t oh = hlo; oh < hhi; oh++) {
                        for (int64_t ow = 0; ow < lo; ow++) dst[oh * v->wo + ow] = 0;
                        for (int64_t ow = hi; ow < v->wo; ow++) dst[oh * v->wo + ow] = 0;
                    }
                } else
                    for (int64_t oh = hlo; oh < hhi; oh++) {
                        const CONV_T *row = plane + (oh * v->sh + hoff) * v->wi;
                        CONV_T *d = dst + oh * v->wo;
                        for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;
                        if (v->sw == 1)
                            for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow + woff];
                        else
                            for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow * v->sw + woff];
                        for (int64_t ow = hi; ow < v->wo; ow++) d[ow] = 0;
                    }
                memset(dst + hhi * v->wo, 0, (size_t)((v->ho - hhi) * v->wo) * sizeof(CONV_T));
            }
    }
}

/* The adjoint of im2col: dsrc[c, h, w] += dcol[k*ld + p] over every (k, p) that read (h, w).
** dcol is scratch: its entries that read the padding may be zeroed. */
static void CONV_FN(col2im)(const conv_win *v, CONV_T *dcol, int64_t ld, CONV_T *dsrc) {
    for (int64_t c = 0; c < v->ch; c++) {
        CONV_T *plane = dsrc + c * v->hi * v->wi;
        for (int64_t ki = 0; ki < v->kh; ki++)
            for (int64_t kj = 0; kj < v->kw; kj++) {
                CONV_T *s = dcol + ((c * v->kh + ki) * v->kw + kj) * ld;
                int64_t hoff = ki * v->dh - v->ph, woff = kj * v->dw - v->pw, hlo, hhi, lo, hi;
                conv_valid_range(hoff, v->sh, v->hi, v->ho, &hlo, &hhi);
                conv_valid_range(woff, v->sw, v->wi, v->wo, &lo, &hi);
                if (v->sh == 1 && v->sw == 1 && v->wo == v->wi && hlo < hhi && lo < hi) {
                    /* as in im2col, one shifted run: dsrc[j + hoff*wi + woff] += s[j], after the
                    ** entries of s outside the columns [lo, hi) (which read nothing) are zeroed */
                    int64_t shift = hoff * v->wi + woff, j0 = hlo * v->wo + lo, j1 = (hhi - 1) * v->wo + hi;
                    for (int64_t oh = hlo; oh < hhi; oh++) {
                        for (int64_t ow = 0; ow < lo; ow++) s[oh * v->wo + ow] = 0;
                        for (int64_t ow = hi; ow < v->wo; ow++) s[oh * v->wo + ow] = 0;
                    }
                    for (int64_t j = j0; j < j1; j++) plane[j + shift] += s[j];
                    continue;
                }
                for (int64_t oh = hlo; oh < hhi; oh++) {
                    CONV_T *row = plane + (oh * v->sh + hoff) * v->wi;
                    const CONV_T *r = s + oh * v->wo;
                    for (int64_t ow = lo; ow < hi; ow++) row[ow * v->sw + woff] += r[ow];
                }
            }
    }
}

/* ---- depthwise: G == C == O (Cg = Og = 1) ----
** Each (n, c) plane is convolved with its own kh x kw filter, directly (no im2col, no GEMM: a GEMM
** per group has one output row and K = kh*kw, all overhead):
**   y[n, c, oh, ow] = b[c] + sum_{ki,kj} w[c, ki, kj] * x[n, c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]
** The inner loop runs over ow inside the valid range of conv_valid_range (stride 1: contiguous). */
static td_status CONV_FN(dw_forward)(const conv_geom *q, const CONV_T *x, const CONV_T *w, const CONV_T *b, CONV_T *y) {
    int64_t NC = q->N * q->C, HW = q->H * q->W, kk = q->kh * q->kw;
    int nt = cpu_threads_for(NC, 2 * kk * q->P);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t nc = 0; nc < NC; nc++) {
        int64_t c = nc % q->C;
        const CONV_T *src = x + nc * HW, *f = w + c * kk;
        CONV_T *dst = y + nc * q->P;
        for (int64_t oh = 0; oh < q->Ho; oh++) {
            CONV_T *d = dst + oh * q->Wo;
            for (int64_t ow = 0; ow < q->Wo; ow++) d[ow] = b ? b[c] : 0;
            for (int64_t ki = 0; ki < q->kh; ki++) {
                int64_t ih = oh * q->sh - q->ph + ki * q->dh;
                if (ih < 0 || ih >= q->H) continue;
                const CONV_T *row = src + ih * q->W;
                for (int64_t kj = 0; kj < q->kw; kj++) {
                    CONV_T wv = f[ki * q->kw + kj];
                    int64_t off = kj * q->dw - q->pw, lo, hi;
                    conv_valid_range(off, q->sw, q->W, q->Wo, &lo, &hi);
                    if (q->sw == 1) {
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ow++) d[ow] += wv * row[ow + off];
                    } else {
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ow++) d[ow] += wv * row[ow * q->sw + off];
                    }
                }
            }
        }
    }
    return TD_OK;
}

/* A column stride sw > 1 reads (and the input gradient writes) every sw-th element of a row, which does
** not vectorize. Those passes use the plane split by column phase instead: split[(p*H + ih)*Wp + j] =
** plane[ih, j*sw + p], Wp = ceil(W / sw), so input column ow*sw + off is entry ow + off/sw (floor) of
** phase off mod sw: contiguous in ow. */
static void CONV_FN(dw_split)(const conv_geom *q, const CONV_T *plane, CONV_T *split) {
    int64_t Wp = (q->W + q->sw - 1) / q->sw;
    for (int64_t p = 0; p < q->sw; p++)
        for (int64_t ih = 0; ih < q->H; ih++)
            for (int64_t j = 0; j * q->sw + p < q->W; j++)
                split[(p * q->H + ih) * Wp + j] = plane[ih * q->W + j * q->sw + p];
}

/* The inverse of dw_split: plane[ih, j*sw + p] = split[(p*H + ih)*Wp + j]. */
static void CONV_FN(dw_merge)(const conv_geom *q, const CONV_T *split, CONV_T *plane) {
    int64_t Wp = (q->W + q->sw - 1) / q->sw;
    for (int64_t p = 0; p < q->sw; p++)
        for (int64_t ih = 0; ih < q->H; ih++)
            for (int64_t j = 0; j * q->sw + p < q->W; j++)
                plane[ih * q->W + j * q->sw + p] = split[(p * q->H + ih) * Wp + j];
}

/* dx[n, c, ih, iw] = sum of w[c, ki, kj] * dy[n, c, oh, ow] over the taps that read (ih, iw): the
** forward's loops with the roles of the planes swapped, one plane per thread at a time (accumulated in
** the split plane when sw > 1, then merged). */
static td_status CONV_FN(dw_backward_input)(const conv_geom *q, const CONV_T *dy, const CONV_T *w, CONV_T *dx) {
    int64_t NC = q->N * q->C, HW = q->H * q->W, kk = q->kh * q->kw;
    int64_t per = q->sw > 1 ? conv_round(q->sw * q->H * ((q->W + q->sw - 1) / q->sw)) : 0;
    int nt = cpu_threads_for(NC, 2 * kk * q->P);
    CONV_T *ws = per ? cpu_nn_workspace((size_t)(nt * per) * sizeof(CONV_T)) : NULL;
    if (per && !ws) return td_last_status();
#pragma omp parallel num_threads(nt)
    {
        CONV_T *split = per ? ws + conv_thread() * per : NULL;
#pragma omp for schedule(static)
        for (int64_t nc = 0; nc < NC; nc++) {
            int64_t c = nc % q->C;
            const CONV_T *g = dy + nc * q->P, *f = w + c * kk;
            CONV_T *acc = split ? split : dx + nc * HW;
            memset(acc, 0, (size_t)(split ? per : HW) * sizeof(CONV_T));
            for (int64_t oh = 0; oh < q->Ho; oh++) {
                const CONV_T *gr = g + oh * q->Wo;
                for (int64_t ki = 0; ki < q->kh; ki++) {
                    int64_t ih = oh * q->sh - q->ph + ki * q->dh;
                    if (ih < 0 || ih >= q->H) continue;
                    for (int64_t kj = 0; kj < q->kw; kj++) {
                        CONV_T wv = f[ki * q->kw + kj];
                        int64_t off = kj * q->dw - q->pw, lo, hi;
                        conv_valid_range(off, q->sw, q->W, q->Wo, &lo, &hi);
                        int64_t at = dw_row_at(q, ih, off);
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ow++) acc[at + ow] += wv * gr[ow];
                    }
                }
            }
            if (split) CONV_FN(dw_merge)(q, split, dx + nc * HW);
        }
    }
    return TD_OK;
}

/* dw[c, ki, kj] = sum over n, oh, ow of dy[n, c, oh, ow] * x[n, c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw].
** One channel per thread at a time, images summed in order: the same bits on any thread count. */
static td_status CONV_FN(dw_backward_weight)(const conv_geom *q, const CONV_T *dy, const CONV_T *x, CONV_T *dw) {
    int64_t HW = q->H * q->W, kk = q->kh * q->kw;
    int64_t per = q->sw > 1 ? conv_round(q->sw * q->H * ((q->W + q->sw - 1) / q->sw)) : 0;
    int nt = cpu_threads_for(q->C, 2 * kk * q->P * q->N);
    CONV_T *ws = per ? cpu_nn_workspace((size_t)(nt * per) * sizeof(CONV_T)) : NULL;
    if (per && !ws) return td_last_status();
#pragma omp parallel num_threads(nt)
    {
        CONV_T *split = per ? ws + conv_thread() * per : NULL;
#pragma omp for schedule(static)
        for (int64_t c = 0; c < q->C; c++) {
            CONV_T *f = dw + c * kk;
            for (int64_t k = 0; k < kk; k++) f[k] = 0;
            for (int64_t n = 0; n < q->N; n++) {
                const CONV_T *src = x + (n * q->C + c) * HW, *g = dy + (n * q->C + c) * q->P;
                if (split) CONV_FN(dw_split)(q, src, split);
                const CONV_T *base = split ? split : src;
                for (int64_t ki = 0; ki < q->kh; ki++)
                    for (int64_t kj = 0; kj < q->kw; kj++) {
                        int64_t off = kj * q->dw - q->pw, lo, hi;
                        conv_valid_range(off, q->sw, q->W, q->Wo, &lo, &hi);
                        CONV_T acc = 0;
                        for (int64_t oh = 0; oh < q->Ho; oh++) {
                            int64_t ih = oh * q->sh - q->ph + ki * q->dh;
                            if (ih < 0 || ih >= q->H) continue;
                            const CONV_T *gr = g + oh * q->Wo;
                            int64_t at = dw_row_at(q, ih, off);
#pragma omp simd reduction(+ : acc)
                            for (int64_t ow = lo; ow < hi; ow++) acc += gr[ow] * base[at + ow];
                        }
                        f[ki * q->kw + kj] += acc;
                    }
            }
        }
    }
    return TD_OK;
}

/* Forward, image by image: y[n, g*Og + o, :] = w_g (Og, K) @ col_g (K, P) + b[g*Og + o],
** col_g = im2col of x[n, g*Cg : (g+1)*Cg] (or those planes themselves for a 1x1 window).
** y[n] is first filled with the bias (or 0) and the GEMM adds to it (beta 1). */
static td_status CONV_FN(conv_forward)(const conv_geom *q, const CONV_T *x, const CONV_T *w, const CONV_T *b,
                                       CONV_T *y) {
    if (conv_is_depthwise(q)) return CONV_FN(dw_forward)(q, x, w, b, y);
    conv_win v = conv_forward_win(q);
    bool direct = conv_win_is_identity(&v);
    int nt = conv_threads(q);
    int64_t per = direct ? 0 : conv_round(q->K * q->P);
    CONV_T *ws = per ? cpu_nn_workspace((size_t)(nt * per) * sizeof(CONV_T)) : NULL;
    if (per && !ws) return td_last_status();
#pragma omp parallel num_threads(nt)
    {
        CONV_T *col = per ? ws + conv_thread() * per : NULL;
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < q->N; n++)
            for (int64_t g = 0; g < q->G; g++) {
                const CONV_T *src = x + (n * q->C + g * q->Cg) * q->H * q->W;
                CONV_T *dst = y + (n * q->O + g * q->Og) * q->P;
                for (int64_t o = 0; o < q->Og; o++)
                    for (int64_t p = 0; p < q->P; p++) dst[o * q->P + p] = b ? b[g * q->Og + o] : 0;
                if (!direct) CONV_FN(im2col)(&v, src, col, q->P);
                CONV_GEMM(false, false, q->Og, q->P, q->K, w + g * q->Og * q->K, q->K, direct ? src : col, q->P, dst,
                          q->P);
            }
    }
    return TD_OK;
}

/* Backward to the input: dcol = w_g^T (K, Og) @ dy[n]_g (Og, P), then dx[n] = col2im(dcol).
** dcol is zeroed and the GEMM adds to it (beta 1): OpenBLAS's own beta-0 pass is slower than memset. */
static td_status CONV_FN(conv_backward_input)(const conv_geom *q, const CONV_T *dy, const CONV_T *w, CONV_T *dx) {
    if (conv_is_depthwise(q)) return CONV_FN(dw_backward_input)(q, dy, w, dx);
    conv_win v = conv_forward_win(q);
    int nt = conv_threads(q);
    int64_t per = conv_round(q->K * q->P), CHW = q->C * q->H * q->W;
    CONV_T *ws = cpu_nn_workspace((size_t)(nt * per) * sizeof(CONV_T));
    if (!ws) return td_last_status();
#pragma omp parallel num_threads(nt)
    {
        CONV_T *dcol = ws + conv_thread() * per;
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < q->N; n++) {
            memset(dx + n * CHW, 0, (size_t)CHW * sizeof(CONV_T));
            for (int64_t g = 0; g < q->G; g++) {
                memset(dcol, 0, (size_t)(q->K * q->P) * sizeof(CONV_T));
                CONV_GEMM(true, false, q->K, q->P, q->Og, w + g * q->Og * q->K, q->K,
                          dy + (n * q->O + g * q->Og) * q->P, q->P, dcol, q->P);
                CONV_FN(col2im)(&v, dcol, q->P, dx + n * CHW + g * q->Cg * q->H * q->W);
            }
        }
    }
    return TD_OK;
}

/* Backward to the weight: dw_g (Og, K) = sum over images of dy[n]_g (Og, P) @ col_g(n)^T (P, K).
** The images are cut into S slots of consecutive images (slot s has [N*s/S, N*(s+1)/S)), a few per
** thread so that a thread slowed by other load takes fewer. Slot s sums its images into part_s
** (slot 0 into dw itself), nb images per GEMM with their columns side by side (col (K, nb*P),
** dY (Og, nb*P)); then dw = part_0 + part_1 + ... in slot order, so the result depends on S (the
** shapes) only, never on the thread count or the schedule. */
static td_status CONV_FN(conv_backward_weight)(const conv_geom *q, const CONV_T *dy, const CONV_T *x, CONV_T *dw) {
    if (conv_is_depthwise(q)) return CONV_FN(dw_backward_weight)(q, dy, x, dw);
    conv_win v = conv_forward_win(q);
    bool direct = conv_win_is_identity(&v);
    int nt = conv_threads(q);
    int64_t S = conv_weight_slots(q), nb = conv_weight_chunk(q, S, sizeof(CONV_T)), OK = q->O * q->K;
    bool gather = nb > 1; /* with one image, dy[n]_g is already (Og, P) with rows P apart */
    int64_t ncol = direct && nb == 1 ? 0 : conv_round(q->K * nb * q->P),
            ndy = gather ? conv_round(q->Og * nb * q->P) : 0;
    int64_t per = ncol + ndy, nparts = (S - 1) * conv_round(OK);
    CONV_T *ws = cpu_nn_workspace((size_t)(nt * per + nparts) * sizeof(CONV_T)), *parts = ws ? ws + nt * per : NULL;
    if (!ws) return td_last_status();
#pragma omp parallel num_threads(nt)
    {
        CONV_T *col = ws + conv_thread() * per, *dY = col + ncol;
#pragma omp for schedule(dynamic)
        for (int64_t s = 0; s < S; s++) {
            CONV_T *part = s ? parts + (s - 1) * conv_round(OK) : dw;
            int64_t lo = q->N * s / S, hi = q->N * (s + 1) / S;
            memset(part, 0, (size_t)OK * sizeof(CONV_T)); /* then beta 1: see conv_backward_input */
            for (int64_t n0 = lo; n0 < hi; n0 += nb) {
                int64_t m = hi - n0 < nb ? hi - n0 : nb, cols = m * q->P;
                for (int64_t g = 0; g < q->G; g++) {
                    const CONV_T *A = dy + (n0 * q->O + g * q->Og) * q->P,
                                 *B = x + (n0 * q->C + g * q->Cg) * q->H * q->W;
                    for (int64_t i = 0; i < m && ncol; i++)
                        CONV_FN(im2col)(&v, x + ((n0 + i) * q->C + g * q->Cg) * q->H * q->W, col + i * q->P, cols);
                    for (int64_t i = 0; i < m && gather; i++)
                        for (int64_t o = 0; o < q->Og; o++)
                            memcpy(dY + o * cols + i * q->P, dy + ((n0 + i) * q->O + g * q->Og + o) * q->P,
                                   (size_t)q->P * sizeof(CONV_T));
                    CONV_GEMM(false, true, q->Og, q->K, cols, gather ? dY : A, cols, ncol ? col : B, cols,
                              part + g * q->Og * q->K, q->K);
                }
            }
        }
    }
    int rt = cpu_threads_for(OK, S);
#pragma omp parallel for num_threads(rt) schedule(static)
    for (int64_t e = 0; e < OK; e++)
        for (int64_t s = 1; s < S; s++) dw[e] += parts[(s - 1) * conv_round(OK) + e];
    return TD_OK;
}
